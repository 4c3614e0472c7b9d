"""Operation traces: one JSON line per operation that leaves a purgatory.

``TraceWriter`` is a purgatory listener; any application can record the same traces that
the simulations write and that ``purgatory analyze`` reads::

    with TraceWriter("ops.jsonl") as trace:
        purgatory.add_listener(trace)
        ...

Fields: purgatory, the purgatory's labels (a simulated broker's purgatories carry
``broker``), op_id, kind, keys, created_at_ms (Unix ms), duration_ms, timeout_ms, outcome
(completed | expired | cancelled | error), error, lateness_ms (expired only), checks. A
fault injected into a simulation is a line of its own, ``{"fault": description, "at_ms":
Unix ms}`` (:meth:`TraceWriter.mark_fault`), which the report draws on its time series.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import time
from typing import IO, Any, Self, final

from purgatory._outcomes import OperationRecord, operation_kind


def record_to_event(record: OperationRecord, op_id: str) -> dict[str, Any]:
    """The trace event (a JSON-ready dict) for one record."""
    op = record.operation
    return {
        "purgatory": record.purgatory,
        **record.labels,  # e.g. the broker a simulated purgatory belongs to
        "op_id": op_id,
        "kind": operation_kind(op),
        "keys": [str(key) for key in record.keys],
        "created_at_ms": record.created_at_unix_ms,
        "duration_ms": round(record.duration_ms, 3),
        "timeout_ms": record.timeout_ms,
        "outcome": record.outcome,
        "error": record.error,
        "lateness_ms": None if record.lateness_ms is None else round(record.lateness_ms, 3),
        "checks": record.checks,
    }


@final
class TraceWriter:
    """A listener that appends each record to a JSON Lines file (gzip if it ends in .gz).

    Operations get an ``op_id`` from their ``op_id`` attribute if they have one, else a
    sequence number unique within this writer.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._file: IO[str]
        if self.path.endswith(".gz"):
            self._file = gzip.open(self.path, "wt", encoding="utf-8")
        else:
            self._file = open(self.path, "w", encoding="utf-8", buffering=1 << 16)
        self._ids = itertools.count(1)
        self.events = 0

    def __call__(self, record: OperationRecord) -> None:
        op_id = getattr(record.operation, "op_id", None) or f"{record.purgatory}-{next(self._ids)}"
        self._file.write(json.dumps(record_to_event(record, str(op_id)), separators=(",", ":")))
        self._file.write("\n")
        self.events += 1

    def mark_fault(self, description: str) -> None:
        """Record that a fault was injected now (a marker line, not an operation)."""
        line = {"fault": description, "at_ms": int(time.time() * 1000)}
        self._file.write(json.dumps(line, separators=(",", ":")))
        self._file.write("\n")

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<TraceWriter {self.path!r} events={self.events}>"
