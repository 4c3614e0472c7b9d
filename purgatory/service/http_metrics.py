"""Service-level Prometheus metrics: HTTP requests, parked requests, rejections, the
stored bytes, and the hits of the Kafka fault rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final, final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from purgatory.metrics import DURATION_BUCKETS
from purgatory.sim.log import LogSpace

if TYPE_CHECKING:
    from purgatory.kafka.faults import Faults

#: Long polls dominate: latencies span the same range as operation durations.
HTTP_BUCKETS: Final = DURATION_BUCKETS

#: Why a request was refused before reaching the broker.
REJECT_REASONS: Final = (
    "invalid",
    "too_large",
    "timeout_ceiling",
    "overloaded",
    "shutting_down",
    "bad_host",
    "unauthorized",
    "media_type",
    "not_found",
    "method_not_allowed",
    "malformed",
)

#: Why the server closed a connection itself.
CLOSE_REASONS: Final = ("header_timeout", "body_timeout", "idle_timeout", "evicted")


def _by_reason(
    name: str, documentation: str, reasons: tuple[str, ...], registry: CollectorRegistry
) -> Counter:
    """A counter labelled ``reason``, every reason exported at zero from the start, so that
    ``rate()`` works from the first scrape."""
    counter = Counter(name, documentation, ["reason"], registry=registry)
    for reason in reasons:
        counter.labels(reason)
    return counter


@final
class ServiceMetrics:
    """``purgatory_http_*`` and ``purgatory_rejected_requests_total`` in one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "purgatory_http_requests",
            "HTTP requests answered, by route template and status.",
            ["method", "route", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "purgatory_http_request_duration_seconds",
            "Time to answer an HTTP request, parked time included.",
            ["method", "route"],
            registry=registry,
            buckets=HTTP_BUCKETS,
        )
        self.parked = Gauge(
            "purgatory_http_parked_requests",
            "Requests that may be parked in a purgatory right now.",
            registry=registry,
        )
        self.rejected = _by_reason(
            "purgatory_rejected_requests",
            "Requests refused before reaching the broker, by reason.",
            REJECT_REASONS,
            registry,
        )

    def reject(self, reason: str) -> None:
        if reason not in REJECT_REASONS:
            raise ValueError(f"unknown rejection reason {reason!r}")
        self.rejected.labels(reason).inc()


@final
class ConnectionMetrics:
    """``purgatory_http_connections*``: the connection budget and why connections closed."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.open = Gauge(
            "purgatory_http_connections",
            "HTTP connections being served (within the budget).",
            registry=registry,
        )
        self.max_connections = Gauge(
            "purgatory_http_max_connections",
            "The connection budget (--max-connections).",
            registry=registry,
        )
        self.refused = Counter(
            "purgatory_http_connections_refused",
            "Connections answered 503 and closed because the budget was full.",
            registry=registry,
        )
        self.closed = _by_reason(
            "purgatory_http_connections_closed",
            "Connections the server closed: slow request head or body, idle, evicted.",
            CLOSE_REASONS,
            registry,
        )


@final
class StorageMetrics:
    """``purgatory_stored_bytes`` and its cap: how close produces are to being refused."""

    def __init__(self, registry: CollectorRegistry, space: LogSpace) -> None:
        self.stored = Gauge(
            "purgatory_stored_bytes",
            "Memory held by stored records, bookkeeping included (each batch once).",
            registry=registry,
        )
        self.stored.set_function(lambda: space.used)
        self.cap = Gauge(
            "purgatory_max_stored_bytes",
            "The cap on stored bytes (--max-stored-bytes); 0: none.",
            registry=registry,
        )
        self.cap.set(space.limit or 0)


@final
class FaultHitsCollector(Collector):
    """``purgatory_kafka_fault_hits_total{rule,description}``: the requests each Kafka
    fault rule acted on (a partition rule: the requests it failed partitions of), read
    from the rules at scrape time; the latest rules added are kept, removed ones included
    (:attr:`purgatory.kafka.faults.Faults.added`), so a rule that fired its last still
    shows its hits."""

    def __init__(self, faults: Faults) -> None:
        self._faults = faults

    def collect(self) -> Iterator[Metric]:
        hits = CounterMetricFamily(
            "purgatory_kafka_fault_hits",
            "Requests each Kafka fault rule acted on, by rule id",
            labels=["rule", "description"],
        )
        for rule_id, rule in list(self._faults.added.items()):
            hits.add_metric([str(rule_id), rule.describe()], rule.hits)
        yield hits
