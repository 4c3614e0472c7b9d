"""Measure the embedded Kafka cluster's start-up as a test sees it: from entering
``EmbeddedKafka(brokers=3)`` to a client's first Metadata answered, for kafka-python and
confluent-kafka; the median and the worst of ``--rounds`` runs (after one warm-up, so
imports are not counted).

    python examples/embedded_startup.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from purgatory.kafka import EmbeddedKafka


def kafka_python_metadata(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert "t" in admin.list_topics()
    finally:
        admin.close()


def confluent_metadata(bootstrap: str) -> None:
    assert "t" in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def measure(first_metadata: Callable[[str], None]) -> tuple[float, float]:
    """(cluster started, first Metadata answered), seconds after entering."""
    entered = time.perf_counter()
    with EmbeddedKafka(brokers=3, topics={"t": 1}) as kafka:
        started = time.perf_counter()
        first_metadata(kafka.bootstrap_servers)
        answered = time.perf_counter()
    return started - entered, answered - entered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    rounds = parser.parse_args().rounds
    clients = [("kafka-python", kafka_python_metadata), ("confluent", confluent_metadata)]
    for name, client in clients:
        measure(client)  # warm-up
        runs = [measure(client) for _ in range(rounds)]
        started = [s * 1000 for s, _ in runs]
        answered = [a * 1000 for _, a in runs]
        print(
            f"{name:13} started: median {statistics.median(started):.1f} ms, "
            f"max {max(started):.1f} ms; first Metadata answered: median "
            f"{statistics.median(answered):.1f} ms, max {max(answered):.1f} ms"
        )


if __name__ == "__main__":
    main()
