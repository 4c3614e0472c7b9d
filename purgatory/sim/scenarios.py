"""Named scenarios: a cluster, a topic, a workload and a schedule of faults.

Fault times are fractions of the run's duration, so every scenario works at any length.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from purgatory.sim.cluster import Cluster
from purgatory.sim.cluster_options import ClusterOptions
from purgatory.sim.latency import Latency
from purgatory.sim.messages import ElectLeadersRequest
from purgatory.sim.workload import ClientWorkloadConfig

# an action on the cluster at a point of the run
FaultAction = Callable[[Cluster], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class FaultEvent:
    at: float  # fraction of the duration, in [0, 1)
    description: str
    action: FaultAction


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    brokers: int = 3
    partitions: int = 6
    replication_factor: int = 3
    # explicit replica lists (first = preferred leader); None: round-robin
    assignment: list[list[int]] | None = None
    cluster_options: ClusterOptions = field(default_factory=ClusterOptions)
    workload: ClientWorkloadConfig = field(default_factory=ClientWorkloadConfig)
    faults: tuple[FaultEvent, ...] = ()
    # delete records every this many ms, keeping this many records per partition
    delete_interval_ms: int = 0
    delete_keep: int = 1_000

    def with_workload(self, **changes: Any) -> Scenario:
        return replace(self, workload=replace(self.workload, **changes))


def _slow(broker: int, median_ms: float, p99_ms: float) -> FaultAction:
    async def act(cluster: Cluster) -> None:
        cluster.set_replication_latency(broker, Latency.from_percentiles(median_ms, p99_ms))

    return act


def _heal(broker: int) -> FaultAction:
    async def act(cluster: Cluster) -> None:
        cluster.set_replication_latency(broker, None)

    return act


def _crash(broker: int) -> FaultAction:
    async def act(cluster: Cluster) -> None:
        await cluster.crash_broker(broker)

    return act


def _crash_unfenced(broker: int) -> FaultAction:
    async def act(cluster: Cluster) -> None:
        await cluster.crash_broker_unfenced(broker)

    return act


def _restart(broker: int) -> FaultAction:
    async def act(cluster: Cluster) -> None:
        await cluster.restart_broker(broker)

    return act


def _request_preferred_election(topic: str) -> FaultAction:
    """An admin asks for a preferred election of every partition (ElectLeaders): the
    request parks in the ElectLeader purgatory until the leaders moved."""

    async def act(cluster: Cluster) -> None:
        partitions = [(topic, p.index) for p in cluster.topics[topic]]
        await cluster.elect_leaders(ElectLeadersRequest(partitions, "preferred", 5_000))

    return act


def _auto_rebalance(enabled: bool) -> FaultAction:
    async def act(cluster: Cluster) -> None:
        cluster.auto_leader_rebalance_enable = enabled

    return act


def _preferred_leaders(topic: str) -> FaultAction:
    """Move each partition back to its first replica if that one is in sync."""

    async def act(cluster: Cluster) -> None:
        for p in cluster.topics[topic]:
            preferred = p.replicas[0]
            if p.leader != preferred and preferred in p.isr and cluster.is_alive(preferred):
                await cluster.fail_over(topic, p.index, preferred)

    return act


# Broker 2 follows every partition and leads none: its crash is a pure follower crash.
_FOLLOWER_2 = [[0, 1, 2], [1, 0, 2]] * 3

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("steady", "3 brokers, 6 partitions, RF 3, no faults"),
        Scenario(
            "slow-follower",
            "broker 2 replicates with median 20 ms / p99 200 ms extra latency for 60% of the run",
            faults=(
                FaultEvent(0.2, "broker 2 slow (median 20 ms, p99 200 ms)", _slow(2, 20, 200)),
                FaultEvent(0.8, "broker 2 back to normal", _heal(2)),
            ),
        ),
        Scenario(
            "follower-crash",
            "follower broker 2 crashes unheard of by the controller (not fenced before "
            "broker_session_timeout_ms); the leaders' lag check drops it from the ISR after "
            "replica_lag_time_max_ms and produces complete without it; it restarts and "
            "catches up",
            assignment=_FOLLOWER_2,
            cluster_options={"replica_lag_time_max_ms": 2_000},
            faults=(
                # unfenced: the crash the ISR's lag check is for (a fenced one leaves at once)
                FaultEvent(0.2, "crash follower broker 2", _crash_unfenced(2)),
                FaultEvent(0.6, "restart broker 2", _restart(2)),
            ),
        ),
        Scenario(
            "leader-failover",
            "follower broker 2 turns very slow and drops out of the ISR; then broker 0 "
            "(leader of half the partitions) crashes: the controller elects from the ISR "
            "(never the lagging replica), clients retry; broker 0 restarts, catches up and "
            "leads again",
            assignment=_FOLLOWER_2,
            cluster_options={"replica_lag_time_max_ms": 2_000},
            faults=(
                FaultEvent(0.1, "broker 2 very slow (median 3 s)", _slow(2, 3000, 4000)),
                # at 0.45: broker 2 has left the ISR by then (lag > 2 s, checked every second)
                FaultEvent(0.45, "crash leader broker 0", _crash(0)),
                FaultEvent(0.55, "broker 2 back to normal", _heal(2)),
                FaultEvent(0.65, "restart broker 0", _restart(0)),
                FaultEvent(0.85, "preferred leader election", _preferred_leaders("events")),
            ),
        ),
        Scenario(
            "preferred-election",
            "leader broker 0 crashes, its partitions fail over; it restarts and catches up; "
            "an ElectLeaders request (preferred) parks until leadership is back; then, with "
            "automatic rebalancing on, broker 1 does the same and the controller's periodic "
            "check moves its partitions back",
            cluster_options={"leader_imbalance_check_interval_ms": 500},
            faults=(
                FaultEvent(0.05, "crash leader broker 0", _crash(0)),
                FaultEvent(0.15, "restart broker 0", _restart(0)),
                FaultEvent(
                    0.3,
                    "preferred leader election (requested)",
                    _request_preferred_election("events"),
                ),
                FaultEvent(0.4, "automatic leader rebalancing on", _auto_rebalance(True)),
                FaultEvent(0.5, "crash leader broker 1", _crash(1)),
                FaultEvent(
                    0.6, "restart broker 1 (the controller moves its leaders back)", _restart(1)
                ),
            ),
        ),
        Scenario(
            "delete-records",
            "DeleteRecords every second keeping 1000 records per partition, with a slow "
            "follower holding the low watermark back",
            delete_interval_ms=1_000,
            faults=(
                FaultEvent(0.3, "broker 2 slow (median 50 ms, p99 400 ms)", _slow(2, 50, 400)),
                FaultEvent(0.7, "broker 2 back to normal", _heal(2)),
            ),
        ),
    )
}
