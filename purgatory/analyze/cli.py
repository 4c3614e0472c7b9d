"""``purgatory analyze TRACES... --out DIR``: command line front end of the Spark pipeline.

Nothing heavy is imported at module level (pyspark, matplotlib): ``purgatory --help`` must
stay fast and work without the ``spark`` extra.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from purgatory.analyze.inputs import DEFAULT_PATTERNS, InputPathError, find_inputs
from purgatory.analyze.pipeline import DEFAULT_TOP_KEYS

if TYPE_CHECKING:
    from purgatory.analyze.summary import AnalysisSummary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "traces",
        nargs="+",
        metavar="TRACES",
        help="trace files (JSON Lines, .gz ok) or directories, searched recursively for "
        "trace files",
    )
    parser.add_argument(
        "--glob",
        action="append",
        metavar="PATTERN",
        help="file name pattern of trace files in directories (repeatable; default: "
        + " and ".join(DEFAULT_PATTERNS)
        + ")",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master URL (default: keep spark-submit's, else local[*])",
    )
    parser.add_argument(
        "--driver-memory", default=None, metavar="SIZE", help="driver JVM heap (default: 2g)"
    )
    parser.add_argument(
        "--shuffle-partitions",
        type=int,
        default=None,
        metavar="N",
        help="spark.sql.shuffle.partitions (default: 2 x cores in local mode)",
    )
    parser.add_argument(
        "--top-keys", type=int, default=DEFAULT_TOP_KEYS, metavar="N", help="hottest keys to keep"
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress display; Spark's console messages go to DIR/spark.log",
    )


def format_summary(summary: AnalysisSummary) -> str:
    """A short fixed-width table: one line per purgatory."""
    counts = summary.counts
    lines = [
        f"events: {counts.events:,}  malformed lines: {counts.malformed_lines:,}"
        f"  blank lines: {counts.blank_lines:,}"
    ]
    header = (
        f"{'purgatory':<20} {'ops':>10} {'completed':>10} {'expired':>9} {'cancel':>8}"
        f" {'errors':>8} {'exp.rate':>8} {'p50 ms':>9} {'p99 ms':>9} {'p999 ms':>9} {'max ms':>9}"
    )
    lines += [header, "-" * len(header)]
    for name, purgatory in sorted(summary.purgatories.items()):
        p = purgatory.totals
        d = p.duration_ms
        rate = "-" if p.expiration_rate is None else f"{p.expiration_rate:.2%}"
        lines.append(
            f"{name[:20]:<20} {p.operations:>10,} {p.completed:>10,} {p.expired:>9,}"
            f" {p.cancelled:>8,} {p.errors:>8,} {rate:>8}"
            f" {_ms(d['p50'])} {_ms(d['p99'])} {_ms(d['p999'])} {_ms(d['max'])}"
        )
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return f"{'-':>9}" if value is None else f"{value:>9,.2f}"


def run(args: argparse.Namespace) -> int:
    patterns = tuple(args.glob) if args.glob else DEFAULT_PATTERNS
    try:
        inputs = find_inputs(args.traces, patterns)
    except InputPathError as exc:
        print(f"purgatory analyze: error: {exc}", file=sys.stderr)
        return 2
    if inputs.total_bytes == 0 and not any("://" in f for f in inputs.files):
        # Every file is empty: no event to find, so say so without starting Spark.
        print(f"purgatory analyze: error: no trace event in {inputs.describe()}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"purgatory analyze: reading {inputs.describe()}", file=sys.stderr)
    if args.shuffle_partitions is not None and args.shuffle_partitions < 1:
        print("purgatory analyze: error: --shuffle-partitions must be >= 1", file=sys.stderr)
        return 2
    try:
        import pyspark  # noqa: F401

        if not args.no_plots:
            import matplotlib  # noqa: F401
    except ImportError as exc:
        print(
            f"purgatory analyze: error: {exc.name} is missing; install purgatory-aio[spark]",
            file=sys.stderr,
        )
        return 2
    from purgatory.analyze import run_analysis

    jvm_log = None
    if args.quiet:  # Spark's own console lines (JVM warnings) go to a file in --out
        os.makedirs(args.out, exist_ok=True)
        jvm_log = os.path.join(args.out, "spark.log")
    summary = run_analysis(
        list(args.traces),
        args.out,
        master=args.master,
        plots=not args.no_plots,
        progress=not args.quiet,
        driver_memory=args.driver_memory,
        shuffle_partitions=args.shuffle_partitions,
        top_keys=args.top_keys,
        patterns=patterns,
        jvm_log=jvm_log,
    )
    if summary.counts.malformed_lines:
        print(f"malformed lines: {summary.counts.malformed_lines}; samples:", file=sys.stderr)
        for sample in summary.malformed_samples:
            print(f"  {sample}", file=sys.stderr)
    print(format_summary(summary))
    print(f"tables, summary.json and report.html written to {args.out}")
    if summary.counts.events == 0:
        print(f"purgatory analyze: error: no trace event in {inputs.describe()}", file=sys.stderr)
        return 1
    return 0
