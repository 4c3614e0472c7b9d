"""Kafka primitive codecs: round trips, bounds checks, and garbage raising DecodeError only."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from purgatory.kafka.codec import DecodeError, Reader, Writer


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_varint_round_trips(value: int) -> None:
    reader = Reader(Writer().varint(value).buf)
    assert reader.varint() == value
    assert reader.remaining == 0


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trips(value: int) -> None:
    assert Reader(Writer().varint(value).buf).varlong() == value


def test_known_varint_encodings() -> None:
    # zigzag: 0 -> 0, -1 -> 1, 1 -> 2, 150 -> 300 = 0xAC 0x02
    assert bytes(Writer().varint(0).varint(-1).varint(1).varint(150).buf) == b"\x00\x01\x02\xac\x02"


def test_fixed_width_and_strings_round_trip() -> None:
    buf = (
        Writer()
        .int8(-3)
        .int16(-300)
        .int32(70000)
        .int64(-(2**40))
        .string("tópic")
        .string(None)
        .nullable_bytes(b"xy")
        .nullable_bytes(None)
        .buf
    )
    reader = Reader(buf)
    assert (reader.int8(), reader.int16(), reader.int32(), reader.int64()) == (
        -3,
        -300,
        70000,
        -(2**40),
    )
    assert reader.string() == "tópic"
    assert reader.nullable_string() is None
    assert bytes(reader.nullable_bytes() or b"") == b"xy"
    assert reader.nullable_bytes() is None
    assert reader.remaining == 0


@pytest.mark.parametrize(
    ("data", "read"),
    [
        (b"\x00", Reader.int16),
        (b"\x00\x05ab", Reader.string),
        (b"\xff\xff", Reader.string),  # null where a string is required
        (b"\x00\x02\xff\xfe", Reader.string),  # not UTF-8
        (b"\x00\x00\x00\x09abc", Reader.nullable_bytes),
        (b"\x7f\xff\xff\xff", Reader.array_length),  # more elements than bytes
        (b"\xff\xff\xff\xfe", Reader.array_length),  # negative, not null
        (b"\x80\x80\x80\x80\x80\x01", Reader.varint),  # longer than 5 bytes
        (b"\x80", Reader.varint),  # truncated
    ],
)
def test_bad_input_raises_decode_error(data: bytes, read: object) -> None:
    with pytest.raises(DecodeError):
        read(Reader(data))  # type: ignore[operator]


def test_null_array_reads_as_empty() -> None:
    assert Reader(b"\xff\xff\xff\xff").array_length() == 0
    assert Reader(b"\xff\xff\xff\xff").nullable_array_length() is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_raises_only_decode_error(data: bytes) -> None:
    for read in (Reader.string, Reader.nullable_bytes, Reader.array_length, Reader.varlong):
        try:
            read(Reader(data))
        except DecodeError:
            pass
