"""Real Kafka clients against the simulated cluster's Kafka listeners (loopback only)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

TIMEOUT = 30.0


def _produce_v3(correlation_id: int, acks: int, value: bytes, base_offset: int = 0) -> bytes:
    """A raw Produce v3 request of one record to t-0, framed, as a client sends it."""
    from kafka.protocol.producer import ProduceRequest

    from purgatory.kafka.record_batches import encode_batch

    request = ProduceRequest[3](
        transactional_id=None,
        acks=acks,
        timeout_ms=1000,
        topic_data=[("t", [(0, encode_batch(base_offset, 0, [(None, value)], 0))])],
    )
    request.with_header(correlation_id=correlation_id, client_id="c")
    return bytes(request.encode(header=True, framed=True))


async def _produce_answer(reader: asyncio.StreamReader) -> tuple[int, int, int]:
    """The next Produce v3 response on the wire: (correlation id, error code, base offset)."""
    from kafka.protocol.producer import ProduceResponse

    size = int.from_bytes(await reader.readexactly(4), "big")
    frame = await reader.readexactly(size)
    [topic] = ProduceResponse[3].decode(frame[4:]).responses
    assert topic.name == "t"
    [partition] = topic.partition_responses
    return int.from_bytes(frame[:4], "big"), partition.error_code, partition.base_offset


async def _aiokafka_read(bootstrap: str, count: int) -> list[bytes]:
    """The first ``count`` values of t-0 and t-1, read from the start by aiokafka."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
        await consumer.seek_to_beginning()
        got: list[bytes] = []
        while len(got) < count:
            batches = await consumer.getmany(timeout_ms=1000)
            got += [m.value for msgs in batches.values() for m in msgs]
    finally:
        await consumer.stop()
    return got


def _confluent_messages(consumer: Any, count: int) -> list[Any]:
    """Poll a confluent-kafka consumer until ``count`` messages came, or 10 s passed."""
    got: list[Any] = []
    deadline = time.monotonic() + 10
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message)
    return got


@pytest.mark.asyncio
async def test_aiokafka_produces_acks_all_and_consumes_back_with_assign(door) -> None:
    async with asyncio.timeout(TIMEOUT):
        producer = AIOKafkaProducer(bootstrap_servers=door.bootstrap, acks="all")
        await producer.start()
        try:
            sent = [
                await producer.send_and_wait("t", f"v{i}".encode(), key=b"k", partition=i % 2)
                for i in range(20)
            ]
        finally:
            await producer.stop()
        assert sorted((m.partition, m.offset) for m in sent) == sorted(
            (p, o) for p in (0, 1) for o in range(10)
        )
        got = await _aiokafka_read(door.bootstrap, 20)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))
    assert door.cluster.partition("t", 0).hws[door.cluster.partition("t", 0).leader] == 10


@pytest.mark.asyncio
async def test_a_parked_fetch_is_woken_by_a_produce(door) -> None:
    async with asyncio.timeout(TIMEOUT):
        consumer = AIOKafkaConsumer(
            bootstrap_servers=door.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=5000
        )
        producer = AIOKafkaProducer(bootstrap_servers=door.bootstrap, acks="all")
        await consumer.start()
        await producer.start()
        try:
            consumer.assign([TopicPartition("t", 0)])
            await consumer.seek_to_end()
            waiting = asyncio.ensure_future(consumer.getone())
            await asyncio.sleep(0.3)  # the fetch is parked by now
            assert not waiting.done()
            # Parked in DelayedFetch, not answered empty and polled again.
            fetch = door.cluster.brokers[0].replica_manager.purgatories["Fetch"]  # t-0 leader
            assert [op.kind for op in fetch.pending_operations()].count("fetch-consumer") == 1
            assert door.stats.requests["FETCH"] <= 2
            sent_at = time.monotonic()
            await producer.send_and_wait("t", b"wake", partition=0)
            message = await waiting
            latency = time.monotonic() - sent_at
        finally:
            await producer.stop()
            await consumer.stop()
    assert message.value == b"wake"
    # Far below the 5 s max wait: the produce woke the parked DelayedFetch.
    assert latency < 1.0


@pytest.mark.asyncio
async def test_a_request_to_a_follower_gets_not_leader(door) -> None:
    # The leader of t-0 is broker 0; the metadata steers clients there, so ask broker 1
    # directly through a raw Produce v3 request.
    host, port = door.addresses[1]
    async with asyncio.timeout(TIMEOUT):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(_produce_v3(5, -1, b"x"))
        answer = await _produce_answer(reader)
        writer.close()
    assert answer[:2] == (5, 6)  # NOT_LEADER_OR_FOLLOWER


def _kafka_python_round_trip(bootstrap: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        futures = [producer.send("t", f"kp{i}".encode(), partition=1) for i in range(10)]
        offsets = [f.get(timeout=10).offset for f in futures]
    finally:
        producer.close(timeout=5)
    assert offsets == list(range(10))
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        consumer.assign([KTopicPartition("t", 1)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(got) < 10 and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                got += [m.value for m in msgs]
    finally:
        consumer.close()
    return got


@pytest.mark.kafka_cluster(brokers=3, topics={"t": (2, 3)})
def test_kafka_python_produces_acks_all_and_consumes_back_with_assign(kafka_cluster) -> None:
    got = _kafka_python_round_trip(kafka_cluster.bootstrap_servers)
    assert got == [f"kp{i}".encode() for i in range(10)]


def _confluent_round_trip(bootstrap: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTopicPartition

    delivered: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(
            "t",
            f"ck{i}".encode(),
            partition=0,
            on_delivery=lambda e, m: delivered.append(m.offset()),
        )
    assert producer.flush(10) == 0
    assert delivered == list(range(10))
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    try:
        consumer.assign([CTopicPartition("t", 0, 0)])
        got = [message.value() for message in _confluent_messages(consumer, 10)]
    finally:
        consumer.close()
    return got


@pytest.mark.kafka_cluster(brokers=3, topics={"t": (2, 3)})
def test_confluent_kafka_produces_acks_all_and_consumes_back_with_assign(kafka_cluster) -> None:
    got = _confluent_round_trip(kafka_cluster.bootstrap_servers)
    assert got == [f"ck{i}".encode() for i in range(10)]


@pytest.mark.asyncio
async def test_failover_mid_stream_loses_no_acknowledged_record(door) -> None:
    cluster = door.cluster
    async with asyncio.timeout(TIMEOUT):
        producer = AIOKafkaProducer(
            bootstrap_servers=door.bootstrap, acks="all", retry_backoff_ms=20
        )
        await producer.start()
        acked: list[bytes] = []
        try:
            for i in range(60):
                if i == 30:
                    old = cluster.partition("t", 0).leader
                    new = await cluster.fail_over("t", 0)
                    assert new != old
                value = f"f{i}".encode()
                await producer.send_and_wait("t", value, partition=0)
                acked.append(value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=door.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("t", 0)])
            await consumer.seek_to_beginning()
            got: set[bytes] = set()
            while not set(acked) <= got:
                batches = await consumer.getmany(timeout_ms=1000)
                got |= {m.value for msgs in batches.values() for m in msgs}
        finally:
            await consumer.stop()
    assert len(acked) == 60


@pytest.mark.asyncio
async def test_offsets_are_committed_and_fetched_per_group(door) -> None:
    tp = TopicPartition("t", 1)
    async with asyncio.timeout(TIMEOUT):
        for group, offset in (("g1", 5), ("g2", 7)):
            consumer = AIOKafkaConsumer(
                bootstrap_servers=door.bootstrap, group_id=group, enable_auto_commit=False
            )
            await consumer.start()
            try:
                consumer.assign([tp])
                await consumer.commit({tp: offset})
            finally:
                await consumer.stop()
        committed = {}
        for group in ("g1", "g2", "g3"):
            consumer = AIOKafkaConsumer(
                bootstrap_servers=door.bootstrap, group_id=group, enable_auto_commit=False
            )
            await consumer.start()
            try:
                consumer.assign([tp])
                committed[group] = await consumer.committed(tp)
            finally:
                await consumer.stop()
    assert committed == {"g1": 5, "g2": 7, "g3": None}


@pytest.mark.asyncio
async def test_acks_0_gets_no_response_and_acks_1_and_2_are_answered(door) -> None:
    host, port = door.addresses[door.cluster.partition("t", 0).leader]
    async with asyncio.timeout(TIMEOUT):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(_produce_v3(1, 0, b"zero") + _produce_v3(2, 1, b"one"))
            writer.write(_produce_v3(3, 2, b"two"))
            answers = {}
            for _ in range(2):
                correlation_id, error_code, base_offset = await _produce_answer(reader)
                answers[correlation_id] = (error_code, base_offset)
        finally:
            writer.close()
    # No answer to correlation id 1 (acks=0): the next one on the wire is 2's.
    assert answers == {2: (0, 1), 3: (21, -1)}  # acks=2: INVALID_REQUIRED_ACKS
    p = door.cluster.partition("t", 0)
    log = p.logs[p.leader]
    assert [r.value for r in log.read_records(0, log.leo, 1 << 20)] == [b"zero", b"one"]


def _confluent_read(bootstrap: str, count: int) -> list[tuple[bytes | None, list, int]]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "h"})
    try:
        consumer.assign([CTopicPartition("t", 1, 0)])
        got = [
            (m.value(), m.headers(), m.timestamp()[1]) for m in _confluent_messages(consumer, count)
        ]
    finally:
        consumer.close()
    return got


@pytest.mark.asyncio
async def test_headers_timestamps_tombstones_and_gzip_survive_the_round_trip(door) -> None:
    async with asyncio.timeout(TIMEOUT):
        producer = AIOKafkaProducer(
            bootstrap_servers=door.bootstrap, acks="all", compression_type="gzip"
        )
        await producer.start()
        try:
            batch = producer.create_batch()
            for i in range(3):
                value = None if i == 2 else b"v" * 200
                batch.append(
                    key=b"k",
                    value=value,
                    timestamp=1_700_000_000_000 + i,
                    headers=[("h", b"%d" % i)],
                )
            await (await producer.send_batch(batch, "t", partition=1))
        finally:
            await producer.stop()
        p = door.cluster.partition("t", 1)
        [stored] = p.logs[p.leader].read_batches(0, 3, 1 << 20)
        assert stored.wire is not None
        assert stored.wire[22] & 0x07 == 1  # kept gzip-compressed, as sent
        consumer = AIOKafkaConsumer(bootstrap_servers=door.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("t", 1)])
            await consumer.seek_to_beginning()
            got = []
            while len(got) < 3:
                batches = await consumer.getmany(timeout_ms=1000)
                got += [m for msgs in batches.values() for m in msgs]
        finally:
            await consumer.stop()
        confluent = await asyncio.to_thread(_confluent_read, door.bootstrap, 3)
        # From the middle of the batch: the whole batch comes back, as from Kafka, and
        # the client skips the records before its offset.
        consumer = AIOKafkaConsumer(bootstrap_servers=door.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("t", 1)])
            consumer.seek(TopicPartition("t", 1), 1)
            tail = (await consumer.getmany(timeout_ms=5000))[TopicPartition("t", 1)]
        finally:
            await consumer.stop()
    assert [m.offset for m in tail] == [1, 2]
    expected = [
        (b"v" * 200, [("h", b"0")], 1_700_000_000_000),
        (b"v" * 200, [("h", b"1")], 1_700_000_000_001),
        (None, [("h", b"2")], 1_700_000_000_002),
    ]
    assert [(m.value, list(m.headers), m.timestamp) for m in got] == expected
    assert confluent == expected


def _confluent_produce_and_read(bootstrap: str, codec: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": codec})
    for i in range(5):
        producer.produce("t", b"c%d" % i + b"." * 300, partition=1)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": codec})
    try:
        consumer.assign([CTopicPartition("t", 0, 0), CTopicPartition("t", 1, 0)])
        got = [message.value() for message in _confluent_messages(consumer, 10)]
    finally:
        consumer.close()
    return got


@pytest.mark.asyncio
@pytest.mark.parametrize(("codec", "attribute"), [("snappy", 2), ("lz4", 3), ("zstd", 4)])
async def test_snappy_lz4_and_zstd_batches_are_kept_and_read_by_every_client(
    door, codec: str, attribute: int
) -> None:
    values = [b"a%d" % i + b"." * 300 for i in range(5)]
    async with asyncio.timeout(TIMEOUT):
        producer = AIOKafkaProducer(
            bootstrap_servers=door.bootstrap, acks="all", compression_type=codec
        )
        await producer.start()
        try:
            batch = producer.create_batch()
            for value in values:
                batch.append(key=None, value=value, timestamp=None)
            await (await producer.send_batch(batch, "t", partition=0))
        finally:
            await producer.stop()
        confluent = await asyncio.to_thread(_confluent_produce_and_read, door.bootstrap, codec)
        got = await _aiokafka_read(door.bootstrap, 10)
    written = values + [b"c%d" % i + b"." * 300 for i in range(5)]
    assert sorted(got) == sorted(written)
    assert sorted(confluent) == sorted(written)
    for index in (0, 1):
        p = door.cluster.partition("t", index)
        stored = p.logs[p.leader].read_batches(0, 5, 1 << 20)
        assert [b.wire[22] & 0x07 for b in stored if b.wire is not None] == [attribute], index
        # The simulation (and the HTTP API) reads the inflated records.
        assert len(p.logs[p.leader].read_records(0, 5, 1 << 20)) == 5


@pytest.mark.asyncio
async def test_a_produce_past_the_stored_bytes_cap_gets_kafka_storage_error() -> None:
    from kafka.errors import KafkaStorageError

    from purgatory.kafka.front_door import KafkaFrontDoor
    from purgatory.sim import Cluster

    async with Cluster(brokers=1, max_stored_bytes=2000) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        door = KafkaFrontDoor(cluster, "127.0.0.1", 0)
        await door.start()
        try:
            codes = []
            for i in range(3):  # about 830 bytes stored each: the batch as sent, undecoded
                async with asyncio.timeout(TIMEOUT):
                    reader, writer = await asyncio.open_connection(*door.addresses[0])
                    writer.write(_produce_v3(i, 1, b"x" * 500, base_offset=i))
                    codes.append((await _produce_answer(reader))[1])
                    writer.close()
        finally:
            await door.close()
        assert codes == [0, 0, KafkaStorageError.errno]
        assert cluster.log_space.used <= 2000
