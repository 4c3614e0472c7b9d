"""The Kafka listeners' counters as Prometheus series, read from :class:`ProtocolStats` at
scrape time (the request path pays nothing for them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import final

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from purgatory.kafka.server import ProtocolStats


@final
class ProtocolCollector(Collector):
    """``purgatory_kafka_requests_total{api}`` and ``purgatory_kafka_bad_input_total{kind}``."""

    def __init__(self, stats: ProtocolStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "purgatory_kafka_requests", "Kafka protocol requests by API", labels=["api"]
        )
        for api, count in sorted(self._stats.requests.items()):
            requests.add_metric([api], count)
        bad = CounterMetricFamily(
            "purgatory_kafka_bad_input",
            "Kafka protocol input refused (the connection closed or an error answered)",
            labels=["kind"],
        )
        for kind, count in sorted(self._stats.bad_input.items()):
            bad.add_metric([kind], count)
        yield requests
        yield bad
