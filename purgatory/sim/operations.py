"""The broker's delayed operations: DelayedProduce, DelayedFetch, DelayedReplicaFetch and
DelayedDeleteRecords.

Each keeps one status per topic-partition, remembers the leader epoch it was created
under, and decides from the partition state alone (synchronous ``try_complete``), as in
Kafka's replica manager. A changed epoch means leadership moved: the op completes with
NOT_LEADER_OR_FOLLOWER for that partition and the client retries on the new leader.

Completion builds the response in ``on_complete`` (Kafka's ``onComplete``), keeps it in
``result`` and hands it to ``reply`` if one was given: callback clients need no task
and no future per request; ``await op`` then reading ``op.result`` serves async callers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar, final

from purgatory import DelayedOperation
from purgatory.errors import ErrorCode
from purgatory.sim.batches import RECORD_OVERHEAD, RecordBatch, records_in
from purgatory.sim.errors import SimulationError
from purgatory.sim.log import Log
from purgatory.sim.messages import (
    DeleteRecordsResult,
    ElectLeadersResult,
    FetchResult,
    PartitionElection,
    ProduceResult,
)
from purgatory.sim.partition import Partition

_NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
_TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT
_NONE = ErrorCode.NONE
_UNAVAILABLE = ErrorCode.BROKER_NOT_AVAILABLE

R = TypeVar("R")

# (partition, epoch, error, batches, leader hw, leader log start): one partition's answer
FollowerResponse = tuple[Partition, int, ErrorCode, list[RecordBatch], int, int]


@final
class PartitionStatus:
    """One partition of a request: what it waits for, and its answer once decided."""

    __slots__ = ("base_offset", "epoch", "error", "partition", "required_offset")

    def __init__(
        self, partition: Partition, required_offset: int = -1, base_offset: int = -1
    ) -> None:
        self.partition = partition
        self.epoch = partition.leader_epoch
        self.required_offset = required_offset
        self.base_offset = base_offset
        self.error: ErrorCode | None = None  # None while undecided


def read_consumer_fetch(
    p: Partition,
    offset: int,
    max_bytes: int,
    as_batches: bool = False,
    read_committed: bool = False,
    replica: int | None = None,
) -> FetchResult:
    """A consumer's answer from the leader's current state: records up to the HW, or
    ``read_committed`` up to the LSO with the aborted transactions among them (or
    ``as_batches``, the batches that hold them). ``replica``: read that follower's log
    instead, up to its own HW or LSO (KIP-392)."""
    leader = p.leader
    if leader is None:
        return FetchResult(_NOT_LEADER)
    if replica is None:
        replica = leader
    log = p.logs.get(replica)
    if log is None:  # no longer a replica (reassigned away)
        return FetchResult(_NOT_LEADER)
    hw = p.hws[replica]
    lso = p.last_stable_offset(replica)
    start = log.log_start_offset
    if offset < start or offset > log.leo:
        return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, hw, [], start, [], lso)
    end = lso if read_committed else hw
    batches = log.read_batches(offset, end, max_bytes) if end > offset else []
    aborted = []
    if read_committed and batches:
        # Kafka's collectAbortedTransactions over what the answer holds
        aborted = log.txns.aborted_between(offset, min(batches[-1].end_offset, end))
    if as_batches:
        return FetchResult(_NONE, hw, [], start, batches, lso, aborted)
    try:
        records = records_in(batches, offset, end)
    except SimulationError as exc:  # a client's batch whose records do not decode
        return FetchResult(exc.code, hw, [], start, [], lso)
    return FetchResult(_NONE, hw, records, start, [], lso, aborted)


def read_follower_fetch(p: Partition, epoch: int, offset: int, max_bytes: int) -> FollowerResponse:
    """A follower's answer for one partition: whole batches up to the leader's LEO."""
    if p.leader_epoch != epoch or p.leader is None:
        return (p, epoch, _NOT_LEADER, [], -1, -1)
    log = p.logs[p.leader]
    batches = log.read_batches(offset, log.leo, max_bytes) if log.leo > offset else []
    return (p, epoch, _NONE, batches, p.hws[p.leader], log.log_start_offset)


def _first_error(statuses: list[PartitionStatus]) -> str | None:
    for status in statuses:
        if status.error is not None and status.error is not _NONE:
            return status.error.value
    return None


class BrokerOperation(DelayedOperation, Generic[R]):
    """An operation that answers its client once, from ``on_complete``.

    ``observer(op)``, if set, sees every operation that finishes (completed, expired, or
    dropped through :meth:`drop`): the simulation's statistics and invariant checker
    read it there, at no cost to the purgatory's listeners (which still see every op).
    """

    __slots__ = ("observer", "op_id", "reply", "result", "statuses")
    #: the purgatory it waits in (statistics are per purgatory)
    purgatory_name: ClassVar[str] = ""
    #: what traces call it
    kind: ClassVar[str] = ""

    def __init__(
        self,
        delay_ms: int,
        statuses: list[PartitionStatus],
        op_id: str,
        reply: Callable[[R], None] | None,
        observer: Observer | None = None,
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self.op_id = op_id
        self.reply = reply
        self.observer = observer
        self.result: R | None = None

    def watch_keys(self) -> tuple[str, ...]:
        """The keys it waits on: its partitions."""
        return tuple([status.partition.key for status in self.statuses])

    def response(self) -> R:
        """The answer, built from the state at completion."""
        raise NotImplementedError

    def unavailable(self) -> R:
        """The answer when the broker shuts down under the request."""
        raise NotImplementedError

    def on_complete(self) -> None:
        self.result = result = self.response()
        if self.observer is not None:
            self.observer(self)
        if self.reply is not None:
            self.reply(result)

    def cancel(self) -> bool:
        """Drop the request (nobody waits for it any more; the observer still sees it);
        True if it was pending."""
        if not super().cancel():
            return False
        if self.observer is not None:
            self.observer(self)
        return True

    def answer_unavailable(self) -> None:
        """Drop the request (broker shutdown) and tell its client so."""
        if self.cancel():
            self.result = result = self.unavailable()
            if self.reply is not None:
                self.reply(result)


# sees each finished operation (see BrokerOperation)
Observer = Callable[[BrokerOperation[Any]], None]


class _PerPartitionOperation(BrokerOperation[R]):
    """A request that waits for a condition on every one of its partitions (Kafka's
    DelayedProduce and DelayedDeleteRecords): a partition whose leader moved answers
    NOT_LEADER_OR_FOLLOWER, one still undecided at expiry REQUEST_TIMED_OUT."""

    __slots__ = ()

    def decide(self, status: PartitionStatus) -> ErrorCode | None:
        """The partition's answer once its condition holds; None while it must wait."""
        raise NotImplementedError

    def try_complete(self) -> bool:
        if self._decide_all():
            return False
        self.error = _first_error(self.statuses)
        return self.force_complete()

    def _decide_all(self) -> bool:
        """Decide every undecided partition from the state now; True if one must wait."""
        pending = False
        for status in self.statuses:
            if status.error is not None:
                continue
            if status.partition.leader_epoch != status.epoch:
                status.error = _NOT_LEADER
            else:
                status.error = self.decide(status)
                pending = pending or status.error is None
        return pending

    def on_complete(self) -> None:
        statuses = self.statuses
        if self.is_expired:  # Kafka answers REQUEST_TIMED_OUT per undecided partition
            for status in statuses:
                if status.error is None:
                    status.error = _TIMED_OUT
            self.error = _first_error(statuses)
        elif statuses[0].error is None:
            # completed by a threshold wait (its value reached the condition, or
            # leadership moved), not by try_complete: decide from the state now
            self._decide_all()
            self.error = _first_error(statuses)
        super().on_complete()


@final
class DelayedProduce(_PerPartitionOperation[ProduceResult]):
    """acks=all: wait until the HW covers ``required_offset`` (last offset + 1) on every
    partition, with at least ``min_insync_replicas`` in the ISR."""

    __slots__ = ("min_insync_replicas",)
    kind: ClassVar[str] = "produce"
    purgatory_name: ClassVar[str] = "Produce"

    def __init__(
        self,
        delay_ms: int,
        statuses: list[PartitionStatus],
        op_id: str,
        min_insync_replicas: int = 1,
        reply: Callable[[ProduceResult], None] | None = None,
        observer: Observer | None = None,
    ) -> None:
        super().__init__(delay_ms, statuses, op_id, reply, observer)
        self.min_insync_replicas = min_insync_replicas

    def decide(self, status: PartitionStatus) -> ErrorCode | None:
        partition = status.partition
        if partition.hws[partition.leader] < status.required_offset:  # type: ignore[index]
            return None
        if len(partition.isr) < self.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return _NONE

    def response(self) -> ProduceResult:
        status = self.statuses[0]  # the cluster's requests name one partition
        error = status.error or _TIMED_OUT
        return ProduceResult(error, status.base_offset if error is _NONE else -1)

    def unavailable(self) -> ProduceResult:
        return ProduceResult(_UNAVAILABLE)


@final
class DelayedDeleteRecords(_PerPartitionOperation[DeleteRecordsResult]):
    """Wait until every live replica's log start offset reached the requested offset."""

    __slots__ = ("alive",)
    kind: ClassVar[str] = "delete-records"
    purgatory_name: ClassVar[str] = "DeleteRecords"

    def __init__(
        self,
        delay_ms: int,
        statuses: list[PartitionStatus],
        op_id: str,
        alive: Callable[[int], bool],
        reply: Callable[[DeleteRecordsResult], None] | None = None,
        observer: Observer | None = None,
    ) -> None:
        super().__init__(delay_ms, statuses, op_id, reply, observer)
        self.alive = alive

    def decide(self, status: PartitionStatus) -> ErrorCode | None:
        if status.partition.low_watermark(self.alive) >= status.required_offset:
            return _NONE
        return None

    def response(self) -> DeleteRecordsResult:
        status = self.statuses[0]
        return DeleteRecordsResult(
            status.error or _TIMED_OUT, status.partition.low_watermark(self.alive)
        )

    def unavailable(self) -> DeleteRecordsResult:
        return DeleteRecordsResult(_UNAVAILABLE)


class _FetchCondition(BrokerOperation[R]):
    """Wait until ``min_bytes`` are readable past the fetch offsets (up to the HW for a
    consumer, up to the LEO for a follower) or ``max_wait_ms`` passes. Expiry is not an
    error: the fetch answers with whatever is there, read at completion like Kafka's
    ``onComplete``."""

    __slots__ = ("as_batches", "max_bytes", "min_bytes", "read_committed", "replica")
    follower: ClassVar[bool] = False
    purgatory_name: ClassVar[str] = "Fetch"

    def __init__(
        self,
        delay_ms: int,
        statuses: list[PartitionStatus],
        min_bytes: int,
        op_id: str,
        max_bytes: int = 1 << 20,
        reply: Callable[[R], None] | None = None,
        observer: Observer | None = None,
        as_batches: bool = False,
        read_committed: bool = False,
        replica: int | None = None,
    ) -> None:
        super().__init__(delay_ms, statuses, op_id, reply, observer)
        self.min_bytes = min_bytes  # statuses' required_offset holds the fetch offset
        self.max_bytes = max_bytes
        # What a consumer asks for (a follower reads whole batches up to the LEO):
        # the batches rather than records, and read_committed waits for the LSO, not the HW
        self.as_batches = as_batches
        self.read_committed = read_committed
        #: a consumer fetch a follower serves (KIP-392): the follower's broker id, whose
        #: log and HW it reads; None: the leader's
        self.replica = replica

    def try_complete(self) -> bool:
        available = 0
        need = self.min_bytes
        follower = self.follower
        replica = self.replica
        for status in self.statuses:
            partition = status.partition
            if partition.leader_epoch != status.epoch or (
                replica is not None and replica not in partition.logs
            ):
                status.error = _NOT_LEADER
                self.error = _NOT_LEADER.value
                return self.force_complete()
            reader = partition.leader if replica is None else replica
            log = partition.logs[reader]  # type: ignore[index]
            offset = status.required_offset
            if follower:
                end = log.leo
            elif self.read_committed:
                end = partition.last_stable_offset(reader)
            else:
                end = partition.hws[reader]  # type: ignore[index]
            if offset < log.log_start_offset or offset > log.leo:
                # the log moved under the request (deleted or truncated): answer now
                return self.force_complete()
            if end > offset:
                available += readable_at_least(log, offset, end, need - available)
        if available >= need:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if not self.is_expired:
            # A threshold wait completes without try_complete, also when leadership moved
            # (the replica manager completes the partition's waiters then): answer as
            # try_complete would. After try_complete this finds nothing new.
            for status in self.statuses:
                if status.error is None and status.partition.leader_epoch != status.epoch:
                    status.error = _NOT_LEADER
                    self.error = _NOT_LEADER.value
                    break
        super().on_complete()


def readable_at_least(log: Log, start: int, end: int, need: int) -> int:
    """Bytes in ``[start, end)``, or a lower bound of them when that already reaches
    ``need``: every record holds at least RECORD_OVERHEAD bytes, so a min_bytes of 1
    needs no byte count at all."""
    lower = RECORD_OVERHEAD * (end - start)
    return lower if lower >= need else log.bytes_between(start, end)


@final
class DelayedFetch(_FetchCondition[FetchResult]):
    """A consumer's long poll on one partition: records up to the HW, or the LSO for
    ``read_committed`` (``as_batches``: the batches that hold them)."""

    __slots__ = ()
    kind: ClassVar[str] = "fetch-consumer"

    def response(self) -> FetchResult:
        status = self.statuses[0]
        if status.error is not None:
            return FetchResult(status.error)
        return read_consumer_fetch(
            status.partition,
            status.required_offset,
            self.max_bytes,
            self.as_batches,
            self.read_committed,
            self.replica,
        )

    def unavailable(self) -> FetchResult:
        return FetchResult(_UNAVAILABLE)


@final
class DelayedReplicaFetch(_FetchCondition[list[FollowerResponse]]):
    """A follower's fetch for every partition it follows on one leader: whole batches up
    to the leader's LEO."""

    __slots__ = ()
    kind: ClassVar[str] = "fetch-follower"
    follower: ClassVar[bool] = True

    def response(self) -> list[FollowerResponse]:
        max_bytes = self.max_bytes
        return [
            read_follower_fetch(s.partition, s.epoch, s.required_offset, max_bytes)
            for s in self.statuses
        ]

    def unavailable(self) -> list[FollowerResponse]:
        return []


@final
class DelayedElectLeader(BrokerOperation[ElectLeadersResult]):
    """Kafka's DelayedElectLeader: wait until every partition the controller is electing
    a leader for has had the leader it chose (``expected_leaders``, by partition key).
    Leader epochs are expected to change here, so they are not an error. ``decided`` are
    the partitions answered at once (not eligible, not needed); the answer lists every
    partition in ``order`` (the request's)."""

    __slots__ = ("decided", "expected_leaders", "order")
    kind: ClassVar[str] = "elect-leader"
    purgatory_name: ClassVar[str] = "ElectLeader"

    def __init__(
        self,
        delay_ms: int,
        expected_leaders: list[tuple[Partition, int]],
        decided: list[PartitionElection],
        order: list[tuple[str, int]],
        op_id: str,
        reply: Callable[[ElectLeadersResult], None] | None = None,
        observer: Observer | None = None,
    ) -> None:
        statuses = [PartitionStatus(p) for p, _ in expected_leaders]
        super().__init__(delay_ms, statuses, op_id, reply, observer)
        #: partition key -> the broker the controller chose to lead it
        self.expected_leaders = {p.key: leader for p, leader in expected_leaders}
        self.decided = decided
        self.order = order

    def try_complete(self) -> bool:
        # A partition is done once its leader was elected, whatever happens to it later
        # (``epoch``: the leader epoch it was seen elected in).
        pending = False
        for status in self.statuses:
            if status.error is None:
                p = status.partition
                if p.leader == self.expected_leaders[p.key]:
                    status.error = _NONE
                    status.epoch = p.leader_epoch
                else:
                    pending = True
        return False if pending else self.force_complete()

    def response(self) -> ElectLeadersResult:
        answers = list(self.decided)
        for status in self.statuses:
            p = status.partition
            if status.error is _NONE:
                answers.append(
                    PartitionElection(p.topic, p.index, _NONE, self.expected_leaders[p.key])
                )
            else:
                answers.append(PartitionElection(p.topic, p.index, _TIMED_OUT, p.leader))
        return ElectLeadersResult.in_order(answers, self.order)

    def unavailable(self) -> ElectLeadersResult:
        return ElectLeadersResult(_UNAVAILABLE)
