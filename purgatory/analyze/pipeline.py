"""``run_analysis``: read traces, compute every table, write Parquet, summary and report."""

from __future__ import annotations

import json
import math
import os
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from purgatory.analyze import report, tables
from purgatory.analyze.report import Row
from purgatory.analyze.schema import malformed_samples, parse_lines
from purgatory.analyze.summary import (
    AnalysisSummary,
    Checks,
    LineCounts,
    OutcomeStats,
    PurgatoryAnalysis,
)
from purgatory.trace import FaultMarker

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from purgatory.analyze.progress import Progress

DEFAULT_TOP_KEYS = 20
MAX_PLOT_POINTS = 2000  # per-second rows are bucketed in Spark beyond this many seconds
PERCENTILE_ERROR = (
    f"percentile_approx(accuracy={tables.PERCENTILE_ACCURACY}): the returned value's rank is "
    f"within n/{tables.PERCENTILE_ACCURACY} of the exact rank (relative rank error "
    f"{1 / tables.PERCENTILE_ACCURACY:g}); max, min and counts are exact"
)
TABLES = (
    "outcomes_by_kind",
    "outcomes_by_purgatory",
    "error_codes",
    "per_second",
    "hot_keys",
    "duration_histogram",
    "lateness_histogram",
)


def _rows(df: DataFrame) -> list[Row]:
    return [row.asDict() for row in df.collect()]


def _clean(value: float | None) -> float | None:
    """JSON has no NaN/Infinity: map them to null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _stats_entry(row: Row, errors: Mapping[str, int]) -> OutcomeStats:
    duration = {name: _clean(row[f"duration_{name}_ms"]) for name, _ in tables.DURATION_QUANTILES}
    duration["max"] = _clean(row["duration_max_ms"])
    lateness = {name: _clean(row[f"lateness_{name}_ms"]) for name, _ in tables.LATENESS_QUANTILES}
    lateness["max"] = _clean(row["lateness_max_ms"])
    return OutcomeStats(
        operations=row["operations"],
        completed=row["completed"],
        expired=row["expired"],
        cancelled=row["cancelled"],
        errors=row["errors"],
        expiration_rate=_clean(row["expiration_rate"]),
        errors_by_code=dict(sorted(errors.items())),
        duration_ms=duration,
        lateness_ms=lateness,
        checks=Checks(mean=_clean(row["checks_mean"]), max=row["checks_max"]),
    )


def build_purgatories(stats: Sequence[Row], errors: Sequence[Row]) -> dict[str, PurgatoryAnalysis]:
    """Per purgatory (by name), its totals and kinds from the collected stats and
    error-code rows."""
    codes: dict[tuple[str, str | None], dict[str, int]] = {}
    for row in errors:
        for key in ((row["purgatory"], None), (row["purgatory"], row["kind"])):
            per = codes.setdefault(key, {})
            per[row["error"]] = per.get(row["error"], 0) + int(row["operations"])
    kinds: dict[str, dict[str, OutcomeStats]] = defaultdict(dict)
    for row in stats:
        if row["level"] == "kind":
            entry = _stats_entry(row, codes.get((row["purgatory"], row["kind"]), {}))
            kinds[row["purgatory"]][row["kind"]] = entry
    return {
        row["purgatory"]: PurgatoryAnalysis(
            totals=_stats_entry(row, codes.get((row["purgatory"], None), {})),
            kinds=kinds.get(row["purgatory"], {}),
        )
        for row in sorted(stats, key=lambda r: (r["purgatory"] or "", r["kind"] or ""))
        if row["level"] == "purgatory"
    }


def _plot_series(spark: SparkSession, per_second_path: str) -> tuple[list[Row], int]:
    """Per-second rows for plotting, bucketed in Spark if the trace spans many seconds."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(per_second_path)
    bounds = df.agg(F.min("second").alias("lo"), F.max("second").alias("hi")).first()
    if bounds is None or bounds["lo"] is None:
        return [], 1
    lo, hi = int(bounds["lo"]), int(bounds["hi"])
    bucket = max(1, math.ceil((hi - lo + 1) / MAX_PLOT_POINTS))
    t = (F.lit(lo) + F.floor((F.col("second") - lo) / bucket) * bucket).alias("t")
    sums = [F.sum(c).alias(c) for c in ("arrivals", *(c for c, _ in report.OUTCOME_COLUMNS))]
    grouped = df.groupBy("purgatory", t).agg(*sums, F.max("in_flight").alias("in_flight"))
    return _rows(grouped), bucket


def _write(df: DataFrame, out_dir: str, name: str) -> str:
    path = os.path.join(out_dir, name)
    df.write.mode("overwrite").parquet(path)
    return path


@dataclass(frozen=True, slots=True)
class _Tables:
    """The tables once written, read back as rows for the summary, plots and report."""

    stats: list[Row]
    errors: list[Row]
    per_second_path: str
    hot_keys: list[Row]
    durations: list[Row]
    lateness: list[Row]


def analyze(
    spark: SparkSession,
    paths: Sequence[str],
    out_dir: str,
    progress: Progress,
    *,
    plots: bool = True,
    top_keys: int = DEFAULT_TOP_KEYS,
) -> AnalysisSummary:
    """Run every step on an existing session; see ``run_analysis`` for the public entry."""
    from pyspark import StorageLevel

    started = time.monotonic()
    os.makedirs(out_dir, exist_ok=True)
    lines = spark.read.text(list(paths))  # files resolved by analyze.inputs.find_inputs
    # Parse once; every table below reads this cached copy instead of re-reading the input.
    parsed = parse_lines(lines).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        progress.step("parsing and validating")
        counts = _count_lines(parsed)
        samples: list[str] = []
        if counts.malformed_lines:
            progress.step("sampling malformed lines")
            samples = malformed_samples(lines, parsed)
        markers = counts.lines - counts.events - counts.blank_lines - counts.malformed_lines
        # no marker (most traces): no scan of the cache to find none
        faults = _faults(parsed) if markers else []
        events = parsed.where("valid").drop("valid", "blank", "marker", "fault", "at_ms")
        written = _write_tables(spark, events, out_dir, progress, top_keys)
        purgatories = build_purgatories(written.stats, written.errors)
        if plots:
            progress.step("plots")
            _plot(spark, out_dir, written, faults)
        summary = AnalysisSummary(
            counts=counts,
            percentile_accuracy=tables.PERCENTILE_ACCURACY,
            percentile_error=PERCENTILE_ERROR,
            purgatories=purgatories,
            malformed_samples=samples,
            faults=[FaultMarker(fault=what, at_ms=at) for at, what in faults],
            inputs=list(paths),
            tables={name: name for name in TABLES},
            elapsed_s=round(time.monotonic() - started, 3),
        )
        report.write_report(
            out_dir, summary, written.stats, written.hot_keys, written.errors, plots
        )
        with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as fh:
            json.dump(summary.to_dict(), fh, indent=2, sort_keys=True)
            fh.write("\n")
        return summary
    finally:
        parsed.unpersist()


def _count_lines(parsed: DataFrame) -> LineCounts:
    """Lines by sort (events, blank, malformed) and the operations' wall-clock span."""
    from pyspark.sql import functions as F

    total = parsed.agg(
        F.count(F.lit(1)).alias("lines"),
        F.sum(F.col("valid").cast("long")).alias("events"),
        F.sum(F.col("blank").cast("long")).alias("blank"),
        F.sum(F.col("marker").cast("long")).alias("markers"),
        F.min(F.when(F.col("valid"), F.col("created_at_ms"))).alias("first"),
        F.max(F.when(F.col("valid"), F.col("created_at_ms") + F.col("duration_ms"))).alias("last"),
    ).first()
    assert total is not None  # a global aggregate always has one row
    n_lines, n_events, n_blank, n_markers = (
        int(total[c] or 0) for c in ("lines", "events", "blank", "markers")
    )
    return LineCounts(
        lines=n_lines,
        events=n_events,
        malformed_lines=n_lines - n_events - n_blank - n_markers,
        blank_lines=n_blank,
        # wall-clock span of the operations (creation of the first, end of the last)
        first_event_unix_ms=_clean(total["first"]),
        last_event_unix_ms=_clean(total["last"]),
    )


def _faults(parsed: DataFrame) -> list[tuple[int, str]]:
    """The fault markers, (time in ms, description), in time order."""
    return [
        (int(row["at_ms"]), str(row["fault"]))
        for row in parsed.where("marker").select("at_ms", "fault").orderBy("at_ms").collect()
    ]


def _write_tables(
    spark: SparkSession, events: DataFrame, out_dir: str, progress: Progress, top_keys: int
) -> _Tables:
    """Compute and write every table of :data:`TABLES` under ``out_dir`` (Parquet)."""
    from pyspark import StorageLevel

    progress.step("outcomes and percentiles")
    stats_df = tables.outcome_stats(events).persist(StorageLevel.MEMORY_AND_DISK)
    stats = _rows(stats_df)
    _write(stats_df.where("level = 'kind'"), out_dir, "outcomes_by_kind")
    _write(stats_df.where("level = 'purgatory'").drop("kind"), out_dir, "outcomes_by_purgatory")
    stats_df.unpersist()

    progress.step("error codes")
    # one scan of the events for the error codes and the duration histogram, both sums of
    # this small table
    counts = tables.outcome_counts(events).persist(StorageLevel.MEMORY_AND_DISK)
    errors = _rows(spark.read.parquet(_write(tables.error_codes(counts), out_dir, "error_codes")))
    progress.step("per-second series")
    per_second_path = _write(tables.per_second(events), out_dir, "per_second")
    progress.step("hot keys")
    hot = spark.read.parquet(_write(tables.hot_keys(events, top_keys), out_dir, "hot_keys"))
    hot_rows = sorted(_rows(hot), key=lambda r: (r["purgatory"], r["rank"]))
    progress.step("histograms")
    durations = _rows(
        spark.read.parquet(_write(tables.duration_histogram(counts), out_dir, "duration_histogram"))
    )
    counts.unpersist()
    bounds = {
        r["purgatory"]: (r["lateness_min_ms"], r["lateness_max_ms"])
        for r in stats
        if r["level"] == "purgatory" and r["lateness_min_ms"] is not None
    }
    lateness_df = tables.lateness_histogram(spark, events, bounds)
    lateness = _rows(spark.read.parquet(_write(lateness_df, out_dir, "lateness_histogram")))
    return _Tables(stats, errors, per_second_path, hot_rows, durations, lateness)


def _plot(
    spark: SparkSession, out_dir: str, written: _Tables, faults: list[tuple[int, str]]
) -> None:
    """The four PNG plots the report shows."""
    series, bucket = _plot_series(spark, written.per_second_path)
    report.plot_durations(written.durations, os.path.join(out_dir, "durations.png"))
    report.plot_in_flight(series, os.path.join(out_dir, "in_flight.png"), bucket, faults)
    report.plot_outcomes(series, os.path.join(out_dir, "outcomes.png"), bucket, faults)
    report.plot_lateness(written.lateness, os.path.join(out_dir, "lateness.png"))
