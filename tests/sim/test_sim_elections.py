"""ElectLeaders and the ElectLeader purgatory: every answer code, parking and timeout, unclean
elections and the loss they accept, automatic rebalancing; on virtual time."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster, ElectLeadersRequest, Latency, ProduceRequest
from purgatory.sim.invariants import InvariantChecker
from purgatory.sim.runner import run_scenario
from purgatory.sim.scenarios import SCENARIOS
from purgatory.sim.workload import ClientWorkloadConfig, Workload
from purgatory.testing import run_virtual

Body = Callable[[Cluster, asyncio.AbstractEventLoop], Awaitable[Any]]


def _run(body: Body, **options: Any) -> Any:
    async def main() -> Any:
        async with Cluster(3, seed=3, **options) as cluster:
            # t-0 prefers broker 0, t-1 prefers broker 1
            await cluster.create_topic("t", 2, 3, assignment=[[0, 1, 2], [1, 0, 2]])
            return await body(cluster, asyncio.get_running_loop())

    return run_virtual(main())


def _errors(result: Any) -> list[tuple[str, int, ErrorCode, int | None]]:
    return [(p.topic, p.partition, p.error, p.leader) for p in result.partitions]


def _elect(c: Cluster) -> Any:
    return c.brokers[0].replica_manager.purgatories["ElectLeader"].statistics()


def test_preferred_election_parks_until_the_preferred_replica_leads() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.fail_over("t", 0, 1)
        start = loop.time()
        request = ElectLeadersRequest([("t", 0), ("t", 1), ("nope", 0)], "preferred")
        result = await c.elect_leaders(request)
        assert loop.time() > start  # it waited for the controller's round trip
        assert result.error is ErrorCode.NONE
        assert _errors(result) == [
            ("t", 0, ErrorCode.NONE, 0),
            ("t", 1, ErrorCode.ELECTION_NOT_NEEDED, 1),
            ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
        ]
        stats = _elect(c)  # broker 0 took it: the lowest live broker (the controller's)
        assert (stats.completed, stats.expired) == (1, 0)

    _run(body)


def test_nothing_to_elect_is_answered_at_once() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.crash_broker(0)  # t-0 fails over to broker 1
        start = loop.time()
        result = await c.elect_leaders(ElectLeadersRequest([("t", 0), ("t", 1)], "preferred"))
        assert loop.time() == start
        assert _errors(result) == [
            ("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, 1),
            ("t", 1, ErrorCode.ELECTION_NOT_NEEDED, 1),
        ]
        assert c.brokers[1].replica_manager.purgatories["ElectLeader"].statistics().completed == 0

    _run(body)


def test_an_election_slower_than_the_timeout_answers_request_timed_out() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.fail_over("t", 0, 1)
        request = ElectLeadersRequest([("t", 0)], "preferred", timeout_ms=100)
        result = await c.elect_leaders(request)
        assert _errors(result) == [("t", 0, ErrorCode.REQUEST_TIMED_OUT, 1)]
        assert _elect(c).expired == 1
        await asyncio.sleep(10)  # the controller still carries the election out
        p = c.partition("t", 0)
        assert p is not None
        assert p.leader == 0

    _run(body, election_rtt=Latency(5_000.0))


def test_unclean_election_elects_outside_the_isr_and_records_the_loss() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        workload = Workload(c, ClientWorkloadConfig(topic="t"), random.Random(1))
        checker = InvariantChecker(c)
        await c.crash_broker(1)
        await c.crash_broker(2)
        await asyncio.sleep(1)  # the ISR of t-0 shrinks to broker 0
        entries: list[tuple[bytes | None, bytes]] = [(None, b"only-on-0")]
        acked = await c.produce(ProduceRequest("t", 0, entries, acks=-1))
        assert acked.error is ErrorCode.NONE
        workload.acked.append((0, acked.base_offset, entries))
        await c.crash_broker(0)  # t-0 is offline: its only in-sync replica is down
        await c.restart_broker(1)  # alive, but outside the ISR
        p = c.partition("t", 0)
        assert p is not None
        assert p.leader is None
        clean = await c.elect_leaders(ElectLeadersRequest([("t", 0)], "preferred"))
        assert _errors(clean) == [("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None)]
        result = await c.elect_leaders(ElectLeadersRequest([("t", 0)], "unclean"))
        assert _errors(result) == [("t", 0, ErrorCode.NONE, 1)]
        [loss] = c.controller.unclean_elections
        assert (loss.partition, loss.leader) == ("t-0", 1)
        assert loss.lost_from <= acked.base_offset < loss.lost_to
        # the acknowledged record is gone, and counted as given up, not as a violation
        assert (workload.lost_records(), workload.lost_to_unclean_elections()) == (0, 1)
        # the invariant checker records the accepted loss, and it is not a violation
        assert checker.accepted_losses == [
            f"t-0: broker 1 elected from outside the ISR, offsets {loss.lost_from}.."
            f"{loss.lost_to} may be lost"
        ]
        assert checker.violations == []
        again = await c.elect_leaders(ElectLeadersRequest([("t", 0)], "unclean"))
        assert _errors(again) == [("t", 0, ErrorCode.ELECTION_NOT_NEEDED, 1)]
        await c.crash_broker(1)
        none_left = await c.elect_leaders(ElectLeadersRequest([("t", 1)], "unclean"))
        assert _errors(none_left) == [("t", 1, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None)]

    _run(body, replica_lag_time_max_ms=200)


def test_automatic_rebalancing_moves_leaders_back_to_preferred_replicas() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> list[int | None]:
        await c.crash_broker(0)
        await c.restart_broker(0)
        await asyncio.sleep(2)  # broker 0 catches up and rejoins the ISR; off by default
        p = c.partition("t", 0)
        assert p is not None
        assert p.leader == 1
        c.auto_leader_rebalance_enable = True
        await asyncio.sleep(2)
        return [q.leader for q in c.partitions()]

    leaders = _run(
        body, leader_imbalance_check_interval_ms=1000, leader_imbalance_per_broker_percentage=0
    )
    assert leaders == [0, 1]


def test_a_partition_named_twice_is_elected_once() -> None:
    request = ElectLeadersRequest([("t", 0), ("t", 1), ("t", 0)])
    assert request.partitions == [("t", 0), ("t", 1)]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (([("t", 0)], "dirty"), ValueError),
        (([("t", -1)], "preferred"), ValueError),
        (("t-0", "preferred"), TypeError),
        (([("t", 0)], "preferred", -1), ValueError),
    ],
)
def test_bad_election_requests_are_refused(args: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        ElectLeadersRequest(*args)


def test_preferred_election_scenario_is_deterministic_and_loses_nothing() -> None:
    def run() -> dict[str, Any]:
        return run_virtual(run_scenario(SCENARIOS["preferred-election"], 10.0, 1)).seeded()

    first = run()
    assert first == run()
    assert first["lost_records"] == 0
    assert first["violations"] == []
    elect = first["purgatories"]["ElectLeader"]
    assert elect["operations"] > 0
    assert elect["completed"] > 0
    leaders = [(p["leader"], p["replicas"][0]) for p in first["final_metadata"][0]["partitions"]]
    assert all(leader == preferred for leader, preferred in leaders)


def test_a_record_acked_after_an_unclean_election_is_not_excused_by_it() -> None:
    # the unclean election gives offset 0 up; the new leader then acknowledges a new record
    # at offset 0: if that one goes missing, it is a lost record, not the election's loss
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> tuple[int, int]:
        workload = Workload(c, ClientWorkloadConfig(topic="t"), random.Random(1))
        await c.crash_broker(1)
        await c.crash_broker(2)
        await asyncio.sleep(1)  # the ISR of t-0 shrinks to broker 0
        before: list[tuple[bytes | None, bytes]] = [(None, b"only-on-0")]
        acked = await c.produce(ProduceRequest("t", 0, before, acks=-1))
        workload.acked.append((0, acked.base_offset, before))
        await c.crash_broker(0)
        await c.restart_broker(1)
        result = await c.elect_leaders(ElectLeadersRequest([("t", 0)], "unclean"))
        assert _errors(result) == [("t", 0, ErrorCode.NONE, 1)]
        after: list[tuple[bytes | None, bytes]] = [(None, b"acked-by-1")]
        acked = await c.produce(ProduceRequest("t", 0, after, acks=-1))
        assert (acked.error, acked.base_offset) == (ErrorCode.NONE, 0)  # in the given-up range
        workload.acked.append((0, acked.base_offset, after))
        assert (workload.lost_records(), workload.lost_to_unclean_elections()) == (0, 1)
        p = c.partition("t", 0)
        assert p is not None
        p.leader_log.truncate_to(0)  # the new record goes missing
        return workload.lost_records(), workload.lost_to_unclean_elections()

    assert _run(body, replica_lag_time_max_ms=200) == (1, 1)


def test_a_crash_of_the_broker_holding_the_request_answers_broker_not_available() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.fail_over("t", 0, 1)
        request = ElectLeadersRequest([("t", 0)], timeout_ms=300)
        task = loop.create_task(c.elect_leaders(request))
        await asyncio.sleep(0.01)
        await c.crash_broker(2)  # another broker: the request stays parked
        assert not task.done()
        await c.crash_broker(0)  # the controller's broker, which holds it
        assert (await task).error is ErrorCode.BROKER_NOT_AVAILABLE
        assert _elect(c).cancelled == 1

    _run(body, election_rtt=Latency(50.0))


def test_a_chosen_leader_out_of_the_isr_by_the_end_of_the_round_trip_times_out() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.fail_over("t", 0, 2)
        task = loop.create_task(c.elect_leaders(ElectLeadersRequest([("t", 0)], timeout_ms=300)))
        await asyncio.sleep(0.01)
        p = c.partition("t", 0)
        assert p is not None
        p.isr.discard(0)  # broker 0 fell behind before the election reached it
        assert _errors(await task) == [("t", 0, ErrorCode.REQUEST_TIMED_OUT, 2)]
        assert p.leader == 2

    _run(body, election_rtt=Latency(50.0), replica_lag_time_max_ms=100_000)


@pytest.mark.parametrize(("percentage", "leader"), [(50, 1), (49, 0)])
def test_automatic_rebalancing_waits_for_the_imbalance_threshold(
    percentage: int, leader: int
) -> None:
    # broker 0 prefers both partitions; after its crash it gets t-1 back by hand: it then
    # leads 1 of its 2, an imbalance of 50 %, over a 49 % threshold but not over 50 %
    async def main() -> int | None:
        options: dict[str, Any] = {
            "auto_leader_rebalance_enable": True,
            "leader_imbalance_check_interval_ms": 1000,
            "leader_imbalance_per_broker_percentage": percentage,
        }
        async with Cluster(3, seed=3, **options) as c:
            await c.create_topic("t", 2, 3, assignment=[[0, 1, 2], [0, 1, 2]])
            await c.crash_broker(0)
            await c.restart_broker(0)
            await asyncio.sleep(0.1)  # back in the ISR
            await c.fail_over("t", 1, 0)
            await asyncio.sleep(2.5)  # two checks
            p = c.partition("t", 0)
            assert p is not None
            return p.leader

    assert run_virtual(main()) == leader


def test_a_partition_elected_while_another_waits_is_answered_none() -> None:
    # t-0's election happens; t-1's cannot (its preferred leader left the ISR) and the
    # request waits; t-0's leader then moves on: t-0 was elected all the same (Kafka's
    # DelayedElectLeader stops waiting for a partition once its leader was elected)
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> Any:
        checker = InvariantChecker(c)
        await c.fail_over("t", 0, 1)
        await c.fail_over("t", 1, 0)
        request = ElectLeadersRequest([("t", 0), ("t", 1)], timeout_ms=300)
        task = loop.create_task(c.elect_leaders(request))
        await asyncio.sleep(0.01)
        t1 = c.partition("t", 1)
        assert t1 is not None
        t1.isr.discard(1)  # broker 1 fell behind before its election reached it
        await asyncio.sleep(0.1)
        assert c.partition("t", 0).leader == 0  # type: ignore[union-attr]
        await c.fail_over("t", 0, 2)
        result = await task
        assert checker.violations == []
        return _errors(result)

    assert _run(body, election_rtt=Latency(50.0), replica_lag_time_max_ms=100_000) == [
        ("t", 0, ErrorCode.NONE, 0),
        ("t", 1, ErrorCode.REQUEST_TIMED_OUT, 0),
    ]


def test_bad_rebalancing_options_are_refused() -> None:
    with pytest.raises(TypeError, match="auto_leader_rebalance_enable"):
        Cluster(auto_leader_rebalance_enable=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="leader_imbalance_check_interval_ms"):
        Cluster(leader_imbalance_check_interval_ms=0)
    with pytest.raises(ValueError, match="leader_imbalance_per_broker_percentage"):
        Cluster(leader_imbalance_per_broker_percentage=101)  # a share of partitions: <= 100
    cluster = Cluster()
    with pytest.raises(TypeError, match="auto_leader_rebalance_enable"):
        cluster.auto_leader_rebalance_enable = "yes"  # type: ignore[assignment]
    cluster.auto_leader_rebalance_enable = True
    assert cluster.controller.auto_leader_rebalance_enable is True
