"""Kafka wire protocol front door for the simulated broker.

Hand-written codecs over ``struct`` and ``memoryview`` for the non-flexible versions that
clients accept. This package depends downward on :mod:`purgatory.sim` only. Its rooms,
from the top (``lint-imports`` keeps the order):

* :mod:`.front_door`: one listener per simulated broker, the shared state, the handler
  tables every listener serves; :mod:`.metrics` exports the listeners' counters.
* :mod:`.handlers`: the request handlers, one class per concern, each with one table of
  the API keys and versions it answers.
* :mod:`.server`: the connection server (framing, per-connection ordering, limits);
  :mod:`.coordinator`: the state Kafka's coordinators keep (groups, committed offsets,
  producer ids), which never sees the wire.
* the wire: :mod:`.protocol` (headers, API keys, ApiVersions), :mod:`.record_batches`
  (record batches v2), :mod:`.compression`, :mod:`.codec` (primitive types),
  :mod:`.crc32c`.
"""
