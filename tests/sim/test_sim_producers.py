"""Idempotent producers' state on each replica's log: retries acknowledged once, gaps and
fenced epochs refused with Kafka's codes, and the state every replica rebuilds from the
batches it holds (so a new leader after a failover knows what the old one wrote)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster, DeleteRecordsRequest, ProduceRequest
from purgatory.sim.errors import SimulationError
from purgatory.sim.log import Log, LogConfig
from purgatory.sim.producers import BATCHES_RETAINED, last_sequence
from purgatory.testing import run_virtual

INT32_MAX = (1 << 31) - 1


class Wire:
    """A client's batch as the log sees it: bytes and header fields."""

    def __init__(self, producer_id: int, epoch: int, sequence: int, count: int = 2) -> None:
        self.buf = bytearray(100)
        self.record_count = count
        self.producer_id, self.producer_epoch, self.base_sequence = producer_id, epoch, sequence
        self.transactional = False

    def assign(self, base_offset: int, leader_epoch: int) -> None:
        pass

    def key_values(self) -> list[tuple[bytes | None, bytes]]:
        return [(None, b"%d" % (self.base_sequence + i)) for i in range(self.record_count)]


def _append(log: Log, producer_id: int, epoch: int, sequence: int, count: int = 2) -> int:
    """Append a batch; its base offset."""
    return log.append((), 0, Wire(producer_id, epoch, sequence, count)).base_offset


def _refused(log: Log, producer_id: int, epoch: int, sequence: int) -> ErrorCode:
    leo = log.leo
    with pytest.raises(SimulationError) as refused:
        _append(log, producer_id, epoch, sequence)
    assert log.leo == leo  # nothing appended
    return refused.value.code


def test_a_retried_batch_gets_its_original_offset_and_is_not_appended() -> None:
    log = Log()
    assert [_append(log, 7, 0, seq) for seq in (0, 2, 4)] == [0, 2, 4]
    assert _append(log, 7, 0, 2) == 2  # the second batch, again
    assert _append(log, 7, 0, 4) == 4
    assert log.leo == 6
    assert [r.value for r in log.read_records(0, 6, 1 << 20)] == [
        b"0",
        b"1",
        b"2",
        b"3",
        b"4",
        b"5",
    ]


def test_a_gap_an_old_batch_and_a_new_epoch_not_at_zero_are_out_of_order() -> None:
    log = Log()
    for seq in range(0, 2 * (BATCHES_RETAINED + 1), 2):
        _append(log, 7, 0, seq)
    assert _refused(log, 7, 0, 14) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # 12 missing
    # The first batch is older than the last five remembered: not known as a retry.
    assert _refused(log, 7, 0, 0) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _refused(log, 7, 1, 12) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _append(log, 7, 1, 0) == log.leo - 2  # a new epoch starts at 0
    assert _refused(log, 7, 0, 12) is ErrorCode.INVALID_PRODUCER_EPOCH  # fenced


def test_a_producer_without_state_may_start_at_any_sequence_and_producers_are_separate() -> None:
    log = Log()
    assert _append(log, 7, 3, 41) == 0
    assert _append(log, 8, 0, 0) == 2
    assert _append(log, 7, 3, 43) == 4
    assert _append(log, 8, 0, 2) == 6
    assert _append(log, -1, -1, -1) == 8  # not idempotent: never checked
    assert _append(log, -1, -1, -1) == 10


def test_sequences_wrap_after_int32_max() -> None:
    assert last_sequence(INT32_MAX - 1, 3) == 0
    log = Log()
    _append(log, 7, 0, INT32_MAX - 1, count=2)
    assert _append(log, 7, 0, 0) == 2
    assert _append(log, 7, 0, INT32_MAX - 1, count=2) == 0  # still a known retry


def test_followers_build_the_same_state_from_the_batches_they_replicate() -> None:
    leader, follower = Log(), Log()
    for seq in (0, 2):
        _append(leader, 7, 0, seq)
    for batch in leader.read_batches(0, leader.leo, 1 << 20):
        follower.append_batch(batch)
    assert _append(follower, 7, 0, 2) == 2  # the follower, leading now, knows the retry
    assert follower.leo == 4
    assert _refused(follower, 7, 0, 6) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_truncation_rebuilds_the_state_from_what_is_left() -> None:
    log = Log()
    for seq in (0, 2, 4):
        _append(log, 7, 0, seq)
    log.truncate_to(4)  # the last batch goes: its retry is appended again
    assert _append(log, 7, 0, 4) == 4
    log.truncate_to(0)  # every batch of producer 7 goes: no state left
    assert _append(log, 7, 0, 100) == 0


def _deleted_by_delete_records(log: Log) -> None:
    log.delete_before(log.leo)


def _deleted_by_retention(log: Log) -> None:
    assert log.apply_retention(log.leo, now_ms=10_000.0)


@pytest.mark.parametrize("delete", [_deleted_by_delete_records, _deleted_by_retention])
def test_a_producer_whose_batches_are_all_deleted_keeps_its_state(
    delete: Callable[[Log], None],
) -> None:
    """As Kafka's ProducerStateManager: a log start moved past every batch of a producer
    (DeleteRecords, retention) leaves its epoch and last batches; only expiry drops them."""
    log = Log(LogConfig(retention_ms=1000))
    for seq in (0, 2, 4):
        _append(log, 7, 0, seq)
    delete(log)
    assert (log.log_start_offset, log.batches) == (6, 0)
    assert _append(log, 7, 0, 4) == 4  # a retry of its last batch: its offsets, not appended
    assert log.leo == 6
    assert _refused(log, 7, 0, 100) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _append(log, 7, 0, 6) == 6  # its next sequence
    delete(log)
    assert _refused(log, 7, 1, 8) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _append(log, 7, 1, 0) == 8  # a new epoch, from 0
    assert _refused(log, 7, 0, 8) is ErrorCode.INVALID_PRODUCER_EPOCH  # still fenced


def test_a_follower_deleting_the_same_batches_keeps_the_same_state() -> None:
    leader, follower = Log(), Log()
    for seq in (0, 2):
        _append(leader, 7, 0, seq)
    for batch in leader.read_batches(0, leader.leo, 1 << 20):
        follower.append_batch(batch)
    leader.delete_before(4)
    follower.delete_before(4)
    assert follower.producers.active() == leader.producers.active()
    assert _append(follower, 7, 0, 2) == 2  # leading now, it knows the retry
    assert _append(follower, 7, 0, 4) == 4


def test_a_retry_after_a_failover_is_acknowledged_once_by_the_new_leader() -> None:
    async def body() -> None:
        async with Cluster(brokers=3, seed=1) as cluster:
            await cluster.create_topic("t", partitions=1, replication_factor=3)
            for seq in (0, 2):
                request = ProduceRequest("t", 0, (), acks=-1, wire=Wire(7, 0, seq))
                assert (await cluster.produce(request)).base_offset == seq
            old = cluster.partition("t", 0).leader
            await cluster.crash_broker(old)
            p = cluster.partition("t", 0)
            assert p.leader != old
            retry = await cluster.produce(ProduceRequest("t", 0, (), wire=Wire(7, 0, 2)))
            assert (retry.error, retry.base_offset) == (ErrorCode.NONE, 2)
            assert p.leader_log.leo == 4
            with pytest.raises(SimulationError) as gap:
                await cluster.produce(ProduceRequest("t", 0, (), wire=Wire(7, 0, 6)))
            assert gap.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    run_virtual(body())


def test_an_idle_producer_expires_after_producer_id_expiration_ms_unless_in_a_transaction() -> None:
    """Kafka's removeExpiredProducers: producer.id.expiration.ms after its last write, a
    producer with no transaction open on the log is forgotten (then any sequence goes)."""
    log = Log()
    log.append((), 0, Wire(7, 0, 0), now_ms=0.0)
    in_txn = Wire(8, 0, 0)
    in_txn.transactional = True
    log.append((), 0, in_txn, now_ms=0.0)
    log.append((), 0, Wire(9, 0, 0), now_ms=500.0)
    log.delete_before(log.leo)
    assert log.remove_expired_producers(now_ms=999.0, expiration_ms=1000) == 0
    assert log.remove_expired_producers(now_ms=1000.0, expiration_ms=1000) == 1
    assert [a.producer_id for a in log.producers.active()] == [8, 9]
    assert log.append((), 0, Wire(7, 0, 100), now_ms=1200.0).base_offset == 6  # any sequence
    assert _refused(log, 9, 0, 100) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.remove_expired_producers(now_ms=1500.0, expiration_ms=1000) == 1  # 9
    assert [a.producer_id for a in log.producers.active()] == [7, 8]


def test_every_replica_expires_producers_by_its_clock_and_only_then_forgets_them() -> None:
    """Through a cluster: DeleteRecords of everything keeps producer 7 on every replica;
    the periodic check, on the brokers' injected clock, forgets it once
    producer_id_expiration_ms passed since its last write."""

    async def body() -> None:
        clock = [0.0]
        async with Cluster(
            brokers=3,
            seed=1,
            producer_id_expiration_ms=60_000,
            producer_id_expiration_check_interval_ms=1_000,
        ) as cluster:
            for broker in cluster.brokers.values():
                broker.replica_manager.now_ms = lambda: clock[0]
            await cluster.create_topic("t", partitions=1, replication_factor=3)
            for seq in (0, 2):
                request = ProduceRequest("t", 0, (), acks=-1, wire=Wire(7, 0, seq))
                assert (await cluster.produce(request)).error is ErrorCode.NONE
            deleted = await cluster.delete_records(DeleteRecordsRequest("t", 0, -1))
            assert deleted.error is ErrorCode.NONE
            p = cluster.partition("t", 0)
            assert p is not None
            managers = [b.replica_manager for b in cluster.brokers.values()]
            clock[0] = 59_999.0
            assert [rm.remove_expired_producers() for rm in managers] == [0, 0, 0]
            assert {len(log.producers) for log in p.logs.values()} == {1}
            retry = await cluster.produce(ProduceRequest("t", 0, (), wire=Wire(7, 0, 2)))
            assert (retry.error, retry.base_offset, p.leader_log.leo) == (ErrorCode.NONE, 2, 4)
            clock[0] = 60_000.0
            await asyncio.sleep(1.5)  # the periodic check of every broker
            assert {len(log.producers) for log in p.logs.values()} == {0}
            fresh = await cluster.produce(ProduceRequest("t", 0, (), wire=Wire(7, 0, 100)))
            assert (fresh.error, fresh.base_offset) == (ErrorCode.NONE, 4)

    run_virtual(body())
