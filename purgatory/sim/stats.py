"""Per-purgatory outcome counts and latency percentiles.

Fed by the cluster's operation observer (:meth:`Cluster.add_op_observer`), not by a
purgatory listener: same operations, same clock, without building a record per op.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import Any, final

from purgatory._outcomes import Outcome
from purgatory.json_types import JsonObject
from purgatory.percentiles import percentile
from purgatory.sim.operations import BrokerOperation


@final
class PurgatoryStats:
    """One purgatory's finished operations by outcome, error and kind, with durations."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.operations = 0
        self.outcomes: dict[Outcome, int] = {}
        self.errors: dict[str, int] = {}
        self.kinds: dict[str, int] = {}
        self.durations: array[float] = array("d")
        self.max_watched = 0
        self.max_delayed = 0

    def add(self, op: BrokerOperation[Any], now_ms: float) -> None:
        """Count ``op``, which finished at ``now_ms`` (the purgatory's clock)."""
        self.operations += 1
        error = op.error
        outcome = Outcome.of(op.operation_state, error)
        outcomes = self.outcomes
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if error is not None:
            self.errors[error] = self.errors.get(error, 0) + 1
        kinds = self.kinds
        kinds[op.kind] = kinds.get(op.kind, 0) + 1
        self.durations.append(now_ms - op.started_ms)

    def sample(self, watched: int, delayed: int) -> None:
        """The purgatory's sizes now (over every broker)."""
        self.max_watched = max(self.max_watched, watched)
        self.max_delayed = max(self.max_delayed, delayed)

    def summary(self) -> JsonObject:
        durations = sorted(self.durations)
        return {
            "operations": self.operations,
            "completed": self.outcomes.get(Outcome.COMPLETED, 0),
            "expired": self.outcomes.get(Outcome.EXPIRED, 0),
            "cancelled": self.outcomes.get(Outcome.CANCELLED, 0),
            "errors": dict(sorted(self.errors.items())),
            "kinds": dict(sorted(self.kinds.items())),
            "duration_ms": {
                "p50": round(percentile(durations, 50), 3) if durations else 0.0,
                "p99": round(percentile(durations, 99), 3) if durations else 0.0,
                "max": round(durations[-1], 3) if durations else 0.0,
            },
            "max_watched": self.max_watched,
            "max_delayed": self.max_delayed,
        }


@final
class StatsBook(dict[str, PurgatoryStats]):
    """:class:`PurgatoryStats` by purgatory name; :meth:`add` is the cluster's operation
    observer (one call per operation routes and counts)."""

    def __init__(self, names: Iterable[str]) -> None:
        super().__init__((name, PurgatoryStats(name)) for name in names)

    def add(self, op: BrokerOperation[Any], now_ms: float) -> None:
        self[op.purgatory_name].add(op, now_ms)
