"""A bounds walk over a request frame before kio's native reader sees it.

kio 0.6.5's reader sizes an array from its count before reading a single element
(``Vec::with_capacity(count)``), so a 60-byte frame claiming 2^35 elements makes it ask
for 256 GiB and the allocator aborts the whole process: no exception to catch. It also
raises on a tagged field its schema does not know, where Kafka skips one (KIP-482: "a
tagged field a receiver does not understand is ignored"). So every frame is walked here
first, by the same schema (:mod:`purgatory.kafka.shapes`), without building a value:

* every length and count is checked against the bytes left (an element takes at least
  one byte), so nothing past the frame is ever sized;
* a null array where the schema has no null is refused (kio would read it as None);
* unknown tagged fields are cut out of the frame (their bytes and the count in front of
  them), which is then handed to kio as if the client had not sent them.

The walk reads lengths and skips over values; it decodes nothing kio decodes.
"""

from __future__ import annotations

import io

# kio without hypothesis (its phantom types would import it): first, see the module
from purgatory.kafka.kio_hypothesis import quiet_kio  # isort: skip

quiet_kio()

from kio.serial.writers import write_unsigned_varint  # noqa: E402
from kio.static.primitive import uvarint  # noqa: E402

from purgatory.kafka.protocol import Frame  # noqa: E402
from purgatory.kafka.shapes import FIXED_WIDTH, FieldShape, Kind, primitive_kind, shape_of  # noqa: E402
from purgatory.kafka.wire_errors import DecodeError  # noqa: E402


def _uvarint(buf: Frame, pos: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(5):
        if pos >= len(buf):
            raise DecodeError(f"varint runs past the end at {pos}")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise DecodeError(f"varint longer than 5 bytes before {pos}")


def _int(buf: Frame, pos: int, width: int) -> tuple[int, int]:
    end = pos + width
    if end > len(buf):
        raise DecodeError(f"need {width} bytes at {pos}, have {len(buf) - pos}")
    return int.from_bytes(buf[pos:end], "big", signed=True), end


def _skip(buf: Frame, pos: int, size: int, what: str) -> int:
    if size < 0 or pos + size > len(buf):
        raise DecodeError(f"{what} of {size} bytes at {pos}, have {len(buf) - pos}")
    return pos + size


class _Walk:
    """One frame's walk: the position moves on, the cuts (unknown tags) pile up."""

    __slots__ = ("buf", "cuts")

    def __init__(self, buf: Frame) -> None:
        self.buf = buf
        #: (start, end, replacement) byte ranges to rewrite, in frame order
        self.cuts: list[tuple[int, int, bytes]] = []

    def struct(self, cls: type, pos: int) -> int:
        shape = shape_of(cls)
        flexible = shape.flexible
        for field in shape.fields:
            legacy = not flexible or (shape.is_request_header and field.name == "client_id")
            pos = self.value(field, pos, legacy)
        if flexible:
            pos = self.tags(shape.tagged, pos)
        return pos

    def value(self, field: FieldShape, pos: int, legacy: bool) -> int:
        kind = field.kind
        buf = self.buf
        if kind is Kind.FIXED:
            return _skip(buf, pos, FIXED_WIDTH[field.kafka_type], field.name)
        if kind is Kind.STRING or kind is Kind.BYTES:
            if legacy:
                size, pos = _int(buf, pos, 2 if kind is Kind.STRING else 4)
                return pos if size == -1 else _skip(buf, pos, size, field.name)
            size, pos = _uvarint(buf, pos)
            return pos if size == 0 else _skip(buf, pos, size - 1, field.name)
        if kind is Kind.STRUCT:
            assert field.item is not None
            if field.nullable:
                # a nullable struct is preceded by an int8: -1 null, else present
                marker, pos = _int(buf, pos, 1)
                if marker < 0:
                    return pos
            return self.struct(field.item, pos)
        # an array: its count, checked against what is left, then each element
        if legacy:
            count, pos = _int(buf, pos, 4)
        else:
            count, pos = _uvarint(buf, pos)
            count -= 1
        if count == -1:
            # kio reads null as None whatever the schema says; Kafka refuses it where
            # the field is not nullable
            if not field.nullable:
                raise DecodeError(f"{field.name}: null, and the field is not nullable")
            return pos
        if count < 0 or count > len(buf) - pos:
            raise DecodeError(f"{field.name}: {count} elements with {len(buf) - pos} bytes left")
        item = field.item
        if item is None:
            element = field._replace(kind=primitive_kind(field.kafka_type, field.name))
            for _ in range(count):
                pos = self.value(element, pos, legacy)
        else:
            for _ in range(count):
                pos = self.struct(item, pos)
        return pos

    def tags(self, known: dict[int, FieldShape], pos: int) -> int:
        start = pos
        count, pos = _uvarint(self.buf, pos)
        count_end = pos
        if count > len(self.buf) - pos:
            raise DecodeError(f"{count} tagged fields with {len(self.buf) - pos} bytes left")
        unknown: list[tuple[int, int]] = []
        for _ in range(count):
            entry = pos
            tag, pos = _uvarint(self.buf, pos)
            size, pos = _uvarint(self.buf, pos)
            end = _skip(self.buf, pos, size, f"tagged field {tag}")
            field = known.get(tag)
            if field is None:
                unknown.append((entry, end))
            elif self.value(field, pos, False) != end:
                raise DecodeError(f"tagged field {tag} ({field.name}) is not {size} bytes")
            pos = end
        if unknown:
            # rewrite the count, then drop each unknown entry: kio reads the rest
            kept = count - len(unknown)
            self.cuts.append((start, count_end, _uvarint_bytes(kept)))
            self.cuts.extend((s, e, b"") for s, e in unknown)
        return pos


def _uvarint_bytes(value: int) -> bytes:
    out = io.BytesIO()
    write_unsigned_varint(out, uvarint(value))
    return out.getvalue()


def guard(frame: Frame, header: type, body: type) -> Frame:
    """Walk ``frame`` (a request header of class ``header``, then a body of class
    ``body``); the frame as kio may read it: ``frame`` itself, or a copy without the
    tagged fields the schema does not know. Raises DecodeError where a length or count
    runs past the end. Bytes after the body are left alone, as Kafka leaves them."""
    walk = _Walk(frame)
    walk.struct(body, walk.struct(header, 0))
    if not walk.cuts:
        return frame
    out = bytearray()
    pos = 0
    for start, stop, replacement in walk.cuts:
        out += frame[pos:start]
        out += replacement
        pos = stop
    out += frame[pos:]
    return bytes(out)
