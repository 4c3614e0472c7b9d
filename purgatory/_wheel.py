"""The synchronous core of the timer: hierarchical timing wheels and their bucket queue.

Kafka's design (TimingWheel, TimerTaskList, TimerTaskEntry), without threads or a clock:
the caller passes integer milliseconds in and gets due tasks out.

* A bucket is a circular doubly-linked list whose sentinel is the bucket itself, so adding
  and removing a task are O(1). The task *is* its list entry (Kafka's TimerTaskEntry is
  folded into TimerTask): no allocation per schedule.
* Wheel level ``k`` has tick ``tick_ms * wheel_size**k``; a task too far out for one level
  goes to the next, created on demand.
* Buckets with a fresh expiration are pushed onto a heap ordered by expiration (Kafka's
  DelayQueue). ``advance_to(now)`` pops every due bucket, moves the wheels to its
  expiration and reinserts its tasks: they cascade down to finer levels or become due.
* Due tasks whose deadline is still ahead (possible when ``tick_ms > 1``) wait in a small
  "ready" list + heap, so that no task is ever handed out before its deadline and tasks
  come out in deadline order.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from typing import Final, SupportsIndex, final

from mypy_extensions import mypyc_attr

_UNSCHEDULED: Final = -1

#: The longest delay a task may have (2**53 ms, about 285,000 years): deadlines are computed
#: as ``clock + delay`` in floating point, which is exact to the millisecond up to here.
MAX_DELAY_MS: Final = 2**53


def validate_delay(delay_ms: object) -> int:
    """Return ``delay_ms`` as an int; reject floats, NaN, bools, non-numbers and delays
    beyond :data:`MAX_DELAY_MS` (a negative delay is fine: the task is due at once)."""
    if isinstance(delay_ms, bool):
        raise TypeError("delay_ms must be an int number of milliseconds, not a bool")
    try:
        delay = operator.index(delay_ms)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"delay_ms must be an int number of milliseconds, got {type(delay_ms).__name__} "
            f"{delay_ms!r}"
        ) from None
    if delay > MAX_DELAY_MS:
        raise ValueError(f"delay_ms must be at most 2**53 (MAX_DELAY_MS), got {delay}")
    return delay


def checked_int(name: str, value: object, least: int) -> int:
    # Annotated SupportsIndex by callers so that the compiled build passes the object
    # through unconverted (a bool would otherwise arrive as 0 or 1).
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < least:
        raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    return value


@mypyc_attr(allow_interpreted_subclasses=True)
class _Node:
    """A link in a bucket's circular list: a task, or the bucket's sentinel."""

    __slots__ = ("_next", "_prev")

    _next: _Node
    _prev: _Node


@mypyc_attr(allow_interpreted_subclasses=True)
class TimerTask(_Node):
    """Something to run once its delay has passed. Subclasses implement :meth:`run`.

    A task belongs to at most one timer at a time; adding it again moves it.
    """

    __slots__ = ("_bucket", "_delay_ms", "expiration_ms")

    def __init__(self, delay_ms: SupportsIndex) -> None:
        # the common case first: an int needs no conversion (every request builds a task)
        if type(delay_ms) is int and delay_ms <= MAX_DELAY_MS:
            self._delay_ms: int = delay_ms
        else:
            self._delay_ms = validate_delay(delay_ms)
        self._bucket: _Bucket | None = None
        #: absolute deadline (ms on the timer's clock) while scheduled, else -1
        self.expiration_ms = _UNSCHEDULED

    @property
    def delay_ms(self) -> int:
        """The delay given at construction, in milliseconds."""
        return self._delay_ms

    @property
    def is_scheduled(self) -> bool:
        """True while the task sits in a timer, waiting for its deadline."""
        return self._bucket is not None

    def run(self) -> None:
        """Called by the timer once the deadline has passed."""
        raise NotImplementedError

    def cancel(self) -> bool:
        """Remove the task from its timer, if any: it will not run. O(1); safe to call at
        any time. True if it was scheduled.

        :class:`~purgatory.DelayedOperation` overrides this to cancel the operation
        itself; the timer never calls ``cancel()`` (it unschedules with ``_unschedule``).
        """
        return TimerTask._unschedule(self)

    @final
    def _unschedule(self) -> bool:
        """Unlink the task from its timer, if any; True if it was scheduled. Timer-only,
        whatever the subclass: what the timer and the completion path call (as
        ``TimerTask._unschedule(task)``, a direct call in the compiled build)."""
        bucket = self._bucket
        if bucket is None:
            return False
        prev = self._prev
        nxt = self._next
        prev._next = nxt
        nxt._prev = prev
        # Links left pointing at former neighbours would keep them alive as long as this
        # task, and in reference cycles only the collector breaks. (Not ``del``: mypyc
        # deletes through the generic PyObject_DelAttr, 30 ns more per cancel.)
        self._prev = self._next = _DETACHED
        self._bucket = None
        bucket.core._size -= 1
        return True


#: Where the links of a task out of every bucket point.
_DETACHED: Final = _Node()


@final
class _Bucket(_Node):
    """A TimerTaskList: the sentinel of a circular list of tasks sharing one expiration."""

    __slots__ = ("core", "expiration_ms", "seq")

    def __init__(self, core: TimerCore, seq: int) -> None:
        self._next = self._prev = self
        self.core = core
        self.seq = seq  # tie-breaker in the heap
        self.expiration_ms = _UNSCHEDULED

    def is_empty(self) -> bool:
        return self._next is self

    def append(self, task: TimerTask) -> None:
        last = self._prev
        task._prev = last
        task._next = self
        last._next = task
        self._prev = task
        task._bucket = self

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the bucket's expiration; True if it changed (the bucket must be queued)."""
        changed = self.expiration_ms != expiration_ms
        self.expiration_ms = expiration_ms
        return changed

    def detach_all(self) -> list[TimerTask]:
        """Unlink and return every task (their ``_bucket`` is cleared); the bucket is reset."""
        tasks = []
        node = self._next
        while node is not self:
            assert isinstance(node, TimerTask)
            following = node._next
            node._bucket = None
            # as in TimerTask._unschedule: no links to former neighbours
            node._prev = node._next = _DETACHED
            tasks.append(node)
            node = following
        self._next = self._prev = self
        self.expiration_ms = _UNSCHEDULED
        return tasks


@final
class _Level:
    """One timing wheel: ``size`` buckets of ``tick_ms`` each."""

    __slots__ = ("buckets", "current_ms", "interval_ms", "limit_ms", "size", "tick_ms")

    def __init__(self, core: TimerCore, tick_ms: int, size: int, start_ms: int) -> None:
        self.tick_ms = tick_ms
        self.size = size
        self.interval_ms = tick_ms * size
        self.buckets = [core._new_bucket() for _ in range(size)]
        self.current_ms = 0
        self.limit_ms = 0
        self.move_to(start_ms)

    def move_to(self, time_ms: int) -> None:
        """Round ``time_ms`` down to a tick and make it the wheel's current time."""
        self.current_ms = time_ms - time_ms % self.tick_ms
        # expirations below this fit in this wheel (cached: checked on every add)
        self.limit_ms = self.current_ms + self.interval_ms


@final
class TimerCore:
    """Hierarchical timing wheels and the expiration-ordered bucket queue, with no clock.

    ``schedule(task, expiration_ms)`` and ``advance_to(now_ms)`` are the whole protocol.
    """

    def __init__(
        self, tick_ms: SupportsIndex = 1, wheel_size: SupportsIndex = 20, start_ms: int = 0
    ) -> None:
        tick = checked_int("tick_ms", tick_ms, 1)
        size = checked_int("wheel_size", wheel_size, 2)
        self._seq = itertools.count()
        self._size = 0
        # (expiration, seq, bucket): buckets waiting for their expiration
        self._queue: list[tuple[int, int, _Bucket]] = []
        # due tasks whose deadline is still ahead (tick_ms > 1 only): list + lazy heap
        self._ready = self._new_bucket()
        self._ready_heap: list[tuple[int, int, TimerTask]] = []
        self._levels = [_Level(self, tick, size, start_ms)]

    def _new_bucket(self) -> _Bucket:
        return _Bucket(self, next(self._seq))

    # -- introspection -------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Tasks scheduled and not yet handed out or cancelled."""
        return self._size

    @property
    def tick_ms(self) -> int:
        return self._levels[0].tick_ms

    @property
    def wheel_size(self) -> int:
        return self._levels[0].size

    @property
    def current_ms(self) -> int:
        return self._levels[0].current_ms

    @property
    def levels(self) -> int:
        return len(self._levels)

    @property
    def queued_buckets(self) -> int:
        return len(self._queue)

    def next_deadline(self) -> int | None:
        """When ``advance_to`` next has work: the earliest queued bucket or ready deadline."""
        queue = self._queue
        # Buckets emptied by cancellation need no wake-up: drop them from the head.
        while queue and queue[0][2].is_empty():
            heapq.heappop(queue)[2].expiration_ms = _UNSCHEDULED
        ready = self._ready_heap
        while ready and not self._is_live_ready(ready[0]):
            heapq.heappop(ready)
        if queue:
            if ready and ready[0][0] < queue[0][0]:
                return ready[0][0]
            return queue[0][0]
        return ready[0][0] if ready else None

    # -- scheduling ----------------------------------------------------------------------

    def schedule(self, task: TimerTask, expiration_ms: int) -> int | None:
        """Schedule ``task`` (not currently scheduled) to be due at ``expiration_ms``.

        Returns the deadline of a bucket or ready entry this created, which may be earlier
        than ``next_deadline()`` was, so the caller can re-arm its wake-up; else None.
        """
        task.expiration_ms = expiration_ms
        self._size += 1
        return self._place(task, expiration_ms)

    def _place(self, task: TimerTask, expiration_ms: int) -> int | None:
        levels = self._levels
        first = levels[0]
        if expiration_ms < first.current_ms + first.tick_ms:
            return self._make_ready(task, expiration_ms)
        for level in levels:
            if expiration_ms < level.limit_ms:
                break
        else:
            while True:  # beyond every wheel: add overflow wheels until one fits
                level = _Level(self, level.interval_ms, level.size, level.current_ms)
                levels.append(level)
                if expiration_ms < level.limit_ms:
                    break
        tick = level.tick_ms
        virtual_id = expiration_ms // tick
        bucket = level.buckets[virtual_id % level.size]
        bucket.append(task)
        bucket_expiration = virtual_id * tick
        if bucket.set_expiration(bucket_expiration):  # a new round for this bucket: queue it
            heapq.heappush(self._queue, (bucket_expiration, bucket.seq, bucket))
            return bucket_expiration
        return None

    def _make_ready(self, task: TimerTask, expiration_ms: int) -> int:
        self._ready.append(task)
        heapq.heappush(self._ready_heap, (expiration_ms, next(self._seq), task))
        return expiration_ms

    def _is_live_ready(self, entry: tuple[int, int, TimerTask]) -> bool:
        task = entry[2]
        return task._bucket is self._ready and task.expiration_ms == entry[0]

    # -- expiry --------------------------------------------------------------------------

    def advance_to(self, now_ms: int) -> list[TimerTask]:
        """Flush every bucket due at ``now_ms``; return the tasks whose deadline has passed.

        The returned tasks are removed from the timer, in deadline order; running them is
        the caller's job. Tasks that became due but whose deadline is after ``now_ms`` (only
        with ``tick_ms > 1``) stay scheduled until a later call.
        """
        queue = self._queue
        levels = self._levels
        due: list[TimerTask] = []
        while queue and queue[0][0] <= now_ms:
            bucket_expiration, _, bucket = heapq.heappop(queue)
            for level in levels:  # Kafka's advanceClock, all levels at once
                if bucket_expiration >= level.current_ms + level.tick_ms:
                    level.move_to(bucket_expiration)
            for task in bucket.detach_all():
                expiration = task.expiration_ms
                if expiration <= now_ms and expiration < levels[0].current_ms + levels[0].tick_ms:
                    due.append(task)
                else:
                    self._place(task, expiration)
        ready_heap = self._ready_heap
        while ready_heap and ready_heap[0][0] <= now_ms:
            entry = heapq.heappop(ready_heap)
            if self._is_live_ready(entry):
                # unlink from the ready list: timer-only (an operation's cancel() would
                # cancel the operation instead of handing it out to expire)
                TimerTask._unschedule(entry[2])
                self._size += 1  # _unschedule counted it out; the count below does it once
                due.append(entry[2])
        self._size -= len(due)
        # Keep the wheels near the present so new tasks land in fine levels (safe: every
        # bucket that expires by now_ms has just been flushed).
        for level in levels:
            if now_ms >= level.current_ms + level.tick_ms:
                level.move_to(now_ms)
        if len(due) > 1:
            due.sort(key=_expiration_of)
        return due

    def clear(self) -> list[TimerTask]:
        """Unschedule and return every task (for shutdown)."""
        tasks: list[TimerTask] = []
        for level in self._levels:
            for bucket in level.buckets:
                tasks.extend(bucket.detach_all())
        tasks.extend(self._ready.detach_all())
        self._queue.clear()
        self._ready_heap.clear()
        self._size = 0
        return tasks

    def __repr__(self) -> str:
        return (
            f"<TimerCore tick={self.tick_ms}ms wheel={self.wheel_size} levels={self.levels} "
            f"size={self._size} queued_buckets={len(self._queue)} now={self.current_ms}>"
        )


_expiration_of = operator.attrgetter("expiration_ms")
