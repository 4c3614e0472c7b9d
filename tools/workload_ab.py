"""Compare the compiled core of two source trees on the purgatory workload, same run, alternating.

Each side (a git revision, or a directory holding ``purgatory/`` and ``setup.py``; ``.`` is
the working tree) is built with mypyc as ``tools/core_ab.py`` builds it. Then, round after
round (every other round in reverse order), each build runs in a process of its own the
workload of ``purgatory bench --compare`` (200k requests, Kafka's TestPurgatoryPerformance)
for the floor, the purgatory and, with ``--call-later``, the hand-written baseline. Printed
per implementation: the CPU per request above the floor, median over the rounds for each
build, and the median and range of the per-round ratios B / A; and the cyclic GC's
collections per run (gc.callbacks), which the load of the shared machine does not move.

    python tools/workload_ab.py main . --rounds 12 --loop asyncio --call-later
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from core_ab import build

# argv: loop, comma-separated implementations, round number (odd: reverse order)
CHILD = r"""
import gc, json, sys, time
from purgatory.bench.runner import run_workload
from purgatory.bench.workload import PurgatoryPerformanceConfig
import purgatory
assert purgatory.COMPILED, "the core is not compiled"
loop, names, round_no = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
collections = [0, 0, 0]
gc.callbacks.append(
    lambda phase, info: phase == "stop" and collections.__setitem__(
        info["generation"], collections[info["generation"]] + 1)
)
out = {}
for name in names if round_no % 2 == 0 else names[::-1]:
    collections[:] = [0, 0, 0]
    result = run_workload(PurgatoryPerformanceConfig(), name, loop)
    out[name] = {"cpu_us": result.cpu_us_per_request, "collections": list(collections)}
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Run:
    cpu_us: float  # CPU per request
    collections: list[int]  # the cyclic GC's collections of generations 0, 1 and 2


def run(tree: Path, loop: str, names: list[str], round_no: int) -> dict[str, Run]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-c", CHILD, loop, ",".join(names), str(round_no)]
    done = subprocess.run(command, cwd=tree.parent, env=env, check=True, capture_output=True)
    return {name: Run(**fields) for name, fields in json.loads(done.stdout).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("a", help="git revision or directory (the reference)")
    parser.add_argument("b", help="git revision or directory (compared with A)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--nowait", action="store_true", help="also the purgatory-nowait run")
    parser.add_argument("--call-later", action="store_true", help="also the call_later baseline")
    args = parser.parse_args()
    names = ["floor", "purgatory"]
    if args.nowait:
        names.append("purgatory-nowait")
    if args.call_later:
        names.append("call_later")
    with tempfile.TemporaryDirectory(prefix="workload-ab-") as tmp:
        scratch = Path(tmp)
        trees = {"A": build(args.a, "A", scratch), "B": build(args.b, "B", scratch)}
        runs: dict[str, list[dict[str, Run]]] = {"A": [], "B": []}
        for round_no in range(args.rounds):
            for side in ("A", "B") if round_no % 2 == 0 else ("B", "A"):
                runs[side].append(run(trees[side], args.loop, names, round_no))
            print(
                f"round {round_no}: "
                + "; ".join(
                    f"{side} " + " ".join(f"{n} {runs[side][-1][n].cpu_us:.2f}" for n in names)
                    for side in ("A", "B")
                ),
                flush=True,
            )
    for name in names[1:]:
        above = {side: [r[name].cpu_us - r["floor"].cpu_us for r in runs[side]] for side in runs}
        ratios = [b / a for a, b in zip(above["A"], above["B"], strict=True)]
        print(
            f"{name:17} us/request above floor: A {statistics.median(above['A']):.2f}, "
            f"B {statistics.median(above['B']):.2f}; B / A {statistics.median(ratios):.3f} "
            f"[{min(ratios):.3f}..{max(ratios):.3f}]"
        )
    for name in names:
        for side in runs:
            gen0 = [r[name].collections[0] for r in runs[side]]
            print(
                f"{name:17} {side} GC collections per run: generation 0 median "
                f"{statistics.median(gen0):.0f} [{min(gen0)}..{max(gen0)}], generation 2 "
                f"{statistics.median(r[name].collections[2] for r in runs[side]):.0f}"
            )


if __name__ == "__main__":
    main()
