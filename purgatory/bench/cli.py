"""``purgatory bench [workload|timer|deadlines]``: the purgatory against hand-written asyncio
baselines, and its deadlines against the monotonic clock.

``workload`` is Kafka's TestPurgatoryPerformance (``--compare`` adds the call_later and heap
baselines and the workload floor); ``timer`` adds and cancels a million timeouts on
SystemTimer and on ``loop.call_later``; ``deadlines`` expires operations in real time and
counts any that fired before submit time + delay by ``time.monotonic()``; ``thresholds``
advances one key's value under many waiters, ``set_value`` against ``wait_until``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from purgatory.bench.runner import (
    EXTRA_IMPLEMENTATIONS,
    IMPLEMENTATIONS,
    LOOPS,
    RunResult,
    run_workload,
)
from purgatory.bench.workload import PurgatoryPerformanceConfig
from purgatory.cli_types import int_at_least, positive_float
from purgatory.json_types import JsonObject

if TYPE_CHECKING:
    from purgatory.bench.deadlines import DeadlineResult
    from purgatory.bench.report import TimerReport, WorkloadReport
    from purgatory.bench.thresholds import ThresholdBenchResult

_WORKLOAD_DEFAULTS = PurgatoryPerformanceConfig()
# The workload options: (flag, the PurgatoryPerformanceConfig field it sets, type, metavar,
# help, which formats the field's default). Each defaults to None: "the config's default".
_WORKLOAD_OPTIONS: tuple[tuple[str, str, Callable[[str], Any], str, str], ...] = (
    ("--num", "num", int_at_least(1), "N", "number of requests (default {})"),
    (
        "--rate",
        "rate",
        positive_float,
        "REQ_PER_S",
        "open-loop request rate (default: no pacing, as fast as possible)",
    ),
    (
        "--keys-per-request",
        "keys_per_request",
        int_at_least(1),
        "K",
        "distinct keys per request (default {})",
    ),
    ("--key-space", "key_space", int_at_least(1), "K", "number of possible keys (default {})"),
    ("--timeout", "timeout_ms", int_at_least(1), "MS", "operation timeout in ms (default {})"),
    ("--p50", "p50_ms", positive_float, "MS", "median completion latency (default {:g})"),
    ("--p75", "p75_ms", positive_float, "MS", "75th percentile completion latency (default {:g})"),
    (
        "--batch",
        "batch",
        int_at_least(1),
        "N",
        "most requests issued between loop yields (default {})",
    ),
)
_WORKLOAD_SWITCHES = (
    ("--compare", "also run the floor and the call_later and heap baselines"),
    ("--nowait", "also run the purgatory through try_complete_else_watch_nowait (sync ops)"),
    ("--no-memory", "skip the tracemalloc pass that measures peak Python heap"),
)
# (flag, metavar, help); the defaults differ between timer and deadlines, so they are None here
_TIMER_OPTIONS = (
    ("--tasks", "N", "tasks to add and cancel (default 1000000; deadlines: operations, 100000)"),
    ("--min-delay", "MS", "smallest delay (default 1)"),
    ("--max-delay", "MS", "largest delay (default 300000; deadlines: 5000)"),
)
_THRESHOLD_OPTIONS = (
    ("--waiters", "N", "waiters on the one key (default 100000)"),
    (
        "--advances",
        "N",
        "advances of its value by 1; thresholds are uniform over 1..N (default 10000)",
    ),
    (
        "--baseline-advances",
        "N",
        "advances the wait_until baseline runs (default: as many as make about 10**7 checks)",
    ),
)
_WORKLOAD_ONLY = tuple(o[0] for o in _WORKLOAD_OPTIONS) + tuple(s[0] for s in _WORKLOAD_SWITCHES)
_TIMER_ONLY = tuple(o[0] for o in _TIMER_OPTIONS)
_THRESHOLD_ONLY = tuple(o[0] for o in _THRESHOLD_OPTIONS)
# which kind each group of options belongs to (deadlines shares the timer's)
_OPTION_GROUPS = (
    ("workload", ("workload",), _WORKLOAD_ONLY),
    ("timer", ("timer", "deadlines"), _TIMER_ONLY),
    ("thresholds", ("thresholds",), _THRESHOLD_ONLY),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kind",
        nargs="?",
        choices=("workload", "timer", "deadlines", "thresholds"),
        default="workload",
        help="workload: Kafka's TestPurgatoryPerformance (default); timer: add+cancel bench; "
        "deadlines: real-time expiries checked against time.monotonic(); thresholds: "
        "set_value against wait_until under many waiters on one key",
    )
    parser.add_argument(
        "--loop",
        choices=(*LOOPS, "both"),
        default="uvloop",
        help="event loop (default: uvloop; both: run on each)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--repeat",
        type=int_at_least(1),
        default=1,
        metavar="N",
        help="rounds: each implementation runs once per round, interleaved (every other round "
        "in reverse order); the table shows "
        "each one's least-CPU run, the CPU target the median of the per-round ratios",
    )
    parser.add_argument(
        "--seed", type=int, default=_WORKLOAD_DEFAULTS.seed, help="random seed (same for all)"
    )
    work = parser.add_argument_group("workload options")
    for flag, field, parse, metavar, text in _WORKLOAD_OPTIONS:
        default = getattr(_WORKLOAD_DEFAULTS, field)
        work.add_argument(
            flag, type=parse, default=None, metavar=metavar, help=text.format(default)
        )
    for flag, text in _WORKLOAD_SWITCHES:
        work.add_argument(flag, action="store_true", help=text)
    timer = parser.add_argument_group("timer and deadlines options")
    for flag, metavar, text in _TIMER_OPTIONS:
        timer.add_argument(flag, type=int_at_least(1), default=None, metavar=metavar, help=text)
    thresholds = parser.add_argument_group("thresholds options")
    for flag, metavar, text in _THRESHOLD_OPTIONS:
        thresholds.add_argument(
            flag, type=int_at_least(1), default=None, metavar=metavar, help=text
        )
    parser.set_defaults(_parser=parser)


def _fail(args: argparse.Namespace, message: str) -> NoReturn:
    parser: argparse.ArgumentParser = args._parser
    parser.error(message)


def _given(args: argparse.Namespace, flags: tuple[str, ...]) -> list[str]:
    return [f for f in flags if getattr(args, _dest(f)) not in (None, False)]


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _build_config(
    args: argparse.Namespace, d: PurgatoryPerformanceConfig
) -> PurgatoryPerformanceConfig:
    given = {field: getattr(args, _dest(flag)) for flag, field, *_ in _WORKLOAD_OPTIONS}
    overrides = {field: value for field, value in given.items() if value is not None}
    try:
        return dataclasses.replace(d, seed=args.seed, **overrides)
    except ValueError as exc:  # cross-option problems, e.g. --p75 below --p50
        _fail(args, str(exc))


def _loops(args: argparse.Namespace) -> tuple[str, ...]:
    return LOOPS if args.loop == "both" else (args.loop,)


def _run_workload(args: argparse.Namespace) -> list[WorkloadReport]:
    from purgatory.bench.report import workload_report

    cfg = _build_config(args, _WORKLOAD_DEFAULTS)
    names = IMPLEMENTATIONS if args.compare else ("purgatory",)
    if args.nowait:
        names = (*names, *EXTRA_IMPLEMENTATIONS)
    results = []
    for loop in _loops(args):
        samples: list[RunResult] = []
        for round_no in range(args.repeat):
            # Interleaved, so drift hits every implementation alike; every other round in
            # reverse order, so a steady drift within rounds favours nobody in the median.
            for name in names if round_no % 2 == 0 else names[::-1]:
                samples.append(run_workload(cfg, name, loop))
        memory = (
            [] if args.no_memory else [run_workload(cfg, name, loop, memory=True) for name in names]
        )
        results.append(workload_report(cfg, loop, samples, memory))
    return results


def _run_timer(args: argparse.Namespace) -> list[TimerReport]:
    from purgatory.bench.report import timer_report
    from purgatory.bench.timer_bench import (
        DEFAULT_MAX_DELAY_MS,
        DEFAULT_MIN_DELAY_MS,
        DEFAULT_TASKS,
        run_timer_bench,
    )

    tasks = DEFAULT_TASKS if args.tasks is None else args.tasks
    lo = DEFAULT_MIN_DELAY_MS if args.min_delay is None else args.min_delay
    hi = DEFAULT_MAX_DELAY_MS if args.max_delay is None else args.max_delay
    if lo > hi:
        _fail(args, f"--min-delay ({lo}) must be <= --max-delay ({hi})")
    results = []
    for loop in _loops(args):
        runs = [run_timer_bench(loop, tasks, lo, hi, args.seed) for _ in range(args.repeat)]
        # each side's least-CPU repetition
        best = dataclasses.replace(
            runs[0],
            system_timer=min((r.system_timer for r in runs), key=lambda p: p.total_s),
            call_later=min((r.call_later for r in runs), key=lambda p: p.total_s),
        )
        results.append(timer_report(best))
    return results


def _run_deadlines(args: argparse.Namespace) -> list[DeadlineResult]:
    from purgatory.bench.deadlines import measure_deadlines

    operations = 100_000 if args.tasks is None else args.tasks
    lo = 1 if args.min_delay is None else args.min_delay
    hi = 5_000 if args.max_delay is None else args.max_delay
    if lo > hi:
        _fail(args, f"--min-delay ({lo}) must be <= --max-delay ({hi})")
    return [measure_deadlines(loop, operations, lo, hi, args.seed) for loop in _loops(args)]


def _run_thresholds(args: argparse.Namespace) -> list[ThresholdBenchResult]:
    from purgatory.bench.thresholds import (
        DEFAULT_ADVANCES,
        DEFAULT_WAITERS,
        run_threshold_bench,
    )

    waiters = DEFAULT_WAITERS if args.waiters is None else args.waiters
    advances = DEFAULT_ADVANCES if args.advances is None else args.advances
    return [
        run_threshold_bench(loop, waiters, advances, args.baseline_advances, args.seed, args.repeat)
        for loop in _loops(args)
    ]


def _format_deadlines(result: DeadlineResult) -> str:
    return (
        f"deadlines on {result.loop}: {result.operations:,} operations, "
        f"{result.early} fired early by time.monotonic() (worst {result.worst_early_ms:.3f}"
        f" ms); lateness p50 {result.lateness_p50_ms:.2f} ms, p99 "
        f"{result.lateness_p99_ms:.2f} ms, max {result.lateness_max_ms:.2f} ms"
    )


def run(args: argparse.Namespace) -> int:
    from purgatory.bench.report import config_dict, format_timer, format_workload

    for owner, kinds, flags in _OPTION_GROUPS:
        wrong = [] if args.kind in kinds else _given(args, flags)
        if wrong:
            _fail(args, f"{', '.join(wrong)}: only for 'purgatory bench {owner}'")
    # the JSON edge: {"benchmark": kind, ["config": ...,] "results": [...]}
    out: JsonObject = {"benchmark": args.kind}
    if args.kind == "deadlines":
        deadlines = _run_deadlines(args)
        text = "\n".join(_format_deadlines(r) for r in deadlines)
        out["results"] = [dataclasses.asdict(r) for r in deadlines]
    elif args.kind == "thresholds":
        from purgatory.bench.thresholds import format_thresholds

        results = _run_thresholds(args)
        text = "\n\n".join(format_thresholds(r) for r in results)
        out["results"] = [r.to_dict() for r in results]
    elif args.kind == "timer":
        timers = _run_timer(args)
        text = "\n\n".join(format_timer(r) for r in timers)
        out["results"] = [r.to_dict() for r in timers]
    else:
        workloads = _run_workload(args)
        cfg = _build_config(args, _WORKLOAD_DEFAULTS)
        text = "\n\n".join(format_workload(cfg, r) for r in workloads)
        out["config"] = config_dict(cfg)
        out["results"] = [r.to_dict() for r in workloads]
    if args.json:
        json.dump(out, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(text)
    return 0
