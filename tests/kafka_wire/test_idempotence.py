"""Idempotent producers over the wire: InitProducerId, sequence checks answered with
Kafka's codes, and real clients (librdkafka, aiokafka) writing every record exactly once,
in order, while the partition's leader crashes under them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from kio_wire import produce_to_t0, read_response, round_trip

from purgatory.errors import ErrorCode
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.partitions import PartitionHandlers
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.schemas import build, request_type
from purgatory.sim import Cluster
from purgatory.sim.latency import Latency
from purgatory.sim.partition import Partition

TIMEOUT = 60.0
SLOW_MS = 200.0  # the slow follower's replication round trip


def _batch(
    producer_id: int, epoch: int, sequence: int, count: int = 2, transactional: bool = False
) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, transactional, producer_id, epoch, sequence, 1 << 20)
    for i in range(count):
        builder.append(i, 1_700_000_000_000, None, b"s%d" % (sequence + i), [])
    return bytes(builder.build())


@pytest.mark.asyncio
async def test_produce_checks_sequences_with_kafkas_codes() -> None:
    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        broker = PartitionHandlers(cluster, 0, {0: ("h", 1)}, ProtocolStats())
        assert await produce_to_t0(broker, _batch(9, 0, 0)) == (0, 0)
        assert await produce_to_t0(broker, _batch(9, 0, 2)) == (0, 2)
        # A retry: acknowledged with the offset it was written at, not appended again.
        assert await produce_to_t0(broker, _batch(9, 0, 0)) == (0, 0)
        assert cluster.partition("t", 0).leader_log.leo == 4
        assert await produce_to_t0(broker, _batch(9, 0, 6)) == (45, -1)  # a gap: 4 never came
        assert await produce_to_t0(broker, _batch(9, 1, 4)) == (45, -1)  # a new epoch starts at 0
        assert await produce_to_t0(broker, _batch(9, 1, 0)) == (0, 4)
        assert await produce_to_t0(broker, _batch(9, 0, 4)) == (47, -1)  # the old epoch is fenced
        assert await produce_to_t0(broker, _batch(10, 0, 77)) == (0, 6)  # no state: any sequence
        # a transactional batch is stored (KIP-98); its producer may not leave the
        # transaction with a plain batch before the marker
        assert await produce_to_t0(broker, _batch(11, 0, 0, transactional=True)) == (0, 8)
        assert await produce_to_t0(broker, _batch(11, 0, 2)) == (48, -1)
        # Kafka takes one batch per partition from Produce v3 on; a sequence check needs it.
        assert await produce_to_t0(broker, _batch(12, 0, 0) + _batch(12, 0, 2)) == (87, -1)
        values = [
            r.value for r in cluster.partition("t", 0).leader_log.read_records(0, 99, 1 << 20)
        ]
        assert values == [b"s0", b"s1", b"s2", b"s3", b"s0", b"s1", b"s77", b"s78", b"s0", b"s1"]


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(6))
async def test_init_producer_id_hands_out_fresh_ids(door: KafkaFrontDoor, version: int) -> None:
    """An idempotent producer (no transactional id) gets a fresh id at epoch 0 from any
    broker; an empty transactional id is INVALID_REQUEST (transactional ones:
    test_transactions.py)."""

    async def ask(transactional_id: str | None, broker: int = 0) -> Any:
        request = build(
            request_type(ApiKey.INIT_PRODUCER_ID, version),
            {"transactional_id": transactional_id, "transaction_timeout": 60_000},
        )
        frame = await round_trip(door.addresses[broker], request)
        return read_response(frame, ApiKey.INIT_PRODUCER_ID, version).body

    first, second = await ask(None), await ask(None, broker=2)
    first_code, second_code = int(first.error_code), int(second.error_code)
    assert (first_code, first.producer_epoch, second_code) == (0, 0, 0)
    assert first.producer_id >= 0
    assert second.producer_id != first.producer_id
    refused = await ask("")
    assert (int(refused.error_code), refused.producer_id) == (ErrorCode.INVALID_REQUEST.number, -1)


def _slow_one_follower(cluster: Cluster) -> tuple[int, int]:
    """Slow the follower that would not be elected, so acks=all answers wait on it while
    the other follower already holds every batch: a crash of the leader then leaves
    batches written but unacknowledged, which the producer retries on the new leader.
    Returns (leader, slow follower)."""
    p = cluster.partition("t", 0)
    assert p is not None
    assert p.leader is not None
    slow = [b for b in p.replicas if b != p.leader][-1]
    cluster.set_replication_latency(slow, Latency(SLOW_MS))
    return p.leader, slow


async def _crash_leader_once_acknowledged(cluster: Cluster, leader: int, slow: int, n: int) -> None:
    """Crash ``leader`` once its high watermark passed ``n`` records, halfway between two
    fetches of the slow follower: what the producer sent since its last answers is then
    written on the leader and the other follower, and not acknowledged."""
    passed = asyncio.Event()

    def watch(p: Partition, old: int, new: int) -> None:
        if p.key == "t-0" and new >= n:
            passed.set()

    cluster.hw_listeners.append(watch)
    await passed.wait()
    cluster.hw_listeners.remove(watch)
    await asyncio.sleep(SLOW_MS / 2000)
    await cluster.crash_broker(leader)
    cluster.set_replication_latency(slow, None)


def _partition_values(cluster: Cluster) -> list[bytes]:
    p = cluster.partition("t", 0)
    assert p is not None
    log = p.leader_log
    return [r.value for r in log.read_records(log.log_start_offset, log.leo, 1 << 40)]


def _confluent_idempotent_produce(bootstrap: str, count: int, failed: list[Any]) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.num.messages": 50,  # many batches in flight when the leader dies
            "retry.backoff.ms": 20,
            "message.timeout.ms": 30_000,
        }
    )

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(error)

    for i in range(count):
        producer.produce("t", b"%d" % i, partition=0, on_delivery=delivered)
        producer.poll(0)
    left = producer.flush(40)
    if left:
        failed.append(f"{left} records undelivered")


@pytest.mark.asyncio
async def test_librdkafka_idempotent_producer_writes_each_record_once_across_a_leader_crash(
    door,
) -> None:
    cluster = door.cluster
    leader, slow = _slow_one_follower(cluster)
    count = 3000
    failed: list[Any] = []
    async with asyncio.timeout(TIMEOUT):
        producing = asyncio.ensure_future(
            asyncio.to_thread(_confluent_idempotent_produce, door.bootstrap, count, failed)
        )
        await _crash_leader_once_acknowledged(cluster, leader, slow, count // 3)
        await producing
    assert failed == []
    assert cluster.partition("t", 0).leader != leader
    assert _partition_values(cluster) == [b"%d" % i for i in range(count)]


@pytest.mark.asyncio
async def test_aiokafka_idempotent_producer_writes_each_record_once_across_a_leader_crash(
    door,
) -> None:
    cluster = door.cluster
    leader, slow = _slow_one_follower(cluster)
    count = 2000
    async with asyncio.timeout(TIMEOUT):
        producer = AIOKafkaProducer(
            bootstrap_servers=door.bootstrap,
            enable_idempotence=True,
            max_batch_size=1000,  # many batches in flight when the leader dies
            retry_backoff_ms=20,
        )
        await producer.start()
        try:
            crash = asyncio.ensure_future(
                _crash_leader_once_acknowledged(cluster, leader, slow, count // 3)
            )
            sent = [await producer.send("t", b"%d" % i, partition=0) for i in range(count)]
            await asyncio.gather(*sent)
            await crash
        finally:
            await producer.stop()
    assert cluster.partition("t", 0).leader != leader
    assert _partition_values(cluster) == [b"%d" % i for i in range(count)]
