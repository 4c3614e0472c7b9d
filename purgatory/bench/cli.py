"""``purgatory bench [workload|timer|deadlines]``: the purgatory against hand-written asyncio
baselines, and its deadlines against the monotonic clock.

``workload`` is Kafka's TestPurgatoryPerformance (``--compare`` adds the call_later and heap
baselines and the workload floor); ``timer`` adds and cancels a million timeouts on
SystemTimer and on ``loop.call_later``; ``deadlines`` expires operations in real time and
counts any that fired before submit time + delay by ``time.monotonic()``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any, NoReturn

from purgatory.bench.runner import (
    EXTRA_IMPLEMENTATIONS,
    IMPLEMENTATIONS,
    LOOPS,
    RunResult,
    run_workload,
)
from purgatory.bench.workload import WorkloadConfig
from purgatory.cli_types import int_at_least, positive_float

_WORKLOAD_DEFAULTS = WorkloadConfig()
_TIMER_ONLY = ("tasks", "min_delay", "max_delay")
_WORKLOAD_ONLY = (
    "num",
    "rate",
    "keys_per_request",
    "key_space",
    "timeout",
    "p50",
    "p75",
    "batch",
    "compare",
    "nowait",
    "no_memory",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = _WORKLOAD_DEFAULTS
    parser.add_argument(
        "kind",
        nargs="?",
        choices=("workload", "timer", "deadlines"),
        default="workload",
        help="workload: Kafka's TestPurgatoryPerformance (default); timer: add+cancel bench; "
        "deadlines: real-time expiries checked against time.monotonic()",
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
    parser.add_argument("--seed", type=int, default=d.seed, help="random seed (same for all)")
    work = parser.add_argument_group("workload options")
    work.add_argument(
        "--num",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help=f"number of requests (default {d.num})",
    )
    work.add_argument(
        "--rate",
        type=positive_float,
        default=None,
        metavar="REQ_PER_S",
        help="open-loop request rate (default: no pacing, as fast as possible)",
    )
    work.add_argument(
        "--keys-per-request",
        type=int_at_least(1),
        default=None,
        metavar="K",
        help=f"distinct keys per request (default {d.keys_per_request})",
    )
    work.add_argument(
        "--key-space",
        type=int_at_least(1),
        default=None,
        metavar="K",
        help=f"number of possible keys (default {d.key_space})",
    )
    work.add_argument(
        "--timeout",
        type=int_at_least(1),
        default=None,
        metavar="MS",
        help=f"operation timeout in ms (default {d.timeout_ms})",
    )
    work.add_argument(
        "--p50",
        type=positive_float,
        default=None,
        metavar="MS",
        help=f"median completion latency (default {d.p50_ms:g})",
    )
    work.add_argument(
        "--p75",
        type=positive_float,
        default=None,
        metavar="MS",
        help=f"75th percentile completion latency (default {d.p75_ms:g})",
    )
    work.add_argument(
        "--batch",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help=f"most requests issued between loop yields (default {d.batch})",
    )
    work.add_argument(
        "--compare",
        action="store_true",
        help="also run the floor and the call_later and heap baselines",
    )
    work.add_argument(
        "--nowait",
        action="store_true",
        help="also run the purgatory through try_complete_else_watch_nowait (sync ops)",
    )
    work.add_argument(
        "--no-memory",
        action="store_true",
        help="skip the tracemalloc pass that measures peak Python heap",
    )
    timer = parser.add_argument_group("timer and deadlines options")
    timer.add_argument(
        "--tasks",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help="tasks to add and cancel (default 1000000; deadlines: operations, 100000)",
    )
    timer.add_argument(
        "--min-delay",
        type=int_at_least(1),
        default=None,
        metavar="MS",
        help="smallest delay (default 1)",
    )
    timer.add_argument(
        "--max-delay",
        type=int_at_least(1),
        default=None,
        metavar="MS",
        help="largest delay (default 300000; deadlines: 5000)",
    )
    parser.set_defaults(_parser=parser)


def _fail(args: argparse.Namespace, message: str) -> NoReturn:
    parser: argparse.ArgumentParser = args._parser
    parser.error(message)


def _given(args: argparse.Namespace, names: tuple[str, ...]) -> list[str]:
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n) not in (None, False)]


def _build_config(args: argparse.Namespace, d: WorkloadConfig) -> WorkloadConfig:
    def pick(value: Any, default: Any) -> Any:
        return default if value is None else value

    fields: dict[str, Any] = {
        "num": pick(args.num, d.num),
        "rate": args.rate,
        "keys_per_request": pick(args.keys_per_request, d.keys_per_request),
        "key_space": pick(args.key_space, d.key_space),
        "timeout_ms": pick(args.timeout, d.timeout_ms),
        "p50_ms": pick(args.p50, d.p50_ms),
        "p75_ms": pick(args.p75, d.p75_ms),
        "seed": args.seed,
        "batch": pick(args.batch, d.batch),
    }
    try:
        return WorkloadConfig(**fields)
    except ValueError as exc:  # cross-option problems, e.g. --p75 below --p50
        _fail(args, str(exc))


def _loops(args: argparse.Namespace) -> tuple[str, ...]:
    return LOOPS if args.loop == "both" else (args.loop,)


def _run_workload(args: argparse.Namespace) -> dict[str, Any]:
    from purgatory.bench.report import config_dict, workload_dict

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
        results.append(workload_dict(cfg, loop, samples, memory))
    return {"benchmark": "workload", "config": config_dict(cfg), "results": results}


def _run_timer(args: argparse.Namespace) -> dict[str, Any]:
    from purgatory.bench.report import timer_dict
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
        results.append(timer_dict(best))
    return {"benchmark": "timer", "results": results}


def _run_deadlines(args: argparse.Namespace) -> dict[str, Any]:
    from purgatory.bench.deadlines import measure_deadlines

    operations = 100_000 if args.tasks is None else args.tasks
    lo = 1 if args.min_delay is None else args.min_delay
    hi = 5_000 if args.max_delay is None else args.max_delay
    if lo > hi:
        _fail(args, f"--min-delay ({lo}) must be <= --max-delay ({hi})")
    results = [
        dataclasses.asdict(measure_deadlines(loop, operations, lo, hi, args.seed))
        for loop in _loops(args)
    ]
    return {"benchmark": "deadlines", "results": results}


def _format_deadlines(result: dict[str, Any]) -> str:
    return (
        f"deadlines on {result['loop']}: {result['operations']:,} operations, "
        f"{result['early']} fired early by time.monotonic() (worst {result['worst_early_ms']:.3f}"
        f" ms); lateness p50 {result['lateness_p50_ms']:.2f} ms, p99 "
        f"{result['lateness_p99_ms']:.2f} ms, max {result['lateness_max_ms']:.2f} ms"
    )


def run(args: argparse.Namespace) -> int:
    from purgatory.bench.report import format_timer, format_workload

    wrong = _given(args, _TIMER_ONLY if args.kind == "workload" else _WORKLOAD_ONLY)
    if wrong:
        other = "timer" if args.kind == "workload" else "workload"
        _fail(args, f"{', '.join(wrong)}: only for 'purgatory bench {other}'")
    if args.kind == "deadlines":
        out = _run_deadlines(args)
        text = "\n".join(_format_deadlines(r) for r in out["results"])
    elif args.kind == "timer":
        out = _run_timer(args)
        text = "\n\n".join(format_timer(r) for r in out["results"])
    else:
        out = _run_workload(args)
        cfg = _build_config(args, _WORKLOAD_DEFAULTS)
        text = "\n\n".join(format_workload(cfg, r) for r in out["results"])
    if args.json:
        json.dump(out, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(text)
    return 0
