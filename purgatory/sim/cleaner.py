"""Log compaction, as Kafka's log cleaner does it (``LogCleanerManager`` picks what to
clean, ``Cleaner`` cleans it, ``CleanedTransactionMetadata`` follows transactions).

One pass over a log whose ``cleanup.policy`` has ``compact``:

- the *dirty* part runs from where the last pass ended (:attr:`Log.first_dirty`, Kafka's
  checkpoint) up to the first uncleanable offset: the active segment's base, the first
  segment whose last batch is younger than ``min.compaction.lag.ms``, and the last stable
  offset (never past the high watermark, nor into an open transaction);
- a pass runs when the dirty bytes are more than ``min.cleanable.dirty.ratio`` of the
  log's, or when a dirty segment's first batch is older than ``max.compaction.lag.ms``;
  :func:`clean` with ``force`` rolls the active segment and runs regardless (a test's
  "compact now");
- the latest offset of each key in the dirty part is mapped (aborted transactions' records
  left out), then every batch from the log start to there is filtered: a record goes if a
  later record has its key, if it has no key, or if it belongs to an aborted transaction;
  a tombstone (null value) stays until ``delete.retention.ms`` after the pass that first
  kept it (the batch's delete horizon), then goes; a transaction marker goes once no data
  of its transaction is left, ``delete.retention.ms`` after that was first seen;
- a batch keeps its base offset (the cleaned log has gaps; a fetch in one gets the next
  batch); the last batch of each active producer and the last batch of the pass stay,
  empty if need be, as Kafka keeps them; the producers' state is not touched.

Time is the broker's clock, and a batch's age its append time (Kafka reads the records'
timestamps: the same for ``LogAppendTime`` topics). Each pass is a generator that yields
after every :data:`SLICE_BATCHES` batches, so a big log does not hold the event loop; the
result is swapped in at the end, abandoned if the log was truncated meanwhile.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Final, NamedTuple

from purgatory.sim.batches import RecordBatch, marker_of
from purgatory.sim.log import Log
from purgatory.sim.producers import NO_PRODUCER_ID, CompletedTxn

#: batches read between two yields of a pass
SLICE_BATCHES: Final = 200


class Cleanable(NamedTuple):
    """What a pass would clean (Kafka's LogToClean): ``[first_dirty, end)`` dirty, with
    ``clean_bytes`` before it and ``dirty_bytes`` in it; ``overdue``: a dirty segment
    passed max.compaction.lag.ms."""

    first_dirty: int
    end: int
    clean_bytes: int
    dirty_bytes: int
    overdue: bool

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable(log: Log, upper: int, now_ms: float, *, force: bool = False) -> Cleanable:
    """The dirty part of ``log`` up to ``upper`` (its last stable offset), as Kafka's
    ``cleanableOffsets`` and ``calculateCleanableBytes`` find it; ``force`` ignores
    ``min.compaction.lag.ms``."""
    config = log.config
    start = log.log_start_offset
    first_dirty = log.first_dirty
    if not start <= first_dirty <= log.leo:
        first_dirty = start
    segments = log.segments
    end = min(upper, segments[-1])
    stats = log.segment_stats(first_dirty)
    if config.min_compaction_lag_ms > 0 and not force:
        horizon = now_ms - config.min_compaction_lag_ms
        for base, _, _, last_ms in stats:
            if last_ms > horizon:
                end = min(end, base)
                break
    end = max(first_dirty, end)
    # rounded down to a segment's base, as Kafka counts cleanable bytes by whole segments
    bases = [base for base in segments if base <= end]
    uncleanable = bases[-1] if bases else end
    if uncleanable < first_dirty:
        uncleanable = first_dirty
    dirty_bytes = log.bytes_between(first_dirty, uncleanable)
    clean_bytes = log.bytes_between(start, first_dirty)
    lag_from = now_ms - min(config.max_compaction_lag_ms, 1 << 62)
    firsts = [first_ms for _, _, first_ms, _ in stats if first_ms > 0]
    overdue = bool(firsts) and min(firsts) < lag_from
    return Cleanable(first_dirty, end, clean_bytes, dirty_bytes, overdue)


def due(log: Log, upper: int, now_ms: float) -> Cleanable | None:
    """What to clean of ``log`` now, if a pass is due (Kafka's grabFilthiestCompactedLog
    conditions): dirty bytes past ``min.cleanable.dirty.ratio``, or some dirty bytes with a
    segment past ``max.compaction.lag.ms``; None if not."""
    if not log.config.compact:
        return None
    found = cleanable(log, upper, now_ms)
    if found.end <= found.first_dirty:
        return None
    if (found.overdue and found.dirty_bytes > 0) or (
        found.ratio > log.config.min_cleanable_dirty_ratio
    ):
        return found
    return None


class _Transactions:
    """Kafka's CleanedTransactionMetadata: the aborted transactions met while reading the
    log in order, and which transactions' data batches a pass has seen."""

    __slots__ = ("aborted", "committed", "kept", "pending")

    def __init__(self, aborted: list[CompletedTxn]) -> None:
        self.pending = deque(sorted(aborted, key=lambda t: t.first_offset))
        #: producer id -> [its aborted transaction, whether a data batch of it was seen]
        self.aborted: dict[int, tuple[CompletedTxn, list[bool]]] = {}
        self.committed: set[int] = set()
        #: the aborted transactions whose data is still there (the cleaned index)
        self.kept: set[int] = set()

    def _reach(self, offset: int) -> None:
        pending = self.pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            self.aborted.setdefault(txn.producer_id, (txn, [False]))

    def on_marker(self, batch: RecordBatch) -> bool:
        """A control batch read: whether it may go (no data of its transaction seen)."""
        self._reach(batch.end_offset - 1)
        if not batch.count:
            return True  # emptied by an earlier pass
        marker = marker_of(batch)
        if marker is None:
            return False
        if not marker.commit:
            entry = self.aborted.pop(batch.producer_id, None)
            if entry is not None and entry[1][0]:
                self.kept.add(entry[0].last_offset)
                return False
            return True
        if batch.producer_id in self.committed:
            self.committed.discard(batch.producer_id)
            return False
        return True

    def on_data(self, batch: RecordBatch) -> bool:
        """A data batch read: whether it belongs to an aborted transaction."""
        self._reach(batch.end_offset - 1)
        if not batch.transactional:
            return False
        entry = self.aborted.get(batch.producer_id)
        if entry is not None:
            entry[1][0] = True
            return True
        self.committed.add(batch.producer_id)
        return False


def _aborted(log: Log, start: int, end: int) -> list[CompletedTxn]:
    return log.txns.aborted_between(start, end)


def clean(log: Log, upper: int, now_ms: float, *, force: bool = False) -> Iterator[None]:
    """One pass of the cleaner over ``log`` if one is due (``force``: the active segment
    rolled first, whatever the ratio and lags), up to ``upper``, its last stable offset;
    yields between slices of :data:`SLICE_BATCHES` batches."""
    if not log.config.compact:
        return
    if force:
        log.roll()
        found: Cleanable | None = cleanable(log, upper, now_ms, force=True)
        assert found is not None
        if found.end <= found.first_dirty:
            return
    else:
        found = due(log, upper, now_ms)
        if found is None:
            return
    generation = log.generation
    first_dirty, end = found.first_dirty, found.end
    # build the offset map: each key's latest offset in the dirty part
    latest: dict[bytes, int] = {}
    txns = _Transactions(_aborted(log, first_dirty, end))
    for i, batch in enumerate(log.batches_between(first_dirty, end)):
        if i and not i % SLICE_BATCHES:
            yield
            if log.generation != generation:
                return
        if batch.control:
            txns.on_marker(batch)
        elif not txns.on_data(batch):
            for offset, key, _ in batch.compaction_view():
                if key is not None and offset >= first_dirty:
                    latest[key] = offset
    # filter every batch from the log start to the end of the dirty part
    originals = log.batches_between(log.log_start_offset, end)
    txns = _Transactions(_aborted(log, log.log_start_offset, end))
    last_of: dict[int, tuple[int, int]] = {}  # producer -> (last data offset or -1, epoch)
    for producer in log.producers.active():
        last = producer.last_batch
        last_of[producer.producer_id] = (
            -1 if last is None else last.end_offset - 1,
            producer.epoch,
        )
    retention_ms = log.config.delete_retention_ms
    results: list[RecordBatch | None] = []
    kept_markers: set[int] = set()
    for i, batch in enumerate(originals):
        if i and not i % SLICE_BATCHES:
            yield
            if log.generation != generation:
                return
        result = _filtered(batch, latest, txns, last_of, end, now_ms, retention_ms)
        if result is not None and batch.control and result.count:
            kept_markers.add(batch.base_offset)
        results.append(result)
    kept = {offset for offset in kept_markers if offset not in _gone_aborted(log, txns, end)}
    log.replace_cleaned(originals, results, end, generation, kept)


def _gone_aborted(log: Log, txns: _Transactions, end: int) -> set[int]:
    """The markers of aborted transactions whose data is gone: out of the index."""
    return {
        t.last_offset
        for t in log.txns.completed
        if t.aborted and t.last_offset < end and t.last_offset not in txns.kept
    }


def _filtered(
    batch: RecordBatch,
    latest: dict[bytes, int],
    txns: _Transactions,
    last_of: dict[int, tuple[int, int]],
    end: int,
    now_ms: float,
    retention_ms: int,
) -> RecordBatch | None:
    """What a pass makes of ``batch`` (Kafka's checkBatchRetention and
    shouldRetainRecord): itself, a filtered copy, or None."""
    control = batch.control
    discardable = txns.on_marker(batch) if control else txns.on_data(batch)
    horizon = batch.delete_horizon_ms
    if control:
        discard = discardable and horizon is not None and horizon <= now_ms
    else:
        discard = discardable
    retain_empty = False
    if batch.producer_id != NO_PRODUCER_ID and batch.producer_id in last_of:
        last_offset, epoch = last_of[batch.producer_id]
        if last_offset >= 0:
            retain_empty = batch.end_offset - 1 == last_offset
        else:
            retain_empty = control and batch.producer_epoch == epoch
    if batch.end_offset == end:
        retain_empty = True  # the pass's last batch keeps the last offset
    if discard and not retain_empty:
        return None
    kept: list[int] = []
    tombstones = False
    if not discard:
        for offset, key, null in batch.compaction_view():
            if control:
                kept.append(offset)
            elif (
                key is not None
                and offset >= latest.get(key, -1)
                and (not null or horizon is None or now_ms < horizon)
            ):
                kept.append(offset)
                tombstones = tombstones or null
    if kept:
        set_horizon = (tombstones or (discardable and control)) and horizon is None
        if len(kept) == batch.count and not set_horizon:
            return batch
        if set_horizon:
            horizon = int(now_ms) + retention_ms
    elif not retain_empty:
        return None
    signature = (tuple(kept), horizon)
    cached = batch.cleaned
    if cached is not None and cached[0] == signature:
        return cached[1]  # another replica cleaned it alike: share the copy
    result = batch.filtered(kept, horizon)
    batch.cleaned = (signature, result)
    return result
