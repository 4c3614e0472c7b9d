"""One librdkafka producer against the broker of several checkouts, alternating, and
against librdkafka's own C mock cluster in the same rounds.

Each checkout (a directory) serves with its own ``.venv/bin/python -m purgatory serve``
(or, without a ``.venv``, this interpreter with the checkout first on ``PYTHONPATH``): one
topic ``t`` of one partition, replication factor 3. The producer is this tree's
``examples/kafka_throughput.py`` one (acks=all, 100-byte records, ``linger.ms=5``), the same
for every build: ``--warmup`` records first, unmeasured, then ``--records`` timed. The
broker's CPU is read from ``/proc/PID/task/*/schedstat`` (nanoseconds). Each round runs
every build and the mock once, every other round in reverse order; the summary gives each
one's median and range of records/s, broker µs a record, records/s over the mock's of the
same round, and broker CPU a record over the first build's of the same round.

    python tools/broker_ab.py --rounds 5 ../main ../old-checkout

Linux only (``/proc``); needs confluent-kafka (the dev extra).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "kafka_throughput", ROOT / "examples" / "kafka_throughput.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_ns(pid: int) -> int:
    """The CPU time of every thread of ``pid`` so far, in nanoseconds."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except OSError:  # a thread that ended meanwhile
            pass
    return total


def serve_command(tree: Path) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    python = tree / ".venv" / "bin" / "python"
    if not python.exists():
        python = Path(sys.executable)
        env["PYTHONPATH"] = str(tree)
    command = [str(python), "-m", "purgatory", "serve", "--port", "0", "--kafka-port", "0"]
    return [*command, "--topic", "t:1:3", "--log-level", "WARNING"], env


def run_broker(
    tree: Path, produce: Callable[..., float], records: int, warmup: int
) -> dict[str, float]:
    command, env = serve_command(tree)
    server = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        bootstrap = ""
        while not bootstrap:  # "kafka bootstrap.servers=HOST:PORT", as every build prints
            line = server.stdout.readline()
            if not line:
                raise RuntimeError(f"{tree}: the server ended before it listened")
            if line.startswith("kafka bootstrap.servers="):
                bootstrap = line.split("=", 1)[1].strip()
        produce(bootstrap, warmup, False)
        before = cpu_ns(server.pid)
        elapsed = produce(bootstrap, records, False)
        broker = cpu_ns(server.pid) - before
        return {"rps": records / elapsed, "us": broker / records / 1000}
    finally:
        server.terminate()
        server.wait(10)


def run_mock(produce: Callable[..., float], records: int, warmup: int) -> dict[str, float]:
    from confluent_kafka import Producer

    holder = Producer({"test.mock.num.brokers": 3})  # the mock lives as long as it does
    brokers = holder.list_topics(timeout=10).brokers.values()
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers)
    produce(bootstrap, warmup, False)
    elapsed = produce(bootstrap, records, False)
    return {"rps": records / elapsed}


def spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path, help="checkouts whose brokers to run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--warmup", type=int, default=1000)
    args = parser.parse_args()
    produce = _example().confluent_produce
    names = [str(tree) for tree in args.trees] + ["mock"]
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            if name == "mock":
                result = run_mock(produce, args.records, args.warmup)
            else:
                result = run_broker(Path(name), produce, args.records, args.warmup)
            result["load"] = os.getloadavg()[0]
            results[name].append(result)
            figures = " ".join(f"{k} {v:,.3f}" for k, v in result.items())
            print(f"round {round_ + 1} {name}: {figures}", flush=True)
    first = results[names[0]]
    mock = results["mock"]
    loads = [r["load"] for rs in results.values() for r in rs]
    print(f"\n{args.rounds} rounds, load average {min(loads):.1f}-{max(loads):.1f}")
    for name in names:
        rs = results[name]
        line = f"{name}: records/s {spread([r['rps'] for r in rs], ',.0f')}"
        if name != "mock":
            line += f", broker µs/record {spread([r['us'] for r in rs], '.3f')}"
            to_mock = [r["rps"] / m["rps"] for r, m in zip(rs, mock, strict=True)]
            to_first = [r["us"] / f["us"] for r, f in zip(rs, first, strict=True)]
            line += f", x mock {spread(to_mock, '.2f')}, CPU x first {spread(to_first, '.2f')}"
        print(line)


if __name__ == "__main__":
    main()
