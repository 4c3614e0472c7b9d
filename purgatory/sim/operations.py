"""The broker's delayed operations: DelayedProduce, DelayedFetch, DelayedDeleteRecords.

Each keeps one status per topic-partition, remembers the leader epoch it was created
under, and decides from the partition state alone (synchronous ``try_complete``), as in
Kafka's replica manager. A changed epoch means leadership moved: the op completes with
NOT_LEADER_OR_FOLLOWER for that partition and the client retries on the new leader.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar, final

from purgatory import DelayedOperation, DelayedOperationPurgatory, OperationCancelled
from purgatory.sim.errors import ErrorCode
from purgatory.sim.partition import Partition

_NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
_TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT
_NONE = ErrorCode.NONE


async def park(
    purgatory: DelayedOperationPurgatory[Any], op: DelayedOperation, keys: Sequence[Hashable]
) -> bool:
    """Watch ``op`` and wait for it; False if the purgatory shut down before it finished.

    If the waiting task is cancelled (the client went away), the op is abandoned: nobody
    is left to answer, so it must not stay watched until its timeout.
    """
    if await purgatory.try_complete_else_watch(op, keys):
        return True
    try:
        await op
    except asyncio.CancelledError:
        op.abandon()
        raise
    except OperationCancelled:
        return False
    return True


@final
class PartitionStatus:
    """One partition of a request: what it waits for, and its answer once decided."""

    __slots__ = ("base_offset", "epoch", "error", "partition", "required_offset")

    def __init__(self, partition: Partition, required_offset: int, base_offset: int = -1) -> None:
        self.partition = partition
        self.epoch = partition.leader_epoch
        self.required_offset = required_offset
        self.base_offset = base_offset
        self.error: ErrorCode | None = None  # None while undecided


def _first_error(statuses: list[PartitionStatus]) -> str | None:
    for status in statuses:
        if status.error is not None and status.error is not _NONE:
            return status.error.value
    return None


class _PerPartitionOperation(DelayedOperation):
    """A request that waits for a condition on every one of its partitions (Kafka's
    DelayedProduce and DelayedDeleteRecords): a partition whose leader moved answers
    NOT_LEADER_OR_FOLLOWER, one still undecided at expiry REQUEST_TIMED_OUT."""

    __slots__ = ("op_id", "statuses")

    def __init__(self, delay_ms: int, statuses: list[PartitionStatus], op_id: str) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self.op_id = op_id

    def decide(self, status: PartitionStatus) -> ErrorCode | None:
        """The partition's answer once its condition holds; None while it must wait."""
        raise NotImplementedError

    def try_complete(self) -> bool:
        pending = False
        for status in self.statuses:
            if status.error is not None:
                continue
            if status.partition.leader_epoch != status.epoch:
                status.error = _NOT_LEADER
            else:
                status.error = self.decide(status)
                pending = pending or status.error is None
        if pending:
            return False
        self.error = _first_error(self.statuses)
        return self.force_complete()

    def on_complete(self) -> None:
        if self.is_expired:  # Kafka answers REQUEST_TIMED_OUT per undecided partition
            for status in self.statuses:
                if status.error is None:
                    status.error = _TIMED_OUT
            self.error = _first_error(self.statuses)


@final
class DelayedProduce(_PerPartitionOperation):
    """acks=all: wait until the HW covers ``required_offset`` (last offset + 1) on every
    partition, with at least ``min_insync_replicas`` in the ISR."""

    __slots__ = ("min_insync_replicas",)
    kind: ClassVar[str] = "produce"

    def __init__(
        self,
        delay_ms: int,
        statuses: list[PartitionStatus],
        op_id: str,
        min_insync_replicas: int = 1,
    ) -> None:
        super().__init__(delay_ms, statuses, op_id)
        self.min_insync_replicas = min_insync_replicas

    def decide(self, status: PartitionStatus) -> ErrorCode | None:
        partition = status.partition
        if partition.hws[partition.leader] < status.required_offset:  # type: ignore[index]
            return None
        if len(partition.isr) < self.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return _NONE


@final
class DelayedFetch(DelayedOperation):
    """Wait until ``min_bytes`` are readable past the fetch offsets (up to the HW for a
    consumer, up to the LEO for a follower) or ``max_wait_ms`` passes. Expiry is not an
    error: the fetch answers with whatever is there. The response is read afterwards,
    from the current state, like Kafka's ``onComplete``."""

    __slots__ = ("follower", "kind", "min_bytes", "op_id", "statuses")

    def __init__(
        self,
        delay_ms: int,
        statuses: list[PartitionStatus],
        min_bytes: int,
        op_id: str,
        follower: bool,
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses  # required_offset holds the fetch offset
        self.min_bytes = min_bytes
        self.op_id = op_id
        self.follower = follower
        self.kind = "fetch-follower" if follower else "fetch-consumer"

    def try_complete(self) -> bool:
        available = 0
        follower = self.follower
        for status in self.statuses:
            partition = status.partition
            if partition.leader_epoch != status.epoch:
                status.error = _NOT_LEADER
                self.error = _NOT_LEADER.value
                return self.force_complete()
            log = partition.logs[partition.leader]  # type: ignore[index]
            offset = status.required_offset
            end = log.leo if follower else partition.hws[partition.leader]  # type: ignore[index]
            if offset < log.log_start_offset or offset > log.leo:
                # the log moved under the request (deleted or truncated): answer now
                return self.force_complete()
            if end > offset:
                available += log.bytes_between(offset, end)
        if available >= self.min_bytes:
            return self.force_complete()
        return False


@final
class DelayedDeleteRecords(_PerPartitionOperation):
    """Wait until every live replica's log start offset reached the requested offset."""

    __slots__ = ("alive",)
    kind: ClassVar[str] = "delete-records"

    def __init__(
        self,
        delay_ms: int,
        statuses: list[PartitionStatus],
        op_id: str,
        alive: Callable[[int], bool],
    ) -> None:
        super().__init__(delay_ms, statuses, op_id)
        self.alive = alive

    def decide(self, status: PartitionStatus) -> ErrorCode | None:
        if status.partition.low_watermark(self.alive) >= status.required_offset:
            return _NONE
        return None
