"""``purgatory serve --kafka-port``: the Kafka listeners and the HTTP API share one cluster,
its purgatory metrics and its ``--trace`` file."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from purgatory.testing import ServeProcess


def _start(*args: str) -> tuple[ServeProcess, str, str]:
    server = ServeProcess(*args)
    addresses = server.start()
    assert addresses.bootstrap_servers is not None
    return server, addresses.url, addresses.bootstrap_servers


def _stop(server: ServeProcess) -> int | None:
    return server.stop()


@pytest.mark.asyncio
async def test_kafka_produce_is_fetched_over_http_and_the_reverse() -> None:
    proc, url, bootstrap = _start("--topic", "t:1:3", "--kafka-port", "0")
    try:
        assert len(bootstrap.split(",")) == 3
        async with asyncio.timeout(30):
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
            await producer.start()
            try:
                sent = await producer.send_and_wait("t", b"from-kafka", key=b"k", partition=0)
            finally:
                await producer.stop()
            async with aiohttp.ClientSession() as session:
                fetch = {"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 0}
                async with session.post(url + "/v1/fetch", json=fetch) as response:
                    fetched = await response.json()
                produce = {"topic": "t", "partition": 0, "acks": -1, "records": [{"value": "h"}]}
                async with session.post(url + "/v1/produce", json=produce) as response:
                    produced = await response.json()
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
            await consumer.start()
            try:
                consumer.assign([TopicPartition("t", 0)])
                consumer.seek(TopicPartition("t", 0), 1)
                message = await consumer.getone()
            finally:
                await consumer.stop()
    finally:
        assert _stop(proc) == 0
    assert sent.offset == 0
    assert fetched["records"] == [{"offset": 0, "key": "k", "value": "from-kafka"}]
    assert produced == {"error": None, "base_offset": 1}
    assert (message.offset, message.value) == (1, b"h")


@pytest.mark.asyncio
async def test_bad_input_is_counted_in_the_metrics() -> None:
    proc, url, bootstrap = _start("--kafka-port", "0", "--brokers", "1")
    try:
        host, port = bootstrap.split(":")
        async with asyncio.timeout(30):
            for garbage in (
                b"\xff\xff\xff\xff",
                b"\x00\x00\x00\x0a\x00\x63\x00\x00\x00\x00\x00\x01\xff\xff",
            ):
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(garbage)
                assert await reader.read() == b""  # closed by the server
                writer.close()
            async with aiohttp.ClientSession() as session:
                async with session.get(url + "/metrics") as response:
                    text = await response.text()
    finally:
        assert _stop(proc) == 0
    assert 'purgatory_kafka_bad_input_total{kind="frame size"} 1.0' in text
    assert 'purgatory_kafka_bad_input_total{kind="unknown api key"} 1.0' in text


@pytest.mark.asyncio
async def test_kafka_connections_over_the_limit_are_closed_and_counted() -> None:
    proc, url, bootstrap = _start(
        "--kafka-port", "0", "--brokers", "2", "--kafka-max-connections", "2"
    )
    held = []
    try:
        async with asyncio.timeout(30):
            for address in bootstrap.split(","):  # one on each broker's listener
                host, port = address.split(":")
                held.append(await asyncio.open_connection(host, int(port)))
            reader, writer = await asyncio.open_connection(host, int(port))
            assert await reader.read() == b""  # the third, over the limit of both listeners
            writer.close()
            async with aiohttp.ClientSession() as session:
                async with session.get(url + "/metrics") as response:
                    text = await response.text()
    finally:
        for _, held_writer in held:
            held_writer.close()
        assert _stop(proc) == 0
    assert "purgatory_kafka_connections 2.0" in text
    assert 'purgatory_kafka_connections_closed_total{reason="limit"} 1.0' in text
    assert 'purgatory_kafka_connections_closed_total{reason="idle_timeout"} 0.0' in text


def test_kafka_port_without_room_for_every_broker_is_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "purgatory", "serve", "--brokers", "3", "--kafka-port", "65535"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--kafka-port" in result.stderr


def _counter(metrics: str, name: str, purgatory: str) -> float:
    """``name`` for ``purgatory``, summed over the brokers."""
    found = re.findall(rf'^{name}{{broker="\w+",purgatory="{purgatory}"}} (\S+)$', metrics, re.M)
    assert found, f"no {name} for {purgatory}"
    return sum(map(float, found))


async def _metrics(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(url + "/metrics") as response:
        return await response.text()


async def _parked_kafka_fetch_woken(bootstrap: str) -> bytes:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=5000
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await consumer.start()
    await producer.start()
    try:
        consumer.assign([TopicPartition("t", 0)])
        await consumer.seek_to_end()
        waiting = asyncio.ensure_future(consumer.getone())
        await asyncio.sleep(0.3)  # parked in DelayedFetch by now
        for i in range(3):
            await producer.send_and_wait("t", f"k{i}".encode(), partition=0)
        return (await waiting).value
    finally:
        await producer.stop()
        await consumer.stop()


@pytest.mark.asyncio
async def test_kafka_and_http_operations_share_the_trace_and_the_metrics(tmp_path: Path) -> None:
    path = tmp_path / "serve.jsonl"
    proc, url, bootstrap = _start(
        "--topic", "t:1:3", "--kafka-port", "0", "--trace", str(path), "--loop", "asyncio"
    )
    try:
        async with asyncio.timeout(30), aiohttp.ClientSession() as session:
            assert await _parked_kafka_fetch_woken(bootstrap) == b"k0"
            group_member = AIOKafkaConsumer(
                "t", bootstrap_servers=bootstrap, group_id="g", auto_offset_reset="earliest"
            )
            await group_member.start()  # joins: a DelayedJoin, then DelayedHeartbeats
            try:
                assert (await group_member.getone()).value == b"k0"
            finally:
                await group_member.stop()
            after_kafka = await _metrics(session, url)
            long_poll = {"topic": "t", "partition": 0, "offset": 3, "max_wait_ms": 5000}
            parked = asyncio.ensure_future(session.post(url + "/v1/fetch", json=long_poll))
            await asyncio.sleep(0.3)
            for value in ("h0", "h1"):
                produce = {"topic": "t", "partition": 0, "acks": -1, "records": [{"value": value}]}
                async with session.post(url + "/v1/produce", json=produce) as response:
                    assert response.status == 200
            async with await parked as response:
                assert (await response.json())["records"][0]["value"] == "h0"
            fault = {"fault": "failover", "topic": "t", "partition": 0}
            async with session.post(url + "/v1/admin/faults", json=fault) as response:
                assert response.status == 200
            after_http = await _metrics(session, url)
    finally:
        assert _stop(proc) == 0

    # Three acks=all produces over Kafka, then two over HTTP, each one DelayedProduce.
    completed = "purgatory_operations_completed_total"
    assert _counter(after_kafka, completed, "Produce") == 3
    assert _counter(after_http, completed, "Produce") == 5
    assert _counter(after_http, completed, "Fetch") > _counter(after_kafka, completed, "Fetch")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    events = [e for e in lines if "op_id" in e]
    produces = [e for e in events if e["kind"] == "produce"]
    assert [e["outcome"] for e in produces] == ["completed"] * 5
    assert all(e["keys"] == ["t-0"] for e in produces)
    # Both parked consumer fetches (Kafka's and HTTP's) were woken, not timed out: each
    # waited at least the 0.3 s before its produce and well under its 5 s max wait.
    woken = [
        e
        for e in events
        if e["kind"] == "fetch-consumer"
        and e["outcome"] == "completed"
        and 250 <= e["duration_ms"] < 4000
    ]
    assert len(woken) >= 2
    # The group coordinator's purgatories are metered and traced alike.
    assert _counter(after_kafka, completed, "Rebalance") == 2  # joined, then left: empty
    assert _counter(after_kafka, completed, "Heartbeat") >= 1
    joins = [e for e in events if e["kind"] == "join-group"]
    assert [(e["keys"], e["outcome"]) for e in joins] == [(["g"], "completed")] * 2
    [fault_marker] = [e["fault"] for e in lines if "fault" in e]
    assert re.fullmatch(r"fault=failover topic=t partition=0 leader=[12]", fault_marker)


def test_an_unwritable_trace_path_is_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "purgatory", "serve", "--trace", str(tmp_path / "no" / "t.jsonl")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "t.jsonl" in result.stderr


@pytest.mark.asyncio
@pytest.mark.virtual_time
@pytest.mark.parametrize("rtt_ms", [0.0, 40.0, None])
async def test_the_replica_round_trip_is_what_acks_all_waits_for(rtt_ms: float | None) -> None:
    from purgatory.service.cluster import new_cluster
    from purgatory.sim import ProduceRequest

    cluster = await new_cluster(3, rtt_ms)
    try:
        await cluster.create_topic("t", 1, 3)
        loop = asyncio.get_running_loop()
        waits = []
        for _ in range(20):
            start = loop.time()
            await cluster.produce(ProduceRequest("t", 0, [(None, b"x")], acks=-1))
            waits.append((loop.time() - start) * 1000)
    finally:
        await cluster.close()
    median = sorted(waits)[10]
    if rtt_ms == 0:
        assert waits == [0.0] * 20  # replication at once
    elif rtt_ms == 40:
        assert 30 < median < 60
    else:
        assert 0.5 < median < 2  # the simulation's default, 1 ms


@pytest.mark.parametrize("rtt", ["-1", "nan", "inf"])
def test_a_bad_replica_round_trip_is_refused(rtt: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "purgatory", "serve", "--replica-rtt-ms", rtt],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--replica-rtt-ms" in result.stderr


def _kafka_python_delete_records(bootstrap: str, offset: int) -> int:
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        [answer] = admin.delete_records({KTopicPartition("t", 0): offset}).values()
    finally:
        admin.close()
    return int(answer["low_watermark"])


@pytest.mark.asyncio
async def test_a_kafka_delete_records_parks_in_the_metered_and_traced_purgatory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "serve.jsonl"
    proc, url, bootstrap = _start(
        "--topic", "t:1:3", "--kafka-port", "0", "--trace", str(path), "--loop", "asyncio"
    )
    pending = re.compile(
        r'^purgatory_pending_operations\{broker="\d",kind="delete-records",'
        r'purgatory="DeleteRecords"\} 1\.0$',
        re.M,
    )
    try:
        async with asyncio.timeout(30), aiohttp.ClientSession() as session:
            for i in range(10):
                produce = {"topic": "t", "partition": 0, "records": [{"value": f"v{i}"}]}
                async with session.post(url + "/v1/produce", json=produce) as response:
                    assert response.status == 200
            slow = {"fault": "slow_follower", "topic": "t", "partition": 0, "latency_ms": 1500}
            async with session.post(url + "/v1/admin/faults", json=slow) as response:
                assert response.status == 200
            deleting = asyncio.ensure_future(
                asyncio.to_thread(_kafka_python_delete_records, bootstrap, 7)
            )
            while not pending.search(await _metrics(session, url)):
                assert not deleting.done()
                await asyncio.sleep(0.05)
            assert await deleting == 7
            after = await _metrics(session, url)
    finally:
        assert _stop(proc) == 0
    assert _counter(after, "purgatory_operations_completed_total", "DeleteRecords") == 1
    events = [json.loads(line) for line in path.read_text().splitlines()]
    [deleted] = [e for e in events if e.get("kind") == "delete-records"]
    assert (deleted["keys"], deleted["outcome"]) == (["t-0"], "completed")
    assert deleted["duration_ms"] >= 100  # parked for the slow follower, not answered at once
