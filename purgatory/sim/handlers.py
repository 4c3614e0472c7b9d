"""The leader's request handlers (Kafka's ReplicaManager), synchronous.

Each handler either answers at once (returns the result) or returns the delayed operation
for the caller to park: the cluster parks it with the purgatory's ``*_nowait`` entry point
for callback clients, or with ``purgatory.park`` for async callers. A parked operation
answers through its ``reply`` callback (or its ``result`` once awaited). Nothing here
awaits, so the simulated clients need no task per request and the purgatory's ``*_nowait``
entry points serve every trigger.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from purgatory.sim.errors import ErrorCode
from purgatory.sim.log import RECORD_OVERHEAD
from purgatory.sim.messages import DeleteRecordsResult, FetchResult, ProduceResult
from purgatory.sim.operations import (
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedProduce,
    DelayedReplicaFetch,
    FollowerResponse,
    PartitionStatus,
    read_consumer_fetch,
    read_follower_fetch,
    readable_at_least,
)
from purgatory.sim.partition import Partition

if TYPE_CHECKING:
    from collections.abc import Callable

    from purgatory.sim.cluster import Cluster

_NONE = ErrorCode.NONE

# (partition, leader epoch, fetch offset, follower's log start): one partition of a
# replica fetch
ReplicaFetchRequest = tuple[Partition, int, int, int]


def produce(
    cluster: Cluster,
    p: Partition,
    entries: list[tuple[bytes | None, bytes]],
    acks: int,
    timeout_ms: int,
    reply: Callable[[ProduceResult], None] | None,
) -> ProduceResult | DelayedProduce:
    """Append on the leader; acks=-1 returns a DelayedProduce to park until the HW covers
    the records."""
    if acks == -1 and len(p.isr) < cluster.min_insync_replicas:
        return ProduceResult(ErrorCode.NOT_ENOUGH_REPLICAS)
    batch, hw_advanced = p.append(entries)
    # new bytes for parked follower fetches (consumers wait for the HW)
    cluster.fetch_purgatory.check_and_complete_nowait(p.replica_key)
    if hw_advanced:
        cluster.on_high_watermark(p, produce=False)
    if acks != -1:
        return ProduceResult(_NONE, batch.base_offset if acks == 1 else -1)
    status = PartitionStatus(p, batch.end_offset, batch.base_offset)
    op = DelayedProduce(
        timeout_ms,
        [status],
        cluster.next_op_id("produce"),
        cluster.min_insync_replicas,
        reply,
        cluster.op_observer,
    )
    return op


def fetch(
    cluster: Cluster,
    p: Partition,
    offset: int,
    min_bytes: int,
    max_bytes: int,
    max_wait_ms: int,
    reply: Callable[[FetchResult], None] | None,
) -> FetchResult | DelayedFetch:
    """A consumer fetch: answer now if ``min_bytes`` are below the HW (or no wait is
    allowed), else return a DelayedFetch to park."""
    log = p.logs[p.leader]  # type: ignore[index]
    if offset < log.log_start_offset or offset > log.leo:
        return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, p.hw, [], log.log_start_offset)
    hw = p.hws[p.leader]  # type: ignore[index]
    if max_wait_ms > 0 and (
        hw <= offset or readable_at_least(log, offset, hw, min_bytes) < min_bytes
    ):
        status = PartitionStatus(p, offset)
        op = DelayedFetch(
            max_wait_ms,
            [status],
            min_bytes,
            cluster.next_op_id("fetch"),
            max_bytes,
            reply,
            cluster.op_observer,
        )
        return op
    return read_consumer_fetch(p, offset, max_bytes)


def delete_records(
    cluster: Cluster,
    p: Partition,
    offset: int,
    timeout_ms: int,
    reply: Callable[[DeleteRecordsResult], None] | None,
) -> DeleteRecordsResult | DelayedDeleteRecords:
    """Move the leader's log start; return the DelayedDeleteRecords to park until every
    live replica followed."""
    target = p.hw if offset == -1 else offset
    if target > p.hw:
        return DeleteRecordsResult(ErrorCode.OFFSET_OUT_OF_RANGE)
    p.leader_log.delete_before(target)
    cluster.on_leadership_change(p)  # parked fetches below the new log start
    status = PartitionStatus(p, target)
    op = DelayedDeleteRecords(
        timeout_ms,
        [status],
        cluster.next_op_id("delete"),
        cluster.is_alive,
        reply,
        cluster.op_observer,
    )
    return op


def replica_fetch(
    cluster: Cluster,
    follower: int,
    requests: list[ReplicaFetchRequest],
    reply: Callable[[list[FollowerResponse]], None] | None,
) -> list[FollowerResponse] | DelayedReplicaFetch:
    """The leader side of a replica fetch: record each follower's fetch offset (which may
    advance the HW), then park until ``replica_fetch_min_bytes`` past the offsets or the
    max wait; the answer is read when it completes."""
    now = cluster.now_ms()
    errors: dict[int, ErrorCode] | None = None  # by request index, rare
    statuses: list[PartitionStatus] = []
    i = -1
    for p, epoch, offset, lso in requests:
        i += 1
        leader = p.leader
        if p.leader_epoch != epoch or leader is None:
            errors = errors or {}
            errors[i] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            continue
        log = p.logs[leader]
        if offset > log.leo or offset < log.log_start_offset:
            errors = errors or {}
            errors[i] = ErrorCode.OFFSET_OUT_OF_RANGE
            continue
        hw_advanced, lso_moved, _ = p.update_follower(follower, offset, lso, now)
        if hw_advanced:
            cluster.on_high_watermark(p)
        elif lso_moved:
            cluster.delete_purgatory.check_and_complete_nowait(p.key)
        statuses.append(PartitionStatus(p, offset))
    max_bytes = cluster.replica_fetch_max_bytes
    wait = cluster.replica_fetch_wait_max_ms
    if statuses and errors is None and wait > 0:
        need = cluster.replica_fetch_min_bytes
        available = 0
        for status in statuses:
            p = status.partition
            log = p.logs[p.leader]  # type: ignore[index]
            offset = status.required_offset
            leo = log.leo
            if leo > offset:  # readable_at_least, inlined
                lower = RECORD_OVERHEAD * (leo - offset)
                available += lower if lower >= need - available else log.bytes_between(offset, leo)
        if available < need:
            op = DelayedReplicaFetch(
                wait,
                statuses,
                need,
                cluster.next_op_id("replica-fetch"),
                max_bytes,
                reply,
                cluster.op_observer,
            )
            keys = tuple([status.partition.replica_key for status in statuses])
            cluster.fetch_purgatory.try_complete_else_watch_nowait(op, keys)
            return op
    out: list[FollowerResponse] = []
    i = -1
    for p, epoch, offset, _lso in requests:
        i += 1
        error = None if errors is None else errors.get(i)
        if error is None:
            out.append(read_follower_fetch(p, epoch, offset, max_bytes))
        else:
            out.append((p, epoch, error, [], -1, -1))
    return out
