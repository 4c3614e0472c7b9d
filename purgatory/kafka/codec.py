"""Primitive Kafka wire types: a bounds-checked reader and an appending writer.

Every decoder in this package reads through :class:`Reader`, so truncated or garbage input
surfaces as one exception type, :class:`DecodeError`, never an ``IndexError`` or a
``struct.error`` from deep inside a parser.
"""

from __future__ import annotations

import struct
from typing import Final, final

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")

# No legitimate array in the requests we serve comes near this; a larger count is garbage
# and must not make us allocate a huge list before the bounds checks catch it.
MAX_ARRAY_LENGTH: Final = 1 << 20


class DecodeError(ValueError):
    """The bytes do not decode as the expected Kafka structure."""


@final
class Reader:
    """Reads Kafka primitives from a buffer, checking every length against what is left."""

    __slots__ = ("_buf", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self._buf = memoryview(buf)
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self._buf) - self.pos

    def copy(self) -> Reader:
        """A reader over the same bytes from the same position, which reads on its own."""
        return Reader(self._buf, self.pos)

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self._buf):
            raise DecodeError(f"need {n} bytes at {self.pos}, have {self.remaining}")
        view = self._buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def int8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def raw(self, n: int) -> memoryview:
        return self._take(n)

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise DecodeError("null where a string is required")
        return value

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"string is not UTF-8: {exc}") from None

    def nullable_bytes(self) -> memoryview | None:
        n = self.int32()
        if n == -1:
            return None
        return self._take(n)

    def array_length(self) -> int:
        """An array's element count; -1 (null) reads as 0 elements."""
        n = self.int32()
        if n == -1:
            return 0
        if n < -1 or n > MAX_ARRAY_LENGTH or n > self.remaining:
            # Every element takes at least one byte, so more elements than bytes is garbage.
            raise DecodeError(f"array length {n} with {self.remaining} bytes left")
        return n

    def nullable_array_length(self) -> int | None:
        n = self.int32()
        if n == -1:
            return None
        if n < -1 or n > MAX_ARRAY_LENGTH or n > self.remaining:
            raise DecodeError(f"array length {n} with {self.remaining} bytes left")
        return n

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
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (value >> 1) ^ -(value & 1)
            shift += 7
        raise DecodeError(f"varint longer than {max_bytes} bytes")


@final
class Writer:
    """Appends Kafka primitives to a growing buffer."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, value: int) -> Writer:
        self.buf += _I8.pack(value)
        return self

    def int16(self, value: int) -> Writer:
        self.buf += _I16.pack(value)
        return self

    def int32(self, value: int) -> Writer:
        self.buf += _I32.pack(value)
        return self

    def int64(self, value: int) -> Writer:
        self.buf += _I64.pack(value)
        return self

    def raw(self, data: bytes | bytearray | memoryview) -> Writer:
        self.buf += data
        return self

    def string(self, value: str | None) -> Writer:
        if value is None:
            return self.int16(-1)
        encoded = value.encode()
        self.int16(len(encoded))
        self.buf += encoded
        return self

    def nullable_bytes(self, value: bytes | bytearray | memoryview | None) -> Writer:
        if value is None:
            return self.int32(-1)
        self.int32(len(value))
        self.buf += value
        return self

    def varint(self, value: int) -> Writer:
        zigzag = (value << 1) ^ (value >> 63)
        while zigzag & ~0x7F:
            self.buf.append((zigzag & 0x7F) | 0x80)
            zigzag >>= 7
        self.buf.append(zigzag)
        return self
