"""The Kafka listeners' counters as Prometheus series, read from :class:`ProtocolStats` at
scrape time (the request path pays nothing for them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.quotas import ClientQuotas
from purgatory.kafka.sasl import SERVED_MECHANISMS


@final
class ProtocolCollector(Collector):
    """``purgatory_kafka_requests_total{api,version}``,
    ``purgatory_kafka_client_connections_total{software,version}``,
    ``purgatory_kafka_bad_input_total{kind}``,
    ``purgatory_kafka_connections``, ``purgatory_kafka_connections_closed_total{reason}``
    and ``purgatory_kafka_authentication_failures_total{mechanism}``; with ``quotas``,
    ``purgatory_kafka_throttle_time_ms_total{quota_type,user,client_id}``,
    ``purgatory_kafka_throttled_total{quota_type,user,client_id}`` (the quota's entity as
    Kafka's quota metric tags name it, ``""`` for a part it has not) and
    ``purgatory_kafka_connections_throttled_total{ip}``."""

    def __init__(self, stats: ProtocolStats, quotas: ClientQuotas | None = None) -> None:
        self._stats = stats
        self._quotas = quotas

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
        for reason in ("limit", "idle_timeout", "session_expired", "connection_rate"):
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
        if self._quotas is not None:
            yield from _quota_metrics(self._quotas)


def _quota_metrics(quotas: ClientQuotas) -> Iterator[Metric]:
    labels = ["quota_type", "user", "client_id"]
    throttle_time = CounterMetricFamily(
        "purgatory_kafka_throttle_time_ms",
        "Throttle time given by the client quotas, by quota type and entity (Kafka's "
        "throttle-time per user/client-id), ms",
        labels=labels,
    )
    for key, ms in sorted(quotas.throttle_time_ms.items()):
        throttle_time.add_metric(list(key), ms)
    throttled = CounterMetricFamily(
        "purgatory_kafka_throttled",
        "Requests throttled by the client quotas, by quota type and entity",
        labels=labels,
    )
    for key, count in sorted(quotas.throttled.items()):
        throttled.add_metric(list(key), count)
    connections = CounterMetricFamily(
        "purgatory_kafka_connections_throttled",
        "Connections refused over their IP's connection_creation_rate",
        labels=["ip"],
    )
    for ip, count in sorted(quotas.connections_throttled.items()):
        connections.add_metric([ip], count)
    yield throttle_time
    yield throttled
    yield connections
