"""One replica's log: record batches (:mod:`purgatory.sim.batches`) in offset order, in
memory.

Each batch is stamped with the leader epoch that wrote it, which is how a replica finds
where its log diverges from a new leader's (Kafka's leader-epoch truncation, KIP-101).

Memory is the scarce resource here (Kafka's is disk): every log of a cluster counts what
its batches hold in one :class:`LogSpace`, which may refuse a produce that would pass a
cap, and each log applies its topic's retention (:class:`LogConfig`).

Each log also keeps its idempotent producers' state (:class:`ProducerStates`) and its
transactions (:class:`Transactions`: ongoing ones, and the aborted-transactions index),
read from the headers of the batches it holds, so every replica knows them. A
transaction marker is a control batch the log writes itself (:meth:`Log.append_marker`),
one control record as Kafka's ``EndTransactionMarker`` spells it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Final, final

from purgatory.errors import ErrorCode
from purgatory.sim.batches import (
    CONTROL,
    RECORD_OVERHEAD,
    TRANSACTIONAL,
    EncodedBatch,
    Record,
    RecordBatch,
    marker_of,
    record_size,
    records_in,
)
from purgatory.sim.errors import SimulationError
from purgatory.sim.producers import (
    NO_PRODUCER_ID,
    EndTxnMarker,
    ProducerStates,
    Transactions,
)
from purgatory.sim.validate import check_int

__all__ = ["LONG_MAX", "Log", "LogConfig", "LogSpace"]

_new_record = tuple.__new__

#: Java's Long.MAX_VALUE: Kafka's max.compaction.lag.ms default (no lag forces a clean)
LONG_MAX: Final = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    """A topic's retention, as Kafka's ``retention.bytes`` and ``retention.ms`` (-1: none),
    and its ``min.insync.replicas`` (None: the broker's).

    Only whole batches below the high watermark go, oldest first: by size, while the
    partition's log stays at least ``retention_bytes`` without the batch; by time, once a
    batch was appended more than ``retention_ms`` ago. Retention applies when the
    ``cleanup.policy`` has ``delete`` (``delete``); compaction when it has ``compact``
    (``compact``: :mod:`purgatory.sim.cleaner`), with Kafka's ``segment.bytes``,
    ``segment.ms``, ``delete.retention.ms``, ``min.compaction.lag.ms``,
    ``max.compaction.lag.ms`` and ``min.cleanable.dirty.ratio``."""

    retention_bytes: int = -1
    retention_ms: int = -1
    min_insync_replicas: int | None = None
    compact: bool = False
    delete: bool = True
    segment_bytes: int = 1 << 30
    segment_ms: int = 604_800_000
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

    def __post_init__(self) -> None:
        check_int("retention_bytes", self.retention_bytes, -1)
        check_int("retention_ms", self.retention_ms, -1)
        if self.min_insync_replicas is not None:
            check_int("min_insync_replicas", self.min_insync_replicas, 1)
        check_int("segment_bytes", self.segment_bytes, 1)
        check_int("segment_ms", self.segment_ms, 1)
        check_int("delete_retention_ms", self.delete_retention_ms, 0)
        check_int("min_compaction_lag_ms", self.min_compaction_lag_ms, 0)
        check_int("max_compaction_lag_ms", self.max_compaction_lag_ms, 1)
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError(
                f"min_cleanable_dirty_ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio}"
            )

    @property
    def retains(self) -> bool:
        """Whether retention ever deletes anything."""
        return self.delete and (self.retention_bytes >= 0 or self.retention_ms >= 0)


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


_NO_RETENTION: Final = LogConfig()


@final
class Log:
    """Append-only batches plus a log start offset; ``leo`` is the log end offset.

    ``config`` is its topic's retention; ``space`` counts the memory its batches hold
    (shared by the logs of a cluster; by default, a space of its own with no cap)."""

    __slots__ = (
        "_active_bytes",
        "_batches",
        "_cum",
        "_ends",
        "_roll_ms",
        "_segments",
        "_total",
        "config",
        "first_dirty",
        "generation",
        "leo",
        "log_start_offset",
        "producers",
        "space",
        "txns",
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
        #: the idempotent producers that wrote the batches held here
        self.producers = ProducerStates()
        #: the transactions of the batches held here (ongoing, and the aborted index)
        self.txns = Transactions()
        #: the base offset of each segment, the last the active one (Kafka's segments, as
        #: coarse as compaction needs: segment.bytes and segment.ms roll them)
        self._segments: list[int] = [0]
        #: the active segment's bytes, and its first batch's append time (None: empty)
        self._active_bytes = 0
        self._roll_ms: float | None = None
        #: where the cleaner's next pass starts (Kafka's cleaner checkpoint)
        self.first_dirty = 0
        #: moves on each truncation or reset: a clean begun before one is abandoned
        self.generation = 0

    # -- writing --------------------------------------------------------------------------

    def append(
        self,
        entries: Sequence[tuple[bytes | None, bytes]],
        epoch: int,
        wire: EncodedBatch | None = None,
        now_ms: float = 0.0,
    ) -> RecordBatch:
        """Append records as the leader at ``now_ms`` (``wire``: a Kafka client's batch
        instead, told its offset and epoch); returns the new batch. For an idempotent
        producer's batch already in the log (a retry), returns that batch and appends
        nothing; a sequence the producer's state refuses raises :class:`SimulationError`
        (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH), as does passing the
        space's cap (KAFKA_STORAGE_ERROR), appending nothing."""
        base = self.leo
        if wire is not None and entries:
            raise ValueError("records come as entries or as one wire batch, not both")
        if wire is None:
            size = RECORD_OVERHEAD * len(entries)
            records = []
            offset = base
            for key, value in entries:  # the hot path: tuple.__new__ skips NamedTuple's lambda
                records.append(_new_record(Record, (offset, key, value)))
                size += len(value) if key is None else len(value) + len(key)
                offset += 1
            batch = RecordBatch(base, epoch, tuple(records), size, now_ms)
        else:
            if wire.producer_id != NO_PRODUCER_ID:
                done = self.producers.check(
                    wire.producer_id, wire.producer_epoch, wire.base_sequence, wire.record_count
                )
                if done is not None:
                    assert isinstance(done, RecordBatch)
                    return done
                if not wire.transactional and wire.producer_id in self.txns.ongoing:
                    # Kafka's ProducerAppendInfo: a producer in a transaction writes
                    # transactional batches until its marker
                    raise SimulationError(
                        ErrorCode.INVALID_TXN_STATE,
                        f"producer {wire.producer_id} wrote a non-transactional batch "
                        "during its transaction",
                    )
            batch = RecordBatch.encoded(base, epoch, wire, now_ms)
        self.space.reserve(batch)
        if wire is not None:
            wire.assign(base, epoch)  # once: the batch keeps its offset and epoch
            self._track(batch)
        return self._store(batch)

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: EndTxnMarker,
        epoch: int,
        now_ms: float = 0.0,
    ) -> RecordBatch:
        """Append a transaction marker of ``producer_id`` at ``producer_epoch`` as the
        leader in ``epoch`` (Kafka's WriteTxnMarkers): it ends the producer's ongoing
        transaction here, if any. :class:`SimulationError` (INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR) appends nothing."""
        self.producers.check_marker(producer_id, producer_epoch, marker.coordinator_epoch)
        batch = RecordBatch.marker(self.leo, epoch, (producer_id, producer_epoch), marker, now_ms)
        self.space.reserve(batch)
        self._track(batch)
        return self._store(batch)

    def _maybe_roll(self, batch: RecordBatch) -> None:
        """Roll a new active segment at ``batch`` if it would pass ``segment.bytes`` or
        comes ``segment.ms`` after the active segment's first batch (Kafka's shouldRoll,
        by the batches' append times); then count it in the active segment."""
        roll_ms = self._roll_ms
        if roll_ms is None:
            self._roll_ms = batch.append_ms
        elif (
            self._active_bytes + batch.size > self.config.segment_bytes
            or batch.append_ms - roll_ms > self.config.segment_ms
        ):
            self._segments.append(batch.base_offset)
            self._roll_ms = batch.append_ms
            self._active_bytes = 0
        self._active_bytes += batch.size

    def roll(self) -> None:
        """Start a new active segment at the log end (nothing if the active one is empty)."""
        if self._roll_ms is not None:
            self._segments.append(self.leo)
            self._roll_ms = None
            self._active_bytes = 0

    def _recount_active(self) -> None:
        """Read the active segment's bytes and first append time again."""
        active = self._segments[-1]
        i = bisect_right(self._ends, active)
        if i >= len(self._batches):
            self._active_bytes = 0
            self._roll_ms = None
            return
        first = self._batches[i]
        self._active_bytes = self._total - (self._cum[i] - first.size)
        self._roll_ms = first.append_ms

    def _store(self, batch: RecordBatch) -> RecordBatch:
        """Put ``batch`` (its space reserved) at the end of the log."""
        self._maybe_roll(batch)
        batch.holders = 1
        self._batches.append(batch)
        self._ends.append(batch.end_offset)
        self._total += batch.size
        self._cum.append(self._total)
        self.leo = batch.end_offset
        return batch

    def _track(self, batch: RecordBatch) -> None:
        """Read a producer's batch into the producer and transaction state."""
        if batch.attributes & CONTROL:
            marker = marker_of(batch)
            self.producers.record(batch, marker)
            if marker is not None:
                self.txns.complete(batch.producer_id, batch.base_offset, not marker.commit)
            return
        self.producers.record(batch)
        if batch.attributes & TRANSACTIONAL:
            self.txns.begin(batch.producer_id, batch.base_offset)

    def append_batch(self, batch: RecordBatch) -> None:
        """Append a batch copied from the leader; it must start at our log end, or after
        it where the leader's cleaner left a gap."""
        if batch.base_offset < self.leo:
            raise ValueError(f"batch starts at {batch.base_offset}, log ends at {self.leo}")
        self._maybe_roll(batch)
        batch.holders += 1
        if batch.holders == 1:
            self.space.used += batch.memory
        self._batches.append(batch)
        self._ends.append(batch.end_offset)
        self._total += batch.size
        self._cum.append(self._total)
        self.leo = batch.end_offset
        if batch.producer_id != NO_PRODUCER_ID:
            self._track(batch)

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or above ``offset``."""
        if offset >= self.leo:
            return
        offset = max(offset, 0)
        self.generation += 1
        self.txns.truncate(offset)
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
            self.leo = last.base_offset
            try:
                kept = last.records[: offset - last.base_offset]
            except SimulationError:  # a client's batch whose records do not decode: all go
                offset = last.base_offset
            else:
                size = sum(record_size(r.key, r.value) for r in kept)
                producer = (last.producer_id, last.producer_epoch, last.base_sequence)
                self.append_batch(
                    RecordBatch(
                        last.base_offset,
                        last.epoch,
                        kept,
                        size,
                        last.append_ms,
                        producer,
                        last.attributes,
                    )
                )
        self.leo = offset
        if self.log_start_offset > offset:
            self.log_start_offset = offset
        segments = self._segments
        while len(segments) > 1 and segments[-1] >= offset:
            segments.pop()
        segments[0] = min(segments[0], offset)
        self._recount_active()
        self.first_dirty = min(self.first_dirty, offset)
        if len(self.producers):
            self.producers.rebuild(batches, marker_of)

    def reset_to(self, offset: int) -> None:
        """Drop everything and restart the log at ``offset`` (a follower that fell behind
        the leader's log start)."""
        self._release(self._batches)
        self._batches.clear()
        self._ends.clear()
        self._cum.clear()
        self.leo = self.log_start_offset = offset
        self.producers.rebuild(())
        self.txns.clear()
        self.generation += 1
        self._segments = [offset]
        self._recount_active()
        self.first_dirty = offset

    def delete_before(self, offset: int) -> None:
        """Advance the log start offset (DeleteRecords, retention); whole batches below it
        go. The producers keep their state, as in Kafka (expiry and truncation drop it); completed
        transactions whose marker went leave the index, an open one stays."""
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
            self.txns.drop_before(offset)
        segments = self._segments
        drop = bisect_right(segments, offset) - 1  # the segment holding the new start stays
        if drop > 0:
            del segments[:drop]
        if segments[-1] <= offset:
            self._recount_active()

    def remove_expired_producers(self, now_ms: float, expiration_ms: int) -> int:
        """Forget the producers idle for ``expiration_ms`` at ``now_ms`` (Kafka's
        ``producer.id.expiration.ms``) with no transaction open here; how many went."""
        if not len(self.producers):
            return 0
        return self.producers.remove_expired(now_ms, expiration_ms, self.txns.ongoing)

    def apply_retention(self, high_watermark: int, now_ms: float) -> bool:
        """Drop the oldest whole batches below ``high_watermark`` that its config's
        retention lets go (see :class:`LogConfig`); True if the log start moved."""
        config = self.config
        if not config.delete:  # cleanup.policy=compact: retention deletes nothing
            return False
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

    def replace_cleaned(
        self,
        originals: Sequence[RecordBatch],
        cleaned: Sequence[RecordBatch | None],
        end: int,
        generation: int,
        kept_txns: Container[int],
    ) -> bool:
        """Swap in what the cleaner made of ``originals`` (the log's first batches when it
        began, all below ``end``): each one's cleaned batch (itself if unchanged), or None
        for one that goes. Batches retention or DeleteRecords removed meanwhile stay
        removed; False (nothing changed) if the log was truncated or reset meanwhile.
        Completed transactions below ``end`` stay in the index only if their marker's
        offset is in ``kept_txns``. The cleaned segments are merged while they fit in
        ``segment.bytes`` (Kafka's groupSegmentsBySize); the next pass starts at ``end``."""
        if generation != self.generation:
            return False
        batches = self._batches
        n = len(originals)
        skip = 0  # the originals deleted from the head meanwhile
        while skip < n and (not batches or batches[0] is not originals[skip]):
            skip += 1
        if any(batches[i - skip] is not originals[i] for i in range(skip, n)):
            return False
        space = self.space
        new: list[RecordBatch] = []
        for original, result in zip(originals[skip:], cleaned[skip:], strict=True):
            if result is original:
                new.append(original)
                continue
            original.holders -= 1
            if original.holders == 0:
                space.used -= original.memory
            if result is not None:
                result.holders += 1
                if result.holders == 1:
                    space.used += result.memory
                new.append(result)
        new += batches[n - skip :]
        self._batches = new
        self._ends = [b.end_offset for b in new]
        self._cum = list(accumulate(b.size for b in new))
        self._total = self._cum[-1] if new else 0
        self.txns.completed = [
            t for t in self.txns.completed if t.last_offset >= end or t.last_offset in kept_txns
        ]
        self._group_segments(end)
        self.first_dirty = end
        return True

    def _group_segments(self, end: int) -> None:
        """Merge the cleaned segments (wholly below ``end``) while each group's bytes fit
        in ``segment.bytes``."""
        segments = self._segments
        cleaned = bisect_right(segments, end) - 1  # segments before the one holding end
        if cleaned < 2:
            return
        limit = self.config.segment_bytes
        grouped = [segments[0]]
        size = self.bytes_between(segments[0], segments[1])
        for i in range(1, cleaned):
            nxt = self.bytes_between(segments[i], segments[i + 1])
            if size + nxt <= limit:
                size += nxt
            else:
                grouped.append(segments[i])
                size = nxt
        self._segments = grouped + segments[cleaned:]

    @property
    def segments(self) -> list[int]:
        """Each segment's base offset, the active one last."""
        return list(self._segments)

    def segment_stats(self, start: int) -> list[tuple[int, int, float, float]]:
        """Each non-active segment from the one holding ``start``: (base offset, bytes,
        first and last batch's append time; both -1 for an empty one)."""
        segments = self._segments
        out = []
        for i in range(max(bisect_right(segments, start) - 1, 0), len(segments) - 1):
            lo, hi = segments[i], segments[i + 1]
            a = bisect_right(self._ends, lo)
            b = bisect_left(self._ends, hi)
            b = min(b, len(self._batches) - 1)
            if a >= len(self._batches) or self._batches[a].base_offset >= hi:
                out.append((lo, 0, -1.0, -1.0))
                continue
            while b > a and self._batches[b].base_offset >= hi:
                b -= 1
            out.append(
                (
                    lo,
                    self.bytes_between(lo, hi),
                    self._batches[a].append_ms,
                    self._batches[b].append_ms,
                )
            )
        return out

    def batches_between(self, start: int, end: int) -> list[RecordBatch]:
        """The batches holding offsets in ``[start, end)``."""
        i = bisect_right(self._ends, start)
        out = []
        batches = self._batches
        while i < len(batches) and batches[i].base_offset < end:
            out.append(batches[i])
            i += 1
        return out

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
        if first.base_offset < start:  # a partial first batch
            total -= first.bytes_in(first.base_offset, start)
        last = self._batches[j]
        if last.end_offset > end:
            total -= last.bytes_in(end, last.end_offset)
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
        return records_in(self.read_batches(start, end, max_bytes), start, end)

    def record_at(self, offset: int) -> Record | None:
        if not self.log_start_offset <= offset < self.leo:
            return None
        i = bisect_right(self._ends, offset)
        batch = self._batches[i]
        if batch.base_offset > offset:  # in a gap the cleaner left
            return None
        if batch.sparse:
            return next((r for r in batch.records if r.offset == offset), None)
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
