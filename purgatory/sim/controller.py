"""Controller logic: elections, crashes, restarts, ISR shrink, metadata.

Kept apart from :mod:`purgatory.sim.cluster` so the public API reads on its own. Every
leadership change bumps the partition's leader epoch and then checks all three
purgatories on its key, so requests parked on the old leader complete with
NOT_LEADER_OR_FOLLOWER and their clients retry on the new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from purgatory import loop_clock_ms
from purgatory.sim.errors import ErrorCode, SimulationError
from purgatory.sim.messages import (
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from purgatory.sim.partition import Partition

if TYPE_CHECKING:
    from purgatory.sim.cluster import Broker, Cluster


def elect_leader(cluster: Cluster, p: Partition, exclude: int | None) -> int | None:
    """Clean election: the first live ISR member in assignment order, other than
    ``exclude`` (which leaves the ISR). No candidate: the partition goes offline and
    keeps its ISR, so the last in-sync replica can lead again when it returns."""
    candidates = [b for b in p.replicas if b != exclude and b in p.isr and cluster.is_alive(b)]
    now = loop_clock_ms()
    if not candidates:
        p.elect(None, now)
        return None
    if exclude is not None:
        p.isr.discard(exclude)
    p.elect(candidates[0], now)
    for broker in p.replicas:
        if broker != p.leader and cluster.is_alive(broker):
            p.become_follower(broker)
    return candidates[0]


def crash_broker(cluster: Cluster, broker: Broker) -> None:
    if not broker.alive:
        return
    broker.alive = False
    for (follower, _leader), fetcher in cluster.fetchers.items():
        if follower == broker.broker_id:
            fetcher.stop()
    touched = []
    for p in cluster.partitions():
        if p.leader == broker.broker_id:
            elect_leader(cluster, p, exclude=broker.broker_id)
            touched.append(p)
        elif broker.broker_id in p.replicas:
            touched.append(p)  # DeleteRecords no longer waits for it
    cluster.bump_metadata()
    for p in touched:
        cluster.on_leadership_change(p)


def restart_broker(cluster: Cluster, broker: Broker) -> None:
    if broker.alive:
        return
    broker.alive = True
    b = broker.broker_id
    touched = []
    for p in cluster.partitions():
        if b not in p.replicas:
            continue
        if p.leader is None and b in p.isr:  # the last in-sync replica is back
            p.elect(b, loop_clock_ms())
            for other in p.replicas:
                if other != b and cluster.is_alive(other):
                    p.become_follower(other)
            touched.append(p)
        elif p.leader is not None and p.leader != b:
            p.become_follower(b)
    cluster.bump_metadata()
    if not cluster.closed:
        cluster.ensure_fetchers()
    for p in touched:
        cluster.on_leadership_change(p)


def move_leader(cluster: Cluster, p: Partition, new_leader: int | None) -> int:
    candidates = [b for b in p.replicas if b != p.leader and b in p.isr and cluster.is_alive(b)]
    if new_leader is None:
        if not candidates:
            raise SimulationError(
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"{p.key}: no live in-sync replica"
            )
        new_leader = candidates[0]
    elif new_leader not in candidates:
        raise SimulationError(
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"{p.key}: broker {new_leader} is not a live in-sync follower ({candidates})",
        )
    p.elect(new_leader, loop_clock_ms())
    for broker in p.replicas:
        if broker != new_leader and cluster.is_alive(broker):
            p.become_follower(broker)
    cluster.bump_metadata()
    cluster.on_leadership_change(p)
    return new_leader


async def isr_shrink_loop(cluster: Cluster) -> None:
    """Kafka's isr-expiration task: every ``replica_lag_time_max_ms / 2``, drop followers
    that have not caught up within ``replica_lag_time_max_ms``."""
    lag = cluster.replica_lag_time_max_ms
    while True:
        await asyncio.sleep(lag / 2000.0)
        now = loop_clock_ms()
        for p in list(cluster.partitions()):
            if p.leader is None or not cluster.is_alive(p.leader):
                continue
            if p.shrink_isr(now, lag) and p.maybe_increment_hw():
                cluster.on_high_watermark(p)


def assign_replicas(
    cluster: Cluster,
    partitions: int,
    replication_factor: int,
    assignment: Sequence[Sequence[int]] | None,
    start: int,
) -> list[list[int]]:
    """Round-robin replica lists, or ``assignment`` once checked."""
    n = len(cluster.brokers)
    if assignment is None:
        return [[(start + i + r) % n for r in range(replication_factor)] for i in range(partitions)]
    replicas = [list(r) for r in assignment]
    if len(replicas) != partitions or any(
        len(r) != replication_factor
        or len(set(r)) != len(r)
        or any(b not in cluster.brokers for b in r)
        for r in replicas
    ):
        raise SimulationError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"assignment must list {partitions} partitions of {replication_factor} "
            f"distinct brokers out of {sorted(cluster.brokers)}: {assignment!r}",
        )
    return replicas


def describe(cluster: Cluster) -> ClusterMetadata:
    brokers = [
        BrokerMetadata(b.broker_id, b.alive, None if b.latency is None else b.latency.median_ms)
        for b in cluster.brokers.values()
    ]
    topics = []
    for name, parts in cluster.topics.items():
        metas = []
        for p in parts:
            log = p.logs[p.leader] if p.leader is not None else None
            metas.append(
                PartitionMetadata(
                    p.index,
                    p.leader,
                    p.leader_epoch,
                    list(p.replicas),
                    sorted(p.isr),
                    p.hw,
                    -1 if log is None else log.log_start_offset,
                    -1 if log is None else log.leo,
                )
            )
        topics.append(TopicMetadata(name, metas))
    return ClusterMetadata(brokers, topics)
