"""The Kafka listeners' counters as Prometheus series, read from :class:`ProtocolStats` at
scrape time (the request path pays nothing for them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from purgatory.kafka.sasl import SERVED_MECHANISMS
from purgatory.kafka.server import ProtocolStats


@final
class ProtocolCollector(Collector):
    """``purgatory_kafka_requests_total{api,version}``,
    ``purgatory_kafka_client_connections_total{software,version}``,
    ``purgatory_kafka_bad_input_total{kind}``,
    ``purgatory_kafka_connections``, ``purgatory_kafka_connections_closed_total{reason}``
    and ``purgatory_kafka_authentication_failures_total{mechanism}``."""

    def __init__(self, stats: ProtocolStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "purgatory_kafka_requests",
            "Kafka protocol requests by API and version",
            labels=["api", "version"],
        )
        for (api, version), count in sorted(self._stats.requests.items()):
            requests.add_metric([api, str(version)], count)
        clients = CounterMetricFamily(
            "purgatory_kafka_client_connections",
            "Kafka connections by the client software they announced (ApiVersions v3+)",
            labels=["software", "version"],
        )
        for (software, software_version), count in sorted(self._stats.clients.items()):
            clients.add_metric([software, software_version], count)
        bad = CounterMetricFamily(
            "purgatory_kafka_bad_input",
            "Kafka protocol input refused (the connection closed or an error answered)",
            labels=["kind"],
        )
        for kind, count in sorted(self._stats.bad_input.items()):
            bad.add_metric([kind], count)
        connections = GaugeMetricFamily(
            "purgatory_kafka_connections", "Kafka protocol connections open, all listeners"
        )
        connections.add_metric([], self._stats.connections)
        closed = CounterMetricFamily(
            "purgatory_kafka_connections_closed",
            "Kafka connections the server closed: over the limit, or idle",
            labels=["reason"],
        )
        # every reason from the first scrape
        for reason in ("limit", "idle_timeout", "session_expired"):
            closed.add_metric([reason], self._stats.closed[reason])
        failures = CounterMetricFamily(
            "purgatory_kafka_authentication_failures",
            "SASL authentications refused (wrong password, unknown user, bad token), by mechanism",
            labels=["mechanism"],
        )
        for mechanism in SERVED_MECHANISMS:  # every mechanism from the first scrape
            failures.add_metric([mechanism], self._stats.authentication_failures[mechanism])
        yield requests
        yield clients
        yield bad
        yield connections
        yield closed
        yield failures
