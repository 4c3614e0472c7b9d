"""The real server on an ephemeral loopback port, driven over HTTP (real time, short waits)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest
from served import Served, start_server
from test_service_connections import read_response, request

from purgatory.service.app import create_app
from purgatory.service.config import ServiceConfig
from purgatory.sim.cluster import Cluster

PRODUCE = "purgatory_delayed_operations"


async def slow_followers(server: Served, latency_ms: int) -> None:
    for broker in (1, 2):  # t-0 is led by broker 0
        status, _ = await server.post(
            "/v1/admin/faults",
            {
                "fault": "slow_follower",
                "topic": "t",
                "partition": 0,
                "broker": broker,
                "latency_ms": latency_ms,
            },
        )
        assert status == 200


async def hw(server: Served, partition: int) -> tuple[int, int]:
    _, meta = await server.get("/v1/metadata")
    (topic,) = meta["topics"]
    p = topic["partitions"][partition]
    return p["high_watermark"], p["log_end_offset"]


@pytest.mark.asyncio
async def test_acks_all_produce_completes_only_after_replication(served: Served) -> None:
    # long enough that a loaded machine still looks at the HW before the followers copy
    await slow_followers(served, 2000)
    body = {"topic": "t", "partition": 0, "records": [{"value": "a"}], "acks": -1}
    produce = asyncio.create_task(served.post("/v1/produce", body))

    async def parked() -> bool:
        return await served.total(PRODUCE, purgatory="Produce") == 1

    await served.until(parked, "the produce to park in the Produce purgatory")
    assert await served.parked() == 1
    assert await hw(served, 0) == (0, 1)  # appended on the leader, not yet replicated
    assert not produce.done()
    status, answer = await produce
    assert (status, answer) == (200, {"error": None, "base_offset": 0})
    assert (await hw(served, 0))[0] >= 1  # answered only once the HW covered the record
    assert await served.total(PRODUCE, purgatory="Produce") == 0
    assert await served.total("purgatory_operations_completed_total", purgatory="Produce") == 1
    assert await served.parked() == 0


@pytest.mark.asyncio
async def test_fetch_with_min_bytes_waits_and_wakes_on_append(served: Served) -> None:
    body = {"topic": "t", "partition": 0, "offset": 0, "min_bytes": 1, "max_wait_ms": 10_000}
    started = time.monotonic()
    fetch = asyncio.create_task(served.post("/v1/fetch", body))

    async def parked() -> bool:
        return await served.parked() == 1

    await served.until(parked, "the fetch to park")
    assert not fetch.done()
    record = {"key": "k", "value": "wake"}
    produce = {"topic": "t", "partition": 0, "records": [record], "acks": 1}
    assert await served.post("/v1/produce", produce) == (200, {"error": None, "base_offset": 0})
    status, answer = await fetch
    assert time.monotonic() - started < 5  # woken by the append, not by max_wait_ms
    assert status == 200
    assert answer["error"] is None
    assert answer["records"] == [{"offset": 0, "key": "k", "value": "wake"}]
    assert answer["high_watermark"] == 1


@pytest.mark.asyncio
async def test_expiry_answers_on_time(served: Served) -> None:
    body = {"topic": "t", "partition": 1, "offset": 0, "max_wait_ms": 300}
    started = time.monotonic()
    status, answer = await served.post("/v1/fetch", body)
    elapsed = time.monotonic() - started
    assert status == 200
    assert answer == {"error": None, "high_watermark": 0, "records": [], "log_start_offset": 0}
    assert 0.3 <= elapsed < 2.0

    await slow_followers(served, 3000)
    produce = {"topic": "t", "partition": 0, "records": [{"value": "x"}], "timeout_ms": 300}
    started = time.monotonic()
    status, answer = await served.post("/v1/produce", produce)
    elapsed = time.monotonic() - started
    assert (status, answer) == (200, {"error": "REQUEST_TIMED_OUT", "base_offset": -1})
    assert 0.3 <= elapsed < 2.0
    assert await served.total("purgatory_operations_expired_total", purgatory="Produce") == 1
    lateness = "purgatory_expiration_lateness_seconds_count"
    assert await served.total(lateness, purgatory="Produce") == 1


@pytest.mark.asyncio
async def test_failover_answers_parked_produces_with_not_leader(served: Served) -> None:
    await slow_followers(served, 2000)
    body = {"topic": "t", "partition": 0, "records": [{"value": "a"}], "timeout_ms": 10_000}
    produces = [asyncio.create_task(served.post("/v1/produce", body)) for _ in range(3)]

    async def parked() -> bool:
        return await served.total(PRODUCE, purgatory="Produce") == 3

    await served.until(parked, "three produces to park")
    fault = {"fault": "failover", "topic": "t", "partition": 0}
    status, answer = await served.post("/v1/admin/faults", fault)
    assert status == 200
    assert answer["leader"] == 1
    for produce in produces:
        assert await produce == (200, {"error": "NOT_LEADER_OR_FOLLOWER", "base_offset": -1})
    assert await served.total("purgatory_operation_errors_total", purgatory="Produce") == 3
    _, meta = await served.get("/v1/metadata")
    assert meta["topics"][0]["partitions"][0]["leader"] == 1
    assert meta["topics"][0]["partitions"][0]["leader_epoch"] == 1


@pytest.mark.asyncio
async def test_bad_requests_get_clear_errors(tight: Served) -> None:
    async with tight.session.post(
        tight.url + "/v1/fetch", data=b"{not json", headers={"Content-Type": "application/json"}
    ) as response:
        assert response.status == 400
        assert "not valid JSON" in (await response.json())["message"]
    status, answer = await tight.post("/v1/fetch", {"topic": "t", "partition": 0})
    assert (status, answer["error"]) == (400, "INVALID_REQUEST")
    assert "offset" in answer["message"]
    status, answer = await tight.post(
        "/v1/fetch", {"topic": "t", "partition": 0, "offset": 0, "x": 1}
    )
    assert status == 400
    assert "unknown field" in answer["message"]
    body = {"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 5000}
    status, answer = await tight.post("/v1/fetch", body)
    assert status == 400
    assert answer["message"] == "body: Expected `int` <= 1000 - at `$.max_wait_ms`"
    big = {"topic": "t", "partition": 0, "records": [{"value": "x" * 2048}]}
    status, answer = await tight.post("/v1/produce", big)
    assert (status, answer["error"]) == (413, "REQUEST_TOO_LARGE")
    status, answer = await tight.post(
        "/v1/topics", {"name": "t", "partitions": 1, "replication_factor": 1}
    )
    assert (status, answer["error"]) == (409, "TOPIC_ALREADY_EXISTS")
    status, answer = await tight.post("/v1/fetch", {"topic": "nope", "partition": 0, "offset": 0})
    assert (status, answer["error"]) == (200, "UNKNOWN_TOPIC_OR_PARTITION")
    reject = "purgatory_rejected_requests_total"
    assert await tight.metric(reject, reason="invalid") == 3
    assert await tight.metric(reject, reason="timeout_ceiling") == 1
    assert await tight.metric(reject, reason="too_large") == 1


@pytest.mark.asyncio
async def test_too_many_parked_requests_get_503_with_retry_after(tight: Served) -> None:
    body = {"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 1000}
    first = asyncio.create_task(tight.post("/v1/fetch", body))

    async def parked() -> bool:
        return await tight.parked() == 1

    await tight.until(parked, "the first fetch to park")
    async with tight.session.post(tight.url + "/v1/fetch", json=body) as response:
        assert response.status == 503
        assert response.headers["Retry-After"] == "1"
        assert (await response.json())["error"] == "TOO_MANY_PENDING_REQUESTS"
    # Requests that cannot park are still served.
    status, _ = await tight.post("/v1/fetch", {**body, "max_wait_ms": 0})
    assert status == 200
    assert await first == (
        200,
        {"error": None, "high_watermark": 0, "records": [], "log_start_offset": 0},
    )
    assert await tight.metric("purgatory_rejected_requests_total", reason="overloaded") == 1


async def park_and_disconnect(server: Served) -> None:
    body = {"topic": "t", "partition": 1, "offset": 0, "max_wait_ms": 30_000}
    async with aiohttp.ClientSession() as client:
        request = asyncio.create_task(client.post(server.url + "/v1/fetch", json=body))

        async def parked() -> bool:
            return await server.parked() == 1

        await server.until(parked, "the fetch to park")
        request.cancel()  # the client goes away: its connection closes
        with pytest.raises(asyncio.CancelledError):
            await request

    async def released() -> bool:
        return await server.parked() == 0

    await server.until(released, "the server to notice the disconnect")


@pytest.mark.asyncio
async def test_disconnected_client_releases_its_parking_slot(served: Served) -> None:
    await park_and_disconnect(served)
    # The handler was cancelled, not left waiting for its 30 s long poll.
    status, _ = await served.post("/v1/fetch", {"topic": "t", "partition": 1, "offset": 0})
    assert status == 200


@pytest.mark.asyncio
async def test_disconnected_client_has_its_operation_removed(served: Served) -> None:
    await park_and_disconnect(served)
    # The broker sees the cancellation before the handler's parking slot is released,
    # so the op must already have left the purgatory as "cancelled".
    cancelled = "purgatory_operations_cancelled_total"
    assert await served.total(cancelled, purgatory="Fetch") == 1


@pytest.mark.asyncio
async def test_openapi_healthz_and_two_apps_in_one_process(served: Served) -> None:
    status, doc = await served.get("/openapi.json")
    assert status == 200
    assert doc["openapi"].startswith("3.")
    for path in ("/v1/topics", "/v1/produce", "/v1/fetch", "/v1/metadata", "/healthz", "/metrics"):
        assert path in doc["paths"]
    fetch_schema = doc["paths"]["/v1/fetch"]["post"]["requestBody"]["content"]
    ref = fetch_schema["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    props: dict[str, Any] = doc["components"]["schemas"][ref]["properties"]
    assert props["max_wait_ms"]["maximum"] == 60_000
    assert await served.get("/healthz") == (200, {"status": "ok", "parked": 0})
    # A second app in the same process gets its own registry: no duplicate metrics.
    async with Cluster() as other:
        create_app(other)
        create_app(other)


@pytest.mark.asyncio
async def test_shutdown_answers_parked_requests() -> None:
    runner, server = await start_server()
    try:
        fetch = {"topic": "t", "partition": 1, "offset": 0, "max_wait_ms": 30_000}
        tasks = [asyncio.create_task(server.post("/v1/fetch", fetch)) for _ in range(5)]

        async def parked() -> bool:
            return await server.parked() == 5

        await server.until(parked, "five fetches to park")
        started = time.monotonic()
        await runner.cleanup()
        assert time.monotonic() - started < 5
        for task in tasks:
            status, answer = await task
            assert (status, answer["error"]) == (200, "BROKER_NOT_AVAILABLE")
        assert server.cluster.closed
    finally:
        await server.session.close()
        await runner.cleanup()


@pytest.mark.asyncio
async def test_elect_leaders_waits_for_the_preferred_leader(served: Served) -> None:
    fault = {"fault": "failover", "topic": "t", "partition": 0, "broker": 1}
    assert (await served.post("/v1/admin/faults", fault))[0] == 200
    body = {"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}
    status, answer = await served.post("/v1/admin/elect-leaders", body)
    assert status == 200
    assert answer == {
        "error": None,
        "partitions": [
            {"topic": "t", "partition": 0, "error": None, "leader": 0},
            {"topic": "t", "partition": 1, "error": "ELECTION_NOT_NEEDED", "leader": 1},
        ],
    }
    completed = "purgatory_operations_completed_total"
    assert await served.total(completed, purgatory="ElectLeader") == 1
    status, answer = await served.post(
        "/v1/admin/elect-leaders", {"partitions": [], "election_type": "dirty"}
    )
    assert status == 400
    assert "$.partitions" in answer["message"]
    status, doc = await served.get("/openapi.json")
    assert "post" in doc["paths"]["/v1/admin/elect-leaders"]


@pytest.mark.asyncio
async def test_a_topic_s_retention_moves_its_log_start_and_old_offsets_go_out_of_range(
    served: Served,
) -> None:
    create = {"name": "short", "partitions": 1, "replication_factor": 1, "retention_bytes": 0}
    status, answer = await served.post("/v1/topics", create)
    assert (status, answer["retention_bytes"], answer["retention_ms"]) == (201, 0, None)
    for i in range(3):
        produce = {"topic": "short", "partition": 0, "records": [{"value": f"r{i}"}]}
        assert (await served.post("/v1/produce", produce))[1]["error"] is None
    # retention_bytes 0 keeps nothing below the high watermark
    status, answer = await served.post("/v1/fetch", {"topic": "short", "partition": 0, "offset": 0})
    assert (status, answer["error"], answer["log_start_offset"]) == (200, "OFFSET_OUT_OF_RANGE", 3)
    bad = {**create, "name": "bad", "retention_ms": -2}
    status, answer = await served.post("/v1/topics", bad)
    assert status == 400
    assert "$.retention_ms" in answer["message"]


@pytest.mark.asyncio
async def test_a_produce_past_the_stored_bytes_cap_gets_507_and_a_reason() -> None:
    runner, server = await start_server(max_stored_bytes=64 * 1024)
    try:
        produce = {"topic": "t", "partition": 0, "records": [{"value": "x" * 1000}] * 10}
        answers = [await server.post("/v1/produce", produce) for _ in range(8)]
        statuses = [status for status, _ in answers]
        assert statuses[:5] == [200] * 5  # 5 x 12,176 bytes fit in 64 KiB, a sixth does not
        assert statuses[5:] == [507] * 3
        answer = answers[-1][1]
        assert answer["error"] == "KAFKA_STORAGE_ERROR"
        assert "cap of 65536 stored bytes" in answer["message"]
        _, meta = await server.get("/v1/metadata")
        assert meta["topics"][0]["partitions"][0]["log_end_offset"] == 50  # nothing kept
    finally:
        await server.session.close()
        await runner.cleanup()


@pytest.mark.asyncio
async def test_bodies_being_read_at_once_are_bounded_server_wide() -> None:
    """Slow bodies each hold a read buffer: past max_body_bytes_in_flight, 503 at once."""
    config = ServiceConfig(max_body_bytes=1000, max_body_bytes_in_flight=2000)
    runner, server = await start_server(config)
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    produce = json.dumps({"topic": "t", "partition": 0, "records": [{"value": "x"}]}).encode()
    slow = []
    try:
        async with asyncio.timeout(10):
            for _ in range(2):  # two 1,000-byte bodies, 10 bytes sent of each
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(request("/v1/produce", b" " * 1000)[:-990])
                slow.append((reader, writer))
            await asyncio.sleep(0.2)  # both handlers are reading
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(request("/v1/produce", produce))
            status, answer = await read_response(reader)
            assert (status, answer["error"]) == (503, "TOO_MANY_BYTES_IN_FLIGHT")
            writer.close()
            slow_reader, slow_writer = slow.pop()
            slow_writer.close()  # its claim goes with it
            await slow_reader.read()
            status, _ = await server.post("/v1/produce", json.loads(produce))
            assert status == 200
    finally:
        for _, writer in slow:
            writer.close()
        await server.session.close()
        await runner.cleanup()
