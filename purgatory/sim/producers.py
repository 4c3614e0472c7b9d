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
- no state for the producer id (new, or its batches deleted by retention or
  DeleteRecords): any sequence is accepted, as by Kafka since 2.5.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Final, NamedTuple, Protocol, final

from purgatory.sim.errors import ErrorCode, SimulationError

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


def last_sequence(base_sequence: int, count: int) -> int:
    """The sequence of a batch's last record: sequences wrap from 2**31 - 1 to 0."""
    last = base_sequence + count - 1
    return last if last <= _INT32_MAX else last - _INT32_MAX - 1


class ActiveProducer(NamedTuple):
    """One producer's state on a log: id, epoch, its last sequence and last batch."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_batch: ProducedBatch


@final
class _Producer:
    __slots__ = ("batches", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[ProducedBatch] = deque(maxlen=BATCHES_RETAINED)


@final
class ProducerStates:
    """The producers that wrote to one log: producer id -> epoch and last batches."""

    __slots__ = ("_producers",)

    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}

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
        previous = self._last(state.batches[-1])
        if base_sequence != (0 if previous == _INT32_MAX else previous + 1):
            raise SimulationError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} sent sequence {base_sequence} after {previous}",
            )
        return None

    def record(self, batch: ProducedBatch) -> None:
        """A batch of an idempotent producer was appended to the log."""
        producer_id = batch.producer_id
        if producer_id == NO_PRODUCER_ID:
            return
        state = self._producers.get(producer_id)
        if state is None or batch.producer_epoch != state.epoch:
            state = self._producers[producer_id] = _Producer(batch.producer_epoch)
        state.batches.append(batch)

    def rebuild(self, batches: Iterable[ProducedBatch]) -> None:
        """Forget everything and read the state again from the log's ``batches`` (after
        a truncation or a move of the log start)."""
        self._producers.clear()
        for batch in batches:
            self.record(batch)

    def active(self) -> list[ActiveProducer]:
        """Each producer with state here, by id: its epoch, the sequence of its last
        record and its last batch (Kafka's DescribeProducers reads these)."""
        return [
            ActiveProducer(pid, state.epoch, self._last(state.batches[-1]), state.batches[-1])
            for pid, state in sorted(self._producers.items())
        ]

    @staticmethod
    def _last(batch: ProducedBatch) -> int:
        return last_sequence(batch.base_sequence, batch.end_offset - batch.base_offset)

    def __len__(self) -> int:
        return len(self._producers)

    def __repr__(self) -> str:
        return f"<ProducerStates producers={len(self._producers)}>"
