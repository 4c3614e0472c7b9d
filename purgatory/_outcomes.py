"""What purgatories report about their operations: a record of each finished operation (its
outcome) for listeners, and statistics snapshots of outcome counts and sizes."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from purgatory._operation import DelayedOperation, OperationState


class Outcome(enum.StrEnum):
    """How an operation left its purgatory: its final :class:`OperationState`, with a
    completion that carries an error told apart. The value is what traces, metrics and the
    summaries write (``"completed"``, ``"expired"``, ``"cancelled"``, ``"error"``)."""

    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    ERROR = "error"

    @classmethod
    def of(cls, state: OperationState, error: object) -> Outcome:
        """The outcome of an operation that ended in ``state`` with ``error`` (None if it
        has none); ``state`` is final (not PENDING)."""
        if state is OperationState.EXPIRED:
            return cls.EXPIRED
        if state is OperationState.CANCELLED:
            return cls.CANCELLED
        return cls.COMPLETED if error is None else cls.ERROR


@dataclass(frozen=True, slots=True)
class OperationRecord:
    """What a listener learns about each operation that leaves the purgatory."""

    purgatory: str
    labels: Mapping[str, str]  # the purgatory's labels (e.g. its broker)
    operation: DelayedOperation
    keys: tuple[Hashable, ...]
    outcome: Outcome
    error: str | None
    started_ms: float  # purgatory clock
    finished_ms: float  # purgatory clock
    created_at_unix_ms: int
    lateness_ms: float | None  # expired only: finished minus deadline
    timeout_ms: int
    checks: int

    @property
    def duration_ms(self) -> float:
        return self.finished_ms - self.started_ms

    @classmethod
    def of(
        cls, purgatory: str, labels: Mapping[str, str], op: DelayedOperation, now: float
    ) -> OperationRecord:
        """The record of ``op``, which has just left ``purgatory`` (with ``labels``) at
        ``now`` (its clock)."""
        outcome = Outcome.of(op.operation_state, op.error)
        lateness = None
        if outcome is Outcome.EXPIRED:
            lateness = now - op.expiration_ms if op.expiration_ms >= 0 else 0.0
        return cls(
            purgatory=purgatory,
            labels=labels,
            operation=op,
            keys=op.keys,
            outcome=outcome,
            error=op.error,
            started_ms=op.started_ms,
            finished_ms=now,
            created_at_unix_ms=int(time.time() * 1000 - (now - op.started_ms)),
            lateness_ms=lateness,
            timeout_ms=op.delay_ms,
            checks=op.checks,
        )


Listener = Callable[[OperationRecord], None]


def operation_kind(op: DelayedOperation) -> str:
    """What traces and metrics call an operation: its ``kind`` attribute if it has a
    non-empty one (the simulation's operations do), else its class name."""
    kind = getattr(op, "kind", None)
    return kind if isinstance(kind, str) and kind else type(op).__name__


@dataclass(frozen=True, slots=True)
class PurgatoryStatistics:
    """A purgatory's sizes and counters at one instant (what metrics and tests read)."""

    name: str
    labels: Mapping[str, str]
    watched: int
    keys: int
    num_delayed: int
    completed: int
    expired: int
    cancelled: int
    callback_errors: int
    purges: int
    purged_entries: int
    threshold_keys: int = 0  # keys with threshold waiters (wait_for_value)
