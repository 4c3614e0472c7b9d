"""The transaction coordinator's two waits, driven here by a manual clock (no reaper, no
sleeps): the timers run only when the test says so.

A transaction past its ``transaction_timeout_ms`` is aborted by its coordinator, which
bumps the producer epoch (fencing the producer), as Kafka's does: a TxnTimeout in the
"TxnTimeout" purgatory. A producer's next transaction that starts while the last one's
markers are still being written waits for them in the "TxnSettle" purgatory instead of
being answered CONCURRENT_TRANSACTIONS, for up to ``SETTLE_WAIT_MS``. An idle transactional
id is removed ``transactional.id.expiration.ms`` after its last change, as Kafka removes
it: a TxnIdExpiration in the "TxnIdExpiration" purgatory."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from purgatory import ManualClock
from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.coordinator.transactions import TransactionCoordinators
from purgatory.kafka.coordinator.txn_coordinator import SETTLE_WAIT_MS, TransactionCoordinator
from purgatory.kafka.coordinator.txn_metadata import (
    TRANSACTION_STATE_TOPIC,
    TxnMetadata,
    TxnSettings,
    TxnState,
)
from purgatory.sim import Cluster

TXN = "slow"


@contextlib.asynccontextmanager
async def _coordinators(
    **cluster_options: Any,
) -> AsyncIterator[tuple[TransactionCoordinators, ManualClock]]:
    """Three brokers' transaction coordinators on a manual clock (no reaper), with topic
    t (2 partitions, replication factor 3) and ``__transaction_state`` created."""
    clock = ManualClock(1_700_000_000_000)
    async with Cluster(3, seed=1, **cluster_options) as cluster:
        await cluster.create_topic("t", 2, 3)
        coordinators = TransactionCoordinators(
            cluster,
            ProducerIds(),
            OffsetStore(),
            TxnSettings(num_partitions=3),
            clock=clock,
            wall_ms=lambda: int(clock()),
            reaper_enabled=False,
        )
        try:
            assert await coordinators.ensure_topic() is ErrorCode.NONE
            yield coordinators, clock
        finally:
            await coordinators.close()


@pytest_asyncio.fixture
async def txns() -> AsyncIterator[tuple[TransactionCoordinators, ManualClock]]:
    async with _coordinators() as made:
        yield made


def _owner(txns: TransactionCoordinators) -> TransactionCoordinator:
    owner = txns.owner(TXN)
    assert owner is not None
    return owner


async def _described(
    owner: TransactionCoordinator, done: Callable[[TxnMetadata | ErrorCode], bool]
) -> TxnMetadata | ErrorCode:
    """What the coordinator describes of the id once ``done`` holds of it (its writes are
    acks=all round trips)."""
    for _ in range(500):
        described = owner.describe(TXN)
        if done(described):
            return described
        await asyncio.sleep(0.005)
    raise AssertionError(f"never so: {described}")


async def _state(owner: TransactionCoordinator, state: TxnState) -> TxnMetadata:
    """The transaction once it reaches ``state``."""
    txn = await _described(owner, lambda t: not isinstance(t, ErrorCode) and t.state is state)
    assert not isinstance(txn, ErrorCode)
    return txn


@pytest.mark.asyncio
async def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    txns: tuple[TransactionCoordinators, ManualClock],
) -> None:
    coordinators, clock = txns
    owner = _owner(coordinators)
    error, pid, epoch = await owner.init_producer_id(TXN, 10_000, None)
    assert (error, epoch) == (ErrorCode.NONE, 0)
    assert await owner.add_partitions(TXN, pid, epoch, [("t", 0)]) is ErrorCode.NONE
    timeouts = coordinators.timeouts
    assert timeouts.num_delayed == 1
    clock.advance(6_000)
    # more partitions later do not restart the clock: it runs from the transaction's start
    assert await owner.add_partitions(TXN, pid, epoch, [("t", 1)]) is ErrorCode.NONE
    clock.advance(3_999)
    assert timeouts.timer.run_due() == 0
    assert (await _state(owner, TxnState.ONGOING)).producer_epoch == 0
    clock.advance(1)
    assert timeouts.timer.run_due() == 1
    aborted = await _state(owner, TxnState.COMPLETE_ABORT)
    assert (aborted.producer_id, aborted.producer_epoch) == (pid, 1)
    assert timeouts.statistics().expired == 1
    for index in (0, 1):  # the abort markers are in
        p = coordinators.cluster.partition("t", index)
        assert p is not None
        assert p.last_stable_offset() == p.hw > 0
    # the producer learns it was fenced at its next request
    assert await owner.add_partitions(TXN, pid, epoch, [("t", 0)]) is ErrorCode.PRODUCER_FENCED
    assert (await owner.end_txn(TXN, pid, epoch, commit=True))[0] is ErrorCode.PRODUCER_FENCED
    assert await owner.init_producer_id(TXN, 10_000, None) == (ErrorCode.NONE, pid, 2)


@pytest.mark.asyncio
async def test_a_transaction_that_ends_in_time_leaves_no_timeout(
    txns: tuple[TransactionCoordinators, ManualClock],
) -> None:
    coordinators, clock = txns
    owner = _owner(coordinators)
    _, pid, epoch = await owner.init_producer_id(TXN, 10_000, None)
    assert await owner.add_partitions(TXN, pid, epoch, [("t", 0)]) is ErrorCode.NONE
    clock.advance(9_000)
    assert (await owner.end_txn(TXN, pid, epoch, commit=True))[0] is ErrorCode.NONE
    assert coordinators.timeouts.num_delayed == 0
    clock.advance(60_000)
    assert coordinators.timeouts.timer.run_due() == 0
    done = await _state(owner, TxnState.COMPLETE_COMMIT)
    assert done.producer_epoch == 0
    stats = coordinators.timeouts.statistics()
    assert (stats.completed, stats.expired) == (1, 0)


@pytest.mark.asyncio
async def test_a_used_up_epoch_moves_to_a_new_producer_id(
    txns: tuple[TransactionCoordinators, ManualClock],
) -> None:
    """Kafka's rotation: past epoch 32766 the next bump hands out a new producer id at epoch
    0, and a KIP-360 retry naming the old id at the used-up epoch gets the new one."""
    coordinators, _ = txns
    owner = _owner(coordinators)
    _, pid, _ = await owner.init_producer_id(TXN, 10_000, None)
    # 32,766 bumps take a while over acks=all writes: start from the state they would leave
    txn = owner.describe(TXN)
    assert not isinstance(txn, ErrorCode)
    worn = txn.copy(producer_epoch=32_766)
    assert await owner._write(owner.state.owned(TXN), txn, worn) is ErrorCode.NONE  # type: ignore[arg-type]
    error, new_pid, epoch = await owner.init_producer_id(TXN, 10_000, (pid, 32_766))
    assert (error, epoch) == (ErrorCode.NONE, 0)
    assert new_pid != pid
    again = await owner.init_producer_id(TXN, 10_000, (pid, 32_766))  # the answer was lost
    assert again == (ErrorCode.NONE, new_pid, 0)  # the same answer, not a second bump
    assert await owner.init_producer_id(TXN, 10_000, (pid, 5)) == (
        ErrorCode.PRODUCER_FENCED,
        -1,
        -1,
    )


@pytest.mark.asyncio
async def test_a_timeout_during_another_write_aborts_once_that_write_is_done(
    txns: tuple[TransactionCoordinators, ManualClock],
) -> None:
    coordinators, clock = txns
    owner = _owner(coordinators)
    _, pid, epoch = await owner.init_producer_id(TXN, 10_000, None)
    assert await owner.add_partitions(TXN, pid, epoch, [("t", 0)]) is ErrorCode.NONE
    adding = asyncio.ensure_future(owner.add_partitions(TXN, pid, epoch, [("t", 1)]))
    await asyncio.sleep(0)  # its record is on its way to the log: a write is pending
    txn = owner.describe(TXN)
    assert not isinstance(txn, ErrorCode)
    assert txn.pending
    clock.advance(10_000)
    assert coordinators.timeouts.timer.run_due() == 1  # expired, and tried again later
    assert await adding is ErrorCode.NONE
    assert (await _state(owner, TxnState.ONGOING)).partitions == {("t", 0), ("t", 1)}
    clock.advance(50)
    assert coordinators.timeouts.timer.run_due() == 1
    aborted = await _state(owner, TxnState.COMPLETE_ABORT)
    assert aborted.producer_epoch == epoch + 1


async def _committing_with_a_leader_gone(
    coordinators: TransactionCoordinators,
) -> tuple[TransactionCoordinator, int, int, int]:
    """A transaction of partition "lone"-0 committed (PrepareCommit durable) while that
    partition's only replica, on another broker than the coordinator, is down: its commit
    marker cannot be written. Returns the coordinator, the producer id and epoch, and the
    broker that is down."""
    cluster = coordinators.cluster
    owner = _owner(coordinators)
    down = next(b for b in cluster.brokers if b != owner.broker_id)
    await cluster.create_topic("lone", 1, 1, assignment=[[down]])
    _, pid, epoch = await owner.init_producer_id(TXN, 10_000, None)
    assert await owner.add_partitions(TXN, pid, epoch, [("lone", 0)]) is ErrorCode.NONE
    await cluster.crash_broker(down)
    assert (await owner.end_txn(TXN, pid, epoch, commit=True))[0] is ErrorCode.NONE
    return owner, pid, epoch, down


@pytest.mark.asyncio
async def test_the_next_transaction_waits_for_the_last_ones_markers(
    txns: tuple[TransactionCoordinators, ManualClock],
) -> None:
    coordinators, _ = txns
    owner, pid, epoch, down = await _committing_with_a_leader_gone(coordinators)
    adding = asyncio.ensure_future(owner.add_partitions(TXN, pid, epoch, [("t", 1)]))
    for _ in range(20):  # the coordinator keeps trying the marker meanwhile
        await asyncio.sleep(0.005)
    assert not adding.done()  # waiting, not answered CONCURRENT_TRANSACTIONS
    assert coordinators.settling.num_delayed == 1
    assert (await _state(owner, TxnState.PREPARE_COMMIT)).partitions == {("lone", 0)}
    await coordinators.cluster.restart_broker(down)  # "lone" is back: the marker lands
    assert await adding is ErrorCode.NONE
    txn = await _state(owner, TxnState.ONGOING)
    assert (txn.producer_epoch, txn.partitions) == (epoch, {("t", 1)})
    assert coordinators.settling.num_delayed == 0
    p = coordinators.cluster.partition("lone", 0)
    assert p is not None
    assert p.last_stable_offset() == p.hw > 0  # committed before the next one began


@pytest.mark.asyncio
async def test_a_wait_for_markers_that_do_not_come_ends_in_concurrent_transactions(
    txns: tuple[TransactionCoordinators, ManualClock],
) -> None:
    coordinators, clock = txns
    owner, pid, epoch, _ = await _committing_with_a_leader_gone(coordinators)
    adding = asyncio.ensure_future(owner.add_partitions(TXN, pid, epoch, groups=["g"]))
    await asyncio.sleep(0.01)
    clock.advance(SETTLE_WAIT_MS - 1)
    assert coordinators.settling.timer.run_due() == 0
    assert not adding.done()
    clock.advance(1)
    assert coordinators.settling.timer.run_due() == 1
    assert await adding is ErrorCode.CONCURRENT_TRANSACTIONS  # as Kafka answers: retry
    assert (await _state(owner, TxnState.PREPARE_COMMIT)).groups == set()


EXPIRATION_MS = 604_800_000  # Kafka's transactional.id.expiration.ms, 7 days


async def _gone(owner: TransactionCoordinator) -> None:
    await _described(owner, lambda t: t is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)


@pytest.mark.asyncio
async def test_an_idle_transactional_id_expires_and_its_next_producer_starts_over(
    txns: tuple[TransactionCoordinators, ManualClock],
) -> None:
    coordinators, clock = txns
    expirations = coordinators.expirations
    owner = _owner(coordinators)
    _, pid, epoch = await owner.init_producer_id(TXN, 10_000, None)
    assert await owner.add_partitions(TXN, pid, epoch, [("t", 0)]) is ErrorCode.NONE
    clock.advance(5_000)
    assert (await owner.end_txn(TXN, pid, epoch, commit=True))[0] is ErrorCode.NONE
    await _state(owner, TxnState.COMPLETE_COMMIT)  # idle from here: its clock starts
    clock.advance(EXPIRATION_MS - 1)
    assert expirations.timer.run_due() == 0
    assert not isinstance(owner.describe(TXN), ErrorCode)
    clock.advance(1)
    assert expirations.timer.run_due() == 1
    await _gone(owner)
    assert expirations.statistics().expired == 1
    # removed in __transaction_state too: the next coordinator does not know it either
    state = coordinators.cluster.partition(TRANSACTION_STATE_TOPIC, owner.state.partition_of(TXN))
    assert state is not None
    await coordinators.cluster.fail_over(TRANSACTION_STATE_TOPIC, state.index)
    successor = _owner(coordinators)
    assert successor is not owner
    assert successor.describe(TXN) is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert await successor.add_partitions(TXN, pid, epoch, [("t", 0)]) is (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    error, new_pid, new_epoch = await successor.init_producer_id(TXN, 10_000, None)
    assert (error, new_epoch) == (ErrorCode.NONE, 0)
    assert new_pid != pid


@pytest.mark.asyncio
async def test_a_transactional_id_in_use_does_not_expire(
    txns: tuple[TransactionCoordinators, ManualClock],
) -> None:
    coordinators, clock = txns
    expirations = coordinators.expirations
    owner = _owner(coordinators)
    _, pid, epoch = await owner.init_producer_id(TXN, 10_000, None)
    clock.advance(EXPIRATION_MS - 1_000)
    assert await owner.add_partitions(TXN, pid, epoch, [("t", 0)]) is ErrorCode.NONE
    clock.advance(2_000)  # past the Empty state's expiration: but a transaction is open
    assert expirations.timer.run_due() == 0
    assert expirations.num_delayed == 0
    assert (await owner.end_txn(TXN, pid, epoch, commit=False))[0] is ErrorCode.NONE
    await _state(owner, TxnState.COMPLETE_ABORT)
    clock.advance(EXPIRATION_MS - 1)
    assert expirations.timer.run_due() == 0
    assert (await _state(owner, TxnState.COMPLETE_ABORT)).producer_id == pid
    clock.advance(1)
    assert expirations.timer.run_due() == 1
    await _gone(owner)


@pytest.mark.asyncio
async def test_an_expiration_during_a_write_that_fails_is_tried_again() -> None:
    """The id's expiration comes while a change of it is being written; the write fails
    (a follower hung, fewer in-sync replicas than ``min.insync.replicas``), so the id is
    still idle: its expiration is tried again, not dropped."""
    async with _coordinators(min_insync_replicas=3, replica_lag_time_max_ms=100) as made:
        coordinators, clock = made
        cluster = coordinators.cluster
        owner = _owner(coordinators)
        assert (await owner.init_producer_id(TXN, 10_000, None))[0] is ErrorCode.NONE
        state = cluster.partition(TRANSACTION_STATE_TOPIC, owner.state.partition_of(TXN))
        assert state is not None
        follower = next(b for b in state.replicas if b != state.leader)
        await cluster.crash_broker_unfenced(follower)
        bump = asyncio.ensure_future(owner.init_producer_id(TXN, 10_000, None))
        await asyncio.sleep(0)
        txn = owner.describe(TXN)
        assert not isinstance(txn, ErrorCode)
        assert txn.pending
        clock.advance(EXPIRATION_MS)
        assert coordinators.expirations.timer.run_due() == 1  # while it is written
        # the ISR shrinks below min.insync.replicas: the bump is not written
        assert (await bump)[0] is ErrorCode.COORDINATOR_NOT_AVAILABLE
        await cluster.restart_broker(follower)
        for _ in range(400):  # caught up and back in the ISR
            if len(state.isr) == 3:
                break
            await asyncio.sleep(0.005)
        assert len(state.isr) == 3
        clock.advance(50)
        assert coordinators.expirations.timer.run_due() == 1  # tried again
        await _gone(owner)
