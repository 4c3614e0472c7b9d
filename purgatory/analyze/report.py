"""``report.html`` with PNG plots, drawn with matplotlib (Agg) from small aggregated rows.

Every input here is already aggregated by Spark (histogram bins, per-second rows, stats);
this module never sees a raw event, so its cost does not grow with the trace size.
"""

from __future__ import annotations

import html
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from purgatory._outcomes import Outcome
from purgatory.analyze.tables import DURATION_BINS_PER_DECADE, ZERO_DURATION_BIN

if TYPE_CHECKING:
    from purgatory.analyze.summary import AnalysisSummary
    from purgatory.trace import FaultMarker

Row = Mapping[str, Any]
MAX_PANELS = 6  # purgatories drawn in per-purgatory panels; the busiest ones first

# the per-second table's column for each outcome, and the outcome (the plots' label)
OUTCOME_COLUMNS: tuple[tuple[str, str], ...] = (
    ("completions", Outcome.COMPLETED),
    ("expirations", Outcome.EXPIRED),
    ("cancellations", Outcome.CANCELLED),
    ("errors", Outcome.ERROR),
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
    """Duration distribution per purgatory on a log x axis (log-binned in Spark), with the
    operations that took no time at all as a labelled bar of their own on the left."""
    plt = _pyplot()
    fig, (zero_ax, ax) = plt.subplots(
        1, 2, figsize=(10, 4.5), sharey=True, gridspec_kw={"width_ratios": [1, 9]}
    )
    grouped = _by_purgatory(rows)
    per_decade = DURATION_BINS_PER_DECADE
    names = sorted(grouped)
    zeros = []
    for name in names:
        counts: dict[int, int] = defaultdict(int)
        for row in grouped[name]:
            counts[int(row["bin"])] += int(row["operations"])
        zeros.append(counts.pop(ZERO_DURATION_BIN, 0))
        if counts:
            first, last = min(counts), max(counts)
            edges = [10.0 ** (b / per_decade) for b in range(first, last + 2)]
            ax.stairs([counts.get(b, 0) for b in range(first, last + 1)], edges, label=name)
    if grouped:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend()
        width = 0.8 / len(names)
        for i, (name, count) in enumerate(zip(names, zeros, strict=True)):
            zero_ax.bar(i * width, count, width=width, color=f"C{i}", label=name)
    else:
        _empty(ax, "operations")
    zero_ax.set_xticks([(len(names) - 1) * 0.8 / max(1, len(names)) / 2], ["0 ms"])
    zero_ax.set_xlabel("no time")
    zero_ax.set_ylabel("operations per bin (log)")
    ax.set_xlabel("duration (ms, log scale)")
    ax.set_title("Operation duration distribution")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


Faults = Sequence[tuple[int, str]]  # (Unix ms, description) of each injected fault


def _title_pad(faults: Faults, label: bool) -> float:
    """Points between a plot and its title: room for the fault numbers when they are drawn."""
    return 16.0 if faults and label else 6.0  # 6: matplotlib's default


def _mark_faults(ax: Any, faults: Faults, start_s: int, label: bool) -> None:
    """Dashed vertical lines where faults were injected (seconds since ``start_s``), each
    numbered just above the plot (its title leaves room: :func:`_title_pad`); the report's
    caption says what each number was."""
    for i, (at_ms, _what) in enumerate(faults):
        x = at_ms / 1000.0 - start_s
        ax.axvline(x, color="0.35", linestyle="--", linewidth=1)
        if label:
            ax.annotate(
                str(i + 1),
                (x, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize="small",
                fontweight="bold",
                color="0.25",
            )


def fault_key(faults: Sequence[FaultMarker]) -> str:
    """What the numbered fault lines stand for, as one line of text."""
    return "; ".join(f"{i + 1}: {f.fault}" for i, f in enumerate(faults))


# Legends beside the plot, not on it: over the data they hid the first seconds' points.
_BESIDE_LOC = "upper left"
_BESIDE_ANCHOR = (1.01, 1.0)


def plot_in_flight(rows: Sequence[Row], path: str, bucket_s: int, faults: Faults = ()) -> None:
    """Operations in flight over time, one line per purgatory, with the faults marked."""
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
        ax.legend(title="purgatory", loc=_BESIDE_LOC, bbox_to_anchor=_BESIDE_ANCHOR)
    else:
        _empty(ax, "operations")
    _mark_faults(ax, faults, start, label=True)
    suffix = "" if bucket_s == 1 else f" (max per {bucket_s} s)"
    ax.set_xlabel("time since first event (s)")
    ax.set_ylabel("operations in flight" + suffix)
    ax.set_title("Operations in flight (watched, not yet finished)", pad=_title_pad(faults, True))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_outcomes(rows: Sequence[Row], path: str, bucket_s: int, faults: Faults = ()) -> None:
    """Finishes per second by outcome, one panel per purgatory (busiest first), with the
    faults marked (labelled in the first panel)."""
    plt = _pyplot()
    grouped = _by_purgatory(rows)
    names = sorted(grouped, key=lambda n: -sum(int(r["arrivals"]) for r in grouped[n]))
    names = names[:MAX_PANELS]
    # one time axis for every panel: a fault's line stands at the same place in each
    fig, axes = plt.subplots(
        max(1, len(names)), 1, figsize=(9, 2.6 * max(1, len(names))), squeeze=False, sharex=True
    )
    start = min((int(r["t"]) for r in rows), default=0)
    for ax, name in zip(axes[:, 0], names, strict=False):
        points = sorted(grouped[name], key=lambda r: int(r["t"]))
        xs = [int(r["t"]) - start for r in points]
        marker = "o" if len(xs) == 1 else None  # a line needs two points to show
        for column, label in OUTCOME_COLUMNS:
            ax.plot(xs, [float(r[column]) / bucket_s for r in points], label=label, marker=marker)
        first = ax is axes[0, 0]
        ax.set_title(name, loc="left", pad=_title_pad(faults, first))
        ax.set_ylabel("operations/s")
        ax.legend(fontsize="small", loc=_BESIDE_LOC, bbox_to_anchor=_BESIDE_ANCHOR)
        _mark_faults(ax, faults, start, label=first)
    if not names:
        _empty(axes[0, 0], "operations")
    axes[-1, 0].set_xlabel("time since first event (s)")
    fig.suptitle("Outcomes per second" + (" (dashed: injected faults)" if faults else ""))
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
        ax.set_yscale("log")  # the tail is what matters, and it holds few operations
        ax.legend()
    else:
        _empty(ax, "expired operations")
    ax.set_xlabel("lateness: expiry minus deadline (ms)")
    ax.set_ylabel("expired operations (log scale)")
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


Column = tuple[str, str, str]  # (row key, heading, format: int | pct | ms | text)


def _table(rows: Sequence[Row], columns: Sequence[Column], caption: str = "") -> str:
    head = "".join(f"<th>{html.escape(heading)}</th>" for _, heading, _ in columns)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class='{kind}'>{html.escape(_fmt(row.get(key), kind))}</td>"
            for key, _, kind in columns
        )
        + "</tr>"
        for row in rows
    )
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(value: Any, kind: str) -> str:
    if value is None:
        return "\N{EN DASH}"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "pct":
        return f"{float(value):.1%}"
    if kind == "ms":
        return f"{float(value):,.2f}"
    if kind == "num":
        return f"{float(value):,.2f}"
    return str(value)


def stats_rows(stats: Sequence[Row]) -> list[Row]:
    """Per purgatory: its all-kinds total first (kind "all"), then each kind; purgatories
    by name. The cluster-wide row is left out (the summary line above gives the totals)."""
    totals = {r["purgatory"]: r for r in stats if r["level"] == "purgatory"}
    kinds: dict[str, list[Row]] = defaultdict(list)
    for row in stats:
        if row["level"] == "kind":
            kinds[str(row["purgatory"])].append(row)
    out: list[Row] = []
    for name in sorted(set(totals) | set(kinds)):
        if name in totals:
            out.append({**totals[name], "kind": "all"})
        out.extend(dict(r) for r in sorted(kinds.get(name, []), key=lambda r: str(r["kind"])))
    return out


OUTCOME_TABLE: tuple[Column, ...] = (
    ("purgatory", "purgatory", "text"),
    ("kind", "kind", "text"),
    ("operations", "operations", "int"),
    ("completed", "completed", "int"),
    ("expired", "expired", "int"),
    ("cancelled", "cancelled", "int"),
    ("errors", "errors", "int"),
    ("expiration_rate", "expired %", "pct"),
)
LATENCY_TABLE: tuple[Column, ...] = (
    ("purgatory", "purgatory", "text"),
    ("kind", "kind", "text"),
    ("duration_p50_ms", "p50", "ms"),
    ("duration_p99_ms", "p99", "ms"),
    ("duration_p999_ms", "p99.9", "ms"),
    ("duration_max_ms", "max", "ms"),
    ("lateness_p99_ms", "lateness p99", "ms"),
    ("checks_mean", "checks mean", "num"),
    ("checks_max", "checks max", "int"),
)

PLOTS: tuple[tuple[str, str, str], ...] = (
    (
        "durations.png",
        "Duration distribution",
        "How long operations waited, from watch to answer. Look for the second hump: "
        "operations that waited for their timeout.",
    ),
    (
        "in_flight.png",
        "Operations in flight",
        "How many operations were parked at each moment; dashed lines mark injected faults. "
        "A step up that does not come back down is a backlog.",
    ),
    (
        "outcomes.png",
        "Outcomes per second",
        "Completions, expirations, cancellations and errors per second, per purgatory. "
        "Bursts of errors or expirations line up with faults.",
    ),
    (
        "lateness.png",
        "Expiry lateness",
        "How long after its deadline each expired operation was answered (log count axis, so "
        "the tail shows). Nothing can be early; a long tail means a busy loop.",
    ),
)

STYLE = (
    "body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;"
    "color:#222}table{border-collapse:collapse;margin-bottom:1.5em;font-size:14px}"
    "caption{text-align:left;font-weight:bold;padding:4px 0}"
    "td,th{border:1px solid #ccc;padding:3px 8px}th{background:#f3f3f3}"
    "td.int,td.pct,td.ms,td.num{text-align:right;font-variant-numeric:tabular-nums}"
    "img{max-width:100%;height:auto}figure{margin:0 0 2em}"
    "figcaption{color:#555;font-size:14px}.note{color:#555;font-size:13px}"
)


def _header(summary: AnalysisSummary) -> str:
    inputs = summary.inputs
    counts = summary.counts
    names = ", ".join(os.path.basename(str(p)) for p in inputs[:3])
    more = f" and {len(inputs) - 3} more" if len(inputs) > 3 else ""
    first, last = counts.first_event_unix_ms, counts.last_event_unix_ms
    span = ""
    if first is not None and last is not None:
        start = datetime.fromtimestamp(first / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
        span = f" from {start} UTC over {(last - first) / 1000:,.1f} s"
    return (
        f"<p>Analysed <b>{counts.events:,}</b> operations{span}, read from "
        f"{len(inputs):,} file{'s' if len(inputs) != 1 else ''} ({html.escape(names + more)}); "
        f"{counts.malformed_lines:,} malformed and {counts.blank_lines:,} blank "
        "lines skipped.</p>"
    )


ERROR_KEYS = ("purgatory", "kind", "outcome", "error")


def write_report(
    out_dir: str,
    summary: AnalysisSummary,
    stats: Sequence[Row],
    hot_keys: Sequence[Row],
    errors: Sequence[Row],
    plots: bool,
) -> str:
    """Write ``report.html`` (tables always, images if ``plots``); return its path."""
    rows = stats_rows(stats)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>purgatory analyze</title><style>{STYLE}</style></head><body>",
        "<h1>purgatory analyze</h1>",
        _header(summary),
        "<h2>Outcomes</h2>",
        _table(rows, OUTCOME_TABLE, "Operations per purgatory, all kinds first, then by kind"),
        "<h2>Latency</h2>",
        _table(rows, LATENCY_TABLE, "Time from watch to answer, in milliseconds¹"),
        "<h2>Error codes</h2>",
        _table(
            # in a fixed order: the table's rows come back in its shuffle's partition order
            sorted(errors, key=lambda r: tuple(r[c] or "" for c in ERROR_KEYS)),
            (
                ("purgatory", "purgatory", "text"),
                ("kind", "kind", "text"),
                ("outcome", "outcome", "text"),
                ("error", "error", "text"),
                ("operations", "operations", "int"),
            ),
        ),
        "<h2>Hottest watch keys</h2>",
        _table(
            hot_keys,
            (
                ("purgatory", "purgatory", "text"),
                ("rank", "rank", "int"),
                ("key", "key", "text"),
                ("operations", "operations", "int"),
                ("expired", "expired", "int"),
                ("expiration_rate", "expired %", "pct"),
            ),
        ),
    ]
    faults = summary.faults
    if plots:
        for name, title, caption in PLOTS:
            if faults and name in ("in_flight.png", "outcomes.png"):
                caption += " Faults: " + fault_key(faults) + "."
            parts.append(
                f"<h2>{html.escape(title)}</h2><figure><img src='{name}' "
                f"alt='{html.escape(title)}'><figcaption>{html.escape(caption)}"
                "</figcaption></figure>"
            )
    parts.append(
        "<p class='note'>¹ Percentiles are approximate: "
        f"{html.escape(summary.percentile_error)}.</p></body></html>"
    )
    path = os.path.join(out_dir, "report.html")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(parts))
    return path
