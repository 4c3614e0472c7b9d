"""Per-purgatory outcome counts and latency percentiles, and the human summary table.

Fed by the cluster's operation observer (:meth:`Cluster.add_op_observer`), not by a
purgatory listener: same operations, same clock, without building a record per op.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import Any, final

from purgatory import OperationState
from purgatory.percentiles import percentile
from purgatory.sim.operations import BrokerOperation

_EXPIRED = OperationState.EXPIRED
_CANCELLED = OperationState.CANCELLED


@final
class PurgatoryStats:
    """One purgatory's finished operations by outcome, error and kind, with durations."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.operations = 0
        self.outcomes: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.kinds: dict[str, int] = {}
        self.durations: array[float] = array("d")
        self.max_watched = 0
        self.max_delayed = 0

    def add(self, op: BrokerOperation[Any], now_ms: float) -> None:
        """Count ``op``, which finished at ``now_ms`` (the purgatory's clock)."""
        self.operations += 1
        error = op.error
        state = op.operation_state
        if state is _EXPIRED:
            outcome = "expired"
        elif state is _CANCELLED:
            outcome = "cancelled"
        else:
            outcome = "completed" if error is None else "error"
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

    def summary(self) -> dict[str, Any]:
        durations = sorted(self.durations)
        return {
            "operations": self.operations,
            "completed": self.outcomes.get("completed", 0),
            "expired": self.outcomes.get("expired", 0),
            "cancelled": self.outcomes.get("cancelled", 0),
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


def format_table(summary: dict[str, Any]) -> str:
    """The final human summary of a run."""
    lines = [
        f"scenario {summary['scenario']}  seed {summary['seed']}  "
        f"simulated {summary['duration_s']:g} s  wall {summary['wall_s']:.2f} s  "
        f"({'virtual' if summary['virtual_time'] else 'real'} time)",
        f"acked records {summary['acked_records']}  lost {summary['lost_records']}  "
        f"requests/wall-s {summary['requests_per_wall_s']:,.0f}",
        f"purgatory ops/wall-s {summary['ops_per_wall_s']:,.0f} "
        f"({summary['produce_fetch_operations']:,} Produce + Fetch operations"
        f"{'' if summary['virtual_time'] else '; real time: paced by the offered load'})",
        "",
        f"{'purgatory':<14}{'ops':>9}{'completed':>11}{'expired':>9}{'p50 ms':>9}"
        f"{'p99 ms':>9}{'max ms':>9}{'max watched':>13}  errors",
    ]
    idle = [n for n, s in summary["purgatories"].items() if not s["operations"]]
    for name, s in summary["purgatories"].items():
        if name in idle:
            continue  # an all-zero row says nothing; named below the table instead
        d = s["duration_ms"]
        errors = ", ".join(f"{k}={v}" for k, v in s["errors"].items()) or "-"
        lines.append(
            f"{name:<14}{s['operations']:>9}{s['completed']:>11}{s['expired']:>9}"
            f"{d['p50']:>9.1f}{d['p99']:>9.1f}{d['max']:>9.1f}{s['max_watched']:>13}  {errors}"
        )
    if idle:
        lines.append(f"(no operations: {', '.join(idle)})")
    req = summary["requests"]
    lines.append("")
    lines.append(
        "requests: " + "  ".join(f"{k}={v}" for k, v in req.items() if not k.startswith("_"))
    )
    if summary.get("client_errors"):
        lines.append(
            "client errors: " + "  ".join(f"{k}={v}" for k, v in summary["client_errors"].items())
        )
    violations = summary.get("violations")
    if violations is not None:
        lines.append(f"invariant violations: {len(violations)}")
        lines.extend(f"  {v}" for v in violations[:10])
    return "\n".join(lines)
