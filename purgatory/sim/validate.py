"""Argument checks with clear errors: the cluster rejects bad input, never clamps it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from purgatory.errors import ErrorCode
from purgatory.sim.errors import SimulationError

#: Kafka's rule for topic names: 1 to 249 of ``[A-Za-z0-9._-]``, but not ``.`` or ``..``
TOPIC_NAME_PATTERN: Final = r"(?!\.\.?$)[A-Za-z0-9._-]{1,249}"
_TOPIC_NAME: Final = re.compile(TOPIC_NAME_PATTERN)


def check_topic_name(name: object) -> str:
    """``name`` if Kafka would accept it as a topic name (matched in full: no newline may
    trail it); else :class:`SimulationError` with ``INVALID_TOPIC_EXCEPTION``."""
    if not isinstance(name, str) or _TOPIC_NAME.fullmatch(name) is None:
        raise SimulationError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic names are 1 to 249 of [A-Za-z0-9._-], not '.' or '..': got {name!r}",
        )
    return name


def check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> int:
    """``value`` as an int in ``[minimum, maximum]``; TypeError/ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise ValueError(f"{name} must be >= {minimum}{upper}, got {value}")
    return value


def check_records(
    records: Sequence[tuple[bytes | None, bytes]],
) -> list[tuple[bytes | None, bytes]]:
    """A non-empty list of ``(key, value)`` pairs with bytes (or None) keys, bytes values."""
    if records.__class__ is not list:  # the common case skips the Sequence ABC check
        if isinstance(records, str | bytes) or not isinstance(records, Sequence):
            raise TypeError("records must be a sequence of (key, value) pairs")
    if not records:
        raise ValueError("records must not be empty")
    for item in records:
        if item.__class__ is not tuple or len(item) != 2:
            if not isinstance(item, tuple) or len(item) != 2:
                raise TypeError(f"each record must be a (key, value) tuple, got {item!r}")
        key, value = item
        if value.__class__ is not bytes or not (key is None or key.__class__ is bytes):
            if not isinstance(value, bytes) or not (key is None or isinstance(key, bytes)):
                raise TypeError(f"record key must be bytes or None and value bytes, got {item!r}")
    return list(records) if records.__class__ is not list else records
