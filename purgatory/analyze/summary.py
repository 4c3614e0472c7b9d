"""What an analysis found (``run_analysis``'s answer, ``summary.json`` by :meth:`to_dict`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from purgatory.json_types import JsonObject
from purgatory.trace import FaultMarker


@dataclass(frozen=True, slots=True)
class LineCounts:
    """The input's lines by sort, and the operations' wall-clock span (Unix ms: creation of
    the first, end of the last; None without operations)."""

    lines: int
    events: int
    malformed_lines: int
    blank_lines: int
    first_event_unix_ms: float | None
    last_event_unix_ms: float | None


@dataclass(frozen=True, slots=True)
class Checks:
    mean: float | None
    max: int | None


@dataclass(frozen=True, slots=True)
class OutcomeStats:
    """Operations of one purgatory (or one kind of it) by outcome, with their durations
    (``tables.DURATION_QUANTILES``' names and ``max``) and lateness in ms (None: none)."""

    operations: int
    completed: int
    expired: int
    cancelled: int
    #: operations whose outcome is ``error``
    errors: int
    expiration_rate: float | None
    #: operations that carry an error code (expired ones included), by code
    errors_by_code: dict[str, int]
    duration_ms: dict[str, float | None]
    lateness_ms: dict[str, float | None]
    checks: Checks


@dataclass(frozen=True, slots=True)
class PurgatoryAnalysis:
    """One purgatory: its totals over every kind, and each kind's."""

    totals: OutcomeStats
    kinds: dict[str, OutcomeStats]

    def to_dict(self) -> JsonObject:
        """The totals' fields, with ``kinds`` beside them."""
        kinds = {name: asdict(stats) for name, stats in self.kinds.items()}
        return asdict(self.totals) | {"kinds": kinds}


@dataclass(frozen=True, slots=True)
class AnalysisSummary:
    """What ``run_analysis`` found; :meth:`to_dict` is ``summary.json``."""

    counts: LineCounts
    percentile_accuracy: int
    percentile_error: str
    purgatories: dict[str, PurgatoryAnalysis]
    #: up to a few malformed lines, truncated
    malformed_samples: list[str]
    faults: list[FaultMarker]
    inputs: list[str]
    #: the Parquet tables written, by name (directories under the output directory)
    tables: dict[str, str]
    elapsed_s: float

    def to_dict(self) -> JsonObject:
        """The JSON document: the line counts' fields at the top level, then the rest."""
        return {
            **asdict(self.counts),
            "percentile_accuracy": self.percentile_accuracy,
            "percentile_error": self.percentile_error,
            "purgatories": {name: p.to_dict() for name, p in self.purgatories.items()},
            "malformed_samples": self.malformed_samples,
            "faults": [{"at_ms": f.at_ms, "fault": f.fault} for f in self.faults],
            "inputs": self.inputs,
            "tables": self.tables,
            "elapsed_s": self.elapsed_s,
        }
