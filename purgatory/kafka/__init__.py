"""Kafka for tests: an embedded cluster that speaks the Kafka protocol, with faults.

The public API, importable from here::

    from purgatory.kafka import EmbeddedKafka, ErrorCode

* :class:`EmbeddedKafka` (its own loop thread) and :class:`AsyncEmbeddedKafka` (the
  running loop): N simulated brokers on free loopback ports, with the keyword arguments
  of :class:`EmbeddedKafkaOptions`;
* :class:`Faults`, :class:`Rule`, :class:`PartitionRule`, :class:`Hit`: the fault rules
  (per request, per partition) on their ``faults`` attribute;
* :class:`ErrorCode` (Kafka's error codes, from :mod:`purgatory.errors`) and
  :class:`SimulationError` (what a refused topic operation raises, from
  :mod:`purgatory.sim`).

Only :class:`ErrorCode` is imported with the package; the others (and the Kafka wire
underneath, about 0.2 s of imports) are imported when first used, so that the pytest
plugin (:mod:`.pytest_plugin`) costs nothing until a test asks for its fixture.

Inside, the package depends downward on :mod:`purgatory.sim` only. Its rooms, from the top
(``lint-imports`` keeps the order):

* :mod:`.front_door`: one listener per simulated broker, the shared state, the handler
  tables every listener serves; :mod:`.metrics` exports the listeners' counters.
* :mod:`.handlers`: the request handlers, one class per concern, each with one table of
  the API keys and versions it answers.
* :mod:`.server`: the connection server (framing, per-connection ordering, limits), over
  :mod:`.connections` (an accepted connection, its TLS handshake) and
  :mod:`.protocol_stats` (what the listeners count);
  :mod:`.coordinator`: the state Kafka's coordinators keep (groups, committed offsets,
  producer ids), which never sees the wire.
* the wire: :mod:`.protocol` (headers, API keys, ApiVersions), :mod:`.record_batches`
  (record batches v2), :mod:`.compression`, :mod:`.codec` (primitive types),
  :mod:`.crc32c`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from purgatory.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka, EmbeddedKafkaOptions
    from purgatory.kafka.fault_rules import Hit, PartitionRule, Rule
    from purgatory.kafka.faults import Faults
    from purgatory.sim.errors import SimulationError

__all__ = [
    "AsyncEmbeddedKafka",
    "EmbeddedKafka",
    "EmbeddedKafkaOptions",
    "ErrorCode",
    "Faults",
    "Hit",
    "PartitionRule",
    "Rule",
    "SimulationError",
]

# The names imported when first used, and their modules.
_LAZY = {
    "AsyncEmbeddedKafka": "purgatory.kafka.embedded",
    "EmbeddedKafka": "purgatory.kafka.embedded",
    "EmbeddedKafkaOptions": "purgatory.kafka.embedded",
    "Faults": "purgatory.kafka.faults",
    "Hit": "purgatory.kafka.fault_rules",
    "PartitionRule": "purgatory.kafka.fault_rules",
    "Rule": "purgatory.kafka.fault_rules",
    "SimulationError": "purgatory.sim.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
