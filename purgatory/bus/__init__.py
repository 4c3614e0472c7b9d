"""Triggers across processes: publish a key in one process, every attached purgatory in
every process re-checks it. A trigger is a hint; after any gap in a bus's connection every
watched key is re-checked, so no wake-up is lost.

``MemoryBus`` needs nothing more; ``RedisBus``, ``PostgresBus`` and ``KafkaBus`` import
their client library (the ``redis``, ``postgres`` and ``kafka`` extras) when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from purgatory.bus._bus import (
    DEFAULT_RECHECK_INTERVAL_S,
    Bus,
    BusClosed,
    BusError,
    BusOptions,
    BusStatistics,
    BusUnavailable,
    ValueReader,
)
from purgatory.bus.memory import MemoryBus, MemoryHub

if TYPE_CHECKING:
    from purgatory.bus.kafka import KafkaBus
    from purgatory.bus.postgres import PostgresBus
    from purgatory.bus.redis import RedisBus

__all__ = [
    "DEFAULT_RECHECK_INTERVAL_S",
    "Bus",
    "BusClosed",
    "BusError",
    "BusOptions",
    "BusStatistics",
    "BusUnavailable",
    "KafkaBus",
    "MemoryBus",
    "MemoryHub",
    "PostgresBus",
    "RedisBus",
    "ValueReader",
]

# Backends whose client library is imported only when the backend is.
_BACKENDS = {"RedisBus": "redis", "PostgresBus": "postgres", "KafkaBus": "kafka"}


def __getattr__(name: str) -> Any:
    module = _BACKENDS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
