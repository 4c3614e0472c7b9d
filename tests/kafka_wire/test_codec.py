"""The primitive codec left for record batches (requests and responses go through kio):
varints and raw bytes; bounds checks; garbage raising DecodeError only."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.wire_errors import DecodeError


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_varint_round_trips(value: int) -> None:
    buf = Writer().varint(value).buf
    reader = Reader(buf)
    assert reader.varint() == value
    assert reader.pos == len(buf)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trips(value: int) -> None:
    assert Reader(Writer().varint(value).buf).varlong() == value


def test_known_varint_encodings() -> None:
    # zigzag: 0 -> 0, -1 -> 1, 1 -> 2, 150 -> 300 = 0xAC 0x02
    assert bytes(Writer().varint(0).varint(-1).varint(1).varint(150).buf) == b"\x00\x01\x02\xac\x02"


def test_int8_and_raw_bytes_round_trip() -> None:
    buf = Writer().int8(-3).raw(b"xy").varint(-7).buf
    reader = Reader(buf)
    assert bytes(reader.raw(1)) == b"\xfd"
    assert bytes(reader.raw(2)) == b"xy"
    assert reader.varint() == -7
    assert reader.pos == len(buf)


@pytest.mark.parametrize(
    ("data", "read"),
    [
        (b"\x80\x80\x80\x80\x80\x01", Reader.varint),  # longer than 5 bytes
        (b"\x80" * 10 + b"\x01", Reader.varlong),  # longer than 10 bytes
        (b"\x80", Reader.varint),  # truncated
        (b"", Reader.varint),
    ],
)
def test_bad_input_raises_decode_error(data: bytes, read: object) -> None:
    with pytest.raises(DecodeError):
        read(Reader(data))  # type: ignore[operator]


def test_raw_reads_past_the_end_raise_decode_error() -> None:
    with pytest.raises(DecodeError):
        Reader(b"abc").raw(4)
    with pytest.raises(DecodeError):
        Reader(b"abc").raw(-1)
    with pytest.raises(DecodeError):
        Reader(b"abc", 2).raw(2)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_raises_only_decode_error(data: bytes) -> None:
    for read in (Reader.varint, Reader.varlong):
        reader = Reader(data)
        try:
            while True:
                read(reader)
        except DecodeError:
            pass
