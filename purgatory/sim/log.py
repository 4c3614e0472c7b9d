"""One replica's log: record batches in offset order, in memory.

Batches are shared between replicas (a follower appends the leader's batch object), and
each batch is stamped with the leader epoch that wrote it, which is how a replica finds
where its log diverges from a new leader's (Kafka's leader-epoch truncation, KIP-101).

Memory is the scarce resource here (Kafka's is disk): every log of a cluster counts what
its batches hold in one :class:`LogSpace`, which may refuse a produce that would pass a
cap, and each log applies its topic's retention (:class:`LogConfig`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol, final

from purgatory.sim.errors import ErrorCode, SimulationError
from purgatory.sim.validate import check_int

# Per-record overhead counted in sizes, so that empty values still occupy bytes.
RECORD_OVERHEAD = 8
# What a stored record costs in memory beyond its key and value bytes (its Record tuple and
# offset int, the bytes objects' headers, its slot in the batch), and a batch beyond its
# records (the batch object, its records tuple, the log's index entries). Measured with
# tracemalloc on CPython 3.11, 64-bit: up to 189 bytes for a keyed record, 139 without a
# key, 198 a batch; tests/sim/test_sim_retention.py keeps the estimate above the measurement.
RECORD_MEMORY: Final = 192
BATCH_MEMORY: Final = 256


class Record(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes


_new_record = tuple.__new__


class EncodedBatch(Protocol):
    """Records as a client's wire protocol encoded them (a Kafka record batch), kept with
    the stored batch so that the protocol's front door serves them back byte-exact. The
    simulation never reads them: it tells them, once, where the log put them."""

    @property
    def buf(self) -> bytearray:
        """The bytes, as stored."""
        ...

    def assign(self, base_offset: int, leader_epoch: int) -> None:
        """Record in the bytes the offset and leader epoch the log gave the batch."""
        ...


def record_size(key: bytes | None, value: bytes) -> int:
    return RECORD_OVERHEAD + len(value) + (0 if key is None else len(key))


def _memory(size: int, records: int, wire: bytearray | None) -> int:
    """A batch's memory from its ``size`` (``record_size`` summed) and record count."""
    extra = records * (RECORD_MEMORY - RECORD_OVERHEAD) + BATCH_MEMORY
    return size + extra + (0 if wire is None else len(wire))


@dataclass(frozen=True, slots=True)
class LogConfig:
    """A topic's retention, as Kafka's ``retention.bytes`` and ``retention.ms`` (-1: none).

    Only whole batches below the high watermark go, oldest first: by size, while the
    partition's log stays at least ``retention_bytes`` without the batch; by time, once a
    batch was appended more than ``retention_ms`` ago."""

    retention_bytes: int = -1
    retention_ms: int = -1

    def __post_init__(self) -> None:
        check_int("retention_bytes", self.retention_bytes, -1)
        check_int("retention_ms", self.retention_ms, -1)

    @property
    def retains(self) -> bool:
        """Whether retention ever deletes anything."""
        return self.retention_bytes >= 0 or self.retention_ms >= 0


@final
class LogSpace:
    """The memory held by every log of a cluster (each batch counted once, however many
    replicas share it), against an optional cap: the server's ``--max-stored-bytes``."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int | None = None) -> None:
        if limit is not None:
            check_int("max_stored_bytes", limit, 1)
        self.limit = limit
        self.used = 0

    def reserve(self, batch: RecordBatch) -> None:
        """Count ``batch``'s memory; ``KAFKA_STORAGE_ERROR`` (nothing counted) if it would
        pass the cap."""
        need = batch.memory
        limit = self.limit
        if limit is not None and self.used + need > limit:
            raise SimulationError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"storing {need} more bytes would pass the cap of {limit} stored bytes "
                f"({self.used} in use): delete records, or wait for retention",
            )
        self.used += need

    def __repr__(self) -> str:
        return f"<LogSpace used={self.used} limit={self.limit}>"


@final
class RecordBatch:
    """Records appended together by one leader in one epoch."""

    __slots__ = (
        "append_ms",
        "base_offset",
        "end_offset",
        "epoch",
        "holders",
        "memory",
        "records",
        "size",
        "wire",
    )

    def __init__(
        self,
        base_offset: int,
        epoch: int,
        records: tuple[Record, ...],
        size: int,
        wire: bytearray | None = None,
        append_ms: float = 0.0,
    ):
        self.base_offset = base_offset
        #: one past the last offset
        self.end_offset = base_offset + len(records)
        self.epoch = epoch
        self.records = records
        self.size = size
        #: the batch as a Kafka client sent it (record batch v2), if one did: the Kafka
        #: front door serves it back byte-exact; the simulation never reads it
        self.wire = wire
        #: the leader's clock (ms) when it appended the batch: time-based retention
        self.append_ms = append_ms
        #: what holding the batch costs in memory (``size`` counts RECORD_OVERHEAD a record)
        self.memory = _memory(size, len(records), wire)
        #: how many logs hold the batch: its memory is freed with the last one
        self.holders = 0

    def __repr__(self) -> str:
        return f"<RecordBatch [{self.base_offset}, {self.end_offset}) epoch={self.epoch}>"


_NO_RETENTION: Final = LogConfig()


@final
class Log:
    """Append-only batches plus a log start offset; ``leo`` is the log end offset.

    ``config`` is its topic's retention; ``space`` counts the memory its batches hold
    (shared by the logs of a cluster; by default, a space of its own with no cap)."""

    __slots__ = (
        "_batches",
        "_cum",
        "_ends",
        "_total",
        "config",
        "leo",
        "log_start_offset",
        "space",
    )

    def __init__(self, config: LogConfig = _NO_RETENTION, space: LogSpace | None = None) -> None:
        self.config = config
        self.space = LogSpace() if space is None else space
        self._batches: list[RecordBatch] = []
        self._ends: list[int] = []  # end offset of each batch, for bisect
        self._cum: list[int] = []  # running byte total through each batch (never rebased)
        self._total = 0
        self.leo = 0
        self.log_start_offset = 0

    # -- writing --------------------------------------------------------------------------

    def append(
        self,
        entries: Sequence[tuple[bytes | None, bytes]],
        epoch: int,
        wire: EncodedBatch | None = None,
        now_ms: float = 0.0,
    ) -> RecordBatch:
        """Append records as the leader at ``now_ms``; returns the new batch (carrying
        ``wire``'s bytes, told their offset and epoch). Raises ``KAFKA_STORAGE_ERROR``,
        appending nothing, if the batch would pass the space's cap."""
        base = self.leo
        size = RECORD_OVERHEAD * len(entries)
        records = []
        offset = base
        for key, value in entries:  # the hot path: tuple.__new__ skips NamedTuple's lambda
            records.append(_new_record(Record, (offset, key, value)))
            size += len(value) if key is None else len(value) + len(key)
            offset += 1
        end = offset
        stored = None if wire is None else wire.buf
        batch = RecordBatch(base, epoch, tuple(records), size, stored, now_ms)
        self.space.reserve(batch)
        if wire is not None:
            wire.assign(base, epoch)  # once: the batch keeps its offset and epoch
        batch.holders = 1
        self._batches.append(batch)
        self._ends.append(end)
        self._total += size
        self._cum.append(self._total)
        self.leo = end
        return batch

    def append_batch(self, batch: RecordBatch) -> None:
        """Append a batch copied from the leader; it must start at our log end."""
        if batch.base_offset != self.leo:
            raise ValueError(f"batch starts at {batch.base_offset}, log ends at {self.leo}")
        batch.holders += 1
        if batch.holders == 1:
            self.space.used += batch.memory
        self._batches.append(batch)
        self._ends.append(batch.end_offset)
        self._total += batch.size
        self._cum.append(self._total)
        self.leo = batch.end_offset

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or above ``offset``."""
        if offset >= self.leo:
            return
        offset = max(offset, 0)
        batches = self._batches
        while batches and batches[-1].base_offset >= offset:
            dropped = batches.pop()
            self._ends.pop()
            self._cum.pop()
            self._total -= dropped.size
            self._release((dropped,))
        if batches and batches[-1].end_offset > offset:  # split the straddling batch
            last = batches.pop()
            self._ends.pop()
            self._cum.pop()
            self._total -= last.size
            self._release((last,))
            kept = last.records[: offset - last.base_offset]
            size = sum(record_size(r.key, r.value) for r in kept)
            self.leo = last.base_offset
            split = RecordBatch(last.base_offset, last.epoch, kept, size, None, last.append_ms)
            self.append_batch(split)
        self.leo = offset
        if self.log_start_offset > offset:
            self.log_start_offset = offset

    def reset_to(self, offset: int) -> None:
        """Drop everything and restart the log at ``offset`` (a follower that fell behind
        the leader's log start)."""
        self._release(self._batches)
        self._batches.clear()
        self._ends.clear()
        self._cum.clear()
        self.leo = self.log_start_offset = offset

    def delete_before(self, offset: int) -> None:
        """Advance the log start offset (DeleteRecords); whole batches below it go."""
        if offset <= self.log_start_offset:
            return
        if offset > self.leo:
            raise ValueError(f"log start {offset} beyond log end {self.leo}")
        self.log_start_offset = offset
        gone = bisect_right(self._ends, offset)
        if gone:
            self._release(self._batches[:gone])
            del self._batches[:gone]
            del self._ends[:gone]
            del self._cum[:gone]

    def apply_retention(self, high_watermark: int, now_ms: float) -> bool:
        """Drop the oldest whole batches below ``high_watermark`` that its config's
        retention lets go (see :class:`LogConfig`); True if the log start moved."""
        config = self.config
        batches = self._batches
        n = 0
        if config.retention_ms >= 0:
            oldest_kept = now_ms - config.retention_ms
            while (
                n < len(batches)
                and batches[n].end_offset <= high_watermark
                and batches[n].append_ms < oldest_kept
            ):
                n += 1
        if config.retention_bytes >= 0:
            excess = self.size_bytes - sum(b.size for b in batches[:n]) - config.retention_bytes
            while (
                n < len(batches)
                and batches[n].end_offset <= high_watermark
                and excess >= batches[n].size
            ):
                excess -= batches[n].size
                n += 1
        if n == 0:
            return False
        self.delete_before(batches[n - 1].end_offset)
        return True

    def _release(self, batches: Iterable[RecordBatch]) -> None:
        """This log lets go of ``batches``: free what no other log holds."""
        space = self.space
        for batch in batches:
            batch.holders -= 1
            if batch.holders == 0:
                space.used -= batch.memory

    # -- reading --------------------------------------------------------------------------

    def bytes_between(self, start: int, end: int) -> int:
        """Bytes of the records in ``[start, end)``."""
        if end <= start:
            return 0
        ends = self._ends
        i = bisect_right(ends, start)  # first batch ending after start
        j = bisect_left(ends, end)  # batch holding end - 1
        if i >= len(ends):
            return 0
        j = min(j, len(ends) - 1)
        first = self._batches[i]
        total = self._cum[j] - self._cum[i] + first.size
        if first.base_offset < start:  # a partial first batch: count exactly
            skip = first.records[: start - first.base_offset]
            total -= sum(record_size(r.key, r.value) for r in skip)
        last = self._batches[j]
        if last.end_offset > end:
            tail = last.records[end - last.base_offset :]
            total -= sum(record_size(r.key, r.value) for r in tail)
        return total

    def read_batches(self, start: int, end: int, max_bytes: int) -> list[RecordBatch]:
        """Whole batches from the one holding ``start``, starting below ``end``, of at
        most ``max_bytes`` in all but at least one (Kafka's rule, so a fetch always makes
        progress). Bisects over offsets and running byte totals: no per-batch loop."""
        ends = self._ends
        n = len(ends)
        # Followers and caught-up consumers read the tail: look there before bisecting.
        if n >= 2 and ends[-2] <= start < ends[-1]:
            i = n - 1
        else:
            i = bisect_right(ends, start)
            if i >= n:
                return []
        batches = self._batches
        if batches[i].base_offset >= end:
            return []
        if i == n - 1:
            return [batches[i]]
        cum = self._cum
        limit = cum[i] - batches[i].size + max_bytes
        j = max(bisect_right(cum, limit, i), i + 1)  # within max_bytes, at least one
        k = n if end >= ends[-1] else bisect_left(ends, end, i) + 1  # batches below end
        return batches[i : min(j, k)]

    def read_records(self, start: int, end: int, max_bytes: int) -> list[Record]:
        """Records in ``[start, end)`` from whole batches of at most ``max_bytes`` in all
        (but at least one batch), as Kafka answers a fetch."""
        out: list[Record] = []
        for batch in self.read_batches(start, end, max_bytes):
            records = batch.records
            if batch.base_offset < start or batch.end_offset > end:
                lo = max(start - batch.base_offset, 0)
                records = records[lo : end - batch.base_offset]
            out.extend(records)
        return out

    def record_at(self, offset: int) -> Record | None:
        if not self.log_start_offset <= offset < self.leo:
            return None
        i = bisect_right(self._ends, offset)
        batch = self._batches[i]
        return batch.records[offset - batch.base_offset]

    def epoch_at(self, offset: int) -> int | None:
        """The epoch of the batch holding ``offset``, or None if it is not in the log."""
        i = bisect_right(self._ends, offset)
        if i >= len(self._batches) or self._batches[i].base_offset > offset:
            return None
        return self._batches[i].epoch

    def divergence_offset(self, leader: Log) -> int:
        """Where this log stops agreeing with ``leader``'s: the truncation point.

        Two logs that hold a batch of the same epoch at an offset hold the same records
        up to there (only one leader writes per epoch), so scan back from the shorter end.
        """
        offset = min(self.leo, leader.leo)
        while offset > self.log_start_offset:
            mine = self.epoch_at(offset - 1)
            theirs = leader.epoch_at(offset - 1)
            if mine is not None and mine == theirs:
                return offset
            offset -= 1
        return offset

    @property
    def batches(self) -> int:
        return len(self._batches)

    @property
    def size_bytes(self) -> int:
        """Bytes of the records in the log (``record_size`` each)."""
        if not self._batches:
            return 0
        return self._total - (self._cum[0] - self._batches[0].size)

    def __repr__(self) -> str:
        return f"<Log [{self.log_start_offset}, {self.leo}) batches={len(self._batches)}>"
