"""The records of ``__share_group_state`` in Kafka's binary format (its share coordinator's
``ShareCoordinatorRecordSerde``), so that Kafka's own tools read them. Each key and value
is prefixed with its int16 version; the key's version names the record's type.

ShareSnapshotKey (version 0) and ShareUpdateKey (version 1): the group id (int16 length,
UTF-8), the topic id (16 bytes), the partition (int32).

ShareSnapshotValue v0 (flexible): snapshot epoch (uint16), state epoch (int32), leader
epoch (int32), start offset (int64), the state batches (a compact array); ShareUpdateValue
v0 (flexible) the same without the state epoch (a start offset of -1: not updated). A
state batch is its first and last offsets (int64), delivery state (int8: 0 Available, 2
Acknowledged, 4 Archived) and delivery count (int16), then its tagged fields (none). A
snapshot is the share-partition's whole state; an update the batches that changed since,
merged over it (:func:`combine`) as Kafka's ``PersisterStateBatchCombiner`` does.
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass, field
from typing import Final

#: Kafka's name for it (``Topic.SHARE_GROUP_STATE_TOPIC_NAME``)
SHARE_GROUP_STATE_TOPIC: Final = "__share_group_state"
#: the key versions, each a record type (``ShareCoordinator.SHARE_*_RECORD_KEY_VERSION``)
SNAPSHOT_KEY_VERSION: Final = 0
UPDATE_KEY_VERSION: Final = 1
VALUE_VERSION: Final = 0
#: the delivery states a state batch holds (Kafka's ``RecordState`` ids)
AVAILABLE: Final = 0
ACKNOWLEDGED: Final = 2
ARCHIVED: Final = 4

_INT16: Final = struct.Struct(">h")
_KEY_TAIL: Final = struct.Struct(">16si")  # topic id, partition
_SNAPSHOT_HEAD: Final = struct.Struct(">Hiiq")  # snapshot epoch, state epoch, leader epoch, start
_UPDATE_HEAD: Final = struct.Struct(">Hiq")  # snapshot epoch, leader epoch, start
_BATCH: Final = struct.Struct(">qqbh")  # first, last, delivery state, delivery count


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Offsets ``first``..``last``, all in one delivery state with one delivery count
    (Kafka's ``PersisterStateBatch``)."""

    first: int
    last: int
    state: int
    count: int


@dataclass(frozen=True, slots=True)
class ShareKey:
    """One share-partition: a share group's view of one topic partition (by topic id)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's ``SharePartitionKey.asCoordinatorKey()``: ``group:topicId:partition``,
        the topic id as Kafka prints a Uuid (URL-safe base64, unpadded); its Java hash
        places the share-partition on ``__share_group_state``."""
        topic = base64.urlsafe_b64encode(self.topic_id.bytes).rstrip(b"=").decode()
        return f"{self.group_id}:{topic}:{self.partition}"


@dataclass(frozen=True, slots=True)
class ShareState:
    """A share-partition's persisted state (Kafka's ``ShareGroupOffset``): the record of a
    snapshot, or (``state_epoch`` unused) of an update."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = field(default=())


def key_bytes(key: ShareKey, *, update: bool = False) -> bytes:
    """The ShareSnapshotKey (ShareUpdateKey with ``update``) of ``key``."""
    group = key.group_id.encode()
    version = UPDATE_KEY_VERSION if update else SNAPSHOT_KEY_VERSION
    return (
        _INT16.pack(version)
        + _INT16.pack(len(group))
        + group
        + _KEY_TAIL.pack(key.topic_id.bytes, key.partition)
    )


def read_key(data: bytes) -> tuple[ShareKey, bool] | None:
    """The share-partition of a key and whether it is an update's; None for a key version
    this does not know (Kafka's loader skips it). ValueError if it does not decode."""
    if len(data) < 4:
        raise ValueError(f"a {len(data)}-byte key")
    (version,) = _INT16.unpack_from(data)
    if version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION):
        return None
    (length,) = _INT16.unpack_from(data, 2)
    if length < 0 or len(data) != 4 + length + _KEY_TAIL.size:
        raise ValueError(f"a {len(data)}-byte key with a {length}-byte group id")
    group = data[4 : 4 + length].decode()
    topic, partition = _KEY_TAIL.unpack_from(data, 4 + length)
    return ShareKey(group, uuid.UUID(bytes=topic), partition), version == UPDATE_KEY_VERSION


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def value_bytes(state: ShareState, *, update: bool = False) -> bytes:
    """The ShareSnapshotValue (ShareUpdateValue with ``update``) of ``state``."""
    out = bytearray(_INT16.pack(VALUE_VERSION))
    if update:
        out += _UPDATE_HEAD.pack(state.snapshot_epoch, state.leader_epoch, state.start_offset)
    else:
        out += _SNAPSHOT_HEAD.pack(
            state.snapshot_epoch, state.state_epoch, state.leader_epoch, state.start_offset
        )
    out += _uvarint(len(state.batches) + 1)
    for b in state.batches:
        out += _BATCH.pack(b.first, b.last, b.state, b.count)
        out += b"\x00"  # the batch's tagged fields: none
    out += b"\x00"  # the value's tagged fields: none
    return bytes(out)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: struct.Struct) -> tuple[int, ...]:
        if self.pos + fmt.size > len(self.data):
            raise ValueError(f"record ends at {len(self.data)}, wanted {self.pos + fmt.size}")
        values = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return values

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise ValueError("record ends inside a varint")
            byte = self.data[self.pos]
            self.pos += 1
            n |= (byte & 0x7F) << shift
            if byte < 0x80:
                return n
            shift += 7
            if shift > 28:
                raise ValueError("varint longer than 5 bytes")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            size = self.uvarint()
            if self.pos + size > len(self.data):
                raise ValueError("record ends inside a tagged field")
            self.pos += size


def read_value(data: bytes, *, update: bool = False) -> ShareState:
    """The state a ShareSnapshotValue (ShareUpdateValue with ``update``: state epoch 0)
    holds. ValueError for another version or bytes that do not decode."""
    reader = _Reader(data)
    (version,) = reader.take(_INT16)
    if version != VALUE_VERSION:
        raise ValueError(f"unknown share state value version {version}")
    if update:
        snapshot_epoch, leader_epoch, start = reader.take(_UPDATE_HEAD)
        state_epoch = 0
    else:
        snapshot_epoch, state_epoch, leader_epoch, start = reader.take(_SNAPSHOT_HEAD)
    count = reader.uvarint() - 1
    if count < 0:
        raise ValueError("null state batches")
    batches = []
    for _ in range(count):
        first, last, state, deliveries = reader.take(_BATCH)
        reader.skip_tags()
        batches.append(StateBatch(first, last, state, deliveries))
    reader.skip_tags()
    if reader.pos != len(data):
        raise ValueError(f"{len(data) - reader.pos} bytes past the record's end")
    return ShareState(snapshot_epoch, state_epoch, leader_epoch, start, tuple(batches))


def combine(
    current: tuple[StateBatch, ...], new: tuple[StateBatch, ...], start: int
) -> tuple[StateBatch, ...]:
    """The batches of ``current`` with ``new`` over them (a newer batch's offsets take its
    state), those before ``start`` dropped, adjacent offsets of one state and count joined
    (Kafka's ``PersisterStateBatchCombiner``)."""
    by_offset: dict[int, tuple[int, int]] = {}
    for batch in (*current, *new):
        for offset in range(max(batch.first, start), batch.last + 1):
            by_offset[offset] = (batch.state, batch.count)
    return batches_of(by_offset)


def batches_of(by_offset: dict[int, tuple[int, int]]) -> tuple[StateBatch, ...]:
    """Offsets' (state, count) as batches of consecutive offsets alike, in order."""
    out: list[StateBatch] = []
    for offset in sorted(by_offset):
        state, count = by_offset[offset]
        last = out[-1] if out else None
        if (
            last is not None
            and last.last == offset - 1
            and (last.state, last.count)
            == (
                state,
                count,
            )
        ):
            out[-1] = StateBatch(last.first, offset, state, count)
        else:
            out.append(StateBatch(offset, offset, state, count))
    return tuple(out)
