"""The records of KIP-932's share-partitions (:mod:`.share_partitions` keeps and changes
them): the acknowledgement types and share-session epochs as the wire carries them, a
record in flight, one share group's view of one topic partition with what it persists
(:meth:`SharePartition.state_batches`), and what a ShareFetch acquired and a ShareFetch or
ShareAcknowledge acknowledged."""

from __future__ import annotations

import asyncio
import enum
import uuid
from dataclasses import dataclass, field
from typing import Final, Protocol, final

from purgatory import TimerTask
from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.share_log import ARCHIVED, StateBatch, batches_of
from purgatory.sim.batches import RecordBatch

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
    #: the lock the record is Acquired under
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
    #: the partition's leader and leader epoch this state belongs to (-1: any)
    leader: int = -1
    leader_epoch: int = -1
    #: the state epoch (AlterShareGroupOffsets starts a new one)
    state_epoch: int = 0
    #: the records past the start that left the window: (Acknowledged or Archived, count)
    done: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: the last write of this state to ``__share_group_state`` (each waits for the one before)
    writing: asyncio.Task[ErrorCode] | None = None

    def advance(self) -> None:
        """The start moves past the records that left the window."""
        self.start = min(self.records, default=self.end)
        for offset in [o for o in self.done if o < self.start]:
            del self.done[offset]

    def state_batches(self) -> tuple[StateBatch, ...]:
        """The state from the start to the end, as Kafka persists it: in flight Available
        (whatever its lock) with its delivery count, left Acknowledged or Archived; an
        offset never handed out (a transaction marker, an aborted record) Archived."""
        by_offset: dict[int, tuple[int, int]] = {}
        for offset in range(self.start, self.end):
            record = self.records.get(offset)
            if record is not None:
                by_offset[offset] = (0, record.delivery_count)
            else:
                by_offset[offset] = self.done.get(offset, (ARCHIVED, 0))
        return batches_of(by_offset)


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
    """A member's share session with one broker (an entry of that broker's
    ShareSessionCache): its next epoch and the partitions it fetches there."""

    group_id: str
    member_id: str
    broker_id: int
    epoch: int = 1
    partitions: dict[TopicPartition, None] = field(default_factory=dict)
    #: the id the member named each topic by: a topic deleted and made again under its
    #: name is another topic, which this session does not fetch
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= (1 << 31) - 1 else epoch + 1


class LockExpiry(Protocol):
    """What an expired acquisition lock tells (the share-partitions)."""

    def expire_lock(self, lock: AcquisitionLock) -> None: ...


@final
class AcquisitionLock(TimerTask):
    """The lock of the records one ShareFetch acquired in one share-partition."""

    def __init__(
        self, delay_ms: int, manager: LockExpiry, sp: SharePartition, offsets: set[int]
    ) -> None:
        super().__init__(delay_ms)
        self.manager = manager
        self.sp = sp
        self.offsets = offsets

    def run(self) -> None:
        self.manager.expire_lock(self)
