"""What a test pays before its first Kafka request, each figure from fresh processes.

Two measurements, ``--runs`` times each, alternating, and their median, lowest and highest:

* ``fixture``: the ``kafka_cluster`` fixture's set-up in a stranger's pytest run,
  ``pytest -c /dev/null -p no:cacheprovider -p no:schemathesis
  examples/kafka_cluster_startup_test.py`` (no plugin imports hypothesis; ``--hypothesis``
  leaves schemathesis's plugin in, which imports it when pytest starts). This file,
  loaded as a pytest plugin (``-p startup_bench``), times the set-up to the millisecond,
  wall clock and the process's CPU time, and says how many modules it imported;
* ``metadata``: ``python examples/embedded_startup.py --cold``: confluent-kafka's first
  Metadata answered by a fresh 3-broker cluster, in ms after the process started, and the
  CPU the process had used by then.

It runs ``python -m pytest`` from the repository's root, where pytest finds the package's
setuptools metadata (``purgatory_aio.egg-info``, left by ``pip install -e``) listing every
module, and marks them all for assertion rewriting, as it does for a wheel install of a
distribution with a ``pytest11`` entry point; the editable install's ``pytest`` script
run elsewhere does not (see docs/performance.md, "Start-up").

    python tools/startup_bench.py [--runs 10] [--hypothesis]

Bytecode: this machine sets ``PYTHONDONTWRITEBYTECODE=1``, so the package's bytecode is
cached only after ``python -m compileall -q purgatory``; the first line says whether it is.
The machine is shared: compare medians taken in the same run, and CPU times over wall times.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TAG = "STARTUP_BENCH"


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Iterator[None]:
    """(As a pytest plugin) the kafka_cluster fixture's set-up, timed."""
    if fixturedef.argname != "kafka_cluster":
        yield
        return
    modules = len(sys.modules)
    hypothesis = "hypothesis" in sys.modules
    wall, cpu = time.perf_counter(), time.process_time()
    yield
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    with open(os.environ[TAG], "a") as out:
        print(
            f"wall={wall * 1000:.1f} cpu={cpu * 1000:.1f} "
            f"modules={len(sys.modules) - modules} hypothesis={hypothesis}",
            file=out,
        )


def _fixture(report: Path, hypothesis: bool) -> dict[str, float]:
    command = [sys.executable, "-m", "pytest", "-q", "-c", os.devnull, "-p", "no:cacheprovider"]
    if not hypothesis:
        command += ["-p", "no:schemathesis"]
    command += ["-p", "startup_bench", "examples/kafka_cluster_startup_test.py"]
    env = {**os.environ, TAG: str(report), "PYTHONPATH": str(ROOT / "tools")}
    report.write_text("")
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"pytest failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    fields = dict(f.split("=") for f in report.read_text().split())
    if (fields["hypothesis"] == "True") != hypothesis:
        print(f"note: hypothesis imported before the set-up: {fields['hypothesis']}")
    return {
        "wall": float(fields["wall"]),
        "cpu": float(fields["cpu"]),
        "n": float(fields["modules"]),
    }


def _metadata() -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, "examples/embedded_startup.py", "--cold"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"first Metadata answered (\d+).*CPU by then (\d+)", done.stdout)
    if found is None:
        raise SystemExit(f"unexpected output: {done.stdout}")
    return float(found[1]), float(found[2])


def _cached() -> str:
    sources = list((ROOT / "purgatory").rglob("*.py"))
    tag = sys.implementation.cache_tag
    cached = [s for s in sources if (s.parent / "__pycache__" / f"{s.stem}.{tag}.pyc").exists()]
    return f"{len(cached)} of {len(sources)} modules of purgatory/ have bytecode cached"


def _line(name: str, values: list[float], unit: str) -> str:
    return (
        f"{name}: median {statistics.median(values):.0f} {unit}, "
        f"lowest {min(values):.0f}, highest {max(values):.0f} ({len(values)} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--hypothesis", action="store_true", help="leave schemathesis's plugin in (imports it)"
    )
    args = parser.parse_args()
    print(_cached())
    report = ROOT / ".startup_bench.out"
    runs: list[dict[str, float]] = []
    answered: list[tuple[float, float]] = []
    try:
        for _ in range(args.runs):
            runs.append(_fixture(report, args.hypothesis))
            answered.append(_metadata())
    finally:
        report.unlink(missing_ok=True)
    print(f"modules the set-up imported: {statistics.median(r['n'] for r in runs):.0f}")
    print(_line("fixture set-up, wall", [r["wall"] for r in runs], "ms"))
    print(_line("fixture set-up, CPU", [r["cpu"] for r in runs], "ms"))
    print(
        _line("first Metadata answered after the process's start", [a for a, _ in answered], "ms")
    )
    print(_line("the process's CPU by then", [c for _, c in answered], "ms"))


if __name__ == "__main__":
    main()
