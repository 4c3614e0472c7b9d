"""Operation traces: one JSON line per operation that leaves a purgatory.

``TraceWriter`` is a purgatory listener; any application can record the same traces that
the simulations write and that ``purgatory analyze`` reads::

    with TraceWriter("ops.jsonl") as trace:
        purgatory.add_listener(trace)
        ...

This module is the trace line's one definition: :class:`TraceEvent` (an operation's line)
and :class:`FaultMarker` (a fault's line) are what is written (:meth:`TraceEvent.to_json`)
and read back (:func:`read_line`); :data:`EVENT_FIELDS` and :data:`MARKER_FIELDS` are the
schema that ``purgatory analyze`` parses with, and :func:`line_template` the fast form of
the same line that the synthetic generator formats.

Fields, in the order they are written: purgatory, the purgatory's labels (strings; a
simulated broker's purgatories carry ``broker``), op_id, kind, keys, created_at_ms (Unix
ms), duration_ms, timeout_ms, outcome (an :class:`~purgatory._outcomes.Outcome`: completed
| expired | cancelled | error), error, lateness_ms (expired only), checks. A fault injected
into a simulation is a line of its own, ``{"fault": description, "at_ms": Unix ms}``
(:meth:`TraceWriter.mark_fault`), which the report draws on its time series.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Final, Literal, NamedTuple, Self, final

from purgatory._outcomes import OperationRecord, Outcome, operation_kind
from purgatory.json_types import Json, JsonObject

__all__ = [
    "EVENT_FIELDS",
    "MARKER_FIELDS",
    "OUTCOMES",
    "FaultMarker",
    "TraceEvent",
    "TraceField",
    "TraceLineError",
    "TraceWriter",
    "line_template",
    "read_line",
]

FieldType = Literal["string", "long", "double", "array<string>"]


class TraceField(NamedTuple):
    """One field of a trace line: its name, its type (as Spark names it) and whether a line
    must carry it (an optional field may be null or absent)."""

    name: str
    type: FieldType
    required: bool


#: an operation's line, in the order it is written (its labels come after ``purgatory``)
EVENT_FIELDS: Final[tuple[TraceField, ...]] = (
    TraceField("purgatory", "string", True),
    TraceField("op_id", "string", True),
    TraceField("kind", "string", True),
    TraceField("keys", "array<string>", True),
    TraceField("created_at_ms", "long", True),
    TraceField("duration_ms", "double", True),
    TraceField("timeout_ms", "long", True),
    TraceField("outcome", "string", True),
    TraceField("error", "string", False),
    TraceField("lateness_ms", "double", False),
    TraceField("checks", "long", True),
)
#: a fault marker's line: ``{"fault": description, "at_ms": Unix ms}``
MARKER_FIELDS: Final[tuple[TraceField, ...]] = (
    TraceField("fault", "string", True),
    TraceField("at_ms", "long", True),
)
#: every outcome a line may carry
OUTCOMES: Final[tuple[str, ...]] = tuple(Outcome)

_EVENT_NAMES: Final = frozenset(f.name for f in EVENT_FIELDS)
_COMPACT: Final = (",", ":")


class TraceLineError(ValueError):
    """A line that is neither an operation's event nor a fault marker."""


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One operation's trace line. Durations are rounded to the microsecond, as written."""

    purgatory: str
    op_id: str
    kind: str
    keys: tuple[str, ...]
    created_at_ms: int
    duration_ms: float
    timeout_ms: int
    outcome: Outcome
    error: str | None
    lateness_ms: float | None
    checks: int
    #: the purgatory's labels (e.g. the broker a simulated purgatory belongs to)
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, record: OperationRecord, op_id: str) -> TraceEvent:
        """The line of ``record``, which the writer calls ``op_id``."""
        return cls(
            purgatory=record.purgatory,
            labels=record.labels,
            op_id=op_id,
            kind=operation_kind(record.operation),
            keys=tuple(str(key) for key in record.keys),
            created_at_ms=record.created_at_unix_ms,
            duration_ms=round(record.duration_ms, 3),
            timeout_ms=record.timeout_ms,
            outcome=record.outcome,
            error=record.error,
            lateness_ms=None if record.lateness_ms is None else round(record.lateness_ms, 3),
            checks=record.checks,
        )

    def to_dict(self) -> JsonObject:
        """The JSON object, in the order of :data:`EVENT_FIELDS` with the labels after
        ``purgatory``."""
        return {
            "purgatory": self.purgatory,
            **self.labels,
            "op_id": self.op_id,
            "kind": self.kind,
            "keys": list(self.keys),
            "created_at_ms": self.created_at_ms,
            "duration_ms": self.duration_ms,
            "timeout_ms": self.timeout_ms,
            "outcome": self.outcome,
            "error": self.error,
            "lateness_ms": self.lateness_ms,
            "checks": self.checks,
        }

    def to_json(self) -> str:
        """The line, without its newline."""
        return json.dumps(self.to_dict(), separators=_COMPACT)


@dataclass(frozen=True, slots=True)
class FaultMarker:
    """A fault injected into a simulation, at ``at_ms`` (Unix ms)."""

    fault: str
    at_ms: int

    def to_json(self) -> str:
        return json.dumps({"fault": self.fault, "at_ms": self.at_ms}, separators=_COMPACT)


def _typed(value: object, kind: FieldType) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "long":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "double":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check(obj: Mapping[str, Json], fields: Sequence[TraceField]) -> None:
    for f in fields:
        value = obj.get(f.name)
        if value is None:
            if f.required:
                raise TraceLineError(f"{f.name} is missing or null")
        elif not _typed(value, f.type):
            raise TraceLineError(f"{f.name} is not a {f.type}: {value!r}")


def read_line(line: str) -> TraceEvent | FaultMarker | None:
    """The event or fault marker on ``line``, None for a blank line; TraceLineError for
    anything else. What ``purgatory analyze`` counts as valid, checked in Python: every
    required field present, non-null and of its type, a known outcome, a duration that is
    a number >= 0, no null key, and (stricter than the analysis, which ignores them) labels
    that are strings."""
    if not line.strip():
        return None
    try:
        obj: Any = json.loads(line)
    except ValueError as exc:
        raise TraceLineError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise TraceLineError("not a JSON object")
    if "purgatory" not in obj and "fault" in obj:
        _check(obj, MARKER_FIELDS)
        return FaultMarker(obj["fault"], obj["at_ms"])
    _check(obj, EVENT_FIELDS)
    if obj["outcome"] not in OUTCOMES:
        raise TraceLineError(f"unknown outcome {obj['outcome']!r}")
    duration = float(obj["duration_ms"])
    if math.isnan(duration) or duration < 0:
        raise TraceLineError(f"duration_ms must be a number >= 0, got {duration!r}")
    labels = {k: v for k, v in obj.items() if k not in _EVENT_NAMES}
    bad = {k: v for k, v in labels.items() if not isinstance(v, str)}
    if bad:
        raise TraceLineError(f"labels must be strings: {bad!r}")
    return TraceEvent(
        purgatory=obj["purgatory"],
        labels=labels,
        op_id=obj["op_id"],
        kind=obj["kind"],
        keys=tuple(obj["keys"]),
        created_at_ms=obj["created_at_ms"],
        duration_ms=obj["duration_ms"],
        timeout_ms=obj["timeout_ms"],
        outcome=Outcome(obj["outcome"]),
        error=obj.get("error"),
        lateness_ms=obj.get("lateness_ms"),
        checks=obj["checks"],
    )


def line_template(labels: Sequence[str] = ()) -> str:
    """:meth:`TraceEvent.to_json`'s line (with its newline) as a %-format, for writers of
    many lines (the synthetic generator): one ``%s`` per field, in order, labels after
    ``purgatory``. Strings and labels are quoted by the template (pass them unescaped), a
    ``long`` takes ``%d``; pass keys as the inside of a JSON array, doubles as
    ``str(round(value, 3))`` and an optional field as its JSON (``null`` if absent)."""
    parts = []
    for f in EVENT_FIELDS:
        if f.type == "string" and f.required:
            spec = '"%s"'
        elif f.type == "long" and f.required:
            spec = "%d"
        elif f.type == "array<string>":
            spec = "[%s]"
        else:
            spec = "%s"
        parts.append(f'"{f.name}":{spec}')
        if f.name == "purgatory":
            parts.extend(f'"{label}":"%s"' for label in labels)
    return "{" + ",".join(parts) + "}\n"


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
        self._file.write(TraceEvent.of(record, str(op_id)).to_json())
        self._file.write("\n")
        self.events += 1

    def mark_fault(self, description: str) -> None:
        """Record that a fault was injected now (a marker line, not an operation)."""
        self._file.write(FaultMarker(description, int(time.time() * 1000)).to_json())
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
