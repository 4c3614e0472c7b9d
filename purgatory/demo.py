"""The main job: a broker simulation with faults, traced, then analysed with Spark.

``purgatory demo`` runs a scenario on the simulated cluster (real time, uvloop where it is
installed), writes every finished operation of every purgatory to ``OUT/trace.jsonl`` with
the library's :class:`~purgatory.trace.TraceWriter`, then runs the Spark pipeline over that
trace into ``OUT/analysis`` (Parquet tables, ``summary.json``, plots, ``report.html``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from purgatory import event_loops
from purgatory.cli_types import positive_float
from purgatory.sim.scenarios import SCENARIOS

if TYPE_CHECKING:
    from purgatory.sim.summary import RunSummary

DEFAULT_OUT = "purgatory-out"
DEFAULT_SCENARIO = "leader-failover"
DEFAULT_DURATION_S = 20.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=DEFAULT_OUT, help="output directory")
    parser.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        default=DEFAULT_SCENARIO,
        help="simulation scenario (see purgatory simulate --list)",
    )
    parser.add_argument(
        "--duration",
        type=positive_float,
        default=DEFAULT_DURATION_S,
        metavar="SECONDS",
        help="simulated seconds",
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument(
        "--virtual-time",
        action="store_true",
        help="run the simulation on virtual time (instant; trace timestamps are compressed)",
    )
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument(
        "--skip-analysis", action="store_true", help="only simulate and write the trace"
    )


async def _simulate(scenario_name: str, duration_s: float, seed: int, trace: Path) -> RunSummary:
    from purgatory.sim.cli import stderr_progress
    from purgatory.sim.runner import run_scenario
    from purgatory.sim.scenarios import SCENARIOS
    from purgatory.trace import TraceWriter

    with TraceWriter(trace) as writer:
        return await run_scenario(
            SCENARIOS[scenario_name],
            duration_s,
            seed,
            listeners=[writer],
            progress=stderr_progress(),
            on_fault=writer.mark_fault,
        )


def run(args: argparse.Namespace) -> int:
    from purgatory.sim.summary import format_table

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trace = out / "trace.jsonl"
    print(f"== simulating {args.scenario!r} for {args.duration:g} s (seed {args.seed})")
    coro = _simulate(args.scenario, args.duration, args.seed, trace)
    if args.virtual_time:
        from purgatory.testing import run_virtual

        summary = run_virtual(coro)
    else:
        summary = event_loops.run(coro)
    print(file=sys.stderr)
    print(format_table(summary))
    print(timing_note(args.virtual_time, args.seed))
    (out / "simulation.json").write_text(json.dumps(summary.to_dict(), indent=2) + "\n")
    print(f"trace: {trace}")
    if args.skip_analysis:
        return 0

    from purgatory.analyze import run_analysis
    from purgatory.analyze.cli import format_summary

    analysis_dir = out / "analysis"
    print(f"== analysing {trace} with Spark")
    analysis = run_analysis([str(trace)], str(analysis_dir), master=args.master)
    print(format_summary(analysis))
    print(f"report: {analysis_dir / 'report.html'}")
    return 0


def timing_note(virtual_time: bool, seed: int) -> str:
    """One line saying how far the run's timings can be compared and reproduced."""
    if virtual_time:
        return (
            f"note: virtual time: timings are simulated, not measured; --virtual-time "
            f"--seed {seed} repeats this run exactly"
        )
    return (
        "note: real time on a shared machine: lateness includes the machine's scheduling "
        "delays, so it is above the quiet-machine figure of 'purgatory bench deadlines'; "
        f"--virtual-time --seed {seed} reproduces a run exactly"
    )
