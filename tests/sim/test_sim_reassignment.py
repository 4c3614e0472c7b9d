"""Partition reassignment in the simulation (Kafka's KIP-455), on virtual time: new
replicas catch up through replication and join the ISR, removed ones leave once they
have, a removed leader hands over; cancels revert; Kafka's refusals."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from purgatory.errors import ErrorCode
from purgatory.sim import (
    Cluster,
    FetchRequest,
    Latency,
    PartitionReassignment,
    ProduceRequest,
    SimulationError,
)
from purgatory.sim.invariants import InvariantChecker
from purgatory.testing import run_virtual

Body = Callable[[Cluster, asyncio.AbstractEventLoop], Awaitable[Any]]


def _run(body: Body, brokers: int = 4, **options: Any) -> Any:
    async def main() -> Any:
        async with Cluster(brokers, seed=5, **options) as cluster:
            await cluster.create_topic("t", 2, 2, assignment=[[0, 1], [1, 2]])
            return await body(cluster, asyncio.get_running_loop())

    return run_virtual(main())


async def _produce(c: Cluster, partition: int, count: int) -> None:
    for i in range(count):
        result = await c.produce(ProduceRequest("t", partition, [(None, b"v%d" % i)]))
        assert result.error is ErrorCode.NONE


async def _until(loop: asyncio.AbstractEventLoop, done: Callable[[], bool]) -> float:
    """Virtual seconds until ``done()``, checked every millisecond (at most a minute)."""
    start = loop.time()
    while not done():
        assert loop.time() - start < 60, "never happened"
        await asyncio.sleep(0.001)
    return loop.time() - start


def test_added_replicas_catch_up_join_the_isr_and_the_removed_ones_leave() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await _produce(c, 0, 20)
        p = c.topics["t"][0]
        epoch = p.leader_epoch
        await c.reassign_partition("t", 0, [2, 3, 0])
        # the target's brokers first, then those leaving; the ISR as it was
        assert p.replicas == (2, 3, 0, 1)
        assert c.partition_reassignments() == [
            PartitionReassignment("t", 0, [2, 3, 0, 1], [2, 3], [1])
        ]
        assert c.describe_partition("t", 0).replicas == [2, 3, 0, 1]  # Metadata shows it
        assert p.isr == {0, 1}
        assert p.leader == 0

        took = await _until(loop, lambda: not c.partition_reassignments())
        assert took > 0  # replication and the AlterPartition round trip take time
        assert p.replicas == (2, 3, 0)
        assert p.isr == {0, 2, 3}
        assert sorted(p.logs) == [0, 2, 3]  # broker 1's log deleted
        assert p.leader == 0  # the leader stays, under a new epoch (replicas left)
        assert p.leader_epoch == epoch + 1
        for broker in (2, 3):
            assert p.logs[broker].leo == 20
            assert p.logs[broker].size_bytes == p.logs[0].size_bytes
        # and it goes on replicating to the new replicas
        await _produce(c, 0, 1)
        await _until(loop, lambda: all(p.logs[b].leo == 21 for b in (2, 3)))

    _run(body)


def test_a_removed_leader_hands_over_to_the_first_target_broker_in_the_isr() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await _produce(c, 1, 5)
        p = c.topics["t"][1]
        assert p.leader == 1
        await c.reassign_partition("t", 1, [3, 2])
        assert p.leader == 1  # until the new replica has caught up
        await _until(loop, lambda: not c.partition_reassignments())
        assert (p.replicas, p.leader, p.isr) == ((3, 2), 3, {2, 3})
        fetched = await c.fetch(FetchRequest("t", 1, offset=0, max_wait_ms=0))
        assert fetched.error is ErrorCode.NONE
        assert len(fetched.records) == 5  # nothing lost on the way

    _run(body)


def test_a_target_inside_the_isr_completes_at_once() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        p = c.topics["t"][0]
        await c.reassign_partition("t", 0, [1, 0])  # a reorder: the preferred leader moves
        assert (p.replicas, p.leader, c.partition_reassignments()) == ((1, 0), 0, [])
        await c.reassign_partition("t", 0, [1])  # the leader removed, the target in the ISR
        assert (p.replicas, p.leader, p.isr) == ((1,), 1, {1})
        assert c.partition_reassignments() == []

    _run(body)


def test_a_reassignment_to_a_dead_broker_stays_in_progress_and_can_be_cancelled() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await _produce(c, 0, 3)
        p = c.topics["t"][0]
        await c.crash_broker(3)
        await c.reassign_partition("t", 0, [0, 3])
        await asyncio.sleep(5)
        assert c.partition_reassignments() == [PartitionReassignment("t", 0, [0, 3, 1], [3], [1])]
        await c.reassign_partition("t", 0, None)  # cancel: back to the replicas before
        assert (p.replicas, p.isr, sorted(p.logs)) == ((0, 1), {0, 1}, [0, 1])
        assert c.partition_reassignments() == []
        with pytest.raises(SimulationError) as none:
            await c.reassign_partition("t", 0, None)
        assert none.value.code is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        assert none.value.message == "No partition reassignment is in progress."

    _run(body)


def test_a_new_target_replaces_the_one_in_progress() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        p = c.topics["t"][0]
        await c.crash_broker(3)
        await c.reassign_partition("t", 0, [0, 3])
        await c.reassign_partition("t", 0, [0, 2])  # 3 is now leaving, never having joined
        assert c.partition_reassignments()[0].removing == [1, 3]
        await _until(loop, lambda: not c.partition_reassignments())
        assert (p.replicas, sorted(p.logs)) == ((0, 2), [0, 2])

    _run(body)


@pytest.mark.parametrize(
    ("target", "code", "message"),
    [
        ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "includes an empty replica list."),
        ([0, 7], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "includes broker 7, but no such broker"),
        ([1, 0, 1], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "includes the broker 1 more than once"),
    ],
)
def test_kafkas_refusals(target: list[int], code: ErrorCode, message: str) -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        with pytest.raises(SimulationError) as refused:
            await c.reassign_partition("t", 0, target)
        assert refused.value.code is code
        assert message in refused.value.message
        assert c.topics["t"][0].replicas == (0, 1)

    _run(body)


def test_unknown_partitions_and_a_replication_factor_change_not_allowed() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        refusals = []
        for topic, index, target, allow in [
            ("nope", 0, [0], True),
            ("t", 9, [0], True),
            ("t", 0, [0, 1, 2], False),
        ]:
            with pytest.raises(SimulationError) as refused:
                await c.reassign_partition(
                    topic, index, target, allow_replication_factor_change=allow
                )
            refusals.append((refused.value.code, refused.value.message))
        assert refusals == [
            (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
            (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:9."),
            (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3"),
        ]
        await c.reassign_partition("t", 0, [2, 3], allow_replication_factor_change=False)

    _run(body)


def test_a_cancel_that_would_need_an_unclean_election_is_refused() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        p = c.topics["t"][0]
        await c.reassign_partition("t", 0, [0, 1, 2])
        await _until(loop, lambda: 2 in p.isr)
        # before the controller hears of it, the old replicas die: only 2 is in the ISR
        await c.crash_broker(0)
        await c.crash_broker(1)
        assert (p.leader, p.isr) == (2, {2})
        with pytest.raises(SimulationError) as refused:
            await c.reassign_partition("t", 0, None)
        assert refused.value.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert refused.value.message == (
            "Unable to revert partition assignment for t:0 because it would require an "
            "unclean leader election."
        )
        await asyncio.sleep(1)  # the ISR does not cover the target: still in progress
        assert c.partition_reassignments()[0].adding == [2]

    _run(body, election_rtt=Latency(100.0, 0.01))


def test_no_acknowledged_record_is_lost_across_a_reassignment_under_load() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        checker = InvariantChecker(c)
        acked = 0

        async def produce() -> None:
            nonlocal acked
            for i in range(300):
                result = await c.produce(ProduceRequest("t", 1, [(None, b"r%d" % i)]))
                if result.error is ErrorCode.NONE:
                    acked += 1
                await asyncio.sleep(0.002)

        producing = asyncio.create_task(produce())
        await asyncio.sleep(0.1)
        await c.reassign_partition("t", 1, [0, 3])  # the leader (1) and 2 leave
        await _until(loop, lambda: not c.partition_reassignments())
        await producing
        p = c.topics["t"][1]
        assert (p.replicas, p.leader) == ((0, 3), 0)
        fetched = await c.fetch(FetchRequest("t", 1, offset=0, max_bytes=1 << 20, max_wait_ms=0))
        assert len(fetched.records) >= acked > 250
        assert checker.violations == []

    _run(body)


def test_deterministic_for_a_seed() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> tuple[float, int]:
        await _produce(c, 0, 10)
        await c.reassign_partition("t", 0, [3, 2])
        took = await _until(loop, lambda: not c.partition_reassignments())
        return took, c.topics["t"][0].leader_epoch

    assert _run(body) == _run(body)
