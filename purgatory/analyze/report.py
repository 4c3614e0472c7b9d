"""``report.html`` with PNG plots, drawn with matplotlib (Agg) from small aggregated rows.

Every input here is already aggregated by Spark (histogram bins, per-second rows, stats);
this module never sees a raw event, so its cost does not grow with the trace size.
"""

from __future__ import annotations

import html
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from purgatory.analyze.tables import DURATION_BINS_PER_DECADE

Row = Mapping[str, Any]
MAX_PANELS = 6  # purgatories drawn in per-purgatory panels; the busiest ones first

OUTCOME_COLUMNS: tuple[tuple[str, str], ...] = (
    ("completions", "completed"),
    ("expirations", "expired"),
    ("cancellations", "cancelled"),
    ("errors", "error"),
)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display; must precede the pyplot import
    import matplotlib.pyplot as plt

    return plt


def _by_purgatory(rows: Sequence[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        grouped[str(row["purgatory"])].append(row)
    return dict(grouped)


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes)


def plot_durations(rows: Sequence[Row], path: str) -> None:
    """Duration distribution per purgatory on a log x axis (log-binned in Spark)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    grouped = _by_purgatory(rows)
    per_decade = DURATION_BINS_PER_DECADE
    for name, bins in sorted(grouped.items()):
        counts: dict[int, int] = defaultdict(int)
        for row in bins:
            counts[int(row["bin"])] += int(row["operations"])
        first, last = min(counts), max(counts)
        edges = [10.0 ** (b / per_decade) for b in range(first, last + 2)]
        ax.stairs([counts.get(b, 0) for b in range(first, last + 1)], edges, label=name)
    if grouped:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend()
    else:
        _empty(ax, "operations")
    ax.set_xlabel("duration (ms, log scale)")
    ax.set_ylabel("operations per bin")
    ax.set_title("Operation duration distribution")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_in_flight(rows: Sequence[Row], path: str, bucket_s: int) -> None:
    """Operations in flight over time, one line per purgatory."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    grouped = _by_purgatory(rows)
    start = min((int(r["t"]) for r in rows), default=0)
    for name, points in sorted(grouped.items()):
        points = sorted(points, key=lambda r: int(r["t"]))
        ax.step(
            [int(r["t"]) - start for r in points],
            [int(r["in_flight"]) for r in points],
            where="post",
            label=name,
        )
    if grouped:
        ax.legend()
    else:
        _empty(ax, "operations")
    suffix = "" if bucket_s == 1 else f" (max per {bucket_s} s)"
    ax.set_xlabel("time since first event (s)")
    ax.set_ylabel("operations in flight" + suffix)
    ax.set_title("Operations in flight")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_outcomes(rows: Sequence[Row], path: str, bucket_s: int) -> None:
    """Finishes per second by outcome, one panel per purgatory (busiest first)."""
    plt = _pyplot()
    grouped = _by_purgatory(rows)
    names = sorted(grouped, key=lambda n: -sum(int(r["arrivals"]) for r in grouped[n]))
    names = names[:MAX_PANELS]
    fig, axes = plt.subplots(
        max(1, len(names)), 1, figsize=(9, 2.6 * max(1, len(names))), squeeze=False
    )
    start = min((int(r["t"]) for r in rows), default=0)
    for ax, name in zip(axes[:, 0], names, strict=False):
        points = sorted(grouped[name], key=lambda r: int(r["t"]))
        xs = [int(r["t"]) - start for r in points]
        for column, label in OUTCOME_COLUMNS:
            ax.plot(xs, [float(r[column]) / bucket_s for r in points], label=label)
        ax.set_title(name)
        ax.set_ylabel("ops/s")
        ax.legend(fontsize="small", ncol=4)
    if not names:
        _empty(axes[0, 0], "operations")
    axes[-1, 0].set_xlabel("time since first event (s)")
    fig.suptitle("Outcomes per second")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_lateness(rows: Sequence[Row], path: str) -> None:
    """Histogram of expiry lateness (actual expiry minus deadline) per purgatory."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    grouped = _by_purgatory(rows)
    for name, bins in sorted(grouped.items()):
        bins = sorted(bins, key=lambda r: int(r["bin"]))
        ax.stairs(_dense_counts(bins), _edges(bins), label=name)
    if grouped:
        ax.legend()
    else:
        _empty(ax, "expired operations")
    ax.set_xlabel("lateness (ms)")
    ax.set_ylabel("expired operations")
    ax.set_title("Expiry lateness")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _dense_counts(bins: Sequence[Row]) -> list[int]:
    by_bin = {int(r["bin"]): int(r["operations"]) for r in bins}
    first, last = int(bins[0]["bin"]), int(bins[-1]["bin"])
    return [by_bin.get(b, 0) for b in range(first, last + 1)]


def _edges(bins: Sequence[Row]) -> list[float]:
    lo, width = float(bins[0]["lower_ms"]), float(bins[0]["upper_ms"]) - float(bins[0]["lower_ms"])
    first, last = int(bins[0]["bin"]), int(bins[-1]["bin"])
    return [lo + (b - first) * width for b in range(first, last + 2)]


def _table(rows: Sequence[Row], columns: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(row.get(c)))}</td>" for c in columns) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


PLOTS: tuple[tuple[str, str], ...] = (
    ("durations.png", "Duration distribution"),
    ("in_flight.png", "Operations in flight"),
    ("outcomes.png", "Outcomes per second"),
    ("lateness.png", "Expiry lateness"),
)


def write_report(
    out_dir: str,
    summary: Mapping[str, Any],
    stats: Sequence[Row],
    hot_keys: Sequence[Row],
    errors: Sequence[Row],
    plots: bool,
) -> str:
    """Write ``report.html`` (tables always, images if ``plots``); return its path."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>purgatory analyze</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
        "margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "</style></head><body><h1>purgatory analyze</h1>",
        f"<p>{summary['events']} events, {summary['malformed_lines']} malformed lines, "
        f"{summary.get('blank_lines', 0)} blank lines. Percentiles are approximate: "
        f"{html.escape(str(summary.get('percentile_error', '')))}</p>",
        "<h2>Per purgatory and kind</h2>",
        _table(
            [r for r in stats if r["level"] != "all"],
            [
                "purgatory",
                "kind",
                "operations",
                "completed",
                "expired",
                "cancelled",
                "errors",
                "expiration_rate",
                "duration_p50_ms",
                "duration_p99_ms",
                "duration_p999_ms",
                "duration_max_ms",
                "lateness_p99_ms",
                "checks_mean",
                "checks_max",
            ],
        ),
        "<h2>Error codes</h2>",
        _table(errors, ["purgatory", "kind", "outcome", "error", "operations"]),
        "<h2>Hottest watch keys</h2>",
        _table(hot_keys, ["purgatory", "rank", "key", "operations", "expired", "expiration_rate"]),
    ]
    if plots:
        for name, title in PLOTS:
            parts.append(f"<h2>{html.escape(title)}</h2><img src='{name}' alt='{title}'>")
    parts.append("</body></html>")
    path = os.path.join(out_dir, "report.html")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(parts))
    return path
