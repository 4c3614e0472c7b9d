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

(the driver's own Python time, plots and report, is not in the stages: see ``wall``). The
stages' CPU is the task threads' alone: on Linux the JVM's CPU by thread follows, where the
JIT compilers and the collectors show (at 10 million events they took about 60 of the
JVM's 178 CPU-seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request
from collections import defaultdict

from purgatory.analyze import run_analysis
from purgatory.analyze.session import get_session


def _jvm_pid() -> int | None:
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    return None if jvm is None else int(jvm.java.lang.ProcessHandle.current().pid())


def _cpu_s(stat_path: str) -> tuple[str, float]:
    """(name, user + system CPU seconds) of a process or thread, from its /proc stat."""
    with open(stat_path) as fh:
        text = fh.read()
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    return name, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _jvm_threads(pid: int) -> dict[str, float]:
    """CPU seconds of the JVM's live threads, grouped by name without its number (GC,
    JIT compiler, task threads...): where the CPU outside the stages went."""
    groups: dict[str, float] = defaultdict(float)
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name, cpu = _cpu_s(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue  # the thread ended meanwhile
        groups[name.rstrip("0123456789#-").strip()] += cpu
    return groups


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
    phases: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for stage in stages:
        phase = phases[stage.get("description") or stage["name"]]
        phase[0] += stage["executorRunTime"] / 1e3  # ms
        phase[1] += stage["executorCpuTime"] / 1e9  # ns
        phase[2] += stage["jvmGcTime"] / 1e3  # ms, the tasks' time in collections
    for name, (run_s, cpu_s, gc_s) in sorted(phases.items(), key=lambda item: -item[1][1]):
        print(f"{name[:40]:40} run {run_s:7.1f} s  cpu {cpu_s:7.1f} s  gc {gc_s:6.1f} s")
    run_total = sum(p[0] for p in phases.values())
    cpu_total = sum(p[1] for p in phases.values())
    gc_total = sum(p[2] for p in phases.values())
    print(
        f"{'all stages':40} run {run_total:7.1f} s  cpu {cpu_total:7.1f} s  gc {gc_total:6.1f} s"
        f"  (session {session_s:.1f} s, wall {wall_s:.1f} s)"
    )
    pid = _jvm_pid()
    if pid is not None and os.path.exists(f"/proc/{pid}/stat"):  # Linux
        # every thread's CPU, those that ended included: GC and JIT are not in the stages
        print(f"{'JVM process':40} cpu {_cpu_s(f'/proc/{pid}/stat')[1]:7.1f} s")
        threads = sorted(_jvm_threads(pid).items(), key=lambda item: -item[1])
        for name, cpu in threads[:8]:
            print(f"  threads {name[:31]:31}     cpu {cpu:7.1f} s")
    spark.stop()


if __name__ == "__main__":
    main()
