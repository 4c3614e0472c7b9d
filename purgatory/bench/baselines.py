"""What the purgatory is measured against, behind one small interface.

* ``floor``: the workload alone (requests, draws, op objects, completion driver), with no
  watching and no timeouts: its CPU is subtracted from everybody else's.
* ``call_later``: what a careful asyncio user writes by hand: a ``loop.call_later`` timeout
  per operation and a set of operations per key; completion cancels the handle and
  discards the op from its sets.
* ``heap``: Kafka's design before the timing wheel: one heap of (deadline, seq, op) with
  lazy deletion of completed ops, one reaper task sleeping until the heap head, and the
  purgatory's watcher lists (plain lists, purged when stale entries exceed
  ``purge_interval``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, final

from purgatory.bench.workload import Tally

Watch = Callable[[Any, list[str]], Awaitable[object] | None]
Complete = Callable[[Any], object]


class Implementation(Protocol):
    """One way of watching operations and timing them out."""

    name: str
    #: True if ``watch`` returns an awaitable (the runner then awaits it)
    watch_is_async: bool

    # Plain attributes holding bound callables, not methods: the runner calls them once per
    # request, and the purgatory's is its own bound method (no wrapper frame).
    @property
    def watch(self) -> Watch:
        """Watch an op on its keys and start its timeout."""

    @property
    def complete(self) -> Complete:
        """Called by the completion driver when an op's latency has passed."""

    def new_op(self, deadline_ms: float) -> Any:
        """A fresh operation whose timeout deadline (loop clock, ms) is ``deadline_ms``."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def expires(self) -> bool:
        """Whether ops whose latency reaches the timeout finish (expire) at all."""


def _not_started(*args: object) -> Any:
    raise RuntimeError("the implementation was not started")


# -- floor ---------------------------------------------------------------------------------


@final
class _FloorOp:
    __slots__ = ("deadline_ms", "finished")

    def __init__(self, deadline_ms: float) -> None:
        self.deadline_ms = deadline_ms
        self.finished = False


@final
class Floor:
    """No purgatory: completions are counted, nothing is watched, nothing expires."""

    name = "floor"
    watch_is_async = False

    def __init__(self, tally: Tally, timeout_ms: int) -> None:
        self._tally = tally
        self.watch: Watch = self._watch
        self.complete: Complete = self._complete

    def new_op(self, deadline_ms: float) -> _FloorOp:
        return _FloorOp(deadline_ms)

    def _watch(self, op: _FloorOp, keys: list[str]) -> None:
        return None

    def _complete(self, op: _FloorOp) -> None:
        if not op.finished:
            op.finished = True
            self._tally.on_completed()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def expires(self) -> bool:
        return False


# -- call_later ----------------------------------------------------------------------------


@final
class _HandOp:
    __slots__ = ("deadline_ms", "finished", "handle", "keys")

    def __init__(self, deadline_ms: float) -> None:
        self.deadline_ms = deadline_ms
        self.finished = False
        self.handle: asyncio.TimerHandle | None = None
        self.keys: list[str] = []


@final
class CallLaterBaseline:
    """A ``call_later`` per operation plus ``dict[key, set[op]]`` watchers."""

    name = "call_later"
    watch_is_async = False

    def __init__(self, tally: Tally, timeout_ms: int) -> None:
        self._tally = tally
        self._timeout_s = timeout_ms / 1000.0
        self._watchers: dict[str, set[_HandOp]] = {}
        self._call_later: Callable[..., asyncio.TimerHandle] = _not_started
        self.watch: Watch = self._watch
        self.complete: Complete = self._complete

    def new_op(self, deadline_ms: float) -> _HandOp:
        return _HandOp(deadline_ms)

    def _watch(self, op: _HandOp, keys: list[str]) -> None:
        watchers = self._watchers
        for key in keys:
            ops = watchers.get(key)
            if ops is None:
                watchers[key] = {op}
            else:
                ops.add(op)
        op.keys = keys
        op.handle = self._call_later(self._timeout_s, self._expire, op)

    def _unwatch(self, op: _HandOp) -> None:
        watchers = self._watchers
        for key in op.keys:
            ops = watchers[key]
            ops.discard(op)
            if not ops:
                del watchers[key]

    def _complete(self, op: _HandOp) -> None:
        if op.finished:
            return
        op.finished = True
        if op.handle is not None:
            op.handle.cancel()
        self._unwatch(op)
        self._tally.on_completed()

    def _expire(self, op: _HandOp) -> None:
        if op.finished:
            return
        op.finished = True
        self._unwatch(op)
        self._tally.on_expired(op.deadline_ms)

    @property
    def watched(self) -> int:
        return sum(len(ops) for ops in self._watchers.values())

    async def start(self) -> None:
        self._call_later = asyncio.get_running_loop().call_later

    async def stop(self) -> None:
        return None

    def expires(self) -> bool:
        return True


# -- heap ----------------------------------------------------------------------------------


@final
class _HeapOp:
    __slots__ = ("deadline_ms", "finished", "keys")

    def __init__(self, deadline_ms: float) -> None:
        self.deadline_ms = deadline_ms
        self.finished = False
        self.keys: list[str] = []


@final
class HeapBaseline:
    """One heapq delay queue (lazy deletion) and one reaper task; watcher lists + purge."""

    name = "heap"
    watch_is_async = False

    def __init__(self, tally: Tally, timeout_ms: int, purge_interval: int = 1000) -> None:
        self._tally = tally
        self._timeout_ms = timeout_ms
        self._purge_interval = purge_interval
        self._watchers: dict[str, list[_HeapOp]] = {}
        self._stale = 0  # watcher entries of finished ops
        self._heap: list[tuple[float, int, _HeapOp]] = []
        self._seq = itertools.count()
        self._reaper: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._wake_handle: asyncio.TimerHandle | None = None
        self._armed_for = math.inf
        self._time: Callable[[], float] = _not_started
        self.purges = 0
        self.watch: Watch = self._watch
        self.complete: Complete = self._complete

    def new_op(self, deadline_ms: float) -> _HeapOp:
        return _HeapOp(deadline_ms)

    def _watch(self, op: _HeapOp, keys: list[str]) -> None:
        watchers = self._watchers
        for key in keys:
            ops = watchers.get(key)
            if ops is None:
                watchers[key] = [op]
            else:
                ops.append(op)
        op.keys = keys
        deadline = self._time() * 1000.0 + self._timeout_ms
        heapq.heappush(self._heap, (deadline, next(self._seq), op))
        if deadline < self._armed_for:
            self._wake()  # the reaper sleeps past the new head: let it re-arm

    def _complete(self, op: _HeapOp) -> None:
        if op.finished:
            return  # lazy deletion: its heap entry is skipped when it surfaces
        op.finished = True
        self._finished(op)
        self._tally.on_completed()

    def _finished(self, op: _HeapOp) -> None:
        self._stale += len(op.keys)
        if self._stale > self._purge_interval:
            self._purge()

    def _purge(self) -> None:
        self.purges += 1
        watchers = self._watchers
        for key, ops in list(watchers.items()):
            live = [op for op in ops if not op.finished]
            if live:
                watchers[key] = live
            else:
                del watchers[key]
        self._stale = 0

    @property
    def watched(self) -> int:
        return sum(len(ops) for ops in self._watchers.values())

    async def _reap(self) -> None:
        loop = asyncio.get_running_loop()
        heap = self._heap
        time = loop.time
        while True:
            now_ms = time() * 1000.0
            while heap and heap[0][0] <= now_ms:
                op = heapq.heappop(heap)[2]
                if not op.finished:
                    op.finished = True
                    self._finished(op)
                    self._tally.on_expired(op.deadline_ms)
            self._wakeup = loop.create_future()
            if heap:
                self._armed_for = heap[0][0]
                self._wake_handle = loop.call_at(self._armed_for / 1000.0, self._wake)
            try:
                await self._wakeup
            finally:
                if self._wake_handle is not None:
                    self._wake_handle.cancel()
                    self._wake_handle = None
                self._wakeup = None
                self._armed_for = math.inf

    def _wake(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)
        self._armed_for = -math.inf  # already woken: no need to wake again

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._time = loop.time
        self._reaper = loop.create_task(self._reap(), name="bench-heap-reaper")

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            try:
                await self._reaper
            except asyncio.CancelledError:
                pass
            self._reaper = None

    def expires(self) -> bool:
        return True
