"""The log side of transactions (KIP-98): transactional batches, markers, the last stable
offset and the aborted-transactions index, on the synchronous core and on a cluster in
virtual time (leader crash mid-transaction included)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from purgatory.errors import ErrorCode
from purgatory.sim import (
    Cluster,
    ElectLeadersRequest,
    FetchRequest,
    Latency,
    ProduceRequest,
    TxnMarker,
)
from purgatory.sim.batches import CONTROL, TRANSACTIONAL, marker_of
from purgatory.sim.errors import SimulationError
from purgatory.sim.invariants import InvariantChecker
from purgatory.sim.log import Log
from purgatory.sim.partition import Partition
from purgatory.sim.producers import CompletedTxn, EndTxnMarker
from purgatory.testing import run_virtual


class Wire:
    """A client's batch as the log sees it: header fields, and records that decode."""

    def __init__(
        self, producer_id: int, epoch: int, sequence: int, count: int = 2, txn: bool = True
    ) -> None:
        self.buf = bytearray(100)
        self.record_count = count
        self.producer_id, self.producer_epoch, self.base_sequence = producer_id, epoch, sequence
        self.transactional = txn

    def assign(self, base_offset: int, leader_epoch: int) -> None:
        pass

    def key_values(self) -> list[tuple[bytes | None, bytes]]:
        return [(None, b"%d" % (self.base_sequence + i)) for i in range(self.record_count)]


def _single() -> Partition:
    """A partition of one replica: every append is committed at once (HW = LEO)."""
    return Partition("t", 0, [0], 0.0)


def _produce(p: Partition, pid: int, seq: int, count: int = 2, txn: bool = True) -> int:
    batch, _ = p.append([], Wire(pid, 0, seq, count, txn))
    return batch.base_offset


def _marker(p: Partition, pid: int, commit: bool, epoch: int = 0, coordinator: int = 0) -> int:
    batch, _ = p.append_marker(pid, epoch, EndTxnMarker(commit, coordinator))
    return batch.base_offset


def test_an_ongoing_transaction_holds_the_lso_at_its_first_offset() -> None:
    p = _single()
    _produce(p, 9, 0, txn=False)  # [0, 2): an idempotent producer, no transaction
    assert p.last_stable_offset() == p.hw == 2
    first = _produce(p, 7, 0)  # [2, 4): producer 7's transaction begins
    _produce(p, 8, 0)  # [4, 6): producer 8's
    _produce(p, 7, 2)  # [6, 8): producer 7 again, same transaction
    assert p.hw == 8
    assert p.last_stable_offset() == first == 2
    assert p.leader_log.txns.ongoing == {7: 2, 8: 4}
    assert _marker(p, 7, commit=True) == 8
    assert p.last_stable_offset() == 4  # producer 8's still open
    assert _marker(p, 8, commit=False) == 9
    assert p.last_stable_offset() == p.hw == 10
    log = p.leader_log
    assert log.txns.aborted_between(0, 10) == [CompletedTxn(8, 4, 9, True)]
    assert log.txns.aborted_between(10, 20) == []  # marker below the range
    assert log.txns.aborted_between(0, 4) == []  # begins at the range's end
    # the marker is a control batch of one record, Kafka's EndTransactionMarker
    marker = log.read_batches(9, 10, 1 << 20)[0]
    assert marker.attributes == TRANSACTIONAL | CONTROL
    assert (marker.producer_id, marker.producer_epoch, marker.base_sequence) == (8, 0, -1)
    (record,) = marker.records
    assert (record.key, record.value) == (b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")
    assert marker_of(marker) == EndTxnMarker(False, 0)


def test_the_lso_passes_a_transaction_only_once_its_marker_is_committed() -> None:
    p = Partition("t", 0, [0, 1], 0.0)
    p.append([], Wire(7, 0, 0))  # [0, 2)
    p.update_follower(1, 2, 0, 0.0)
    assert (p.hw, p.last_stable_offset()) == (2, 0)
    _marker(p, 7, commit=True)  # at 2, not yet replicated
    assert (p.hw, p.last_stable_offset()) == (2, 0)  # Kafka's unreplicated transaction
    p.update_follower(1, 3, 0, 0.0)
    assert (p.hw, p.last_stable_offset()) == (3, 3)


def test_refusals_fenced_epochs_and_mixed_writes() -> None:
    p = _single()
    _produce(p, 7, 0)

    def refused(call: Any) -> ErrorCode:
        leo = p.leo
        with pytest.raises(SimulationError) as error:
            call()
        assert p.leo == leo  # nothing appended
        return error.value.code

    # a non-transactional batch in the middle of the producer's transaction
    assert refused(lambda: _produce(p, 7, 2, txn=False)) is ErrorCode.INVALID_TXN_STATE
    # the coordinator aborts with a bumped epoch (a timed-out transaction): the old
    # epoch is fenced, for data and for markers
    _marker(p, 7, commit=False, epoch=1, coordinator=3)
    assert refused(lambda: p.append([], Wire(7, 0, 2))) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert refused(lambda: _marker(p, 7, True, epoch=0, coordinator=3)) is (
        ErrorCode.INVALID_PRODUCER_EPOCH
    )
    assert refused(lambda: _marker(p, 7, True, epoch=1, coordinator=2)) is (
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    )
    # the new epoch starts its sequences at 0
    assert refused(lambda: p.append([], Wire(7, 1, 5))) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    batch, _ = p.append([], Wire(7, 1, 0))
    assert p.leader_log.txns.ongoing == {7: batch.base_offset}
    # a marker with no transaction ongoing is written but completes nothing (as Kafka's)
    _marker(p, 5, commit=False)
    assert [t.producer_id for t in p.leader_log.txns.completed] == [7]


def test_truncation_undoes_transactions_and_markers() -> None:
    log = Log()
    log.append((), 0, Wire(7, 0, 0))  # [0, 2)
    log.append((), 0, Wire(8, 0, 0))  # [2, 4)
    log.append_marker(7, 0, EndTxnMarker(False, 0), 0)  # 4
    log.append((), 0, Wire(7, 0, 2))  # [5, 7): a new transaction of producer 7
    assert log.txns.ongoing == {8: 2, 7: 5}
    log.truncate_to(4)  # the marker goes: producer 7's first transaction is open again
    assert log.txns.ongoing == {8: 2, 7: 0}
    assert log.txns.completed == []
    log.truncate_to(1)  # a transaction's first batch is cut: it is still ongoing from 0
    assert log.txns.ongoing == {7: 0}
    log.truncate_to(0)
    assert log.txns.ongoing == {}
    # a batch a truncation cut keeps its producer and transactional bit
    log.append((), 0, Wire(9, 0, 0, count=4))
    log.truncate_to(2)
    (cut,) = log.read_batches(0, 2, 1 << 20)
    assert cut.attributes == TRANSACTIONAL
    assert cut.producer_id == 9
    assert log.txns.ongoing == {9: 0}


def test_the_log_start_drops_old_markers_and_bounds_the_lso() -> None:
    p = _single()
    _produce(p, 7, 0)  # [0, 2)
    _marker(p, 7, commit=False)  # 2
    _produce(p, 8, 0)  # [3, 5)
    log = p.leader_log
    assert [t.producer_id for t in log.txns.completed] == [7]
    log.delete_before(3)
    assert log.txns.completed == []  # its marker went with the log
    assert p.last_stable_offset() == 3
    log.delete_before(4)  # producer 8's transaction lost its first batch: still open
    assert log.txns.ongoing == {8: 3}
    assert p.last_stable_offset() == 4 == log.log_start_offset
    log.reset_to(10)
    assert log.txns.ongoing == {}
    assert p.last_stable_offset() == p.hw


def test_a_transactional_producer_keeps_its_state_and_transaction_across_delete_records() -> None:
    """Kafka keeps a producer's state whatever the log start: a marker left alone after
    DeleteRecords does not restart the producer's sequences, and an open transaction
    whose batches all went is still its own, ended by its marker."""
    p = _single()
    _produce(p, 7, 0)  # [0, 2)
    _marker(p, 7, commit=True)  # 2
    log = p.leader_log
    log.delete_before(2)  # the data batch goes, its marker stays
    assert _produce(p, 7, 2) == 3  # the next transaction continues the sequence
    assert _produce(p, 7, 4) == 5
    log.delete_before(log.leo)  # the open transaction's batches all go
    assert _produce(p, 7, 4) == 5  # a retry: its offsets, not appended again
    assert log.leo == 7
    with pytest.raises(SimulationError) as gap:
        _produce(p, 7, 100)
    assert gap.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.txns.ongoing == {7: 3}
    assert p.last_stable_offset() == 7 == log.log_start_offset
    assert _produce(p, 7, 6) == 7  # still its transaction
    assert _marker(p, 7, commit=False) == 9
    assert log.txns.completed == [CompletedTxn(7, 3, 9, True)]
    assert p.last_stable_offset() == p.hw == 10


def test_a_follower_rebuilds_the_same_transactions_from_what_it_replicates() -> None:
    p = Partition("t", 0, [0, 1], 0.0)
    p.append([], Wire(7, 0, 0))
    p.append([], Wire(8, 0, 0))
    p.append_marker(7, 0, EndTxnMarker(False, 4))
    leader, follower = p.logs[0], p.logs[1]
    p.apply_fetch(1, leader.read_batches(0, leader.leo, 1 << 20), 0, 0)
    assert follower.txns.ongoing == leader.txns.ongoing == {8: 2}
    assert follower.txns.completed == leader.txns.completed == [CompletedTxn(7, 0, 4, True)]
    p.update_follower(1, follower.leo, 0, 0.0)
    assert p.last_stable_offset(0) == 2
    p.apply_fetch(1, [], p.hw, 0)
    assert p.last_stable_offset(1) == 2


# -- on a cluster, in virtual time --------------------------------------------------------


def _run(body: Any, **options: Any) -> Any:
    async def main() -> Any:
        async with Cluster(3, seed=3, **options) as cluster:
            await cluster.create_topic("t", 2, 3, assignment=[[0, 1, 2], [1, 2, 0]])
            return await body(cluster, asyncio.get_running_loop())

    return run_virtual(main())


async def _txn_produce(c: Cluster, pid: int, seq: int, partition: int = 0) -> int:
    result = await c.produce(ProduceRequest("t", partition, [], wire=Wire(pid, 0, seq)))
    assert result.error is ErrorCode.NONE
    return result.base_offset


def test_markers_are_committed_as_acks_all_and_move_every_replicas_lso() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await _txn_produce(c, 7, 0, 0)
        await _txn_produce(c, 7, 0, 1)
        c.set_replication_latency(1, Latency(30.0))
        c.set_replication_latency(2, Latency(30.0))
        start = loop.time()
        answer = await c.write_txn_markers([TxnMarker(7, 0, 0, False, (("t", 0), ("t", 1)))])
        assert answer == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
        assert loop.time() - start >= 0.030  # it waited for a slowed replication round
        for index in (0, 1):
            p = c.partition("t", index)
            assert p is not None
            assert p.hw == 3
            assert p.last_stable_offset() == 3
            for broker, log in p.logs.items():
                assert log.txns.completed == [CompletedTxn(7, 0, 2, True)], broker
        # read_committed reads up to the LSO and names the aborted transaction
        fetched = await c.fetch(FetchRequest("t", 0, 0, isolation_level=1, max_wait_ms=0))
        assert fetched.last_stable_offset == 3
        assert [r.offset for r in fetched.records] == [0, 1, 2]
        assert fetched.aborted_transactions == [CompletedTxn(7, 0, 2, True)]
        plain = await c.fetch(FetchRequest("t", 0, 0, max_wait_ms=0))
        assert plain.aborted_transactions == []
        assert plain.last_stable_offset == 3

    _run(body)


def test_read_committed_stops_at_the_lso_and_waits_for_the_marker() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await _txn_produce(c, 7, 0)  # [0, 2), open
        await c.produce(ProduceRequest("t", 0, [(None, b"x")]))  # 2, no transaction
        p = c.partition("t", 0)
        assert p is not None
        assert (p.hw, p.last_stable_offset()) == (3, 0)
        now = await c.fetch(FetchRequest("t", 0, 0, isolation_level=1, max_wait_ms=0))
        assert now.records == []
        assert now.last_stable_offset == 0
        uncommitted = await c.fetch(FetchRequest("t", 0, 0, max_wait_ms=0))
        assert len(uncommitted.records) == 3
        # a read_committed long poll wakes when the commit marker is committed
        waiting = asyncio.ensure_future(
            c.fetch(FetchRequest("t", 0, 0, isolation_level=1, max_wait_ms=5000))
        )
        await asyncio.sleep(0.1)
        assert not waiting.done()
        start = loop.time()
        assert await c.write_txn_markers([TxnMarker(7, 0, 0, True, (("t", 0),))]) == {
            ("t", 0): ErrorCode.NONE
        }
        fetched = await waiting
        assert loop.time() - start < 1.0
        assert [r.offset for r in fetched.records] == [0, 1, 2, 3]
        assert fetched.aborted_transactions == []

    _run(body)


def test_a_new_leader_after_a_crash_mid_transaction_knows_it_and_takes_the_marker() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await _txn_produce(c, 7, 0)  # [0, 2): acks=all, so every replica has it
        await c.produce(ProduceRequest("t", 0, [(None, b"x")]))  # 2
        await _txn_produce(c, 8, 0)  # [3, 5)
        old = c.partition("t", 0)
        assert old is not None
        assert old.leader == 0
        await c.crash_broker(0)
        p = c.partition("t", 0)
        assert p is not None
        assert p.leader in (1, 2)
        assert p.leader_log.txns.ongoing == {7: 0, 8: 3}
        assert p.last_stable_offset() == 0
        answer = await c.write_txn_markers(
            [TxnMarker(7, 0, 1, False, (("t", 0),))],
        )
        assert answer == {("t", 0): ErrorCode.NONE}
        assert p.last_stable_offset() == 3  # producer 8 still open
        answer = await c.write_txn_markers([TxnMarker(8, 0, 1, True, (("t", 0),))])
        assert answer == {("t", 0): ErrorCode.NONE}
        assert p.last_stable_offset() == p.hw == 7
        # the old leader comes back, truncates to the new leader and replicates the rest
        await c.restart_broker(0)
        await asyncio.sleep(1.0)
        for broker, log in p.logs.items():
            assert log.txns.ongoing == {}, broker
            assert log.txns.aborted_between(0, 7) == [CompletedTxn(7, 0, 5, True)], broker
        fetched = await c.fetch(FetchRequest("t", 0, 0, isolation_level=1, max_wait_ms=0))
        assert fetched.aborted_transactions == [CompletedTxn(7, 0, 5, True)]

    _run(body)


def test_marker_refusals() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await _txn_produce(c, 7, 0)
        assert await c.write_txn_markers([TxnMarker(7, 0, 2, True, (("t", 0),))]) == {
            ("t", 0): ErrorCode.NONE
        }
        answer = await c.write_txn_markers(
            [
                TxnMarker(7, 0, 1, True, (("t", 0), ("nope", 0), ("t", 5))),
            ]
        )
        assert answer == {
            ("t", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        with pytest.raises(ValueError, match="named twice"):
            await c.write_txn_markers(
                [TxnMarker(7, 0, 2, True, (("t", 0),)), TxnMarker(8, 0, 2, True, (("t", 0),))]
            )
        await c.crash_broker(1)
        await c.crash_broker(2)
        await c.crash_broker(0)  # t-0 offline
        answer = await c.write_txn_markers([TxnMarker(7, 0, 2, True, (("t", 0),))])
        assert answer[("t", 0)] in (
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.LEADER_NOT_AVAILABLE,
        )

    _run(body)


def test_txn_marker_is_checked_when_built() -> None:
    with pytest.raises(ValueError, match="producer_id"):
        TxnMarker(-1, 0, 0, True, (("t", 0),))
    with pytest.raises(ValueError, match="producer_epoch"):
        TxnMarker(1, 1 << 15, 0, True, (("t", 0),))
    with pytest.raises(TypeError):
        TxnMarker(1, 0, 0, 1, (("t", 0),))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TxnMarker(1, 0, 0, True, [("t", 0)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="isolation_level"):
        FetchRequest("t", 0, 0, isolation_level=2)


def test_a_marker_in_flight_when_the_leader_crashes_is_written_again_on_the_new_one() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await _txn_produce(c, 7, 0)  # [0, 2) on every replica
        c.set_replication_latency(1, Latency(200.0))
        c.set_replication_latency(2, Latency(200.0))
        marker = TxnMarker(7, 0, 0, False, (("t", 0),))
        pending = asyncio.ensure_future(c.write_txn_markers([marker]))
        await asyncio.sleep(0.01)  # appended on broker 0, not replicated yet
        assert not pending.done()
        await c.crash_broker(0)
        assert await pending == {("t", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
        p = c.partition("t", 0)
        assert p is not None
        assert p.leader in (1, 2)
        assert p.leader_log.txns.ongoing == {7: 0}  # the new leader never saw the marker
        c.set_replication_latency(1, None)
        c.set_replication_latency(2, None)
        assert await c.write_txn_markers([marker]) == {("t", 0): ErrorCode.NONE}
        assert p.last_stable_offset() == p.hw == 3
        fetched = await c.fetch(FetchRequest("t", 0, 0, isolation_level=1, max_wait_ms=0))
        assert fetched.aborted_transactions == [CompletedTxn(7, 0, 2, True)]

    _run(body)


def test_an_unclean_election_gives_a_marker_up_and_the_old_leader_reopens_the_txn() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        checker = InvariantChecker(c)
        await _txn_produce(c, 7, 0)  # [0, 2) on every replica
        await c.crash_broker(1)
        await c.crash_broker(2)
        await asyncio.sleep(1)  # the ISR of t-0 shrinks to broker 0
        marker = TxnMarker(7, 0, 0, False, (("t", 0),))
        assert await c.write_txn_markers([marker]) == {("t", 0): ErrorCode.NONE}  # only on 0
        p = c.partition("t", 0)
        assert p is not None
        assert p.logs[0].txns.completed == [CompletedTxn(7, 0, 2, True)]
        await c.crash_broker(0)
        await c.restart_broker(1)  # never saw the marker
        result = await c.elect_leaders(ElectLeadersRequest([("t", 0)], "unclean"))
        assert [(e.error, e.leader) for e in result.partitions] == [(ErrorCode.NONE, 1)]
        assert p.leader_log.txns.ongoing == {7: 0}
        assert p.last_stable_offset() == 0
        await c.restart_broker(0)  # truncates the marker away: the transaction is open again
        await asyncio.sleep(1)
        assert p.logs[0].leo == p.logs[1].leo == 2
        assert p.logs[0].txns.ongoing == {7: 0}
        assert p.logs[0].txns.completed == []
        # the coordinator writes the marker again, through the new leader
        assert await c.write_txn_markers([marker]) == {("t", 0): ErrorCode.NONE}
        assert p.last_stable_offset() == p.hw == 3
        assert checker.violations == []

    _run(body, replica_lag_time_max_ms=200)
