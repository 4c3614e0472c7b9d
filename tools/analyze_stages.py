"""Where ``purgatory analyze`` spends its CPU: executor time per phase, from Spark itself.

Runs ``run_analysis`` on TRACES into OUT with a session of its own (as the command makes
it), then reads every completed stage from Spark's status REST API and adds up, per phase
(the job description the pipeline's progress line sets), the tasks' run time and CPU
time. On the shared machine CPU seconds move far less with the load than wall seconds
do, so compare them, a baseline and a candidate run one after the other:

    python -m purgatory.analyze.generate --events 1000000 --malformed 10 --parts 8 \\
        --gzip --out /tmp/t1m
    mkdir /tmp/base && git archive main purgatory | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base python tools/analyze_stages.py /tmp/t1m /tmp/out-base
    python tools/analyze_stages.py /tmp/t1m /tmp/out-new

(the driver's own Python time, plots and report, is not in the stages: see ``wall``).
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from collections import defaultdict

from purgatory.analyze import run_analysis
from purgatory.analyze.session import get_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("traces")
    parser.add_argument("out")
    args = parser.parse_args()
    started = time.monotonic()
    spark = get_session().spark
    session_s = time.monotonic() - started
    run_analysis([args.traces], args.out, spark=spark, progress=False)
    wall_s = time.monotonic() - started
    context = spark.sparkContext
    url = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/stages?status=complete"
    with urllib.request.urlopen(url) as answer:
        stages = json.load(answer)
    phases: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for stage in stages:
        phase = phases[stage.get("description") or stage["name"]]
        phase[0] += stage["executorRunTime"] / 1e3  # ms
        phase[1] += stage["executorCpuTime"] / 1e9  # ns
    for name, (run_s, cpu_s) in sorted(phases.items(), key=lambda item: -item[1][1]):
        print(f"{name[:40]:40} run {run_s:7.1f} s  cpu {cpu_s:7.1f} s")
    run_total = sum(p[0] for p in phases.values())
    cpu_total = sum(p[1] for p in phases.values())
    print(
        f"{'all stages':40} run {run_total:7.1f} s  cpu {cpu_total:7.1f} s"
        f"  (session {session_s:.1f} s, wall {wall_s:.1f} s)"
    )
    spark.stop()


if __name__ == "__main__":
    main()
