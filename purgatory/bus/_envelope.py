"""What a bus message carries: the sender, the keys it triggers and the values it
advances, as JSON text.

A message is ``["<sender id>", item, ...]``, each item a key to trigger (``"key"``) or a
key's new value (``["key", 42]``): JSON keeps any str key intact (quotes, newlines, NUL are
escaped, so PostgreSQL's text payloads take it too), and the sender id lets a bus skip its
own messages, whose items it already applied locally when it published them. Items that do
not fit in one message are split over several, never truncated.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

#: a key to trigger, or a key and the value it advances to
Item = str | tuple[str, int]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def check_keys(keys: Sequence[object]) -> list[str]:
    """The keys as a list of str; TypeError for anything else, before anything is sent."""
    if not keys:
        raise ValueError("publish needs at least one key")
    checked: list[str] = []
    for key in keys:
        if type(key) is not str:
            if isinstance(key, str):  # a str subclass: send it as the plain text it is
                key = str.__str__(key)
            else:
                raise TypeError(
                    f"keys on a bus are str (they travel as text to other processes), "
                    f"got {type(key).__name__} {key!r}"
                )
        checked.append(key)
    return checked


def encode(sender: str, items: Iterable[Item], max_bytes: int) -> list[str]:
    """The messages that carry ``items``, each at most ``max_bytes`` in UTF-8.

    ValueError for an item that cannot fit in a message of its own, or a key that is not
    encodable text (a lone surrogate), before anything is sent."""
    head = _dumps([sender])[:-1]  # '["sender"'
    room = max_bytes - len(head.encode()) - 1  # the closing ']'
    messages: list[str] = []
    parts: list[str] = []
    used = 0
    for item in items:
        key = item if isinstance(item, str) else item[0]
        try:
            part = "," + _dumps(item if isinstance(item, str) else list(item))
            size = len(part.encode())
        except UnicodeEncodeError as exc:
            raise ValueError(f"key {key!r} is not encodable as UTF-8 text: {exc}") from None
        if size > room:
            raise ValueError(
                f"key of {len(key.encode())} bytes does not fit in one message of this bus "
                f"({max_bytes} bytes at most, {room - 3} for a key once the envelope is in)"
            )
        if used + size > room:
            messages.append(head + "".join(parts) + "]")
            parts, used = [], 0
        parts.append(part)
        used += size
    if parts:
        messages.append(head + "".join(parts) + "]")
    return messages


def decode(message: str | bytes) -> tuple[str, list[str], list[tuple[str, int]]]:
    """(sender, keys, values) of a message; ValueError if it is not one a bus wrote."""
    try:
        items = json.loads(message)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a bus message: {exc}") from None
    if not isinstance(items, list) or len(items) < 2 or not isinstance(items[0], str):
        raise ValueError(f"not a bus message: {message[:80]!r}")
    keys: list[str] = []
    values: list[tuple[str, int]] = []
    for item in items[1:]:
        if isinstance(item, str):
            keys.append(item)
        elif (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and type(item[1]) is int
        ):
            values.append((item[0], item[1]))
        else:
            raise ValueError(f"not a bus message: {message[:80]!r}")
    return items[0], keys, values
