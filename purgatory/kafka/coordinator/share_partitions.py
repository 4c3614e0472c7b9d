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
never handed out.

A share-partition's state is its leader's (Kafka's SharePartitionManager is per broker):
it is kept in memory for the leader and leader epoch that loaded it, and dropped when the
partition's leadership moves (a crashed leader's memory is gone). With a persister (the
share coordinators, :mod:`.share_state`) every change is written to
``__share_group_state`` (Kafka's WriteShareGroupState: the start offset and the state of
each record from it to the end, Available ones with their delivery count, Acknowledged
and Archived ones), and a new leader loads the share-partition from there (Kafka's
ReadShareGroupState): what was acknowledged stays so, and what was acquired is Available
again with its delivery count. An acknowledgement is answered once its write is durable
(:meth:`SharePartitions.written`); so is an acquisition, whose delivery count is written
with the records Available (a reload delivers them again, counted on). Without a
persister the state is in memory only, shared by the brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Hashable, Iterable
from typing import final

from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer
from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.share_log import (
    ACKNOWLEDGED,
    ARCHIVED,
    ShareKey,
    ShareState,
)
from purgatory.kafka.coordinator.share_records import (
    ACCEPT,
    FINAL,
    GAP,
    OPEN,
    REJECT,
    RELEASE,
    RENEW,
    Acknowledgement,
    Acquired,
    AcquisitionLock,
    InFlight,
    PartitionFetch,
    RecordState,
    ShareConfig,
    SharePartition,
    ShareSession,
    TopicPartition,
    next_epoch,
)
from purgatory.kafka.coordinator.share_state import ShareCoordinators
from purgatory.sim import Cluster
from purgatory.sim.partition import Partition


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
        #: each partition's leadership when the fetch parked: one that moved since is no
        #: longer the fetching broker's to acquire from
        self.owners = {tp: manager.leadership(*tp) for tp in wanted}

    def try_complete(self) -> bool:
        if not self.manager.acquirable(self.group_id, self.wanted):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        still = [tp for tp in self.wanted if self.manager.leadership(*tp) == self.owners[tp]]
        self.result = self.manager.acquire(self.group_id, self.member_id, still, self.max_records)
        for tp in self.wanted:
            if tp not in self.result:
                self.result[tp] = PartitionFetch(ErrorCode.NOT_LEADER_OR_FOLLOWER)


@final
class SharePartitions:
    """Every share-partition and share session of the cluster; one serves every broker
    (each answers for the partitions it leads). ``labels`` go on the ``ShareFetch``
    purgatory and the ``ShareLocks`` timer; ``clock`` is theirs (the coordinator's).
    ``persister`` (the share coordinators) keeps the state durable in
    ``__share_group_state``, and then each share-partition is its leader's: held for the
    leader and leader epoch that loaded it, loaded again by the next; without one the
    state is in memory only, shared by the brokers."""

    def __init__(
        self,
        cluster: Cluster,
        config: ShareConfig | None = None,
        labels: dict[str, str] | None = None,
        clock: Callable[[], float] | None = None,
        persister: ShareCoordinators | None = None,
    ) -> None:
        self.cluster = cluster
        self.persister = persister
        self.config = ShareConfig() if config is None else config
        #: a group's settings: the broker's (``config``) unless the front door sets this to
        #: read the group's own configs (``share.*`` set on its GROUP resource)
        self.group_config: Callable[[str], ShareConfig] = lambda _group: self.config
        self.fetches: DelayedOperationPurgatory[DelayedShareFetch] = DelayedOperationPurgatory(
            "ShareFetch", labels=labels, clock=clock
        )
        self.locks = SystemTimer("ShareLocks", clock=clock)
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        #: the share sessions, by (broker, group, member): each broker keeps its own, as
        #: Kafka's ShareSessionCache is per broker, so a member fetching from two leaders
        #: has two sessions with their own epochs
        self.sessions: dict[tuple[int, str, str], ShareSession] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._watching = False
        self.closed = False
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
        self.closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        self.locks.close()
        await self.fetches.shutdown()
        for sp in list(self.partitions.values()):  # the writes not done: never answered
            if sp.writing is not None and not sp.writing.done():
                sp.writing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sp.writing

    def _on_high_watermark(self, p: Partition, old: int, new: int) -> None:
        if self.fetches.watched:
            self.fetches.check_and_complete_nowait(("hw", p.topic, p.index))

    # -- sessions ----------------------------------------------------------------------------

    def session(
        self,
        broker_id: int,
        group_id: str,
        member_id: str,
        epoch: int,
        *,
        acknowledge: bool = False,
    ) -> tuple[ErrorCode, ShareSession | None]:
        """The share session with broker ``broker_id`` a ShareFetch (ShareAcknowledge:
        ``acknowledge``) with ``epoch`` belongs to, as Kafka's ShareSessionCache checks it:
        epoch 0 opens one (in place of the member's old one with that broker;
        ShareAcknowledge cannot open one), -1 names the last request of one, any other must
        be the session's next epoch. ``group.share.max.share.sessions`` bounds each
        broker's sessions, as Kafka bounds its cache."""
        key = (broker_id, group_id, member_id)
        if epoch == OPEN:
            if acknowledge:
                return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
            old = self.sessions.pop(key, None)
            if old is not None:
                self._release_member(group_id, member_id, old.partitions)
            held = sum(1 for b, _g, _m in self.sessions if b == broker_id)
            if held >= self.config.max_sessions:
                return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None
            opened = self.sessions[key] = ShareSession(group_id, member_id, broker_id, 0)
            return ErrorCode.NONE, opened
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch != FINAL and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        return ErrorCode.NONE, session

    def next_epoch(self, session: ShareSession) -> None:
        session.epoch = next_epoch(session.epoch)

    def close_session(self, session: ShareSession) -> None:
        """The session's last request was served: it goes, and the records its member
        still holds in its partitions are released."""
        key = (session.broker_id, session.group_id, session.member_id)
        if self.sessions.get(key) is session:
            del self.sessions[key]
        self._release_member(session.group_id, session.member_id, session.partitions)

    def member_removed(self, group_id: str, member_id: str) -> None:
        """A share group's member left (or its session ended). A member with an open
        share session keeps it (a consumer leaves the group before its last
        ShareAcknowledge): its records are released when that closes it, or by their
        locks; without one, the records it holds are released now."""
        if any(g == group_id and m == member_id for _b, g, m in self.sessions):
            return
        partitions = [(t, i) for g, t, i in self.partitions if g == group_id]
        self._release_member(group_id, member_id, partitions)

    def group_deleted(self, group_id: str) -> None:
        """DeleteGroups took the share group: its share-partitions go."""
        for key in [(group_id, t, i) for t, i in self.initialized(group_id)]:
            self._forget(key, durable=True)

    # -- the admin's offsets (DescribeShareGroupOffsets, Alter..., Delete...) ---------------

    def initialized(self, group_id: str) -> list[TopicPartition]:
        """The partitions ``group_id`` has share-partition state for, in order: in memory
        or, with a persister, in ``__share_group_state``."""
        found = {(t, i) for g, t, i in self.partitions if g == group_id}
        if self.persister is not None:
            for key in self.persister.keys(group_id):
                topic = self.cluster.topic_name(key.topic_id)
                if topic is not None:
                    found.add((topic, key.partition))
        return sorted(found)

    def start_and_lag(self, group_id: str, topic: str, index: int) -> tuple[int, int] | None:
        """The share-partition's start offset and its lag (the records up to where a
        fetch may read not yet acknowledged or archived: those in flight and those not
        yet looked at); None where the group has no state for the partition."""
        if self.persister is None:
            sp = self.partitions.get((group_id, topic, index))
        else:
            sp = self._share_partition(group_id, topic, index, create=False)
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
        key = (group_id, topic, index)
        old = self._share_partition(group_id, topic, index, create=False)
        self._forget(key, durable=start < 0)
        if start >= 0:
            p = self.cluster.partition(topic, index)
            sp = self.partitions[key] = SharePartition(
                group_id,
                topic,
                index,
                start,
                start,
                topic_id=self.cluster.topic_id(topic),
                leader=-1 if p is None or p.leader is None else p.leader,
                leader_epoch=-1 if p is None else p.leader_epoch,
                state_epoch=0 if old is None else old.state_epoch + 1,
                writing=None if old is None else old.writing,
            )
            self._persist(sp)

    def forget(self, group_id: str, topic: str) -> bool:
        """DeleteShareGroupOffsets: the group's share-partitions of ``topic`` go; False if
        it had none."""
        keys = [(group_id, t, i) for t, i in self.initialized(group_id) if t == topic]
        for key in keys:
            self._forget(key, durable=True)
        return bool(keys)

    def _forget(self, key: tuple[str, str, int], *, durable: bool = False) -> None:
        """The share-partition leaves memory; ``durable``: its persisted state is deleted
        too (a tombstone)."""
        sp = self.partitions.pop(key, None)
        if sp is not None:
            for record in sp.records.values():
                if record.lock is not None:
                    record.lock.cancel()
        if durable and self.persister is not None:
            topic_id = self.cluster.topic_id(key[1]) if sp is None else sp.topic_id
            if topic_id is not None:
                self._spawn_delete(ShareKey(key[0], topic_id, key[2]), sp)

    # -- durability ----------------------------------------------------------------------

    def leadership(self, topic: str, index: int) -> tuple[int, int]:
        """The partition's leader and leader epoch now ((-1, -1) without one)."""
        p = self.cluster.partition(topic, index)
        if p is None or p.leader is None:
            return -1, -1
        return p.leader, p.leader_epoch

    def _owned(self, sp: SharePartition) -> bool:
        """Whether ``sp`` is the state of the partition's leader now (always, without a
        persister: the brokers share it)."""
        if self.persister is None or sp.leader == -1:
            return True
        return (sp.leader, sp.leader_epoch) == self.leadership(sp.topic, sp.index)

    def _watch_leadership(self) -> None:
        if self._watching or self.closed or self.cluster.closed or self.persister is None:
            return
        self._watching = True
        self.cluster.call_on_change(self._leadership_changed)

    def _leadership_changed(self) -> None:
        """Leadership moved: the share-partitions whose leader changed leave the old
        leader's memory (their locks with them) and are loaded by the new one."""
        self._watching = False
        if self.closed:
            return
        for key, sp in list(self.partitions.items()):
            if (sp.leader, sp.leader_epoch) != self.leadership(key[1], key[2]):
                self._share_partition(*key, create=False)
        self._watch_leadership()

    def _persist(self, sp: SharePartition) -> None:
        """Write the share-partition's state now (after the writes before it)."""
        if self.persister is None or sp.topic_id is None:
            return
        key = ShareKey(sp.group_id, sp.topic_id, sp.index)
        start, batches = sp.start, sp.state_batches()
        previous = sp.writing
        persister = self.persister

        async def write() -> ErrorCode:
            if previous is not None:
                await asyncio.wait([previous])
            return await persister.write(key, sp.state_epoch, sp.leader_epoch, start, batches)

        sp.writing = asyncio.get_running_loop().create_task(write())
        self._watch_leadership()

    def _spawn_delete(self, key: ShareKey, sp: SharePartition | None = None) -> None:
        previous = None if sp is None else sp.writing
        persister = self.persister
        if persister is None:
            return

        async def delete() -> ErrorCode:
            if previous is not None:
                await asyncio.wait([previous])
            return await persister.delete(key)

        task = asyncio.get_running_loop().create_task(delete())
        if sp is not None:
            sp.writing = task

    async def written(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Wait until what was changed in these share-partitions is written to
        ``__share_group_state``; each one's error (COORDINATOR_NOT_AVAILABLE where its
        share coordinator is missing or the write did not reach its ISR)."""
        out: dict[TopicPartition, ErrorCode] = {}
        tasks: dict[TopicPartition, asyncio.Task[ErrorCode] | None] = {}
        for topic, index in partitions:  # the writes of now, before any share-partition moves
            sp = self.partitions.get((group_id, topic, index))
            tasks[(topic, index)] = None if sp is None else sp.writing
        for (topic, index), task in tasks.items():
            error = ErrorCode.NONE
            if task is not None:
                await asyncio.wait([task])
                error = task.result() if not task.cancelled() else ErrorCode.NOT_COORDINATOR
            if error in (ErrorCode.NOT_COORDINATOR, ErrorCode.FENCED_LEADER_EPOCH):
                error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            out[(topic, index)] = error
        return out

    def _loaded(
        self, group_id: str, topic: str, index: int, p: Partition, topic_id: uuid.UUID | None
    ) -> tuple[SharePartition | None, bool]:
        """The share-partition as the partition's leader loads it, and whether it was
        persisted: from its persisted state, if any (None while that cannot be read), else
        where ``share.auto.offset.reset`` says."""
        state: ShareState | None = None
        if self.persister is not None and topic_id is not None:
            read = self.persister.read(ShareKey(group_id, topic_id, index), p.leader_epoch)
            if isinstance(read, ErrorCode):
                return None, False
            state = read
        assert p.leader is not None
        if state is None:
            if self.group_config(group_id).auto_offset_reset == "earliest":
                start = p.leader_log.log_start_offset
            else:
                start = self._readable_end(p, group_id)
            fresh = SharePartition(
                group_id,
                topic,
                index,
                start,
                start,
                topic_id=topic_id,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
            )
            return fresh, False
        sp = SharePartition(
            group_id,
            topic,
            index,
            state.start_offset,
            state.start_offset,
            topic_id=topic_id,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            state_epoch=state.state_epoch,
        )
        limit = self.group_config(group_id).delivery_count_limit
        for batch in state.batches:
            for offset in range(max(batch.first, sp.start), batch.last + 1):
                if batch.state == 0 and batch.count < limit:
                    sp.records[offset] = InFlight(RecordState.AVAILABLE, batch.count)
                else:  # left the window (delivered as often as allowed: Archived)
                    sp.done[offset] = (batch.state or ARCHIVED, batch.count)
            sp.end = max(sp.end, batch.last + 1)
        sp.advance()
        return sp, True

    # -- acquiring ---------------------------------------------------------------------------

    def _share_partition(
        self, group_id: str, topic: str, index: int, *, create: bool = True
    ) -> SharePartition | None:
        """The share-partition as its leader holds it: loaded if the leader has not yet
        (its leadership moved, or it was never read); ``create``: made afresh if nothing
        was persisted (else None then)."""
        key = (group_id, topic, index)
        sp = self.partitions.get(key)
        topic_id = self.cluster.topic_id(topic)
        p = self.cluster.partition(topic, index)
        owned = self.persister is None or (
            sp is not None
            and p is not None
            and p.leader is not None
            and (sp.leader, sp.leader_epoch) in ((p.leader, p.leader_epoch), (-1, -1))
        )
        if sp is not None and sp.topic_id == topic_id and owned:
            if sp.leader == -1 and p is not None and p.leader is not None:
                sp.leader, sp.leader_epoch = p.leader, p.leader_epoch
            return sp
        if sp is not None:  # the topic was made again, or the state was another leader's
            self._forget(key)
        if p is None or p.leader is None:
            return None
        sp, persisted = self._loaded(group_id, topic, index, p, topic_id)
        if sp is None or not (create or persisted):
            return None
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
            self._persist(sp)  # the delivery counts, the records Available should it crash
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
        acknowledgements applies); a GAP is archived. Records acquired from an earlier
        leader are Available to this one: INVALID_RECORD_STATE."""
        sp = self._share_partition(group_id, topic, index, create=False)
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
                state = ACKNOWLEDGED if kind == ACCEPT else ARCHIVED
                sp.done[offset] = (state, record.delivery_count)
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
        if planned:
            self._persist(sp)
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
            sp.done[offset] = (ARCHIVED, record.delivery_count)
            return False
        record.state = RecordState.AVAILABLE
        return True

    def _drop(self, sp: SharePartition, offset: int) -> None:
        record = sp.records.pop(offset)
        self._unlock(record, offset)

    def expire_lock(self, lock: AcquisitionLock) -> None:
        """An acquisition lock expired: its records still acquired are released."""
        sp = lock.sp
        if self.partitions.get((sp.group_id, sp.topic, sp.index)) is not sp:
            lock.offsets.clear()  # the state of a leader that is no longer
            return
        released = False
        for offset in sorted(lock.offsets):
            record = sp.records.get(offset)
            if record is not None and record.lock is lock:
                released |= self._release(sp, offset)
        lock.offsets.clear()
        sp.advance()
        self._persist(sp)
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
            if sp is None or not self._owned(sp):
                continue  # a moved leader's records: the new one holds them Available
            released = changed = False
            for offset in sorted(sp.records):
                record = sp.records[offset]
                if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                    self._unlock(record, offset)
                    released |= self._release(sp, offset)
                    changed = True
            sp.advance()
            if changed:
                self._persist(sp)
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
        """Acquire now, or park until something can be acquired or ``max_wait_ms``;
        answered once the acquisitions' delivery counts are written (a write that fails
        does not fail the fetch: Kafka does not write acquisitions)."""
        if max_wait_ms <= 0 or not wanted or self.acquirable(group_id, wanted):
            result = self.acquire(group_id, member_id, wanted, max_records)
        else:
            op = DelayedShareFetch(max_wait_ms, self, group_id, member_id, wanted, max_records)
            keys: list[Hashable] = [("hw", t, i) for t, i in wanted]
            keys += [("released", group_id, t, i) for t, i in wanted]
            await self.fetches.park(op, keys)
            result = op.result
        await self.written(group_id, [tp for tp, got in result.items() if got.acquired])
        return result


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
