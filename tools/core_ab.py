"""Compare the compiled core of two source trees on its hot paths, same run, alternating.

Each side (a git revision, or a directory holding ``purgatory/`` and ``setup.py``; ``.`` is
the working tree) is built with mypyc in a scratch directory. Then a micro-benchmark of the
core's hot paths runs in each build, round after round (every other round in reverse
order), and the per-round ratios B / A are printed: median and range. This machine is
shared and noisy, so only same-round ratios over many rounds mean much; ``--instructions``
counts instructions under valgrind's cachegrind instead, which no load disturbs.

    python tools/core_ab.py main . --rounds 30
    python tools/core_ab.py main . --instructions

Used to decide whether a hand-inlined copy in the core earns its keep (a copy must earn at least 3%
on its hot path). Needs a C compiler and mypyc (the dev extra); about a minute per build.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METRICS = ("create", "watch", "complete", "request", "timer_add_cancel")

# argv: ops, repetitions, "time" (print the best ns/op of each metric) or "count" (no clock:
# cachegrind counts whatever runs, so the difference of two repetition counts is per op)
BENCH = r"""
import asyncio, gc, json, random, sys, time
import purgatory
from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory._timer import SystemTimer
from purgatory._wheel import TimerTask

assert purgatory.COMPILED, "the core is not compiled"
N, REPS, MODE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = random.Random(1)
KEYS = [tuple(rng.sample(range(100), 3)) for _ in range(N)]
DELAYS = [rng.randint(1, 300_000) for _ in range(N)]

class Op(DelayedOperation):  # interpreted, as users' subclasses are
    __slots__ = ("ready",)
    def __init__(self, delay_ms):
        super().__init__(delay_ms)
        self.ready = False
    def try_complete(self):
        return self.force_complete() if self.ready else False

class Task(TimerTask):
    __slots__ = ()
    def run(self):
        raise AssertionError

def cpu_ns_per_op(fn):
    gc.collect(); gc.disable()
    start = time.process_time_ns(); fn(); spent = time.process_time_ns() - start
    gc.enable()
    return spent / N

async def main():
    best = {}
    for _ in range(REPS):
        def create():
            for delay in DELAYS:
                Op(delay)
        if MODE == "time":  # counted, it would be the request's creation over again
            best["create"] = min(best.get("create", 1e18), cpu_ns_per_op(create))
        p = DelayedOperationPurgatory("bench", purge_interval=10**9)
        ops = []
        def watch():  # an op per request, watched on 3 keys of 100 and timed out
            for delay, keys in zip(DELAYS, KEYS):
                op = Op(delay)
                p.try_complete_else_watch_nowait(op, keys)
                ops.append(op)
        def complete():  # every op completed by a trigger, leaving its lists and the timer
            for op in ops:
                op.ready = True
            for key in range(100):
                p.check_and_complete_nowait(key)
        w, c = cpu_ns_per_op(watch), cpu_ns_per_op(complete)
        assert p.num_delayed == 0 and p.watched == 0
        await p.shutdown()
        timer, tasks = SystemTimer("bench"), [Task(d) for d in DELAYS]
        def add_cancel():
            for task in tasks:
                timer.add(task)
            for task in tasks:
                task.cancel()
        t = cpu_ns_per_op(add_cancel)
        for name, value in zip(("watch", "complete", "request", "timer_add_cancel"),
                               (w, c, w + c, t)):
            best[name] = min(best.get(name, value), value)
    if MODE == "time":
        print(json.dumps(best))

asyncio.run(main())
"""


def build(side: str, name: str, scratch: Path) -> Path:
    """The compiled core of ``side`` (a git revision or a directory), in scratch/name."""
    tree = scratch / name
    if Path(side).is_dir():
        shutil.copytree(
            Path(side) / "purgatory",
            tree / "purgatory",
            ignore=shutil.ignore_patterns("*.so", "__pycache__"),
        )
        shutil.copy(Path(side) / "setup.py", tree / "setup.py")
    else:
        tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", side, "purgatory", "setup.py"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    env = {k: v for k, v in os.environ.items() if k != "PURGATORY_PURE_PYTHON"}
    # setup.py alone (no pyproject.toml beside it): only the extensions are built
    subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
    )
    return tree


def bench(tree: Path, args: list[str], scratch: Path, prefix: list[str] = []) -> str:  # noqa: B006
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    command = [*prefix, sys.executable, "-c", BENCH, *args]
    done = subprocess.run(command, cwd=scratch, env=env, check=True, capture_output=True)
    return done.stdout.decode() + done.stderr.decode()


def instructions_per_op(tree: Path, ops: int, scratch: Path) -> float:
    grind = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    counts = []
    for reps in (1, 3):
        out = bench(tree, [str(ops), str(reps), "count"], scratch, grind)
        counts.append(int(re.findall(r"I\s+refs:\s+([\d,]+)", out)[-1].replace(",", "")))
    return (counts[1] - counts[0]) / (2 * ops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("a", help="git revision or directory (the reference)")
    parser.add_argument("b", help="git revision or directory (compared with A)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--ops", type=int, default=50_000, help="operations per measurement")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per request (create + watch + complete) under cachegrind",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="core-ab-") as tmp:
        scratch = Path(tmp)
        trees = {"A": build(args.a, "A", scratch), "B": build(args.b, "B", scratch)}
        if args.instructions:
            counts = {
                name: instructions_per_op(tree, 20_000, scratch) for name, tree in trees.items()
            }
            ratio = counts["B"] / counts["A"]
            print(
                f"instructions per request + timer add/cancel: A {counts['A']:.1f}, "
                f"B {counts['B']:.1f}, B / A {ratio:.4f}"
            )
            return
        runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
        for round_no in range(args.rounds):
            for name in ("A", "B") if round_no % 2 == 0 else ("B", "A"):
                runs[name].append(
                    json.loads(bench(trees[name], [str(args.ops), "5", "time"], scratch))
                )
        for metric in METRICS:
            a = statistics.median(r[metric] for r in runs["A"])
            ratios = [b[metric] / r[metric] for b, r in zip(runs["B"], runs["A"], strict=True)]
            print(
                f"{metric:17} A {a:7.0f} ns/op   B / A {statistics.median(ratios):.3f}"
                f" [{min(ratios):.3f}..{max(ratios):.3f}]"
            )


if __name__ == "__main__":
    main()
