"""Idempotent producers' state on one replica's log, as Kafka's ``ProducerStateManager``.

For each producer id, the epoch and the last five batches it wrote (their sequence range
and where they went), all read from batch headers: a replica builds the same state from
the batches it replicated, so a new leader after a failover knows what the old one
accepted. The leader checks a produced batch against it before appending:

- the same epoch and sequence range as one of the last five batches: a retry of a batch
  already written, acknowledged with its original offsets and not appended again;
- an older epoch: INVALID_PRODUCER_EPOCH (a fenced producer);
- a newer epoch not starting at sequence 0, or the same epoch not continuing the last
  sequence (a gap, or a batch older than the last five): OUT_OF_ORDER_SEQUENCE_NUMBER;
- no state for the producer id (new, expired, or its batches truncated away): any
  sequence is accepted, as by Kafka since 2.5.

As in Kafka's ``ProducerStateManager``, the state does not follow the log start: a
producer whose batches DeleteRecords or retention removed keeps its epoch and last batches
(a retry of one is still recognised, its next batch continues its sequence). A producer
leaves only when the log is truncated below its batches (the state is read again from what
is left) or when it expires: ``producer.id.expiration.ms`` after its last write, unless a
transaction of it is open on the log (:meth:`ProducerStates.remove_expired`).

Transactions (KIP-98) are tracked here too, from the same headers: a transactional batch
begins its producer's transaction on the log unless one is ongoing, and a transaction
marker (a control batch the coordinator writes) ends it (:class:`Transactions`); a
marker also moves the producer to its epoch and remembers the coordinator's epoch, so a
marker from an older producer epoch (INVALID_PRODUCER_EPOCH) or an older coordinator
(TRANSACTION_COORDINATOR_FENCED) is refused, as by Kafka's ``ProducerAppendInfo``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Container, Iterable
from typing import Final, NamedTuple, Protocol, final

from purgatory.errors import ErrorCode
from purgatory.sim.errors import SimulationError

#: batches remembered per producer (Kafka's ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``)
BATCHES_RETAINED: Final = 5
NO_PRODUCER_ID: Final = -1
_INT32_MAX: Final = (1 << 31) - 1


class ProducedBatch(Protocol):
    """What the state reads of a stored batch: its producer fields and offsets."""

    @property
    def producer_id(self) -> int: ...

    @property
    def producer_epoch(self) -> int: ...

    @property
    def base_sequence(self) -> int: ...

    @property
    def base_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def append_ms(self) -> float: ...


def last_sequence(base_sequence: int, count: int) -> int:
    """The sequence of a batch's last record: sequences wrap from 2**31 - 1 to 0."""
    last = base_sequence + count - 1
    return last if last <= _INT32_MAX else last - _INT32_MAX - 1


class EndTxnMarker(NamedTuple):
    """What a transaction marker says (Kafka's ``EndTransactionMarker``): commit or
    abort, and the epoch of the coordinator that wrote it."""

    commit: bool
    coordinator_epoch: int


class CompletedTxn(NamedTuple):
    """A transaction a marker ended on one log: its producer, the offset of its first
    batch, the marker's offset (``last_offset``), and whether it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class ActiveProducer(NamedTuple):
    """One producer's state on a log: id, epoch, its last sequence and last batch (-1 and
    None when a marker at a new epoch is all it has written since), and the epoch of the
    coordinator that wrote its last marker (-1: none)."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_batch: ProducedBatch | None
    coordinator_epoch: int


@final
class _Producer:
    __slots__ = ("batches", "coordinator_epoch", "epoch", "last_ms")

    def __init__(self, epoch: int, coordinator_epoch: int = -1) -> None:
        self.epoch = epoch
        #: the epoch of the last coordinator that wrote a marker for it (-1: none yet)
        self.coordinator_epoch = coordinator_epoch
        #: when its last batch or marker was appended (Kafka's lastTimestamp)
        self.last_ms = 0.0
        self.batches: deque[ProducedBatch] = deque(maxlen=BATCHES_RETAINED)


@final
class ProducerStates:
    """The producers that wrote to one log: producer id -> epoch and last batches."""

    __slots__ = ("_producers",)

    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}

    def epoch(self, producer_id: int) -> int | None:
        """The epoch ``producer_id`` is at on this log (None: no state for it)."""
        state = self._producers.get(producer_id)
        return None if state is None else state.epoch

    def check(
        self, producer_id: int, epoch: int, base_sequence: int, count: int
    ) -> ProducedBatch | None:
        """The batch already written that a produced batch repeats (a retry), or None if
        it is to be appended; :class:`SimulationError` with Kafka's code if it may not."""
        state = self._producers.get(producer_id)
        if state is None:
            return None
        if epoch < state.epoch:
            raise SimulationError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {epoch} is older than its epoch {state.epoch}",
            )
        if epoch > state.epoch:
            if base_sequence != 0:
                raise SimulationError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {producer_id}'s new epoch {epoch} starts at sequence "
                    f"{base_sequence}, not 0",
                )
            return None
        last = last_sequence(base_sequence, count)
        for batch in state.batches:
            if batch.base_sequence == base_sequence and self._last(batch) == last:
                return batch
        if not state.batches:
            # a marker moved the producer to this epoch: its first batch starts at 0
            if base_sequence != 0:
                raise SimulationError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {producer_id}'s epoch {epoch} starts at sequence "
                    f"{base_sequence}, not 0",
                )
            return None
        previous = self._last(state.batches[-1])
        if base_sequence != (0 if previous == _INT32_MAX else previous + 1):
            raise SimulationError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} sent sequence {base_sequence} after {previous}",
            )
        return None

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Whether a marker of ``producer_id`` at ``epoch`` from a coordinator at
        ``coordinator_epoch`` may be written: :class:`SimulationError` with
        INVALID_PRODUCER_EPOCH (the producer moved on to a newer epoch) or
        TRANSACTION_COORDINATOR_FENCED (a newer coordinator wrote for it) if not."""
        state = self._producers.get(producer_id)
        if state is None:
            return
        if epoch < state.epoch:
            raise SimulationError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker of producer {producer_id} at epoch {epoch}, older than its "
                f"epoch {state.epoch}",
            )
        if coordinator_epoch < state.coordinator_epoch:
            raise SimulationError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {state.coordinator_epoch}",
            )

    def record(self, batch: ProducedBatch, marker: EndTxnMarker | None = None) -> None:
        """A batch of an idempotent producer was appended to the log; ``marker``: the
        batch is a transaction marker saying so."""
        producer_id = batch.producer_id
        if producer_id == NO_PRODUCER_ID:
            return
        state = self._producers.get(producer_id)
        if marker is not None:
            # Kafka's appendEndTxnMarker: the producer is at the marker's epoch (its
            # sequences start over if that is new), the coordinator at the marker's.
            if state is None or batch.producer_epoch != state.epoch:
                state = self._producers[producer_id] = _Producer(batch.producer_epoch)
            state.coordinator_epoch = marker.coordinator_epoch
            state.last_ms = batch.append_ms
            return
        if state is None or batch.producer_epoch != state.epoch:
            coordinator_epoch = -1 if state is None else state.coordinator_epoch
            state = self._producers[producer_id] = _Producer(
                batch.producer_epoch, coordinator_epoch
            )
        state.batches.append(batch)
        state.last_ms = batch.append_ms

    def remove_expired(self, now_ms: float, expiration_ms: int, in_txn: Container[int]) -> int:
        """Forget the producers whose last write is ``expiration_ms`` or more before
        ``now_ms``, but those in ``in_txn`` (a transaction of theirs is open on the log),
        as Kafka's ``removeExpiredProducers`` does with ``producer.id.expiration.ms``;
        returns how many went."""
        producers = self._producers
        expired = [
            pid
            for pid, state in producers.items()
            if now_ms - state.last_ms >= expiration_ms and pid not in in_txn
        ]
        for pid in expired:
            del producers[pid]
        return len(expired)

    def rebuild(
        self, batches: Iterable[ProducedBatch], marker_of: MarkerReader | None = None
    ) -> None:
        """Forget everything and read the state again from the log's ``batches`` (after
        a truncation; a move of the log start keeps the state as it is); ``marker_of``
        reads a batch's transaction marker (None for a data batch)."""
        self._producers.clear()
        for batch in batches:
            self.record(batch, None if marker_of is None else marker_of(batch))

    def active(self) -> list[ActiveProducer]:
        """Each producer with state here, by id: its epoch, the sequence of its last
        record and its last batch, its coordinator's epoch (Kafka's DescribeProducers
        reads these). A transaction marker that moved a producer to a new epoch leaves it
        no batch yet: sequence -1 (Kafka's NO_SEQUENCE)."""
        return [
            ActiveProducer(
                pid,
                state.epoch,
                self._last(state.batches[-1]) if state.batches else -1,
                state.batches[-1] if state.batches else None,
                state.coordinator_epoch,
            )
            for pid, state in sorted(self._producers.items())
        ]

    @staticmethod
    def _last(batch: ProducedBatch) -> int:
        return last_sequence(batch.base_sequence, batch.end_offset - batch.base_offset)

    def __len__(self) -> int:
        return len(self._producers)

    def __repr__(self) -> str:
        return f"<ProducerStates producers={len(self._producers)}>"


# reads the transaction marker a batch holds, None for a data batch
MarkerReader = Callable[[ProducedBatch], EndTxnMarker | None]


@final
class Transactions:
    """One log's transactions, as Kafka's ``ProducerStateManager`` and transaction index
    keep them: the ongoing ones (producer id -> offset of its first batch) and the
    completed ones in marker order. A completed transaction stays unstable until the
    high watermark passes its marker (Kafka's unreplicated transactions), so the last
    stable offset only moves once the marker is committed; the aborted ones are the
    aborted-transactions index read_committed fetches get. Everything is kept from the
    log's own batches, so each replica holds the same state, and undone with them on a
    truncation (a marker cut off makes its transaction ongoing again)."""

    __slots__ = ("completed", "ongoing")

    def __init__(self) -> None:
        #: producer id -> the first offset of its ongoing transaction
        self.ongoing: dict[int, int] = {}
        #: the transactions markers ended, by marker offset
        self.completed: list[CompletedTxn] = []

    def begin(self, producer_id: int, offset: int) -> None:
        """A transactional batch of ``producer_id`` at ``offset``: its transaction's first
        if none is ongoing."""
        self.ongoing.setdefault(producer_id, offset)

    def complete(self, producer_id: int, marker_offset: int, aborted: bool) -> None:
        """A marker at ``marker_offset`` ended ``producer_id``'s transaction; a marker
        with no ongoing transaction changes nothing (as Kafka's, it completes none)."""
        first = self.ongoing.pop(producer_id, None)
        if first is not None:
            self.completed.append(CompletedTxn(producer_id, first, marker_offset, aborted))

    def first_unstable(self, high_watermark: int) -> int | None:
        """The first offset of the earliest transaction not yet decided below
        ``high_watermark``: ongoing, or with a marker not below it; None if none."""
        first = min(self.ongoing.values()) if self.ongoing else None
        completed = self.completed
        i = len(completed) - 1
        while i >= 0 and completed[i].last_offset >= high_watermark:
            txn_first = completed[i].first_offset
            if first is None or txn_first < first:
                first = txn_first
            i -= 1
        return first

    def aborted_between(self, start: int, end: int) -> list[CompletedTxn]:
        """The aborted transactions that overlap ``[start, end)`` (Kafka's
        ``collectAbortedTransactions``): their marker at or after ``start``, their first
        batch before ``end``."""
        completed = self.completed
        i = bisect_left(completed, start, key=_last_offset)
        return [t for t in completed[i:] if t.aborted and t.first_offset < end]

    def truncate(self, offset: int) -> None:
        """The log loses everything at or above ``offset``: transactions begun there go,
        and one whose marker went is ongoing again."""
        ongoing = self.ongoing
        for producer_id in [p for p, first in ongoing.items() if first >= offset]:
            del ongoing[producer_id]
        completed = self.completed
        while completed and completed[-1].last_offset >= offset:
            txn = completed.pop()
            if txn.first_offset < offset:
                ongoing[txn.producer_id] = txn.first_offset
        # nothing else: a producer's transactions follow each other in the log

    def drop_before(self, log_start: int) -> None:
        """The log start moved to ``log_start``: completed transactions whose marker is
        below it go (Kafka deletes the index with its segments). An ongoing one stays:
        it is still undecided, however much of it was deleted."""
        completed = self.completed
        gone = bisect_left(completed, log_start, key=_last_offset)
        if gone:
            del completed[:gone]

    def clear(self) -> None:
        self.ongoing.clear()
        self.completed.clear()

    def __repr__(self) -> str:
        return f"<Transactions ongoing={len(self.ongoing)} completed={len(self.completed)}>"


def _last_offset(txn: CompletedTxn) -> int:
    return txn.last_offset
