"""The completion driver: Kafka's CompletionQueue thread, as one re-armed loop timer.

Requests whose latency is below the timeout are force-completed at their completion time.
Completion times are whole milliseconds, so operations are grouped per millisecond: one
dict lookup and list append per operation, one heap push and (at most) one ``call_at`` per
distinct millisecond. That was cheaper than a heap entry or a ``call_at`` per operation,
and it matters because every implementation, the floor included, pays for it.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Callable
from typing import Any, Final, final

# asyncio may run a call_at handle a hair before its instant; never let that skip a bucket
_EPSILON_MS: Final = 1e-3


@final
class CompletionDriver:
    """Calls ``complete(op)`` for each added op once the loop clock reaches its time."""

    __slots__ = ("_armed_for", "_buckets", "_complete", "_handle", "_heap", "_loop", "fired")

    def __init__(self, loop: asyncio.AbstractEventLoop, complete: Callable[[Any], object]) -> None:
        self._loop = loop
        self._complete = complete
        self._buckets: dict[int, list[Any]] = {}
        self._heap: list[int] = []
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = math.inf
        self.fired = 0  # operations handed to complete()

    def add(self, op: Any, at_ms: int) -> None:
        """Complete ``op`` when the loop clock (in ms) reaches ``at_ms``."""
        bucket = self._buckets.get(at_ms)
        if bucket is not None:
            bucket.append(op)
            return
        self._buckets[at_ms] = [op]
        heapq.heappush(self._heap, at_ms)
        if at_ms < self._armed_for:
            if self._handle is not None:
                self._handle.cancel()
            self._arm(at_ms)

    def _arm(self, at_ms: int) -> None:
        self._armed_for = at_ms
        self._handle = self._loop.call_at(at_ms / 1000.0, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._armed_for = math.inf
        now_ms = self._loop.time() * 1000.0 + _EPSILON_MS
        heap = self._heap
        buckets = self._buckets
        complete = self._complete
        while heap and heap[0] <= now_ms:
            ops = buckets.pop(heapq.heappop(heap))
            self.fired += len(ops)
            for op in ops:
                complete(op)
        if heap:
            self._arm(heap[0])

    @property
    def pending(self) -> int:
        return sum(len(ops) for ops in self._buckets.values())

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed_for = math.inf
        self._buckets.clear()
        self._heap.clear()
