"""What a scenario run did: :class:`RunSummary` (``purgatory simulate --json``) and the
human table of it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

from purgatory.json_types import JsonObject
from purgatory.sim.messages import TopicMetadata

# Wall-clock fields: they differ between runs even on virtual time.
WALL_CLOCK_FIELDS: Final = (
    "wall_s",
    "requests_per_wall_s",
    "purgatory_operations_per_wall_s",
    "produce_fetch_operations_per_wall_s",
)


@dataclass(frozen=True, slots=True)
class DurationPercentiles:
    """Operation durations in ms (0.0 when there were none)."""

    p50: float
    p99: float
    max: float


@dataclass(frozen=True, slots=True)
class PurgatorySummary:
    """One purgatory name's operations over every broker, in the order ``--json`` prints
    them: counts by outcome (``errors`` by error code, the ``error`` outcome's and the
    others'), by kind, durations and the largest sizes sampled."""

    operations: int
    completed: int
    expired: int
    cancelled: int
    errors: dict[str, int]
    kinds: dict[str, int]
    duration_ms: DurationPercentiles
    max_watched: int
    max_delayed: int


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run's figures, in the order ``--json`` prints them (:meth:`to_dict`)."""

    scenario: str
    seed: int
    duration_s: float
    simulated_s: float
    acked_records: int
    lost_records: int
    #: accepted losses, not violations: an unclean election was asked for
    lost_to_unclean_elections: int
    #: what each unclean election gave up; None without the invariant checker
    unclean_elections: list[str] | None
    #: per purgatory name: outcome counts, errors, kinds, durations, sizes
    purgatories: dict[str, PurgatorySummary]
    #: the clients' request counters and the replica fetchers' rounds
    requests: dict[str, int]
    client_errors: dict[str, int]
    faults: list[str]
    #: watched entries per purgatory name, sampled once a simulated second
    watched_per_s: dict[str, list[int]]
    final_metadata: list[TopicMetadata]
    #: None without the invariant checker
    violations: list[str] | None
    virtual_time: bool
    wall_s: float
    requests_per_wall_s: float
    #: every purgatory's operations (Produce, Fetch, DeleteRecords, ElectLeader) per wall second
    purgatory_operations_per_wall_s: float
    #: Produce and Fetch operations (consumer and follower fetches): the throughput figure
    produce_fetch_operations: int
    produce_fetch_operations_per_wall_s: float

    @property
    def failed(self) -> bool:
        """An acked record was lost or an invariant was broken."""
        return self.lost_records > 0 or bool(self.violations)

    def to_dict(self) -> JsonObject:
        """The JSON object, fields in declaration order (the JSON edge: nested summaries
        become objects here)."""
        return dataclasses.asdict(self)

    def seeded(self) -> JsonObject:
        """:meth:`to_dict` without the wall-clock fields: what the same seed repeats."""
        return {k: v for k, v in self.to_dict().items() if k not in WALL_CLOCK_FIELDS}


def format_table(summary: RunSummary) -> str:
    """The final human summary of a run."""
    s = summary
    lines = [
        f"scenario {s.scenario}  seed {s.seed}  "
        f"simulated {s.duration_s:g} s  wall {s.wall_s:.2f} s  "
        f"({'virtual' if s.virtual_time else 'real'} time)",
        f"acked records {s.acked_records}  lost {s.lost_records}  "
        f"requests/wall-s {s.requests_per_wall_s:,.0f}",
        f"purgatory ops/wall-s {s.produce_fetch_operations_per_wall_s:,.0f} "
        f"({s.produce_fetch_operations:,} Produce + Fetch operations"
        f"{'' if s.virtual_time else '; real time: paced by the offered load'})",
        "",
        f"{'purgatory':<14}{'ops':>9}{'completed':>11}{'expired':>9}{'p50 ms':>9}"
        f"{'p99 ms':>9}{'max ms':>9}{'max watched':>13}  errors",
    ]
    lines.extend(_purgatory_rows(s.purgatories))
    lines.append("")
    lines.append(
        "requests: " + "  ".join(f"{k}={v}" for k, v in s.requests.items() if not k.startswith("_"))
    )
    if s.client_errors:
        lines.append("client errors: " + "  ".join(f"{k}={v}" for k, v in s.client_errors.items()))
    if s.violations is not None:
        lines.append(f"invariant violations: {len(s.violations)}")
        lines.extend(f"  {v}" for v in s.violations[:10])
    return "\n".join(lines)


def _purgatory_rows(purgatories: dict[str, PurgatorySummary]) -> list[str]:
    rows = []
    idle = [n for n, p in purgatories.items() if not p.operations]
    for name, p in purgatories.items():
        if name in idle:
            continue  # an all-zero row says nothing; named below the table instead
        d = p.duration_ms
        errors = ", ".join(f"{k}={v}" for k, v in p.errors.items()) or "-"
        rows.append(
            f"{name:<14}{p.operations:>9}{p.completed:>11}{p.expired:>9}"
            f"{d.p50:>9.1f}{d.p99:>9.1f}{d.max:>9.1f}{p.max_watched:>13}  {errors}"
        )
    if idle:
        rows.append(f"(no operations: {', '.join(idle)})")
    return rows
