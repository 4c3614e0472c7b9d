"""Every broker's share coordinator (KIP-932's persister, Kafka's ``ShareCoordinatorService``
and its ``ShareCoordinatorShard``): the durable state of the share-partitions, kept in the
internal topic ``__share_group_state``. A share-partition's state lives in partition
``abs(String.hashCode("group:topicId:partition")) % share.coordinator.state.topic.num.partitions``
(Java's hash, so the partition is Kafka's), replicated
``share.coordinator.state.topic.replication.factor`` times; that partition's leader is its
share coordinator.

A coordinator keeps the state of the partitions it leads in memory, loaded from its
replica of the log when it becomes their leader (to the log's end, as Kafka loads): a
ShareSnapshot replaces a share-partition's state, a ShareUpdate is merged over it, a
tombstone removes it. A write (Kafka's WriteShareGroupState) appends a ShareSnapshot the
first time and after ``share.coordinator.snapshot.update.records.per.snapshot`` updates,
a ShareUpdate otherwise, acks=all to the partition's ISR; once durable, the state in
memory takes it. A write or read with a leader epoch older than the last one seen is
FENCED_LEADER_EPOCH: a share-partition's old leader cannot overwrite its new one. The
records are Kafka's (:mod:`.share_log`).

The log is pruned as Kafka's ShareCoordinatorOffsetsManager prunes it: below the oldest of
the share-partitions' latest ShareSnapshot (a tombstone counts as one, then its
share-partition is forgotten) every record is superseded, and every
``PRUNE_INTERVAL_MS`` (Kafka's internal ``share.coordinator.state.topic.prune.interval.ms``)
each coordinator moves its partitions' log start there with DeleteRecords.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.offsets_topic import partition_for
from purgatory.kafka.coordinator.share_log import (
    SHARE_GROUP_STATE_TOPIC,
    ShareKey,
    ShareState,
    StateBatch,
    combine,
    key_bytes,
    read_key,
    read_value,
    value_bytes,
)
from purgatory.kafka.coordinator.state_topic import StateTopic, append_error
from purgatory.sim import Cluster, ProduceRequest
from purgatory.sim.batches import EncodedBatch
from purgatory.sim.messages import DeleteRecordsRequest

logger = logging.getLogger("purgatory.kafka.share_state")

#: builds one ``__share_group_state`` record (key, value; None: a tombstone) as a Kafka batch
BatchEncoder = Callable[[bytes, bytes | None], EncodedBatch]
#: Kafka's defaults
NUM_PARTITIONS: Final = 50
REPLICATION_FACTOR: Final = 3
UPDATES_PER_SNAPSHOT: Final = 500
PRUNE_INTERVAL_MS: Final = 5 * 60 * 1000


@final
@dataclass(frozen=True, slots=True)
class ShareStateSettings:
    """The share coordinator's broker configs, by Kafka's names."""

    num_partitions: int = NUM_PARTITIONS  # share.coordinator.state.topic.num.partitions
    replication_factor: int = REPLICATION_FACTOR  # ...state.topic.replication.factor
    updates_per_snapshot: int = UPDATES_PER_SNAPSHOT  # ...snapshot.update.records.per.snapshot
    prune_interval_ms: int = PRUNE_INTERVAL_MS  # ...state.topic.prune.interval.ms (internal)


@final
@dataclass(slots=True)
class LoadedShard:
    """A ``__share_group_state`` partition a broker leads: the leader epoch it was loaded
    at, each share-partition's state, the updates written since its last snapshot, the
    newest leader epoch its writers and readers had, the offset of each one's latest
    snapshot, the offset below which every record is superseded (``redundant``) and where
    the log start was last moved (``pruned``)."""

    index: int
    epoch: int
    states: dict[ShareKey, ShareState] = field(default_factory=dict)
    updates: dict[ShareKey, int] = field(default_factory=dict)
    leader_epochs: dict[ShareKey, int] = field(default_factory=dict)
    snapshots: dict[ShareKey, int] = field(default_factory=dict)
    redundant: int = 0
    pruned: int = 0

    def replay(self, key: ShareKey, update: bool, value: bytes | None, offset: int) -> None:
        """Apply one record of the log, at ``offset`` (Kafka's
        ``ShareCoordinatorShard.replay``)."""
        if not update:
            self._snapshot_at(key, offset, deleted=not value)
        if not value:  # a tombstone: the share-partition's state was deleted
            self.states.pop(key, None)
            self.updates.pop(key, None)
            self.leader_epochs.pop(key, None)
            return
        state = read_value(value, update=update)
        self.leader_epochs[key] = max(self.leader_epochs.get(key, -1), state.leader_epoch)
        current = self.states.get(key)
        if not update or current is None:
            self.states[key] = state
            self.updates[key] = 0
            return
        start = current.start_offset if state.start_offset == -1 else state.start_offset
        self.states[key] = ShareState(
            current.snapshot_epoch,
            current.state_epoch,
            current.leader_epoch if state.leader_epoch == -1 else state.leader_epoch,
            start,
            combine(current.batches, state.batches, start),
        )
        self.updates[key] = self.updates.get(key, 0) + 1

    def _snapshot_at(self, key: ShareKey, offset: int, *, deleted: bool) -> None:
        """A snapshot (or tombstone) of ``key`` at ``offset`` supersedes its older records:
        the log is redundant below the oldest latest snapshot. A deleted share-partition
        writes nothing more, so it stops holding the log back."""
        self.snapshots[key] = offset
        self.redundant = max(self.redundant, min(self.snapshots.values()))
        if deleted:
            del self.snapshots[key]


@final
class ShareCoordinator:
    """Broker ``broker_id``'s share coordinator: the ``__share_group_state`` partitions it
    leads. ``batch`` encodes a record as a Kafka batch (else the simulation's entries,
    where a tombstone is an empty value)."""

    def __init__(
        self,
        broker_id: int,
        cluster: Cluster,
        settings: ShareStateSettings,
        batch: BatchEncoder | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.cluster = cluster
        self.settings = settings
        self._batch = batch
        self.shards: dict[int, LoadedShard] = {}

    def leads(self, index: int) -> int | None:
        """The leader epoch of partition ``index`` if this broker leads it (and runs)."""
        p = self.cluster.partition(SHARE_GROUP_STATE_TOPIC, index)
        if p is None or p.leader != self.broker_id or not self.cluster.is_running(self.broker_id):
            return None
        return p.leader_epoch

    def shard(self, index: int) -> LoadedShard | None:
        """Partition ``index`` as this broker leads it now, loaded first if it just became
        its leader; None if it does not lead it."""
        epoch = self.leads(index)
        if epoch is None:
            self.shards.pop(index, None)
            return None
        loaded = self.shards.get(index)
        if loaded is None or loaded.epoch != epoch:
            loaded = self._load(index, epoch)
        return loaded

    def elected_or_resigned(self) -> None:
        """Leadership changed: forget the partitions this broker no longer leads (their
        state leaves its memory); those it leads are loaded when first asked."""
        for index in list(self.shards):
            if self.leads(index) != self.shards[index].epoch:
                del self.shards[index]

    def _load(self, index: int, epoch: int) -> LoadedShard:
        """Rebuild partition ``index`` from this broker's replica of the log, to its end: a
        key of a version Kafka's format does not know is skipped."""
        loaded = LoadedShard(index, epoch)
        for record in self.cluster.replica_records(SHARE_GROUP_STATE_TOPIC, index, self.broker_id):
            found = None if record.key is None else read_key(record.key)
            if found is not None:
                loaded.replay(found[0], found[1], record.value, record.offset)
        self.shards[index] = loaded
        return loaded

    async def prune(self) -> int:
        """Move the log start of each partition this broker leads up to its redundant
        offset (DeleteRecords); the records removed."""
        removed = 0
        for index in list(self.shards):
            loaded = self.shard(index)
            if loaded is None or loaded.redundant <= loaded.pruned:
                continue
            target = loaded.redundant
            result = await self.cluster.delete_records(
                DeleteRecordsRequest(SHARE_GROUP_STATE_TOPIC, index, target)
            )
            if result.error is ErrorCode.NONE:
                removed += target - loaded.pruned
                loaded.pruned = target
            else:
                logger.info("pruning %s-%d: %s", SHARE_GROUP_STATE_TOPIC, index, result.error)
        return removed

    def _unfenced(self, index: int, key: ShareKey, leader_epoch: int) -> LoadedShard | ErrorCode:
        """Partition ``index`` for a reader or writer of ``key`` at ``leader_epoch``:
        NOT_COORDINATOR if this broker does not lead it, FENCED_LEADER_EPOCH if a newer
        leader of the share-partition has read or written it."""
        loaded = self.shard(index)
        if loaded is None:
            return ErrorCode.NOT_COORDINATOR
        if loaded.leader_epochs.get(key, -1) > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return loaded

    def read(self, index: int, key: ShareKey, leader_epoch: int) -> ShareState | ErrorCode | None:
        """ReadShareGroupState: the share-partition's state (None: it has none), or
        NOT_COORDINATOR, or FENCED_LEADER_EPOCH for a reader older than the last one. The
        reader's epoch is the newest now, fencing older writers."""
        loaded = self._unfenced(index, key, leader_epoch)
        if isinstance(loaded, ErrorCode):
            return loaded
        state = loaded.states.get(key)
        if state is not None:
            loaded.leader_epochs[key] = leader_epoch
        return state

    async def write(
        self,
        index: int,
        key: ShareKey,
        state_epoch: int,
        leader_epoch: int,
        start: int,
        batches: tuple[StateBatch, ...],
    ) -> ErrorCode:
        """WriteShareGroupState: append a ShareSnapshot (the first write, or one past
        ``updates_per_snapshot`` updates) or a ShareUpdate, acks=all; once durable, and
        while this broker still leads the partition at the epoch it loaded, the state in
        memory takes it."""
        loaded = self._unfenced(index, key, leader_epoch)
        if isinstance(loaded, ErrorCode):
            return loaded
        current = loaded.states.get(key)
        if current is not None and current.state_epoch > state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        update = (
            current is not None
            and loaded.updates.get(key, 0) < self.settings.updates_per_snapshot
            and current.state_epoch == state_epoch
        )
        if current is None or current.state_epoch != state_epoch:
            record = ShareState(0, state_epoch, leader_epoch, start, combine((), batches, start))
        elif update:
            record = ShareState(
                current.snapshot_epoch, 0, leader_epoch, start, combine((), batches, start)
            )
        else:
            record = ShareState(
                current.snapshot_epoch + 1,
                state_epoch,
                leader_epoch,
                start,
                combine(current.batches, batches, start),
            )
        return await self._append(loaded, key, update, value_bytes(record, update=update))

    async def delete(self, index: int, key: ShareKey) -> ErrorCode:
        """DeleteShareGroupState: a tombstone for the share-partition."""
        loaded = self.shard(index)
        if loaded is None:
            return ErrorCode.NOT_COORDINATOR
        return await self._append(loaded, key, False, None)

    async def _append(
        self, loaded: LoadedShard, key: ShareKey, update: bool, value: bytes | None
    ) -> ErrorCode:
        record = key_bytes(key, update=update)
        if self._batch is not None:
            request = ProduceRequest(
                SHARE_GROUP_STATE_TOPIC, loaded.index, [], acks=-1, wire=self._batch(record, value)
            )
        else:
            request = ProduceRequest(
                SHARE_GROUP_STATE_TOPIC, loaded.index, [(record, value or b"")], acks=-1
            )
        result = await self.cluster.produce(request)
        error = append_error(result.error)
        if error is not ErrorCode.NONE:
            return error
        if self.shard(loaded.index) is not loaded:
            return ErrorCode.NOT_COORDINATOR
        loaded.replay(key, update, value, result.base_offset)
        return ErrorCode.NONE


@final
class ShareCoordinators:
    """Every broker's share coordinator, and what routes a share-partition to its own:
    the topic (created on first write), the partition of a key, the leadership followed."""

    def __init__(
        self,
        cluster: Cluster,
        settings: ShareStateSettings | None = None,
        batch: BatchEncoder | None = None,
    ) -> None:
        self.cluster = cluster
        self.settings = ShareStateSettings() if settings is None else settings
        self.coordinators = {
            b: ShareCoordinator(b, cluster, self.settings, batch) for b in cluster.brokers
        }
        self.state_topic = StateTopic(
            cluster,
            SHARE_GROUP_STATE_TOPIC,
            self.settings.num_partitions,
            self.settings.replication_factor,
            self.coordinators,
        )
        self._pruner: asyncio.Task[None] | None = None

    @property
    def closed(self) -> bool:
        return self.state_topic.closed

    def partition_of(self, key: ShareKey) -> int:
        """Kafka's ``ShareCoordinatorService.partitionFor(key.asCoordinatorKey())``."""
        return partition_for(key.coordinator_key(), self.settings.num_partitions)

    def owner(self, key: ShareKey) -> ShareCoordinator | None:
        """The share coordinator of ``key``: its partition's running leader, if any."""
        p = self.cluster.partition(SHARE_GROUP_STATE_TOPIC, self.partition_of(key))
        if p is None or p.leader is None or not self.cluster.is_running(p.leader):
            return None
        return self.coordinators[p.leader]

    async def ensure_topic(self) -> ErrorCode:
        """Create ``__share_group_state`` on first use: ``num_partitions`` partitions,
        replication factor min(configured, brokers), records kept forever, pruned every
        ``prune_interval_ms`` from then on."""
        error = await self.state_topic.ensure()
        if error is ErrorCode.NONE and self._pruner is None and not self.closed:
            self._pruner = asyncio.get_running_loop().create_task(self._prune_every())
        return error

    async def prune(self) -> int:
        """Prune now (as the periodic prune does): every running share coordinator moves
        the log start of the partitions it leads past their superseded records; the
        records removed."""
        removed = 0
        for broker, coordinator in self.coordinators.items():
            if self.cluster.is_running(broker):
                removed += await coordinator.prune()
        return removed

    async def _prune_every(self) -> None:
        while True:
            await asyncio.sleep(self.settings.prune_interval_ms / 1000)
            try:
                await self.prune()
            except Exception:  # a prune that failed is tried again at the next interval
                logger.exception("pruning %s failed", SHARE_GROUP_STATE_TOPIC)

    def read(self, key: ShareKey, leader_epoch: int) -> ShareState | ErrorCode | None:
        """The persisted state of ``key`` (None: none, the topic not made yet included),
        or why it cannot be read now (COORDINATOR_NOT_AVAILABLE while its partition has
        no leader)."""
        if SHARE_GROUP_STATE_TOPIC not in self.cluster.topics:
            return None
        owner = self.owner(key)
        if owner is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return owner.read(self.partition_of(key), key, leader_epoch)

    async def write(
        self,
        key: ShareKey,
        state_epoch: int,
        leader_epoch: int,
        start: int,
        batches: tuple[StateBatch, ...],
    ) -> ErrorCode:
        error = await self.ensure_topic()
        if error is not ErrorCode.NONE:
            return error
        owner = self.owner(key)
        if owner is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return await owner.write(
            self.partition_of(key), key, state_epoch, leader_epoch, start, batches
        )

    async def delete(self, key: ShareKey) -> ErrorCode:
        if SHARE_GROUP_STATE_TOPIC not in self.cluster.topics:
            return ErrorCode.NONE
        owner = self.owner(key)
        if owner is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return await owner.delete(self.partition_of(key), key)

    def keys(self, group_id: str) -> list[ShareKey]:
        """The share-partitions of ``group_id`` with persisted state, in the partitions
        whose leaders run (each loaded first if need be)."""
        if SHARE_GROUP_STATE_TOPIC not in self.cluster.topics:
            return []
        found: list[ShareKey] = []
        for index in range(len(self.cluster.topics[SHARE_GROUP_STATE_TOPIC])):
            p = self.cluster.partition(SHARE_GROUP_STATE_TOPIC, index)
            if p is None or p.leader is None or not self.cluster.is_running(p.leader):
                continue
            shard = self.coordinators[p.leader].shard(index)
            if shard is not None:
                found += [k for k in shard.states if k.group_id == group_id]
        return found

    async def close(self) -> None:
        self.state_topic.close()
        if self._pruner is not None:
            self._pruner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pruner
            self._pruner = None
