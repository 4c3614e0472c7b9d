"""SystemTimer: the timing wheel on an asyncio loop (Kafka's SystemTimer).

The wheel itself (:class:`~purgatory._wheel.TimerCore`) is synchronous. This shell reads the
clock, runs due tasks, and lets one waiter (the purgatory's reaper) sleep exactly until the
earliest deadline: it arms one ``loop.call_at`` for that instant and re-arms it when an
earlier bucket is queued. Nothing is polled, so an idle timer never wakes.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, SupportsIndex, final

from purgatory._clock import CLOCK_EPSILON_MS, Clock, loop_clock_ms
from purgatory._wheel import TimerCore, TimerTask

logger = logging.getLogger("purgatory.timer")

_running_loop: Final = asyncio._get_running_loop  # None outside a loop


@dataclass(frozen=True, slots=True)
class TimerStatistics:
    """A timer's size, shape and counters at one instant."""

    name: str
    size: int
    tick_ms: int
    wheel_size: int
    levels: int
    queued_buckets: int
    tasks_run: int
    task_errors: int
    wakeups: int


@final
class SystemTimer:
    """A hierarchical timing wheel driven by the event loop.

    ``add`` schedules a task at ``now + task.delay_ms`` (a delay <= 0 is due at once);
    ``await advance_clock(timeout_ms)`` waits until something is due (or the timeout
    passes) and runs every due task, in deadline order, never before its deadline.
    """

    def __init__(
        self,
        name: str,
        tick_ms: SupportsIndex = 1,
        wheel_size: SupportsIndex = 20,
        *,
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {name!r}")
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be callable (returning milliseconds), got {clock!r}")
        self.name = name
        probe = TimerCore(tick_ms, wheel_size)  # validate now, not at the first add
        self._tick_ms = probe.tick_ms
        self._wheel_size = probe.wheel_size
        if clock is None:
            clock = loop_clock_ms
        self._clock: Clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None  # bound on first use
        self._on_loop_clock = clock is loop_clock_ms
        # The loop clock, bound on first use: get_running_loop() on every read would cost
        # more than the whole wheel insertion.
        self._loop_time: Callable[[], float] | None = None
        self._core: TimerCore | None = None
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None
        self._wake_handle: asyncio.TimerHandle | None = None
        self._armed_for = math.inf  # deadline the waiter's wake-up is set for
        self._give_up = math.inf  # when the current advance_clock times out
        self._ran_while_waiting = 0
        self._tasks_run = 0
        self._task_errors = 0
        self._wakeups = 0

    # -- scheduling ----------------------------------------------------------------------

    def now_ms(self) -> float:
        """The timer's clock, in milliseconds."""
        loop_time = self._loop_time
        if loop_time is not None:
            return loop_time() * 1000.0
        if not self._on_loop_clock:
            return self._clock()
        loop_time = self._loop_time = _time_source(asyncio.get_running_loop())
        return loop_time() * 1000.0

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now; re-adding moves it."""
        if self._loop is None:  # bind on first use (advance_clock checks every time)
            loop = _running_loop()
            if loop is not None:
                self._check_loop(loop)
        self._add_at(task, self.now_ms())

    def _add_at(self, task: TimerTask, now: float) -> None:
        """``add``, with the clock already read by the caller."""
        if self._closed:
            raise RuntimeError(f"timer {self.name!r} is closed")
        core = self._core
        if core is None:
            core = self._core = TimerCore(self._tick_ms, self._wheel_size, math.floor(now))
        if task._bucket is not None:
            # timer-only: re-adding moves the task; task.cancel() would cancel an operation
            TimerTask._unschedule(task)
        delay = task._delay_ms
        # Round the deadline up: with a fractional clock, rounding down would run early.
        expiration = math.ceil(now + delay) if delay > 0 else math.floor(now)
        queued = core.schedule(task, expiration)
        if queued is not None and queued < self._armed_for:
            self._rearm(queued)

    @property
    def size(self) -> int:
        """Tasks waiting for their deadline."""
        return 0 if self._core is None else self._core.size

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._closed

    # -- expiry --------------------------------------------------------------------------

    def run_due(self) -> int:
        """Run every task due now, synchronously; return how many ran."""
        core = self._core
        if core is None:
            return 0
        due = core.advance_to(math.floor(self.now_ms() + CLOCK_EPSILON_MS))
        for task in due:
            try:
                task.run()
            except Exception:
                self._task_errors += 1
                logger.exception("timer %r: task %r failed", self.name, task)
        self._tasks_run += len(due)
        return len(due)

    async def advance_clock(self, timeout_ms: int | None = None) -> bool:
        """Wait up to ``timeout_ms`` (forever if None) for a deadline; run all that are due.

        Returns True if any task ran. Only one caller may wait at a time.
        """
        loop = asyncio.get_running_loop()
        self._check_loop(loop)
        if self._waiter is not None:
            raise RuntimeError(f"timer {self.name!r}: advance_clock is already being awaited")
        give_up = math.inf
        if timeout_ms is not None:
            if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int):
                raise TypeError(f"timeout_ms must be an int or None, got {timeout_ms!r}")
            if timeout_ms < 0:
                raise ValueError(f"timeout_ms must be >= 0, got {timeout_ms!r}")
            give_up = self.now_ms() + timeout_ms
        if self.run_due():
            return True
        if self._closed or self.now_ms() >= give_up:
            return False
        self._give_up = give_up
        self._ran_while_waiting = 0
        self._waiter = loop.create_future()
        self._arm_next(loop)
        try:
            await self._waiter
        finally:
            self._disarm()
            self._waiter = None
        return self._ran_while_waiting > 0

    def _arm_next(self, loop: asyncio.AbstractEventLoop) -> None:
        deadline = None if self._core is None else self._core.next_deadline()
        self._arm(loop, self._give_up if deadline is None else min(deadline, self._give_up))

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._wake_handle is not None:
            self._wake_handle.cancel()
            self._wake_handle = None
        self._armed_for = deadline
        if deadline == math.inf:
            return
        if self._on_loop_clock:
            self._wake_handle = loop.call_at(deadline / 1000.0, self._wake)
        else:
            delay_s = max(0.0, deadline - self.now_ms()) / 1000.0
            self._wake_handle = loop.call_later(delay_s, self._wake)

    def _disarm(self) -> None:
        if self._wake_handle is not None:
            self._wake_handle.cancel()
            self._wake_handle = None
        self._armed_for = math.inf

    def _rearm(self, deadline: int) -> None:
        if self._waiter is not None:
            self._arm(self._waiter.get_loop(), deadline)

    def _wake(self) -> None:
        """The armed deadline has come. Due tasks run right here, in the timer callback,
        not one loop iteration later in the waiting task; a cascade that ran nothing just
        re-arms for the next deadline."""
        self._wake_handle = None
        armed_for = self._armed_for
        self._armed_for = math.inf
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        self._wakeups += 1
        ran = self.run_due()
        now = self.now_ms()
        if ran or self._closed or now >= self._give_up:
            self._ran_while_waiting += ran
            waiter.set_result(None)
        elif now + CLOCK_EPSILON_MS < armed_for:
            # Woken before the deadline: uvloop's timers count whole milliseconds and can
            # fire up to 1 ms early. Waking again 1 ms later beats spinning on zero delays.
            self._arm(waiter.get_loop(), armed_for + 1)
        else:
            self._arm_next(waiter.get_loop())

    # -- lifecycle -----------------------------------------------------------------------

    def _check_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bind to ``loop`` on first use; refuse any other loop afterwards."""
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError(
                f"timer {self.name!r} is bound to a different event loop (a timer belongs "
                "to the loop that first used it)"
            )

    def close(self) -> list[TimerTask]:
        """Stop the timer: pending tasks are unscheduled (and returned), waiters return."""
        self._closed = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        return [] if self._core is None else self._core.clear()

    def statistics(self) -> TimerStatistics:
        """Size, shape and counters now, as a frozen dataclass."""
        core = self._core
        return TimerStatistics(
            name=self.name,
            size=self.size,
            tick_ms=self._tick_ms,
            wheel_size=self._wheel_size,
            levels=1 if core is None else core.levels,
            queued_buckets=0 if core is None else core.queued_buckets,
            tasks_run=self._tasks_run,
            task_errors=self._task_errors,
            wakeups=self._wakeups,
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<SystemTimer {self.name!r} {state} size={self.size} tick={self._tick_ms}ms>"


def _time_source(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """``loop.time``, or ``time.monotonic`` when the loop's clock is that clock:

    * asyncio's own loops: ``time()`` is ``time.monotonic()`` (one Python frame less);
    * uvloop: ``time()`` is the same CLOCK_MONOTONIC truncated to whole milliseconds, up
      to 1 ms behind; deadlines computed from it would fire up to 1 ms early.

    Any other loop (virtual time, for instance) keeps its own clock.
    """
    loop_type = type(loop)
    if loop_type.time is asyncio.BaseEventLoop.time or loop_type.__module__.startswith("uvloop"):
        return time.monotonic
    return loop.time
