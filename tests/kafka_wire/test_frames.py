"""The frame reader of a connection: frames read straight into their buffers come out
whole and in order however the transport splits the bytes, reading pauses past the
read-ahead, and a size prefix alone allocates no more than the first buffer."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from purgatory.kafka.frames import READ_AHEAD_BYTES, READ_CHUNK_BYTES, FrameReader
from purgatory.kafka.protocol import MAX_FRAME_BYTES, Frame

T = TypeVar("T")


class _Transport:
    """What the reader calls on a transport: pause and resume, counted."""

    def __init__(self) -> None:
        self.paused = False
        self.pauses = 0

    def pause_reading(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return False


def _reader() -> tuple[FrameReader, _Transport]:
    reader = FrameReader(MAX_FRAME_BYTES)
    transport = _Transport()
    reader.set_transport(transport)  # type: ignore[arg-type]
    return reader, transport


def _now(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a reader call that has what it needs: it must not wait."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    coroutine.close()
    raise AssertionError("the call waited")


def _framed(frames: list[bytes]) -> bytes:
    return b"".join(len(f).to_bytes(4, "big") + f for f in frames)


def _feed(reader: FrameReader, data: bytes, reads: list[int]) -> None:
    """Deliver ``data`` as a transport does: into each buffer the reader offers, at most
    one of ``reads`` bytes at a time (cycled), holding the last view while asking for the
    next buffer (asyncio's TLS layer does)."""
    pos = 0
    step = 0
    held = None
    while pos < len(data):
        buffer = reader.get_buffer(-1)
        assert len(buffer) > 0
        n = min(len(buffer), reads[step % len(reads)], len(data) - pos)
        step += 1
        buffer[:n] = data[pos : pos + n]
        held = buffer  # noqa: F841 - still alive while the reader is told and asked again
        reader.buffer_updated(n)
        pos += n


def _take(reader: FrameReader) -> Frame | None:
    size = _now(reader.next_size())
    frame = _now(reader.next_frame())
    assert frame is None or len(frame) == size
    return frame


_SIZES = st.one_of(
    st.integers(0, 300),
    st.integers(READ_CHUNK_BYTES - 8, READ_CHUNK_BYTES + 8),
    st.integers(READ_CHUNK_BYTES + 9, 3 * READ_CHUNK_BYTES),
)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(_SIZES, min_size=1, max_size=6),
    reads=st.lists(st.integers(1, 2 * READ_CHUNK_BYTES), min_size=1, max_size=5),
    held=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_frames_come_out_whole_and_in_order_however_the_bytes_are_split(
    sizes: list[int], reads: list[int], held: list[bool]
) -> None:
    # frames sent two at a time and taken as they arrive, some held to the end: a buffer
    # is reused only once no view of its frame is left, so a held frame's bytes never
    # change, and a reused buffer longer than its frame takes none of the next frame's
    frames = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    reader, _ = _reader()
    kept: list[tuple[bytes, Frame]] = []
    for pair in range(0, len(frames), 2):
        _feed(reader, _framed(frames[pair : pair + 2]), reads)
        for i in range(pair, min(pair + 2, len(frames))):
            got = _take(reader)
            assert got is not None
            assert bytes(got) == frames[i]
            if held[i]:
                kept.append((frames[i], got))
            del got
    reader.feed_eof()
    assert _now(reader.next_size()) is None
    assert _now(reader.next_frame()) is None
    for sent, got in kept:
        assert bytes(got) == sent


def test_a_large_frames_buffer_is_reused_once_its_frame_is_released() -> None:
    reader, _ = _reader()
    first, second = bytes([1]) * 300_000, bytes([2]) * 300_000
    third, fourth = bytes([3]) * 100_000, b"next"  # sent together
    _feed(reader, _framed([first]), [READ_CHUNK_BYTES])
    held = _take(reader)
    assert isinstance(held, memoryview)
    _feed(reader, _framed([second]), [READ_CHUNK_BYTES])
    got = _take(reader)
    assert isinstance(got, memoryview)
    assert got.obj is not held.obj  # the first is still viewed: a buffer of its own
    assert bytes(held) == first
    released = id(got.obj)
    del got
    _feed(reader, _framed([third, fourth]), [READ_CHUNK_BYTES])
    again = _take(reader)
    assert isinstance(again, memoryview)
    assert id(again.obj) == released
    assert bytes(again) == third  # read up to its end in a longer buffer, no further
    assert _take(reader) == fourth
    assert bytes(held) == first


@pytest.mark.asyncio
async def test_a_frame_larger_than_the_chunk_is_read_into_its_own_buffer_and_the_next_follows() -> (
    None
):
    # a 110 KB Produce frame, then a small one sent later: the large frame's size must
    # not be taken for the next frame's once it is complete (the next request then
    # waited for 110 KB that never came, and the connection closed as truncated)
    large, small = b"p" * 110_036, b"s" * 20
    reader, _ = _reader()
    _feed(reader, _framed([large]), [READ_CHUNK_BYTES])
    got = _take(reader)
    assert isinstance(got, memoryview)
    assert got.readonly
    assert bytes(got) == large
    waiting = asyncio.ensure_future(reader.next_size())
    await asyncio.sleep(0)
    assert not waiting.done()  # no size known yet
    _feed(reader, _framed([small]), [READ_CHUNK_BYTES])
    assert await waiting == len(small)
    assert _take(reader) == small


def test_reading_pauses_past_the_read_ahead_and_resumes_as_frames_are_taken() -> None:
    reader, transport = _reader()
    frame = b"x" * 1000
    count = READ_AHEAD_BYTES // 1000 + 2
    _feed(reader, _framed([frame] * count), [READ_CHUNK_BYTES])
    assert transport.paused
    taken = 0
    while transport.paused:
        assert _take(reader) == frame
        taken += 1
    assert 0 < taken < count
    assert transport.pauses == 1


def test_a_flood_of_empty_frames_pauses_reading_too() -> None:
    reader, transport = _reader()
    _feed(reader, _framed([b""] * READ_AHEAD_BYTES), [READ_CHUNK_BYTES])
    assert transport.paused


def test_a_size_prefix_alone_allocates_no_more_than_the_first_buffer() -> None:
    reader, _ = _reader()
    claimed = MAX_FRAME_BYTES
    _feed(reader, claimed.to_bytes(4, "big") + b"abc" + b"\0" * READ_CHUNK_BYTES, [1 << 20])
    assert _now(reader.next_size()) == claimed
    assert len(reader.get_buffer(-1)) <= 1024 * 1024


@pytest.mark.parametrize("size", [-1, MAX_FRAME_BYTES + 1])
def test_a_size_out_of_bounds_is_reported_and_nothing_more_is_read(size: int) -> None:
    reader, transport = _reader()
    _feed(reader, size.to_bytes(4, "big", signed=True) + b"more", [READ_CHUNK_BYTES])
    assert _now(reader.next_size()) == size
    assert transport.paused
    reader.feed_eof()
    assert _now(reader.next_frame()) is None


def test_a_connection_closed_inside_a_frame_ends_it_with_none() -> None:
    reader, _ = _reader()
    _feed(reader, (200_000).to_bytes(4, "big") + b"y" * 100_000, [READ_CHUNK_BYTES])
    reader.feed_eof()
    assert _now(reader.next_size()) == 200_000
    assert _now(reader.next_frame()) is None


@pytest.mark.asyncio
async def test_a_waiting_task_wakes_when_its_frame_arrives() -> None:
    reader, _ = _reader()
    waiting = asyncio.ensure_future(reader.next_frame())
    await asyncio.sleep(0)
    assert not waiting.done()
    _feed(reader, _framed([b"hello"]), [2])
    assert await waiting == b"hello"
