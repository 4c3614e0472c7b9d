"""Prometheus metrics for any number of purgatories.

Sizes and totals are read from ``purgatory.statistics()`` at scrape time by a custom
collector, so the hot path pays nothing for them; only the two histograms (operation
duration, expiration lateness) are fed per operation, by a purgatory listener. Every series
carries the label ``purgatory`` (the purgatory's name); ``purgatory_pending_operations``
also carries ``kind``, so that, say, a broker's follower fetches and its consumers' fetches,
which share one Fetch purgatory, show apart. Metrics live in the registry you
pass, so several applications in one process never clash::

    registry = CollectorRegistry()
    metrics = PurgatoryMetrics(registry)
    metrics.track(produce_purgatory)
    start_http_server(9100, registry=registry)   # or serve generate_latest(registry)
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any, Final, final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client import start_http_server as _prometheus_start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from purgatory._outcomes import OperationRecord, operation_kind
from purgatory._purgatory import DelayedOperationPurgatory, check_labels

__all__ = ["DURATION_BUCKETS", "LATENESS_BUCKETS", "PurgatoryMetrics", "start_http_server"]

DURATION_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""The duration histogram's buckets (seconds): operations span sub-millisecond completions
to multi-second long polls."""

LATENESS_BUCKETS: Final = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
"""The lateness histogram's buckets (seconds): how late expirations run after their
deadline; a healthy reaper stays within a tick or two."""

# (metric suffix, PurgatoryStatistics field, help) for the values read at scrape time.
_GAUGES: Final = (
    ("watched_entries", "watched", "Watcher-list and threshold entries (Kafka's PurgatorySize)."),
    ("delayed_operations", "num_delayed", "Operations in the timer (NumDelayedOperations)."),
    ("watched_keys", "keys", "Keys with a non-empty watcher list."),
    ("threshold_keys", "threshold_keys", "Keys with threshold waiters (wait_for_value)."),
)
_COUNTERS: Final = (
    ("operations_completed", "completed", "Operations completed before their timeout."),
    ("operations_expired", "expired", "Operations that timed out (Kafka's ExpiresPerSec)."),
    ("operations_cancelled", "cancelled", "Operations abandoned (disconnect, shutdown)."),
    ("callback_errors", "callback_errors", "Exceptions raised by callbacks and listeners."),
    ("purges", "purges", "Purges of completed operations from watcher lists."),
    ("purged_entries", "purged_entries", "Watcher-list entries dropped by purges."),
)


@final
class _StatisticsCollector(Collector):
    """Reads every tracked purgatory's statistics when the registry is scraped."""

    def __init__(self, namespace: str, owner: PurgatoryMetrics) -> None:
        self._namespace = namespace
        self._owner = owner
        self._labels = ["purgatory", *owner.labels]

    def _families(self) -> tuple[list[GaugeMetricFamily], list[CounterMetricFamily]]:
        ns = self._namespace
        labels = self._labels
        gauges = [GaugeMetricFamily(f"{ns}_{n}", h, labels=labels) for n, _, h in _GAUGES]
        counters = [CounterMetricFamily(f"{ns}_{n}", h, labels=labels) for n, _, h in _COUNTERS]
        return gauges, counters

    def _pending_family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            f"{self._namespace}_pending_operations",
            "Watched operations still pending, by kind (e.g. follower vs consumer fetches).",
            labels=[*self._labels, "kind"],
        )

    def describe(self) -> Iterable[Metric]:
        # Lets the registry detect name clashes at registration time.
        gauges, counters = self._families()
        return [*gauges, *counters, self._pending_family()]

    def collect(self) -> Iterable[Metric]:
        gauges, counters = self._families()
        pending = self._pending_family()
        for key, purgatory in self._owner.tracked():
            label_values = list(key)
            kinds: dict[str, int] = {}
            for op in purgatory.pending_operations():
                kind = operation_kind(op)
                kinds[kind] = kinds.get(kind, 0) + 1
            for kind, count in sorted(kinds.items()):
                pending.add_metric([*label_values, kind], count)
            stats = purgatory.statistics()
            for family, (_, field, _) in zip(gauges, _GAUGES, strict=True):
                family.add_metric(label_values, getattr(stats, field))
            for cfamily, (_, field, _) in zip(counters, _COUNTERS, strict=True):
                cfamily.add_metric(label_values, getattr(stats, field))
        return [*gauges, *counters, pending]


@final
class PurgatoryMetrics:
    """Prometheus metrics for the purgatories handed to :meth:`track`.

    Exposes, per purgatory name: ``purgatory_watched_entries``,
    ``purgatory_delayed_operations``, ``purgatory_watched_keys``,
    ``purgatory_threshold_keys`` and, per kind too,
    ``purgatory_pending_operations`` (gauges);
    ``purgatory_operations_{completed,expired,cancelled}_total``,
    ``purgatory_operation_errors_total`` (completed with an error code),
    ``purgatory_callback_errors_total``, ``purgatory_purges_total``,
    ``purgatory_purged_entries_total`` (counters); and the histograms
    ``purgatory_operation_duration_seconds`` and ``purgatory_expiration_lateness_seconds``.

    ``labels`` names the purgatory labels every tracked purgatory carries (say
    ``("broker",)`` for a broker's purgatories): each becomes a metric label after
    ``purgatory``, and a purgatory is identified by its name and their values.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        namespace: str = "purgatory",
        duration_buckets: Sequence[float] = DURATION_BUCKETS,
        lateness_buckets: Sequence[float] = LATENESS_BUCKETS,
        labels: Sequence[str] = (),
    ) -> None:
        if not namespace.isidentifier():
            raise ValueError(f"namespace must be a valid metric name prefix, got {namespace!r}")
        if isinstance(labels, str):
            raise TypeError(f"labels must be a sequence of label names, got {labels!r}")
        self.labels = tuple(check_labels(dict.fromkeys(labels, "")))
        self.registry = registry
        self._lock = threading.Lock()  # scrapes may come from another thread
        # (name, *label values) -> the purgatory and the listener feeding its histograms
        self._tracked: dict[tuple[str, ...], tuple[DelayedOperationPurgatory[Any], _Listener]] = {}
        names = ["purgatory", *self.labels]
        self._duration, self._lateness = (
            Histogram(f"{namespace}_{name}", help_text, names, registry=registry, buckets=buckets)
            for name, help_text, buckets in (
                (
                    "operation_duration_seconds",
                    "Time from watch to completion, expiration or cancellation.",
                    tuple(duration_buckets),
                ),
                (
                    "expiration_lateness_seconds",
                    "How long after its deadline an operation actually expired.",
                    tuple(lateness_buckets),
                ),
            )
        )
        self._errors = Counter(
            f"{namespace}_operation_errors",
            "Operations completed with an error code (e.g. NOT_LEADER_OR_FOLLOWER).",
            names,
            registry=registry,
        )
        registry.register(_StatisticsCollector(namespace, self))

    def _key(self, purgatory: DelayedOperationPurgatory[Any]) -> tuple[str, ...]:
        if set(purgatory.labels) != set(self.labels):
            raise ValueError(
                f"{purgatory!r} has labels {sorted(purgatory.labels)}; these metrics expect "
                f"{sorted(self.labels)}"
            )
        return (purgatory.name, *(purgatory.labels[label] for label in self.labels))

    def track(self, purgatory: DelayedOperationPurgatory[Any]) -> None:
        """Export ``purgatory``'s metrics under its name and label values (which must be
        unique here)."""
        key = self._key(purgatory)
        with self._lock:
            if key in self._tracked:
                raise ValueError(f"a purgatory {_describe(key)} is already tracked")
            listener = _Listener(
                self._duration.labels(*key),
                self._lateness.labels(*key),
                self._errors.labels(*key),
            )
            self._tracked[key] = (purgatory, listener)
        purgatory.add_listener(listener)

    def untrack(self, purgatory: DelayedOperationPurgatory[Any]) -> None:
        """Stop exporting ``purgatory``; its series disappear from the next scrape."""
        key = self._key(purgatory)
        with self._lock:
            entry = self._tracked.get(key)
            if entry is None or entry[0] is not purgatory:
                raise ValueError(f"{purgatory!r} is not tracked")
            del self._tracked[key]
            for metric in (self._duration, self._lateness, self._errors):
                metric.remove(*key)
        purgatory.remove_listener(entry[1])

    def tracked(self) -> list[tuple[tuple[str, ...], DelayedOperationPurgatory[Any]]]:
        """(name and label values, purgatory) for each tracked purgatory."""
        with self._lock:
            return [(key, purgatory) for key, (purgatory, _) in self._tracked.items()]

    def __repr__(self) -> str:
        return f"<PurgatoryMetrics tracking {[_describe(k) for k in sorted(self._tracked)]}>"


def _describe(key: tuple[str, ...]) -> str:
    return repr(key[0]) if len(key) == 1 else f"{key[0]!r} {key[1:]}"


@final
class _Listener:
    """Feeds the histograms; the label lookups are done once, not per operation."""

    __slots__ = ("_duration", "_errors", "_lateness")

    def __init__(self, duration: Histogram, lateness: Histogram, errors: Counter) -> None:
        self._duration = duration
        self._lateness = lateness
        self._errors = errors

    def __call__(self, record: OperationRecord) -> None:
        self._duration.observe(max(record.duration_ms, 0.0) / 1000.0)
        if record.lateness_ms is not None:
            self._lateness.observe(max(record.lateness_ms, 0.0) / 1000.0)
        elif record.outcome == "error":
            self._errors.inc()


def start_http_server(
    port: int, addr: str = "127.0.0.1", *, registry: CollectorRegistry
) -> tuple[Any, threading.Thread]:
    """Serve ``registry`` at ``http://addr:port/metrics`` from a daemon thread.

    For plain library users without aiohttp; binds loopback unless told otherwise. Returns
    prometheus-client's ``(server, thread)``; call ``server.shutdown()`` to stop it.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port must be an int in 0..65535, got {port!r}")
    server, thread = _prometheus_start_http_server(port, addr, registry=registry)
    return server, thread
