"""The primitives of a record batch's records: a bounds-checked reader and an appending
writer of varints and bytes (Kafka's message format v2, which the request schemas carry as
opaque bytes; requests and responses themselves go through :mod:`purgatory.kafka.schemas`).

Every decoder reads through :class:`Reader`, so truncated or garbage input surfaces as
one exception type, :class:`~purgatory.kafka.wire_errors.DecodeError`, never an
``IndexError`` from deep inside a parser.
"""

from __future__ import annotations

import struct
from typing import Final, final

from purgatory.kafka.wire_errors import DecodeError

_I8: Final = struct.Struct(">b")


@final
class Reader:
    """Reads varints and bytes from a buffer, checking every length against what is left."""

    __slots__ = ("_buf", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self._buf = memoryview(buf)
        self.pos = pos

    def raw(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self._buf):
            raise DecodeError(f"need {n} bytes at {self.pos}, have {len(self._buf) - self.pos}")
        view = self._buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def varint(self) -> int:
        """A zigzag-encoded signed varint of at most 32 bits (record fields)."""
        return self._zigzag(5)

    def varlong(self) -> int:
        """A zigzag-encoded signed varint of at most 64 bits."""
        return self._zigzag(10)

    def _zigzag(self, max_bytes: int) -> int:
        value = 0
        shift = 0
        for _ in range(max_bytes):
            byte = self.raw(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (value >> 1) ^ -(value & 1)
            shift += 7
        raise DecodeError(f"varint longer than {max_bytes} bytes")


@final
class Writer:
    """Appends a record's primitives to a growing buffer."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, value: int) -> Writer:
        self.buf += _I8.pack(value)
        return self

    def raw(self, data: bytes | bytearray | memoryview) -> Writer:
        self.buf += data
        return self

    def varint(self, value: int) -> Writer:
        zigzag = (value << 1) ^ (value >> 63)
        while zigzag & ~0x7F:
            self.buf.append((zigzag & 0x7F) | 0x80)
            zigzag >>= 7
        self.buf.append(zigzag)
        return self
