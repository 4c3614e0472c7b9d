"""A connection's Kafka frames (a 4-byte size, then that many bytes), read from the socket
straight into their own buffers.

asyncio's StreamReader copies each chunk the transport reads into its buffer, and
``readexactly`` copies the frame out of it again; the buffer pauses the transport past
128 KiB and resumes it at each wait. A producer's 0.4 MB Produce frame cost about 1 ms of
CPU that way, against 0.08-0.1 ms read as here (measured on loopback, the sender in
another process). A :class:`FrameReader` is fed by a buffered protocol: the transport
reads into a 64 KiB chunk, frames that fit are cut out of it as ``bytes``, and a larger
frame gets a buffer of its own that the transport then fills in place; it is handed out
as a read-only ``memoryview`` of that buffer (kio reads one as it reads ``bytes``).

Frames are read ahead of the task that takes them only up to :data:`READ_AHEAD_BYTES`:
past that the transport pauses until the task catches up, so a client pipelining
requests it does not wait for costs a bounded amount of memory. A frame's buffer grows
with what arrives (at most doubling), not from its size prefix alone, so four bytes
claiming 16 MiB make no 16 MiB allocation. A connection keeps the buffers of its last two
large frames (up to 1 MiB each) and reads a later frame into one once nothing views it.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from collections.abc import Callable
from typing import Final, TypeVar, final

from purgatory.kafka.protocol import Frame

T = TypeVar("T")

#: what the transport reads into when no large frame is being filled
READ_CHUNK_BYTES: Final = 64 * 1024
#: frames read and not yet taken, past which the transport pauses (each counted with
#: ``_ENTRY_BYTES`` more, so that a flood of empty frames pauses it too)
READ_AHEAD_BYTES: Final = 256 * 1024
_ENTRY_BYTES: Final = 64
#: the first buffer of a large frame, at least (then doubled as it fills, up to the size)
_FIRST_BUFFER_BYTES: Final = 1024 * 1024
#: a large frame's buffer up to this size is kept for the connection's next frames: a
#: new one costs its zeroing and page faults (0.1-0.15 ms for a 0.4 MB Produce frame)
REUSED_BUFFER_BYTES: Final = 1024 * 1024
#: how many such buffers a connection keeps: the frame being served holds one while the
#: next is read into another
_REUSED_BUFFERS: Final = 2


@final
class FrameReader:
    """The frames of one connection. The protocol side (:meth:`get_buffer`,
    :meth:`buffer_updated`, :meth:`feed_eof`, :meth:`set_transport`) is called by the
    connection's buffered protocol; the task side (:meth:`next_size`, :meth:`next_frame`)
    by the task serving it, one frame at a time."""

    __slots__ = (
        "_carry",
        "_chunk",
        "_closed",
        "_filled",
        "_frame",
        "_max_frame_bytes",
        "_next_size",
        "_paused",
        "_queued_bytes",
        "_ready",
        "_reused",
        "_transport",
        "_waiter",
    )

    def __init__(self, max_frame_bytes: int) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._chunk = bytearray(READ_CHUNK_BYTES)
        #: bytes of an incomplete prefix or small frame left from the last chunk
        self._carry = b""
        #: a large frame being filled in place, and how much of it has arrived
        self._frame: bytearray | None = None
        self._filled = 0
        #: the size prefix of the frame after the ready ones, once read (also a refused one)
        self._next_size: int | None = None
        self._ready: deque[Frame] = deque()
        #: buffers of large frames handed out, reused once no view of them is left
        self._reused: deque[bytearray] = deque(maxlen=_REUSED_BUFFERS)
        self._queued_bytes = 0
        self._closed = False
        self._paused = False
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[None] | None = None

    # -- the protocol's side ---------------------------------------------------------------

    def set_transport(self, transport: asyncio.Transport) -> None:
        """The transport to pause and resume (a TLS connection's replaces its socket's)."""
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is None:
            return memoryview(self._chunk)
        if self._filled == len(frame):
            # full and not complete: a larger buffer (never resized in place: the
            # transport may still hold a view of this one)
            grown = bytearray(min(self._frame_size(), 2 * len(frame)))
            grown[: len(frame)] = frame
            self._frame = frame = grown
        # up to the frame's end: a reused buffer may be longer, and the bytes after the
        # frame are the next one's
        return memoryview(frame)[self._filled : self._frame_size()]

    def buffer_updated(self, nbytes: int) -> None:
        frame = self._frame
        if frame is not None:
            self._filled += nbytes
            size = self._frame_size()
            if self._filled == size:
                self._frame, self._next_size = None, None
                if len(frame) <= REUSED_BUFFER_BYTES and all(b is not frame for b in self._reused):
                    self._reused.append(frame)
                self._push(memoryview(frame)[:size].toreadonly())
            return
        if self._closed or (self._next_size is not None and self._refused(self._next_size)):
            return  # a refused size: the task closes the connection, nothing more is read
        data = memoryview(self._chunk)[:nbytes]
        if self._carry:
            data = memoryview(self._carry + data)
            self._carry = b""
        self._cut(data)

    def feed_eof(self) -> None:
        """The connection is closed or lost: what is complete can still be taken."""
        self._closed = True
        self._wake()

    # -- the task's side -------------------------------------------------------------------

    def known_size(self) -> int | None:
        """The size prefix of the next frame if it has been read (it may be out of bounds:
        the caller refuses it), else None."""
        ready = self._ready
        return len(ready[0]) if ready else self._next_size

    def take(self) -> Frame | None:
        """The next frame if it has arrived whole (it is taken), else None."""
        ready = self._ready
        if not ready:
            return None
        frame = ready.popleft()
        self._queued_bytes -= len(frame) + _ENTRY_BYTES
        if self._paused and self._queued_bytes <= READ_AHEAD_BYTES:
            self._paused = False
            self._resume()
        return frame

    async def next_size(self) -> int | None:
        """:meth:`known_size`, once read; None if the connection closed first."""
        return await self._until(self.known_size)

    async def next_frame(self) -> Frame | None:
        """:meth:`take`, once whole; None if the connection closed first."""
        return await self._until(self.take)

    async def _until(self, poll: Callable[[], T | None]) -> T | None:
        while (value := poll()) is None:
            if self._closed:
                return None
            await self._wait()
        return value

    # -- internals -------------------------------------------------------------------------

    def _frame_size(self) -> int:
        size = self._next_size
        assert size is not None
        return size

    def _refused(self, size: int) -> bool:
        return not 0 <= size <= self._max_frame_bytes

    def _cut(self, data: memoryview) -> None:
        """Cut whole frames out of ``data``; keep what starts the next one."""
        end = len(data)
        pos = 0
        while end - pos >= 4:
            size = int.from_bytes(data[pos : pos + 4], "big", signed=True)
            self._next_size = size
            if self._refused(size):
                self._pause()  # the task refuses it and closes the connection
                self._wake()
                return
            start = pos + 4
            if end - start >= size:
                self._next_size = None
                self._push(bytes(data[start : start + size]))
                pos = start + size
                continue
            if size <= READ_CHUNK_BYTES:
                break  # a small frame: carried over to the next chunk
            # a large frame: its own buffer, which the transport fills from here on
            part = end - start
            frame = self._buffer(size, part)
            frame[:part] = data[start:end]
            self._frame, self._filled = frame, part
            self._wake()  # its size is known
            return
        if pos < end:
            self._carry = bytes(data[pos:end])
        self._wake()

    def _buffer(self, size: int, arrived: int) -> bytearray:
        """A buffer for a frame of ``size`` bytes of which ``arrived`` are here: a kept one
        no view is left of, or a new one sized by what arrived."""
        for buffer in self._reused:
            # free: referenced by the deque, this loop and getrefcount's argument only (a
            # view of it, however many, holds one more reference)
            if len(buffer) >= size and sys.getrefcount(buffer) == 3:
                return buffer
        return bytearray(min(size, max(_FIRST_BUFFER_BYTES, 2 * arrived)))

    def _push(self, frame: Frame) -> None:
        self._ready.append(frame)
        self._queued_bytes += len(frame) + _ENTRY_BYTES
        if self._queued_bytes > READ_AHEAD_BYTES:
            self._pause()
        self._wake()

    def _pause(self) -> None:
        transport = self._transport
        if not self._paused and transport is not None:
            self._paused = True
            transport.pause_reading()

    def _resume(self) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self) -> None:
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._waiter = None
