"""``purgatory serve``'s fault API over HTTP, on a running server: partition faults on the
Kafka listeners (``/v1/faults``: add, list, remove, their hits on ``/metrics``; a real
producer retrying through one), and crashes of any broker through ``/v1/admin/faults``,
which close its Kafka listener (fenced at once, or unfenced) and reopen it on restart."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from purgatory.kafka.fault_partitions import PARTITION_APIS
from purgatory.testing import ServeProcess

JSON = {"Content-Type": "application/json"}


def _call(server: ServeProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data, JSON, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        with error:
            raw = error.read()
            status = error.code
    kind = "json" if raw[:1] in (b"{", b"[") else "text"
    return status, json.loads(raw) if kind == "json" else raw.decode()


def _accepts(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    directory: Path = tmp_path_factory.mktemp("serve-faults")
    with ServeProcess(
        "--kafka-port",
        "0",
        "--brokers",
        "3",
        "--topic",
        "t:2:3",
        "--topic",
        "c:2:3",
        directory=directory,
    ) as process:
        yield process


def test_a_partition_fault_fails_one_partition_and_a_producer_retries_through_it(
    server: ServeProcess,
) -> None:
    from kafka import KafkaProducer

    status, rule = _call(
        server,
        "POST",
        "/v1/faults",
        {
            "api_keys": ["Produce"],
            "topic": "t",
            "partition": 1,
            "error": "NOT_LEADER_OR_FOLLOWER",
            "count": 2,
        },
    )
    assert status == 201, rule
    assert rule == {
        "id": rule["id"],
        "api_keys": ["PRODUCE"],
        "broker": None,
        "topic": "t",
        "partition": 1,
        "error": "NOT_LEADER_OR_FOLLOWER",
        "error_code": 6,
        "count": 2,
        "hits": 0,
        "active": True,
    }
    status, listed = _call(server, "GET", "/v1/faults")
    assert (status, listed) == (200, {"faults": [rule]})
    producer = KafkaProducer(
        bootstrap_servers=server.bootstrap_servers, acks="all", retry_backoff_ms=20
    )
    try:
        assert producer.send("t", b"x", partition=0).get(timeout=20).offset == 0
        assert producer.send("t", b"y", partition=1).get(timeout=20).offset == 0
    finally:
        producer.close(timeout=5)
    status, listed = _call(server, "GET", "/v1/faults")
    assert (status, listed) == (200, {"faults": []})  # fired twice: gone
    status, metrics = _call(server, "GET", "/metrics")
    line = next(
        line
        for line in metrics.splitlines()
        if line.startswith("purgatory_kafka_fault_hits_total") and f'rule="{rule["id"]}"' in line
    )
    assert line.endswith(" 2.0"), line
    assert "PRODUCE t-1: error NOT_LEADER_OR_FOLLOWER" in line


def test_partition_faults_are_listed_and_removed_by_id_or_all_at_once(
    server: ServeProcess,
) -> None:
    _, first = _call(server, "POST", "/v1/faults", {"error": 6, "topic": "t", "count": None})
    _, second = _call(server, "POST", "/v1/faults", {"error": "kafka_storage_error", "broker": 2})
    # no api_keys: every API with a code per partition, listed by name
    every = sorted(key.name for key in PARTITION_APIS)
    assert (first["count"], first["api_keys"]) == (None, every)
    assert (second["error"], second["error_code"], second["broker"]) == (
        "KAFKA_STORAGE_ERROR",
        56,
        2,
    )
    _, listed = _call(server, "GET", "/v1/faults")
    assert [r["id"] for r in listed["faults"]] == [first["id"], second["id"]]
    status, removed = _call(server, "DELETE", f"/v1/faults/{first['id']}")
    assert (status, removed["id"], removed["active"]) == (200, first["id"], False)
    status, missing = _call(server, "DELETE", f"/v1/faults/{first['id']}")
    assert (status, missing["error"]) == (404, "NOT_FOUND")
    assert _call(server, "DELETE", "/v1/faults/abc")[0] == 404
    _call(server, "POST", "/v1/faults", {"error": 6})
    status, cleared = _call(server, "DELETE", "/v1/faults")
    assert status == 200
    assert len(cleared["faults"]) == 2
    assert _call(server, "GET", "/v1/faults")[1] == {"faults": []}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"error": "NO_SUCH_ERROR"}, "not the name of a Kafka error code"),
        ({"error": 12345}, "12345 is not a Kafka error code"),
        ({"error": 6, "api_keys": ["Metadata"]}, "no error code per partition"),
        ({"error": 6, "api_keys": ["Produse"]}, "unknown Kafka API 'Produse'"),
        ({"error": 6, "api_keys": []}, "length >= 1"),
        ({"error": 6, "partition": -1}, "$.partition"),
        ({"error": 6, "broker": 3}, "$.broker"),
        ({"error": 6, "count": 0}, "$.count"),
        ({"error": 6, "topic": "no way"}, "$.topic"),
        ({"error": True}, "$.error"),
        ({"error": 6, "times": 1}, "unknown field `times`"),
        ({}, "missing required field `error`"),
    ],
)
def test_bad_partition_faults_get_400_naming_why(
    server: ServeProcess, body: dict[str, Any], message: str
) -> None:
    status, answer = _call(server, "POST", "/v1/faults", body)
    assert status == 400, answer
    assert answer["error"] == "INVALID_REQUEST"
    assert message in answer["message"]
    assert _call(server, "GET", "/v1/faults")[1] == {"faults": []}


def test_the_fault_routes_take_json_only(server: ServeProcess) -> None:
    for method, path in (("POST", "/v1/faults"), ("DELETE", "/v1/faults")):
        request = urllib.request.Request(
            server.url + path, b"{}", {"Content-Type": "text/plain"}, method=method
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        with refused.value:
            assert refused.value.code == 415


def test_a_delete_without_a_body_needs_no_content_type(server: ServeProcess) -> None:
    # a browser sends a cross-site DELETE only after a CORS preflight, never approved here
    _, rule = _call(server, "POST", "/v1/faults", {"error": 6, "topic": "t"})
    request = urllib.request.Request(server.url + f"/v1/faults/{rule['id']}", method="DELETE")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
    assert _call(server, "GET", "/v1/faults")[1] == {"faults": []}


def _partition(server: ServeProcess, topic: str, index: int) -> dict[str, Any]:
    _, metadata = _call(server, "GET", "/v1/metadata")
    [found] = [t for t in metadata["topics"] if t["name"] == topic]
    return dict(found["partitions"][index])


def test_any_broker_crashes_and_restarts_with_its_kafka_listener(server: ServeProcess) -> None:
    before = _partition(server, "c", 0)
    leader = before["leader"]
    address = server.addresses.brokers[leader]
    assert _accepts(address)
    status, answer = _call(
        server, "POST", "/v1/admin/broker-faults", {"fault": "crash_broker", "broker": leader}
    )
    assert (status, answer) == (200, {"fault": "crash_broker", "broker": leader})
    assert not _accepts(address)  # its listener closed, as EmbeddedKafka's crash does
    after = _partition(server, "c", 0)
    assert after["leader"] != leader
    # fenced at once: out of the ISR of every partition it had, followed ones included
    for index in (0, 1):
        assert leader not in _partition(server, "c", index)["isr"]
    status, answer = _call(
        server, "POST", "/v1/admin/broker-faults", {"fault": "restart_broker", "broker": leader}
    )
    assert (status, answer) == (200, {"fault": "restart_broker", "broker": leader})
    assert _accepts(address)  # back on its port
    deadline = time.monotonic() + 10
    while leader not in _partition(server, "c", 0)["isr"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_an_unfenced_crash_keeps_leadership_until_the_session_times_out(
    tmp_path: Path,
) -> None:
    with ServeProcess(
        "--kafka-port",
        "0",
        "--brokers",
        "3",
        "--topic",
        "u:1:3",
        "--kafka-config",
        "broker.session.timeout.ms=1000",
        directory=tmp_path,
    ) as server:
        leader = _partition(server, "u", 0)["leader"]
        status, _ = _call(
            server,
            "POST",
            "/v1/admin/broker-faults",
            {"fault": "crash_broker_unfenced", "broker": leader},
        )
        assert status == 200
        assert not _accepts(server.addresses.brokers[leader])
        assert _partition(server, "u", 0)["leader"] == leader  # the controller has not heard
        deadline = time.monotonic() + 10
        while _partition(server, "u", 0)["leader"] == leader:  # fenced after 1 s
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert leader not in _partition(server, "u", 0)["isr"]


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("broker-faults", {"fault": "crash_broker"}, 400, "missing required field `broker`"),
        ("broker-faults", {"fault": "restart_broker", "broker": 9}, 404, "no broker 9"),
        ("broker-faults", {"fault": "failover", "broker": 1}, 400, "$.fault"),
        ("faults", {"fault": "failover", "broker": 1}, 400, "missing required field `topic`"),
        ("faults", {"fault": "crash_broker", "broker": 1}, 400, "$.fault"),
    ],
)
def test_bad_crash_requests_are_refused(
    server: ServeProcess, path: str, body: dict[str, Any], status: int, message: str
) -> None:
    got, answer = _call(server, "POST", f"/v1/admin/{path}", body)
    assert (got, message in answer["message"]) == (status, True), answer


def test_without_kafka_listeners_partition_faults_are_refused(tmp_path: Path) -> None:
    with ServeProcess(directory=tmp_path) as server:
        status, answer = _call(server, "POST", "/v1/faults", {"error": 6})
        assert status == 409
        assert "--kafka-port" in answer["message"]
        assert _call(server, "GET", "/v1/faults")[0] == 409
        _, doc = _call(server, "GET", "/openapi.json")
        assert set(doc["paths"]["/v1/faults"]) == {"get", "post", "delete"}
        assert doc["paths"]["/v1/faults/{id}"]["delete"]["parameters"][0]["name"] == "id"
