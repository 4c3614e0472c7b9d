"""Prometheus metrics for buses, read from ``bus.statistics()`` at scrape time.

Every series carries the label ``bus`` (the bus's name)::

    registry = CollectorRegistry()
    BusMetrics(registry).track(bus)

``purgatory_bus_connected`` is 0 while a bus is cut off from its server (and its waiters
are being re-checked every ``recheck_interval_s``): the one to alert on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Final, final

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector

from purgatory.bus._bus import Bus

__all__ = ["BusMetrics"]

# (metric suffix, BusStatistics field, help)
_GAUGES: Final = (
    ("connected", "connected", "1 while the bus's subscription is confirmed, 0 while cut off."),
    ("attached_purgatories", "attached", "Purgatories the bus triggers."),
    ("pending_keys", "pending_keys", "Triggered keys waiting for their check."),
)
_COUNTERS: Final = (
    ("published_keys", "published", "Keys published by this process."),
    ("publish_errors", "publish_errors", "Publish calls that could not send (BusUnavailable)."),
    ("messages_sent", "messages_sent", "Messages sent (a publish may split into several)."),
    ("messages_received", "messages_received", "Messages received from other processes."),
    ("received_keys", "received", "Keys received from other processes."),
    ("received_values", "values_received", "Values received from other processes."),
    ("coalesced_keys", "coalesced", "Triggers merged into a check already pending."),
    ("checks", "checks", "check_and_complete calls run for triggers."),
    ("rechecks", "rechecks", "Re-checks of every watched key (after connects, while cut off)."),
    ("reconnects", "reconnects", "Connections made after the first."),
    ("disconnected_seconds", "disconnected_s", "Seconds spent cut off from the server."),
    ("overflows", "overflows", "Times the pending-key set was full (a full re-check instead)."),
    ("malformed_messages", "malformed", "Messages that were not a bus's (each: a re-check)."),
)


@final
class BusMetrics(Collector):
    """Exposes ``purgatory_bus_*`` for every bus handed to :meth:`track`."""

    def __init__(
        self, registry: CollectorRegistry | None = REGISTRY, *, namespace: str = "purgatory_bus"
    ) -> None:
        self._namespace = namespace
        self._buses: dict[str, Bus] = {}
        self._lock = threading.Lock()  # scrapes may run in the HTTP server's thread
        if registry is not None:
            registry.register(self)

    def track(self, bus: Bus) -> None:
        if not isinstance(bus, Bus):
            raise TypeError(f"expected a Bus, got {bus!r}")
        with self._lock:
            if bus.name in self._buses:
                raise ValueError(f"a bus named {bus.name!r} is tracked already")
            self._buses[bus.name] = bus

    def untrack(self, bus: Bus) -> None:
        with self._lock:
            if self._buses.get(bus.name) is not bus:
                raise ValueError(f"{bus!r} is not tracked")
            del self._buses[bus.name]

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        families = self._families()
        with self._lock:
            buses = list(self._buses.values())
        for bus in buses:
            stats = bus.statistics()
            for family, (_, field, _) in zip(families, (*_GAUGES, *_COUNTERS), strict=True):
                family.add_metric([bus.name], float(getattr(stats, field)))
        return families

    def _families(self) -> list[GaugeMetricFamily | CounterMetricFamily]:
        ns, labels = self._namespace, ["bus"]
        gauges = [GaugeMetricFamily(f"{ns}_{n}", h, labels=labels) for n, _, h in _GAUGES]
        counters = [CounterMetricFamily(f"{ns}_{n}", h, labels=labels) for n, _, h in _COUNTERS]
        return [*gauges, *counters]
