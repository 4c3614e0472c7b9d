"""``purgatory simulate``: run a broker scenario, print a summary table or ``--json``.

Exit status: 0 when every invariant held and no acked record was lost, 1 otherwise,
2 for bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import sys
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any

from purgatory import event_loops
from purgatory.cli_types import int_at_least, non_negative_float, positive_float

if TYPE_CHECKING:
    from purgatory.sim.summary import RunSummary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from purgatory.sim.scenarios import SCENARIOS

    parser.add_argument(
        "--scenario", choices=sorted(SCENARIOS), default="steady", help="what to simulate (--list)"
    )
    parser.add_argument(
        "--duration", type=positive_float, default=10.0, help="seconds of simulated time"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed (same seed, same run)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--trace", metavar="PATH", help="write operation traces (JSON Lines)")
    parser.add_argument(
        "--virtual-time", action="store_true", help="run on virtual time (deterministic)"
    )
    parser.add_argument(
        "--loop",
        choices=event_loops.available_loops(),
        default=event_loops.default_loop(),
        help="event loop on real time (ignored with --virtual-time)",
    )
    parser.add_argument("--no-check", action="store_true", help="skip the invariant checker")
    parser.add_argument("--quiet", action="store_true", help="no live progress line")
    parser.add_argument("--list", action="store_true", help="list scenarios and exit")
    load = parser.add_argument_group("workload (defaults: the scenario's)")
    load.add_argument("--produce-rate", type=non_negative_float, help="requests/s")
    load.add_argument("--fetch-rate", type=non_negative_float, help="consumer fetches/s")
    load.add_argument("--records-per-request", type=int_at_least(1), help="records per produce")
    load.add_argument("--record-bytes", type=int_at_least(0), help="bytes per record value")
    load.add_argument(
        "--acks", type=int, choices=(-1, 0, 1), help="produce acks (-1: all in-sync replicas)"
    )
    load.add_argument(
        "--produce-timeout-ms", type=int_at_least(0), help="how long an acks=all produce waits"
    )
    load.add_argument(
        "--fetch-min-bytes", type=int_at_least(0), help="bytes a consumer fetch waits for"
    )
    load.add_argument(
        "--fetch-max-bytes", type=int_at_least(1), help="most bytes one fetch returns"
    )
    load.add_argument(
        "--fetch-max-wait-ms", type=int_at_least(0), help="how long a consumer fetch may wait"
    )


_WORKLOAD_ARGS = (
    "produce_rate",
    "fetch_rate",
    "records_per_request",
    "record_bytes",
    "acks",
    "produce_timeout_ms",
    "fetch_min_bytes",
    "fetch_max_bytes",
    "fetch_max_wait_ms",
)


def run(args: argparse.Namespace) -> int:
    from purgatory.sim.runner import run_scenario
    from purgatory.sim.scenarios import SCENARIOS
    from purgatory.sim.summary import format_table
    from purgatory.trace import TraceWriter

    if args.list:
        for name, scenario in SCENARIOS.items():
            print(f"{name:<16}{scenario.description}")
        return 0
    scenario = SCENARIOS[args.scenario]
    changes = {k: getattr(args, k) for k in _WORKLOAD_ARGS if getattr(args, k) is not None}
    try:
        scenario = scenario.with_workload(**changes)
    except (TypeError, ValueError) as exc:
        print(f"purgatory simulate: error: {exc}", file=sys.stderr)
        return 2
    progress = None if args.quiet else stderr_progress()

    trace = TraceWriter(args.trace) if args.trace else None
    try:
        coro = run_scenario(
            scenario,
            args.duration,
            args.seed,
            listeners=[trace] if trace is not None else [],
            progress=progress,
            check=not args.no_check,
            on_fault=trace.mark_fault if trace is not None else None,
        )
        with fewer_collections():
            summary = _run(coro, virtual=args.virtual_time, loop=args.loop)
    finally:
        if trace is not None:
            trace.close()
    if args.json:
        document = summary.to_dict()
        document["workload"] = dataclasses.asdict(scenario.workload)
        if trace is not None:
            document["trace"] = {"path": trace.path, "events": trace.events}
        print(json.dumps(document, sort_keys=False))
    else:
        print(format_table(summary))
    return 1 if summary.failed else 0


# Young-generation size while a simulation runs (CPython's default is 700).
GC_THRESHOLD = 10_000


@contextlib.contextmanager
def fewer_collections(threshold: int = GC_THRESHOLD) -> Iterator[None]:
    """Run the cyclic garbage collector less often, for the duration of the block.

    A run allocates millions of short-lived objects that reference counting frees, on top
    of a long-lived heap that only grows (the replicas' logs). At CPython's default
    threshold the heap's growth triggers full collections that traverse every record
    ever appended, about a tenth of a steady run's time; a larger young generation lets
    the short-lived objects die first. Cyclic garbage is still collected.
    """
    old = gc.get_threshold()
    gc.set_threshold(threshold, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _run(coro: Coroutine[Any, Any, RunSummary], *, virtual: bool, loop: str) -> RunSummary:
    if virtual:
        from purgatory.testing import run_virtual

        return run_virtual(coro)
    return event_loops.run(coro, loop)


def stderr_progress() -> Callable[[str], None]:
    """A ``progress`` for :func:`run_scenario` writing to stderr: lines starting with "\\r"
    rewrite themselves in place on a terminal; in a log, every line is a line of its own."""
    tty = sys.stderr.isatty()
    in_place = False  # the terminal's cursor is at the end of a rewritable line

    def progress(line: str) -> None:
        nonlocal in_place
        rewrite = line.startswith("\r")
        if not tty:
            text = line[1:] + "\n" if rewrite else line
        else:
            text = "\n" + line if in_place and not rewrite else line
            in_place = rewrite
        sys.stderr.write(text)
        sys.stderr.flush()

    return progress
