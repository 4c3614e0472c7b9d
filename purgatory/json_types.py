"""The type of a JSON document, for what the project writes and reads as JSON (reports,
summaries, traces, HTTP bodies): unlike ``dict[str, Any]`` it lets mypy refuse a value
``json.dumps`` could not write (a datetime, a set, a dataclass).

Arrays and objects are read-only (``Sequence``, ``Mapping``) so that a ``list[int]`` or a
``dict[str, float]`` is a JSON value as it is (a ``list[Json]`` would have to be copied)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

#: any JSON value
Json: TypeAlias = "bool | int | float | str | Sequence[Json] | Mapping[str, Json] | None"
#: a JSON object, as built
JsonObject: TypeAlias = "dict[str, Json]"
