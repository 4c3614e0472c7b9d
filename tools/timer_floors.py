"""Where the timer's add + cancel goes, per task, against what no timer can save.

``purgatory bench timer`` adds N tasks one by one from a Python loop, then cancels them
the same way, and compares the CPU with ``loop.call_later`` + ``cancel``. This splits the
timer's side into what the loop and the calls cost before any timer work, and the rest.
Each part is a Python loop over the same N tasks (delays uniform over 1 ms .. 300 s, as
the bench), timed in CPU ns per task, in one process, round after round:

* ``loop``: ``for task in tasks: pass``;
* ``call(task)``: a compiled no-op method of a final class called as ``add(task)``;
  its module is built with mypyc here, in a scratch directory (the floor of ``add``; its
  parameter is an ``object``, so ``add``'s check that the task is a TimerTask falls in the
  wheel's share);
* ``call()``: the same class's compiled method that returns a float (``now_ms``'s floor);
* ``now_ms()``: ``timer.now_ms()``, i.e. ``call()`` + reading the clock;
* ``cancel idle``: ``task.cancel()`` of tasks in no timer: the call, the type check of an
  interpreted subclass's ``self`` and the first test of ``_unschedule`` (cancel's floor);
* ``add``, ``cancel``: the timer's, as in the bench (a waiter parked in ``advance_clock``,
  cancels in the order of the adds);
* ``call_later``: ``loop.call_later`` + ``handle.cancel`` + one loop iteration, as in the
  bench; 0.04 of it is the issue's budget for the timer's add + cancel.

Then ``add`` = ``call(task)`` + clock (``now_ms()`` - ``call()``) + the wheel's share, and
``cancel`` = ``cancel idle`` + unlinking. Below a million tasks, each part runs over the
tasks again until it has made a million calls (cancelled tasks are added again), after one
collection. Medians over the rounds, and their range:

    python tools/timer_floors.py --tasks 1000 10000 100000 1000000 --rounds 5 [--loop uvloop]

Needs the compiled core and mypyc (the dev extra). The machine is shared: compare the parts
of one run, not figures of different runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

FLOOR_MODULE = """
from typing import final


@final
class Sink:
    def add(self, task: object) -> None:
        pass

    def now(self) -> float:
        return 0.5
"""

PARTS = ("loop", "call(task)", "call()", "now_ms()", "cancel idle", "add", "cancel", "call_later")


def build_floor(scratch: Path) -> None:
    (scratch / "timer_floor.py").write_text(FLOOR_MODULE)
    subprocess.run(
        [sys.executable, "-m", "mypyc", "timer_floor.py"],
        cwd=scratch,
        check=True,
        capture_output=True,
    )
    sys.path.insert(0, str(scratch))


def per_task_ns(n: int, run: Callable[[], object], reps: int = 1) -> float:
    gc.collect()
    start = time.process_time_ns()
    for _ in range(reps):
        run()
    return (time.process_time_ns() - start) / (n * reps)


async def one_round(delays: list[int]) -> dict[str, float]:
    import timer_floor  # type: ignore[import-not-found]  # built by build_floor

    from purgatory._timer import SystemTimer
    from purgatory._wheel import TimerTask

    class Task(TimerTask):  # interpreted, as the bench's and users' tasks are
        __slots__ = ()

        def run(self) -> None:
            raise AssertionError("a cancelled task ran")

    n = len(delays)
    reps = max(1, 1_000_000 // n)  # small N: repeated, so that a figure is not 10 us
    out: dict[str, float] = {}
    loop = asyncio.get_running_loop()
    delays_s = [delay / 1000.0 for delay in delays]
    gc.collect()
    start = time.process_time_ns()
    for _ in range(reps):
        handles = [loop.call_later(delay, print) for delay in delays_s]
        for handle in handles:
            handle.cancel()
        await asyncio.sleep(0)  # the bench counts the iteration that drops cancelled handles
    out["call_later"] = (time.process_time_ns() - start) / (n * reps)
    del handles, delays_s

    timer = SystemTimer("floors")
    waiter = loop.create_task(timer.advance_clock(None))
    await asyncio.sleep(0)  # parked, as under a purgatory's reaper
    tasks = [Task(delay) for delay in delays]
    sink = timer_floor.Sink()

    def empty() -> None:
        for _ in tasks:
            pass

    def call_task() -> None:
        add = sink.add
        for task in tasks:
            add(task)

    def call_none() -> None:
        now = sink.now
        for _ in tasks:
            now()

    def now_ms() -> None:
        now = timer.now_ms
        for _ in tasks:
            now()

    def cancel_all() -> None:
        for task in tasks:
            task.cancel()

    def add_all() -> None:
        add = timer.add
        for task in tasks:
            add(task)

    out["loop"] = per_task_ns(n, empty, reps)
    out["call(task)"] = per_task_ns(n, call_task, reps)
    out["call()"] = per_task_ns(n, call_none, reps)
    out["now_ms()"] = per_task_ns(n, now_ms, reps)
    out["cancel idle"] = per_task_ns(n, cancel_all, reps)
    add_ns = cancel_ns = 0
    gc.collect()  # once: a collection between rounds would leave the caches cold
    for _ in range(reps):  # cancelled tasks are added again: the timer holds N at most
        start = time.process_time_ns()
        add_all()
        added = time.process_time_ns()
        cancel_all()
        add_ns += added - start
        cancel_ns += time.process_time_ns() - added
    out["add"] = add_ns / (n * reps)
    out["cancel"] = cancel_ns / (n * reps)
    if timer.size:
        raise AssertionError(f"{timer.size} tasks left after cancelling all")
    timer.close()
    await waiter
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[1000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--json", action="store_true", help="print the rounds as JSON")
    args = parser.parse_args()
    import purgatory

    if not purgatory.COMPILED:
        sys.exit("the core is not compiled: the floors are those of the compiled build")
    from purgatory.bench.runner import loop_factory

    results: dict[int, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="timer-floors-") as tmp:
        build_floor(Path(tmp))
        for n in args.tasks:
            rng = random.Random(1)
            delays = [rng.randint(1, 300_000) for _ in range(n)]
            with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
                results[n] = [runner.run(one_round(delays)) for _ in range(args.rounds)]
    if args.json:
        json.dump({str(n): rounds for n, rounds in results.items()}, sys.stdout)
        return
    print(f"{args.loop}, CPU ns per task, median [range] of {args.rounds} rounds")
    for n, rounds in results.items():
        med = {part: statistics.median(r[part] for r in rounds) for part in PARTS}
        print(f"\n{n:,} pending")
        for part in PARTS:
            values = [r[part] for r in rounds]
            print(f"  {part:12} {med[part]:7.1f}  [{min(values):.1f}..{max(values):.1f}]")
        clock = med["now_ms()"] - med["call()"]
        wheel_add = med["add"] - med["call(task)"] - clock
        unlink = med["cancel"] - med["cancel idle"]
        floor = med["call(task)"] + clock + med["cancel idle"]
        budget = 0.04 * med["call_later"]
        print(
            f"  add = call {med['call(task)']:.1f} + clock {clock:.1f} + wheel {wheel_add:.1f};"
            f" cancel = call {med['cancel idle']:.1f} + unlink {unlink:.1f}"
        )
        print(
            f"  budget 0.04 x call_later = {budget:.1f}; calls + clock = {floor:.1f}"
            f" ({floor / budget:.0%} of it); add + cancel = {med['add'] + med['cancel']:.1f}"
            f" (ratio {(med['add'] + med['cancel']) / med['call_later']:.3f})"
        )


if __name__ == "__main__":
    main()
