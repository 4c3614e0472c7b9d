"""The log side of transactions over the wire: transactional batches produced with
Kafka's framing, markers written by the cluster (as the transaction coordinator writes
them), Fetch read_committed (up to the last stable offset, with the aborted transactions)
read back by kio, ListOffsets read_committed, and the three clients' consumers reading
committed records only (librdkafka by default, aiokafka and kafka-python when asked)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer, TopicPartition
from kio_wire import produce_to_t0, read_response, round_trip

from purgatory.errors import ErrorCode
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.partitions import PartitionHandlers
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.record_batches import encode_batch, split_batches
from purgatory.kafka.schemas import build, request_type
from purgatory.sim import Cluster, ProduceRequest, TxnMarker
from purgatory.sim.batches import CONTROL, TRANSACTIONAL

TIMEOUT = 60.0
T0 = 1_700_000_000_000
#: these batches come from producers no transaction coordinator knows (the log side alone;
#: the coordinator's: test_transactions.py), which KIP-890's verification would refuse
UNVERIFIED: dict[str, object] = {"transaction.partition.verification.enable": False}


@pytest_asyncio.fixture
async def door() -> AsyncIterator[KafkaFrontDoor]:
    """The conftest's cluster (three brokers, t of 2 partitions) without verification."""
    async with AsyncEmbeddedKafka(brokers=3, seed=1, topics={"t": (2, 3)}, configs=UNVERIFIED) as k:
        yield k.front_door


def _batch(
    producer_id: int, sequence: int, values: list[bytes], transactional: bool = True
) -> bytes:
    """A record batch v2 as a client's producer frames it (kafka-python's builder)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, transactional, producer_id, 0, sequence, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, T0, None, value, [])
    return bytes(builder.build())


async def _produce_wire(door: KafkaFrontDoor, data: bytes, version: int = 9) -> tuple[int, int]:
    """Produce ``data`` to t-0 through the front door of its leader, over the wire:
    (error code, base offset)."""
    p = door.cluster.partition("t", 0)
    assert p is not None
    assert p.leader is not None
    request = build(
        request_type(ApiKey.PRODUCE, version),
        {
            "transactional_id": "tx",
            "acks": -1,
            "timeout": 10_000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": data}]}],
        },
    )
    frame = await round_trip(door.addresses[p.leader], request)
    [topic] = read_response(frame, ApiKey.PRODUCE, version).body.responses
    [part] = topic.partition_responses
    return int(part.error_code), int(part.base_offset)


async def _fill(door: KafkaFrontDoor) -> None:
    """t-0: producer 7's transaction (aborted) interleaved with producer 8's (committed),
    their markers, a record with no transaction, then producer 9's open transaction.

    [0, 2) p7 a0 a1 | [2, 4) p8 c0 c1 | [4, 5) p7 a2 | 5 commit p8 | 6 abort p7 |
    7 plain | [8, 10) p9 o0 o1 (open)"""
    assert await _produce_wire(door, _batch(7, 0, [b"a0", b"a1"])) == (0, 0)
    assert await _produce_wire(door, _batch(8, 0, [b"c0", b"c1"])) == (0, 2)
    assert await _produce_wire(door, _batch(7, 2, [b"a2"])) == (0, 4)
    cluster = door.cluster
    assert await cluster.write_txn_markers([TxnMarker(8, 0, 0, True, (("t", 0),))]) == {
        ("t", 0): ErrorCode.NONE
    }
    assert await cluster.write_txn_markers([TxnMarker(7, 0, 0, False, (("t", 0),))]) == {
        ("t", 0): ErrorCode.NONE
    }
    result = await cluster.produce(ProduceRequest("t", 0, [(None, b"plain")]))
    assert (result.error, result.base_offset) == (ErrorCode.NONE, 7)
    assert await _produce_wire(door, _batch(9, 0, [b"o0", b"o1"])) == (0, 8)


COMMITTED = [b"c0", b"c1", b"plain"]
EVERYTHING = [b"a0", b"a1", b"c0", b"c1", b"a2", b"plain", b"o0", b"o1"]


async def _fetch(
    door: KafkaFrontDoor, version: int, isolation: int, offset: int = 0
) -> tuple[Any, list[Any]]:
    """Fetch t-0 from its leader: the partition's answer and the batches it holds (as
    kafka-python reads them)."""
    from kafka.record import MemoryRecords

    p = door.cluster.partition("t", 0)
    assert p is not None
    assert p.leader is not None
    topic_id = door.cluster.topic_id("t")
    request = build(
        request_type(ApiKey.FETCH, version),
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": isolation,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "t",
                    "topic_id": topic_id if version >= 13 else uuid.UUID(int=0),
                    "partitions": [
                        {
                            "partition": 0,
                            "fetch_offset": offset,
                            "partition_max_bytes": 1 << 20,
                            "current_leader_epoch": -1,
                            "log_start_offset": -1,
                        }
                    ],
                }
            ],
        },
    )
    frame = await round_trip(door.addresses[p.leader], request)
    [topic] = read_response(frame, ApiKey.FETCH, version).body.responses
    [part] = topic.partitions
    batches = []
    records = MemoryRecords(bytes(part.records or b""))
    while records.has_next():
        batches.append(records.next_batch())
    return part, batches


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [4, 11, 12, 16])
async def test_fetch_read_committed_stops_at_the_lso_and_names_the_aborted(
    door: KafkaFrontDoor, version: int
) -> None:
    async with asyncio.timeout(TIMEOUT):
        await _fill(door)
        part, batches = await _fetch(door, version, isolation=1)
        assert part.error_code == 0
        assert (part.high_watermark, part.last_stable_offset) == (10, 8)
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(7, 0)]
        # whole batches below the LSO, markers included (clients skip control batches)
        assert [b.base_offset for b in batches] == [0, 2, 4, 5, 6, 7]
        markers = [b for b in batches if b.is_control_batch]
        assert [(b.base_offset, b.producer_id, b.is_transactional) for b in markers] == [
            (5, 8, True),
            (6, 7, True),
        ]
        # Kafka's EndTransactionMarker: key version 0 + type (1 commit, 0 abort), value
        # version 0 + coordinator epoch
        records = [list(b) for b in markers]
        assert [[(r.key, r.value) for r in rs] for rs in records] == [
            [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
            [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")],
        ]
        # from past the aborted transaction's marker, it is not named any more
        part, _ = await _fetch(door, version, isolation=1, offset=7)
        assert list(part.aborted_transactions) == []
        # read_uncommitted: up to the HW, the LSO still told, no aborted list
        part, batches = await _fetch(door, version, isolation=0)
        assert (part.high_watermark, part.last_stable_offset) == (10, 8)
        assert part.aborted_transactions is None
        assert [b.base_offset for b in batches] == [0, 2, 4, 5, 6, 7, 8]
        # the open transaction ends: the LSO moves to the HW
        assert await door.cluster.write_txn_markers([TxnMarker(9, 0, 0, True, (("t", 0),))]) == {
            ("t", 0): ErrorCode.NONE
        }
        part, batches = await _fetch(door, version, isolation=1)
        assert (part.high_watermark, part.last_stable_offset) == (11, 11)
        assert [b.base_offset for b in batches][-2:] == [8, 10]
    assert not door.stats.bad_input


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [2, 5, 9])
async def test_list_offsets_read_committed_latest_is_the_lso(
    door: KafkaFrontDoor, version: int
) -> None:
    async with asyncio.timeout(TIMEOUT):
        await _fill(door)
        p = door.cluster.partition("t", 0)
        assert p is not None
        assert p.leader is not None
        for isolation, expected in [(0, 10), (1, 8)]:
            request = build(
                request_type(ApiKey.LIST_OFFSETS, version),
                {
                    "replica_id": -1,
                    "isolation_level": isolation,
                    "topics": [
                        {
                            "name": "t",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "timestamp": -1,
                                    "current_leader_epoch": -1,
                                }
                            ],
                        }
                    ],
                },
            )
            frame = await round_trip(door.addresses[p.leader], request)
            [topic] = read_response(frame, ApiKey.LIST_OFFSETS, version).body.topics
            [part] = topic.partitions
            assert (part.error_code, part.offset) == (0, expected)


@pytest.mark.asyncio
async def test_a_client_may_not_write_markers_and_the_verifier_sees_first_writes() -> None:
    asked: list[tuple[int, int, str, int]] = []
    refuse = {12}

    async def verify(producer_id: int, epoch: int, topic: str, partition: int) -> ErrorCode:
        asked.append((producer_id, epoch, topic, partition))
        return ErrorCode.INVALID_TXN_STATE if producer_id in refuse else ErrorCode.NONE

    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        broker = PartitionHandlers(cluster, 0, {0: ("h", 1)}, ProtocolStats(), txn_verifier=verify)
        control = encode_batch(
            0,
            0,
            [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
            T0,
            (5, 0, -1),
            TRANSACTIONAL | CONTROL,
        )
        assert split_batches(control)[0].control
        assert (await produce_to_t0(broker, control))[0] == ErrorCode.INVALID_RECORD.number
        assert (await produce_to_t0(broker, _batch(11, 0, [b"x"])))[0] == 0
        assert (await produce_to_t0(broker, _batch(11, 1, [b"y"])))[0] == 0  # within it
        # refused by the verifier: a Produce v12 is told its transaction is abortable
        assert (await produce_to_t0(broker, _batch(12, 0, [b"z"])))[0] == (
            ErrorCode.TRANSACTION_ABORTABLE.number
        )
        assert (await produce_to_t0(broker, _batch(13, 0, [b"n"], transactional=False)))[0] == 0
        assert asked == [(11, 0, "t", 0), (12, 0, "t", 0)]
        p = cluster.partition("t", 0)
        assert p is not None
        assert p.leader_log.txns.ongoing == {11: 0}
        assert p.leo == 3


# -- real clients' consumers ----------------------------------------------------------------


def _confluent_read(bootstrap: str, want: int) -> list[bytes]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False}
    )  # isolation.level read_committed is librdkafka's default
    try:
        consumer.assign([CTopicPartition("t", 0, 0)])
        return _drain(lambda: consumer.poll(0.2), want)
    finally:
        consumer.close()


def _kafka_python_read(bootstrap: str, want: int, isolation: str) -> list[bytes]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False
    )
    try:
        tp = KTopicPartition("t", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)

        def poll() -> list[Any]:
            return [r for rs in consumer.poll(200).values() for r in rs]

        return _drain(poll, want)
    finally:
        consumer.close()


def _drain(poll: Any, want: int) -> list[bytes]:
    """Values polled until ``want`` arrived, then a few polls more (nothing else may)."""
    import time

    got: list[bytes] = []
    deadline = time.monotonic() + 30
    extra = 0
    while time.monotonic() < deadline and extra < 5:
        batch = poll()
        if batch is None:
            batch = []
        elif not isinstance(batch, list):
            if batch.error():
                raise AssertionError(batch.error())
            batch = [batch]
        got.extend(m.value() if callable(m.value) else m.value for m in batch)
        if len(got) >= want:
            extra += 1
    return got


async def _aiokafka_read(bootstrap: str, want: int, isolation: str) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tp = TopicPartition("t", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[bytes] = []
        extra = 0
        while extra < 5:
            answer = await consumer.getmany(tp, timeout_ms=200)
            got.extend(m.value for m in answer.get(tp, []) if m.value is not None)
            if len(got) >= want:
                extra += 1
        return got
    finally:
        await consumer.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("client", "isolation"),
    [
        ("confluent-kafka", "read_committed"),
        ("aiokafka", "read_committed"),
        ("aiokafka", "read_uncommitted"),
        ("kafka-python", "read_committed"),
        ("kafka-python", "read_uncommitted"),
    ],
)
async def test_consumers_see_committed_records_only(
    door: KafkaFrontDoor, client: str, isolation: str
) -> None:
    async with asyncio.timeout(TIMEOUT):
        await _fill(door)
        expected = COMMITTED if isolation == "read_committed" else EVERYTHING
        if client == "aiokafka":
            got = await _aiokafka_read(door.bootstrap, len(expected), isolation)
        elif client == "confluent-kafka":
            got = await asyncio.to_thread(_confluent_read, door.bootstrap, len(expected))
        else:
            got = await asyncio.to_thread(
                _kafka_python_read, door.bootstrap, len(expected), isolation
            )
    # no aborted record, no control record, nothing of the open transaction
    assert got == expected
    assert not door.stats.bad_input


@pytest.mark.asyncio
async def test_embedded_records_leave_markers_out() -> None:
    async with AsyncEmbeddedKafka(
        brokers=1, seed=1, topics={"t": (1, 1)}, configs=UNVERIFIED
    ) as kafka:
        await _fill(kafka.front_door)
        values = [r.value for r in kafka.records("t", 0)]
    assert values == EVERYTHING  # what a read_uncommitted consumer reads
