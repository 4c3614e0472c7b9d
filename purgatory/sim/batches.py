"""Record batches, as a log holds them: records appended together by one leader in one
epoch (:class:`RecordBatch`), decoded or kept as a Kafka client's wire bytes (an
:class:`EncodedBatch`), opaque: the log reads its header only (record count, producer
fields), and its records are decoded when someone reads them as key/value pairs (the HTTP
API). Its size is its length in bytes, as Kafka counts a batch; its memory what holding it
costs. A transaction marker is a control batch, one control record as Kafka's
``EndTransactionMarker`` spells it (:func:`marker_of` reads it).

Batches are shared between replicas (a follower appends the leader's batch object), and
each is stamped with the leader epoch that wrote it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple, Protocol, final

from purgatory.errors import ErrorCode
from purgatory.sim.errors import SimulationError
from purgatory.sim.producers import NO_PRODUCER_ID, EndTxnMarker, ProducedBatch

# Per-record overhead counted in sizes, so that empty values still occupy bytes.
RECORD_OVERHEAD = 8
# What a stored record costs in memory beyond its key and value bytes (its Record tuple and
# offset int, the bytes objects' headers, its slot in the batch), and a batch beyond its
# records (the batch object, its records tuple, the log's index entries). Measured with
# tracemalloc on CPython 3.11, 64-bit: up to 189 bytes for a keyed record, 139 without a
# key, 206 a batch before the cleaner's three fields (24 more);
# tests/sim/test_sim_retention.py keeps the estimate above the measurement.
RECORD_MEMORY: Final = 192
BATCH_MEMORY: Final = 304

# A batch's attributes, as Kafka's record batch v2 spells them (bits 4 and 5).
TRANSACTIONAL: Final = 0x10
CONTROL: Final = 0x20
# A control record's key: version int16 0, type int16 (Kafka's ControlRecordType);
# an end-transaction marker's value: version int16 0, coordinator epoch int32.
_CONTROL_KEY: Final = struct.Struct(">hh")
_MARKER_VALUE: Final = struct.Struct(">hi")
_ABORT: Final = 0
_COMMIT: Final = 1


class Record(NamedTuple):
    """One record of a partition's log: its offset, key (None: no key) and value."""

    offset: int
    key: bytes | None
    value: bytes


_new_record = tuple.__new__


class EncodedBatch(Protocol):
    """Records as a client's wire protocol encoded them (a Kafka record batch), stored as
    they came so that the protocol's front door serves them back byte-exact. The
    simulation reads only its header fields, tells it once where the log put it, and
    decodes its records only when they are read as key/value pairs."""

    @property
    def buf(self) -> bytearray:
        """The bytes, as stored."""
        ...

    @property
    def record_count(self) -> int: ...

    @property
    def producer_id(self) -> int:
        """An idempotent producer's id; -1 for none."""
        ...

    @property
    def producer_epoch(self) -> int: ...

    @property
    def base_sequence(self) -> int:
        """The producer's sequence number of the first record."""
        ...

    @property
    def transactional(self) -> bool:
        """Whether the batch belongs to its producer's transaction (KIP-98)."""
        ...

    def assign(self, base_offset: int, leader_epoch: int) -> None:
        """Record in the bytes the offset and leader epoch the log gave the batch."""
        ...

    def key_values(self) -> list[tuple[bytes | None, bytes]]:
        """The records as (key, value) pairs; ValueError if they do not decode."""
        ...

    def compaction_view(self) -> list[tuple[int, bytes | None, bool]]:
        """Each record's offset, key and whether its value is null (a tombstone), for the
        log cleaner; ValueError if they do not decode."""
        ...

    def retained(self, offsets: Sequence[int], delete_horizon_ms: int | None) -> EncodedBatch:
        """The batch with only the records at ``offsets`` (none: an empty batch, its
        header kept), as Kafka's cleaner rewrites a batch: base offset, producer fields
        and codec kept; ``delete_horizon_ms`` marked in it (Kafka's delete horizon)."""
        ...


def record_size(key: bytes | None, value: bytes) -> int:
    return RECORD_OVERHEAD + len(value) + (0 if key is None else len(key))


#: (producer id, epoch, base sequence) of a batch no idempotent producer wrote
NO_PRODUCER: Final = (NO_PRODUCER_ID, -1, -1)


class BatchAttributes:
    """What a batch's attributes say of it (Kafka's record batch v2 bits), for the stored
    batches here and the wire batches of the Kafka front door."""

    __slots__ = ()
    attributes: int

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL)

    @property
    def control(self) -> bool:
        """A control batch (a transaction marker): clients skip it."""
        return bool(self.attributes & CONTROL)


@final
class RecordBatch(BatchAttributes):
    """Records appended together by one leader in one epoch: decoded records (the
    simulation's and the HTTP API's), or a Kafka client's batch as it came
    (:meth:`encoded`)."""

    __slots__ = (
        "_encoded",
        "_offsets",
        "_records",
        "append_ms",
        "attributes",
        "base_offset",
        "base_sequence",
        "cleaned",
        "count",
        "delete_horizon_ms",
        "end_offset",
        "epoch",
        "holders",
        "memory",
        "producer_epoch",
        "producer_id",
        "size",
        "wire",
    )

    def __init__(
        self,
        base_offset: int,
        epoch: int,
        records: tuple[Record, ...],
        size: int,
        append_ms: float = 0.0,
        producer: tuple[int, int, int] = NO_PRODUCER,
        attributes: int = 0,
    ):
        self._records: tuple[Record, ...] | None = records
        self._encoded: EncodedBatch | None = None
        self.base_offset = base_offset
        #: how many records; one past the last offset
        self.count = len(records)
        self.end_offset = base_offset + self.count
        self.epoch = epoch
        #: ``record_size`` summed over the records (a Kafka batch: its length in bytes)
        self.size = size
        #: the batch as a Kafka client sent it (record batch v2), if one did: the Kafka
        #: front door serves it back byte-exact
        self.wire: bytearray | None = None
        #: the leader's clock (ms) when it appended the batch: time-based retention
        self.append_ms = append_ms
        #: the idempotent producer that wrote it (-1: none), its epoch, the first
        #: record's sequence number
        self.producer_id, self.producer_epoch, self.base_sequence = producer
        #: TRANSACTIONAL and CONTROL bits, as in a Kafka batch's attributes
        self.attributes = attributes
        #: what holding the batch costs in memory
        self.memory = size + self.count * (RECORD_MEMORY - RECORD_OVERHEAD) + BATCH_MEMORY
        #: how many logs hold the batch: its memory is freed with the last one
        self.holders = 0
        #: when the cleaner may remove its tombstones (or the marker it is) at the
        #: earliest (Kafka's delete horizon); None until a clean sets it
        self.delete_horizon_ms: int | None = None
        #: a cleaned Kafka batch's record offsets (None: consecutive from the base)
        self._offsets: tuple[int, ...] | None = None
        #: what the cleaner last made of it, for the next replica that cleans it alike
        self.cleaned: tuple[object, RecordBatch] | None = None

    @classmethod
    def encoded(
        cls, base_offset: int, epoch: int, wire: EncodedBatch, append_ms: float = 0.0
    ) -> RecordBatch:
        """A batch that keeps a Kafka client's bytes and decodes nothing until read."""
        batch = cls.__new__(cls)
        batch._records = None
        batch._encoded = wire
        batch.wire = buf = wire.buf
        batch.base_offset = base_offset
        batch.count = count = wire.record_count
        batch.end_offset = base_offset + count
        batch.epoch = epoch
        batch.size = len(buf)
        batch.append_ms = append_ms
        batch.producer_id = wire.producer_id
        batch.producer_epoch = wire.producer_epoch
        batch.base_sequence = wire.base_sequence
        batch.attributes = TRANSACTIONAL if wire.transactional else 0
        batch.memory = len(buf) + BATCH_MEMORY
        batch.holders = 0
        batch.delete_horizon_ms = None
        batch._offsets = None
        batch.cleaned = None
        return batch

    @classmethod
    def marker(
        cls,
        base_offset: int,
        epoch: int,
        producer: tuple[int, int],
        marker: EndTxnMarker,
        append_ms: float = 0.0,
    ) -> RecordBatch:
        """A transaction marker of ``producer`` (id, epoch): a control batch of one
        control record, Kafka's ``EndTransactionMarker`` (key: version 0 and type, 1
        commit or 0 abort; value: version 0 and the coordinator's epoch)."""
        key = _CONTROL_KEY.pack(0, _COMMIT if marker.commit else _ABORT)
        value = _MARKER_VALUE.pack(0, marker.coordinator_epoch)
        record = _new_record(Record, (base_offset, key, value))
        return cls(
            base_offset,
            epoch,
            (record,),
            record_size(key, value),
            append_ms,
            (producer[0], producer[1], -1),
            TRANSACTIONAL | CONTROL,
        )

    @property
    def records(self) -> tuple[Record, ...]:
        """The records; a Kafka client's batch is decoded on each read (not kept: that
        would double its memory). ``CORRUPT_MESSAGE`` if its records do not decode
        (only a batch forged under a valid checksum)."""
        records = self._records
        if records is not None:
            return records
        assert self._encoded is not None
        try:
            pairs = self._encoded.key_values()
        except ValueError as exc:
            raise SimulationError(
                ErrorCode.CORRUPT_MESSAGE, f"batch at offset {self.base_offset}: {exc}"
            ) from None
        offsets = self._offsets
        if offsets is not None:
            return tuple(
                [_new_record(Record, (o, k, v)) for o, (k, v) in zip(offsets, pairs, strict=True)]
            )
        base = self.base_offset
        return tuple(
            [_new_record(Record, (base + i, key, value)) for i, (key, value) in enumerate(pairs)]
        )

    @property
    def sparse(self) -> bool:
        """Whether the cleaner removed records inside it: its offsets have gaps."""
        return self.count != self.end_offset - self.base_offset

    def compaction_view(self) -> list[tuple[int, bytes | None, bool]]:
        """Each record's offset, key and whether its value is null (a tombstone; records
        written over HTTP have none)."""
        encoded = self._encoded
        if encoded is None:
            return [(r.offset, r.key, False) for r in self.records]
        try:
            return encoded.compaction_view()
        except ValueError as exc:
            raise SimulationError(
                ErrorCode.CORRUPT_MESSAGE, f"batch at offset {self.base_offset}: {exc}"
            ) from None

    def filtered(self, offsets: Sequence[int], delete_horizon_ms: int | None) -> RecordBatch:
        """The batch with only the records at ``offsets``, as Kafka's cleaner writes it:
        the base offset, epoch, producer fields and attributes kept; its last offset the
        last record's (an empty batch keeps its own, as Kafka keeps an empty batch's)."""
        end = offsets[-1] + 1 if offsets else self.end_offset
        encoded = self._encoded
        if encoded is not None:
            wire = encoded.retained(offsets, delete_horizon_ms)
            batch = RecordBatch.encoded(self.base_offset, self.epoch, wire, self.append_ms)
            batch._offsets = tuple(offsets)
        else:
            wanted = set(offsets)
            kept = tuple(r for r in self.records if r.offset in wanted)
            size = sum(record_size(r.key, r.value) for r in kept)
            producer = (self.producer_id, self.producer_epoch, self.base_sequence)
            batch = RecordBatch(self.base_offset, self.epoch, kept, size, self.append_ms, producer)
        batch.attributes = self.attributes
        batch.end_offset = end
        batch.delete_horizon_ms = delete_horizon_ms
        return batch

    def bytes_in(self, start: int, end: int) -> int:
        """Bytes of the records in ``[start, end)``: counted exactly for decoded records,
        a Kafka batch's bytes shared evenly between its records."""
        lo = max(start, self.base_offset)
        hi = min(end, self.end_offset)
        if hi <= lo:
            return 0
        if lo == self.base_offset and hi == self.end_offset:
            return self.size
        records = self._records
        if records is None:
            return self.size * (hi - lo) // (self.end_offset - self.base_offset)
        if self.sparse:
            return sum(record_size(r.key, r.value) for r in records if lo <= r.offset < hi)
        base = self.base_offset
        return sum(record_size(r.key, r.value) for r in records[lo - base : hi - base])

    def __repr__(self) -> str:
        return f"<RecordBatch [{self.base_offset}, {self.end_offset}) epoch={self.epoch}>"


def records_in(batches: Iterable[RecordBatch], start: int, end: int) -> list[Record]:
    """The records of ``batches`` (consecutive) in ``[start, end)``."""
    out: list[Record] = []
    for batch in batches:
        records = batch.records
        if batch.base_offset < start or batch.end_offset > end:
            if batch.sparse:
                records = tuple(r for r in records if start <= r.offset < end)
            else:
                lo = max(start - batch.base_offset, 0)
                records = records[lo : end - batch.base_offset]
        out.extend(records)
    return out


def marker_of(batch: ProducedBatch) -> EndTxnMarker | None:
    """The transaction marker ``batch`` holds; None for a data batch (or a control batch
    that is no end-transaction marker)."""
    assert isinstance(batch, RecordBatch)
    if not batch.attributes & CONTROL or not batch.count:
        return None
    record = batch.records[0]
    if record.key is None or len(record.key) < 4 or len(record.value) < 6:
        return None
    kind = _CONTROL_KEY.unpack_from(record.key)[1]
    if kind not in (_ABORT, _COMMIT):
        return None
    return EndTxnMarker(kind == _COMMIT, _MARKER_VALUE.unpack_from(record.value)[1])
