"""The share-partitions of KIP-932, as Kafka's SharePartitionManager keeps them: for each
(share group, topic partition) the records in flight between the share-partition start
offset (the first record not yet acknowledged or archived) and its end offset (the next
record not yet looked at), each Available or Acquired (by one member, with a delivery
count); a record acknowledged (ACCEPT) or archived (REJECT, or delivered
``group.share.delivery.count.limit`` times) leaves the window. Records are acquired by
ShareFetch, acknowledged by ShareFetch or ShareAcknowledge, in share sessions with their
epochs (:class:`ShareSession`).

An acquisition locks its records to their member for ``group.share.record.lock.duration.ms``:
the lock is a :class:`~purgatory.TimerTask` on the library's own
:class:`~purgatory.SystemTimer` (``ShareLocks``); an expired lock makes its records
Available again, their delivery count kept (Archived past the limit). A ShareFetch that
finds nothing to acquire parks as a :class:`DelayedShareFetch` in the ``ShareFetch``
purgatory, watched on each partition (a produce moving its high watermark wakes it) and
on each (group, partition) (a release or an expired lock wakes it), until ``max_wait_ms``.

Where a share group starts reading a partition is ``share.auto.offset.reset`` (latest by
default), what it reads ``share.isolation.level``: read_committed stops at the last
stable offset and archives the records of aborted transactions; transaction markers are
never handed out. The state is kept in memory, not in ``__share_group_state``: it survives
a leader's failover (every broker shares it) but not the front door's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Final, final

from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer, TimerTask
from purgatory.errors import ErrorCode
from purgatory.sim import Cluster
from purgatory.sim.batches import RecordBatch
from purgatory.sim.partition import Partition

#: the acknowledgement types (ShareFetch and ShareAcknowledge)
GAP: Final = 0
ACCEPT: Final = 1
RELEASE: Final = 2
REJECT: Final = 3
RENEW: Final = 4
#: a share session's epochs: open (0), close (-1)
OPEN: Final = 0
FINAL: Final = -1

#: (topic name, partition index)
TopicPartition = tuple[str, int]


class RecordState(enum.Enum):
    """The state of a record in flight (Kafka's RecordState; Acknowledged and Archived
    records have left the window)."""

    AVAILABLE = "Available"
    ACQUIRED = "Acquired"


@final
@dataclass(frozen=True, slots=True)
class ShareConfig:
    """The broker configs share-partitions follow, by Kafka's names."""

    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    max_record_locks: int = 2_000  # group.share.partition.max.record.locks
    max_sessions: int = 2_000  # group.share.max.share.sessions
    auto_offset_reset: str = "latest"  # share.auto.offset.reset
    read_committed: bool = False  # share.isolation.level


@final
@dataclass(eq=False, slots=True)
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: str = ""
    lock: AcquisitionLock | None = None


@final
@dataclass(eq=False, slots=True)
class SharePartition:
    """One share group's view of one topic partition."""

    group_id: str
    topic: str
    index: int
    start: int = 0
    end: int = 0
    records: dict[int, InFlight] = field(default_factory=dict)
    #: the topic's id when the state began: a topic deleted and made again under its name
    #: is another topic, whose state starts afresh (Kafka keys it by topic id)
    topic_id: uuid.UUID | None = None

    def advance(self) -> None:
        """The start moves past the records that left the window."""
        self.start = min(self.records, default=self.end)


@final
class AcquisitionLock(TimerTask):
    """The lock of the records one ShareFetch acquired in one share-partition."""

    def __init__(
        self, delay_ms: int, manager: SharePartitions, sp: SharePartition, offsets: set[int]
    ) -> None:
        super().__init__(delay_ms)
        self.manager = manager
        self.sp = sp
        self.offsets = offsets

    def run(self) -> None:
        self.manager.expire_lock(self)


@dataclass(frozen=True, slots=True)
class Acquired:
    """Records acquired together: offsets ``first``..``last`` with one delivery count."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """What one partition of a ShareFetch got: the acquired ranges, and the leader's
    batches that hold them (up to ``readable_end``, where a fetch may read)."""

    error: ErrorCode
    acquired: tuple[Acquired, ...] = ()
    batches: tuple[RecordBatch, ...] = ()
    readable_end: int = 0


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    """Offsets ``first``..``last`` acknowledged with ``types``: one type for all, or one
    per offset."""

    first: int
    last: int
    types: tuple[int, ...]


@final
@dataclass(eq=False, slots=True)
class ShareSession:
    """A member's share session (Kafka's ShareSessionCache entry): its next epoch and the
    partitions it fetches."""

    group_id: str
    member_id: str
    epoch: int = 1
    partitions: dict[TopicPartition, None] = field(default_factory=dict)
    #: the id the member named each topic by: a topic deleted and made again under its
    #: name is another topic, which this session does not fetch
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= (1 << 31) - 1 else epoch + 1


@final
class DelayedShareFetch(DelayedOperation):
    """A ShareFetch with nothing to acquire yet, parked on its partitions."""

    def __init__(
        self,
        delay_ms: int,
        manager: SharePartitions,
        group_id: str,
        member_id: str,
        wanted: list[TopicPartition],
        max_records: int,
    ) -> None:
        super().__init__(delay_ms)
        self.manager = manager
        self.group_id = group_id
        self.member_id = member_id
        self.wanted = wanted
        self.max_records = max_records
        self.result: dict[TopicPartition, PartitionFetch] = {}

    def try_complete(self) -> bool:
        if not self.manager.acquirable(self.group_id, self.wanted):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        self.result = self.manager.acquire(
            self.group_id, self.member_id, self.wanted, self.max_records
        )


@final
class SharePartitions:
    """Every share-partition and share session of the cluster; one serves every broker
    (each answers for the partitions it leads). ``labels`` go on the ``ShareFetch``
    purgatory and the ``ShareLocks`` timer; ``clock`` is theirs (the coordinator's)."""

    def __init__(
        self,
        cluster: Cluster,
        config: ShareConfig | None = None,
        labels: dict[str, str] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = ShareConfig() if config is None else config
        #: a group's settings: the broker's (``config``) unless the front door sets this to
        #: read the group's own configs (``share.*`` set on its GROUP resource)
        self.group_config: Callable[[str], ShareConfig] = lambda _group: self.config
        self.fetches: DelayedOperationPurgatory[DelayedShareFetch] = DelayedOperationPurgatory(
            "ShareFetch", labels=labels, clock=clock
        )
        self.locks = SystemTimer("ShareLocks", clock=clock)
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._reaper: asyncio.Task[None] | None = None
        cluster.hw_listeners.append(self._on_high_watermark)

    # -- running -----------------------------------------------------------------------------

    async def start(self) -> None:
        await self.fetches.start()
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        while True:
            await self.locks.advance_clock(None)

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        self.locks.close()
        await self.fetches.shutdown()

    def _on_high_watermark(self, p: Partition, old: int, new: int) -> None:
        if self.fetches.watched:
            self.fetches.check_and_complete_nowait(("hw", p.topic, p.index))

    # -- sessions ----------------------------------------------------------------------------

    def session(
        self, group_id: str, member_id: str, epoch: int, *, acknowledge: bool = False
    ) -> tuple[ErrorCode, ShareSession | None]:
        """The share session a ShareFetch (ShareAcknowledge: ``acknowledge``) with
        ``epoch`` belongs to, as Kafka's ShareSessionCache checks it: epoch 0 opens one
        (in place of the member's old one; ShareAcknowledge cannot open one), -1 names the
        last request of one, any other must be the session's next epoch."""
        key = (group_id, member_id)
        if epoch == OPEN:
            if acknowledge:
                return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
            old = self.sessions.pop(key, None)
            if old is not None:
                self._release_member(group_id, member_id, old.partitions)
            if len(self.sessions) >= self.config.max_sessions:
                return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None
            opened = self.sessions[key] = ShareSession(group_id, member_id, 0)
            return ErrorCode.NONE, opened
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch != FINAL and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        return ErrorCode.NONE, session

    def next_epoch(self, session: ShareSession) -> None:
        session.epoch = _next_epoch(session.epoch)

    def close_session(self, session: ShareSession) -> None:
        """The session's last request was served: it goes, and the records its member
        still holds in its partitions are released."""
        if self.sessions.get((session.group_id, session.member_id)) is session:
            del self.sessions[(session.group_id, session.member_id)]
        self._release_member(session.group_id, session.member_id, session.partitions)

    def member_removed(self, group_id: str, member_id: str) -> None:
        """A share group's member left (or its session ended). A member with an open
        share session keeps it (a consumer leaves the group before its last
        ShareAcknowledge): its records are released when that closes it, or by their
        locks; without one, the records it holds are released now."""
        if (group_id, member_id) in self.sessions:
            return
        partitions = [(t, i) for g, t, i in self.partitions if g == group_id]
        self._release_member(group_id, member_id, partitions)

    def group_deleted(self, group_id: str) -> None:
        """DeleteGroups took the share group: its share-partitions go."""
        for key in [k for k in self.partitions if k[0] == group_id]:
            self._forget(key)

    # -- the admin's offsets (DescribeShareGroupOffsets, Alter..., Delete...) ---------------

    def initialized(self, group_id: str) -> list[TopicPartition]:
        """The partitions ``group_id`` has share-partition state for, in order."""
        return sorted((t, i) for g, t, i in self.partitions if g == group_id)

    def start_and_lag(self, group_id: str, topic: str, index: int) -> tuple[int, int] | None:
        """The share-partition's start offset and its lag (the records up to where a
        fetch may read not yet acknowledged or archived: those in flight and those not
        yet looked at); None where the group has no state for the partition."""
        sp = self.partitions.get((group_id, topic, index))
        if sp is None:
            return None
        p = self.cluster.partition(topic, index)
        if p is None or p.leader is None:
            return sp.start, -1
        return sp.start, max(self._readable_end(p, group_id) - sp.end, 0) + len(sp.records)

    def alter_start(self, group_id: str, topic: str, index: int, start: int) -> None:
        """The share-partition starts at ``start`` (AlterShareGroupOffsets: its group is
        empty): what was in flight is dropped; a negative start forgets the state (the
        next fetch starts where ``share.auto.offset.reset`` says)."""
        self._forget((group_id, topic, index))
        if start >= 0:
            self.partitions[(group_id, topic, index)] = SharePartition(
                group_id, topic, index, start, start, topic_id=self.cluster.topic_id(topic)
            )

    def forget(self, group_id: str, topic: str) -> bool:
        """DeleteShareGroupOffsets: the group's share-partitions of ``topic`` go; False if
        it had none."""
        keys = [k for k in self.partitions if k[0] == group_id and k[1] == topic]
        for key in keys:
            self._forget(key)
        return bool(keys)

    def _forget(self, key: tuple[str, str, int]) -> None:
        sp = self.partitions.pop(key, None)
        if sp is not None:
            for record in sp.records.values():
                if record.lock is not None:
                    record.lock.cancel()

    # -- acquiring ---------------------------------------------------------------------------

    def _share_partition(self, group_id: str, topic: str, index: int) -> SharePartition | None:
        key = (group_id, topic, index)
        sp = self.partitions.get(key)
        topic_id = self.cluster.topic_id(topic)
        if sp is not None and sp.topic_id == topic_id:
            return sp
        if sp is not None:  # the topic was deleted and made again
            self._forget(key)
        p = self.cluster.partition(topic, index)
        if p is None or p.leader is None:
            return None
        if self.group_config(group_id).auto_offset_reset == "earliest":
            start = p.leader_log.log_start_offset
        else:
            start = self._readable_end(p, group_id)
        sp = SharePartition(group_id, topic, index, start, start, topic_id=topic_id)
        self.partitions[key] = sp
        return sp

    def _readable_end(self, p: Partition, group_id: str) -> int:
        return p.last_stable_offset() if self.group_config(group_id).read_committed else p.hw

    def acquirable(self, group_id: str, wanted: list[TopicPartition]) -> bool:
        """Whether a ShareFetch of ``group_id`` for ``wanted`` would acquire anything now."""
        for topic, index in wanted:
            sp = self._share_partition(group_id, topic, index)
            if sp is None:
                continue
            if any(r.state is RecordState.AVAILABLE for r in sp.records.values()):
                return True
            p = self.cluster.partition(topic, index)
            if (
                p is not None
                and p.leader is not None
                and sp.end < self._readable_end(p, group_id)
                and sp.end - sp.start < self.group_config(group_id).max_record_locks
            ):
                return True
        return False

    def acquire(
        self, group_id: str, member_id: str, wanted: list[TopicPartition], max_records: int
    ) -> dict[TopicPartition, PartitionFetch]:
        """Acquire for ``member_id`` up to ``max_records`` records (whole batches: a
        batch is not split) across ``wanted``, in order: records to redeliver first, then
        new ones."""
        out: dict[TopicPartition, PartitionFetch] = {}
        budget = max(max_records, 1)
        config = self.group_config(group_id)
        for topic, index in wanted:
            sp = self._share_partition(group_id, topic, index)
            p = self.cluster.partition(topic, index)
            if sp is None or p is None or p.leader is None:
                out[(topic, index)] = PartitionFetch(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            if budget <= 0:
                out[(topic, index)] = PartitionFetch(ErrorCode.NONE)
                continue
            log = p.leader_log
            end = self._readable_end(p, group_id)
            if sp.end < log.log_start_offset:  # retention took records the group never saw
                for offset in [o for o in sp.records if o < log.log_start_offset]:
                    self._drop(sp, offset)
                sp.end = log.log_start_offset
            offsets: list[int] = []
            for offset in sorted(sp.records):
                if len(offsets) >= budget:
                    break
                record = sp.records[offset]
                if record.state is RecordState.AVAILABLE and offset >= log.log_start_offset:
                    offsets.append(offset)
            if len(offsets) < budget and sp.end < end:
                offsets += self._new_records(sp, p, end, budget - len(offsets))
            sp.advance()
            if not offsets:
                out[(topic, index)] = PartitionFetch(ErrorCode.NONE, readable_end=end)
                continue
            lock = AcquisitionLock(config.lock_duration_ms, self, sp, set(offsets))
            for offset in offsets:
                record = sp.records[offset]
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                record.member_id = member_id
                record.lock = lock
            self.locks.add(lock)
            budget -= len(offsets)
            batches = log.read_batches(min(offsets), max(offsets) + 1, 1 << 62)
            out[(topic, index)] = PartitionFetch(
                ErrorCode.NONE, _ranges(sp, offsets), tuple(batches), end
            )
        return out

    def _new_records(self, sp: SharePartition, p: Partition, end: int, budget: int) -> list[int]:
        """Records from the share-partition's end on, whole batches, about ``budget`` of
        them: transaction markers and (read_committed) aborted records are passed over."""
        log = p.leader_log
        config = self.group_config(sp.group_id)
        room = sp.start + config.max_record_locks - sp.end
        if room <= 0:
            return []
        aborted = log.txns.aborted_between(sp.end, end) if config.read_committed else []
        taken: list[int] = []
        for batch in log.read_batches(sp.end, end, 1 << 62):
            if len(taken) >= min(budget, room):
                break
            if batch.end_offset > end:
                break
            skip = batch.control or (
                batch.transactional
                and any(
                    t.producer_id == batch.producer_id
                    and t.first_offset <= batch.base_offset <= t.last_offset
                    for t in aborted
                )
            )
            if not skip:
                if batch.sparse:
                    offsets = [r.offset for r in batch.records if r.offset >= sp.end]
                else:
                    offsets = list(range(max(batch.base_offset, sp.end), batch.end_offset))
                # the in-flight cap is hard: a batch is cut, as Kafka acquires part of one
                # (the batch is sent whole; the client keeps the records acquired)
                cut = offsets[: room - len(taken)]
                for offset in cut:
                    sp.records[offset] = InFlight(RecordState.AVAILABLE, 0)
                taken += cut
                if len(cut) < len(offsets):
                    sp.end = cut[-1] + 1 if cut else sp.end
                    break
            sp.end = max(sp.end, batch.end_offset)
        return taken

    # -- acknowledging and releasing -------------------------------------------------------

    def acknowledge(
        self, group_id: str, member_id: str, topic: str, index: int, acks: list[Acknowledgement]
    ) -> ErrorCode:
        """Acknowledge records ``member_id`` holds: every offset named must be acquired
        by it (INVALID_RECORD_STATE otherwise, and none of this partition's
        acknowledgements applies); a GAP is archived."""
        sp = self.partitions.get((group_id, topic, index))
        if sp is None:
            return ErrorCode.INVALID_RECORD_STATE
        planned: list[tuple[int, int]] = []
        for ack in acks:
            if ack.last < ack.first or not ack.types:
                return ErrorCode.INVALID_REQUEST
            if len(ack.types) not in (1, ack.last - ack.first + 1):
                return ErrorCode.INVALID_REQUEST
            for i, offset in enumerate(range(ack.first, ack.last + 1)):
                kind = ack.types[0] if len(ack.types) == 1 else ack.types[i]
                if kind not in (GAP, ACCEPT, RELEASE, REJECT, RENEW):
                    return ErrorCode.INVALID_REQUEST
                record = sp.records.get(offset)
                if kind == GAP and (record is None or record.state is RecordState.AVAILABLE):
                    continue  # nothing there (a marker, a compacted record): nothing to do
                if (
                    record is None
                    or record.state is not RecordState.ACQUIRED
                    or record.member_id != member_id
                ):
                    return ErrorCode.INVALID_RECORD_STATE
                planned.append((offset, kind))
        released = False
        renewed: set[int] = set()
        for offset, kind in planned:
            record = sp.records[offset]
            if kind == RENEW:
                renewed.add(offset)
                continue
            self._unlock(record, offset)
            if kind in (ACCEPT, REJECT, GAP):
                del sp.records[offset]
            else:
                released |= self._release(sp, offset)
        if renewed:
            duration = self.group_config(sp.group_id).lock_duration_ms
            lock = AcquisitionLock(duration, self, sp, set(renewed))
            for offset in renewed:
                record = sp.records[offset]
                self._unlock(record, offset)
                record.lock = lock
            self.locks.add(lock)
        sp.advance()
        if released:
            self._wake(sp)
        return ErrorCode.NONE

    def _unlock(self, record: InFlight, offset: int) -> None:
        lock = record.lock
        record.lock = None
        if lock is not None:
            lock.offsets.discard(offset)
            if not lock.offsets:
                lock.cancel()

    def _release(self, sp: SharePartition, offset: int) -> bool:
        """The record is Available again, or Archived if delivered as often as the limit
        allows; True if it is Available."""
        record = sp.records[offset]
        record.member_id = ""
        record.lock = None
        if record.delivery_count >= self.group_config(sp.group_id).delivery_count_limit:
            del sp.records[offset]
            return False
        record.state = RecordState.AVAILABLE
        return True

    def _drop(self, sp: SharePartition, offset: int) -> None:
        record = sp.records.pop(offset)
        self._unlock(record, offset)

    def expire_lock(self, lock: AcquisitionLock) -> None:
        """An acquisition lock expired: its records still acquired are released."""
        sp = lock.sp
        released = False
        for offset in sorted(lock.offsets):
            record = sp.records.get(offset)
            if record is not None and record.lock is lock:
                released |= self._release(sp, offset)
        lock.offsets.clear()
        sp.advance()
        if released:
            self._wake(sp)

    def expire_locks(self) -> int:
        """Expire every acquisition lock now (tests); returns how many."""
        locks = {
            id(r.lock): r.lock
            for sp in self.partitions.values()
            for r in sp.records.values()
            if r.lock is not None
        }
        for lock in locks.values():
            lock.cancel()
            self.expire_lock(lock)
        return len(locks)

    def _release_member(
        self, group_id: str, member_id: str, partitions: Iterable[TopicPartition]
    ) -> None:
        for topic, index in list(partitions):
            sp = self.partitions.get((group_id, topic, index))
            if sp is None:
                continue
            released = False
            for offset in sorted(sp.records):
                record = sp.records[offset]
                if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                    self._unlock(record, offset)
                    released |= self._release(sp, offset)
            sp.advance()
            if released:
                self._wake(sp)

    def _wake(self, sp: SharePartition) -> None:
        if self.fetches.watched:
            self.fetches.check_and_complete_nowait(("released", sp.group_id, sp.topic, sp.index))

    # -- long polls --------------------------------------------------------------------------

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        wanted: list[TopicPartition],
        max_records: int,
        max_wait_ms: int,
    ) -> dict[TopicPartition, PartitionFetch]:
        """Acquire now, or park until something can be acquired or ``max_wait_ms``."""
        if max_wait_ms <= 0 or not wanted or self.acquirable(group_id, wanted):
            return self.acquire(group_id, member_id, wanted, max_records)
        op = DelayedShareFetch(max_wait_ms, self, group_id, member_id, wanted, max_records)
        keys: list[Hashable] = [("hw", t, i) for t, i in wanted]
        keys += [("released", group_id, t, i) for t, i in wanted]
        await self.fetches.park(op, keys)
        return op.result


def _ranges(sp: SharePartition, offsets: list[int]) -> tuple[Acquired, ...]:
    """The acquired offsets as ranges of consecutive offsets with one delivery count."""
    out: list[Acquired] = []
    for offset in sorted(offsets):
        count = sp.records[offset].delivery_count
        if out and out[-1].last == offset - 1 and out[-1].delivery_count == count:
            out[-1] = Acquired(out[-1].first, offset, count)
        else:
            out.append(Acquired(offset, offset, count))
    return tuple(out)
