"""Measure the embedded Kafka cluster's start-up as a test sees it.

Warm (the default): from entering ``EmbeddedKafka(brokers=3)`` to a client's first
Metadata answered, for kafka-python and confluent-kafka; the median and the worst of
``--rounds`` runs (after one warm-up, so imports are not counted)::

    python examples/embedded_startup.py [--rounds 20]

Cold (``--cold``): one run in this fresh process, every figure counted from the process's
start (as the operating system recorded it; where it does not say, from this script's
first line): the client library imported, ``purgatory.kafka.embedded`` imported, the
cluster started, the client's first Metadata answered; then the CPU time the process had
used by then (all its threads, from its start), which a loaded machine disturbs less. Run
it several times, each a new process (``tools/startup_bench.py`` does, and takes medians)::

    python examples/embedded_startup.py --cold [--client confluent|kafka-python]
"""

from __future__ import annotations

import time

FIRST_LINE = time.time()

import argparse  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
from collections.abc import Callable  # noqa: E402


def process_start() -> tuple[float, str]:
    """When this process started (wall clock), and what says so: Linux's record of it
    (to its clock tick, 10 ms), else this script's first line."""
    try:
        with open("/proc/self/stat") as stat:
            ticks = int(stat.read().rpartition(")")[2].split()[19])
        with open("/proc/uptime") as uptime:
            up = float(uptime.read().split()[0])
    except (OSError, ValueError, IndexError):
        return FIRST_LINE, "the script's first line"
    booted = time.time() - up
    return booted + ticks / os.sysconf("SC_CLK_TCK"), "the process's start"


def kafka_python_metadata(bootstrap: str) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert "t" in admin.list_topics()
    finally:
        admin.close()


def confluent_metadata(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    assert "t" in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


CLIENTS: dict[str, tuple[str, Callable[[str], None]]] = {
    "kafka-python": ("kafka", kafka_python_metadata),
    "confluent": ("confluent_kafka.admin", confluent_metadata),
}


def measure(first_metadata: Callable[[str], None]) -> tuple[float, float]:
    """(cluster started, first Metadata answered), seconds after entering."""
    from purgatory.kafka.embedded import EmbeddedKafka

    entered = time.perf_counter()
    with EmbeddedKafka(brokers=3, topics={"t": 1}) as kafka:
        started = time.perf_counter()
        first_metadata(kafka.bootstrap_servers)
        answered = time.perf_counter()
    return started - entered, answered - entered


def cold(client: str) -> None:
    """One cold run, each step's end in ms after the process started."""
    import importlib

    module, first_metadata = CLIENTS[client]
    importlib.import_module(module)
    client_imported = time.time()
    from purgatory.kafka.embedded import EmbeddedKafka

    imported = time.time()
    with EmbeddedKafka(brokers=3, topics={"t": 1}) as kafka:
        started = time.time()
        first_metadata(kafka.bootstrap_servers)
        answered = time.time()
        cpu = time.process_time()  # the process's CPU so far, every thread's, its start's too
    start, since = process_start()
    ms = [(t - start) * 1000 for t in (FIRST_LINE, client_imported, imported, started, answered)]
    print(
        f"{client}: ms after {since}: script {ms[0]:.0f}, client imported {ms[1]:.0f}, "
        f"purgatory.kafka.embedded imported {ms[2]:.0f} (+{ms[2] - ms[1]:.0f}), "
        f"cluster started {ms[3]:.0f} (+{ms[3] - ms[2]:.0f}), "
        f"first Metadata answered {ms[4]:.0f} (+{ms[4] - ms[3]:.0f}); "
        f"CPU by then {cpu * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--cold", action="store_true", help="one run from the process's start")
    parser.add_argument("--client", choices=sorted(CLIENTS), default="confluent")
    args = parser.parse_args()
    if args.cold:
        cold(args.client)
        return
    for name, (_, client) in CLIENTS.items():
        measure(client)  # warm-up
        runs = [measure(client) for _ in range(args.rounds)]
        started = [s * 1000 for s, _ in runs]
        answered = [a * 1000 for _, a in runs]
        print(
            f"{name:13} started: median {statistics.median(started):.1f} ms, "
            f"max {max(started):.1f} ms; first Metadata answered: median "
            f"{statistics.median(answered):.1f} ms, max {max(answered):.1f} ms"
        )


if __name__ == "__main__":
    main()
