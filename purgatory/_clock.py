"""Clocks: monotonic time in milliseconds, injectable for tests.

A clock is any zero-argument callable returning monotonic milliseconds as a float (or int).
The timer schedules on whole milliseconds: an expiration is rounded *up*, the current time
is rounded *down*, so no task can run before its deadline.
"""

from __future__ import annotations

import asyncio
from typing import Final, Protocol, final


class Clock(Protocol):
    """Anything called with no arguments that returns monotonic time in milliseconds."""

    def __call__(self) -> float: ...


def loop_clock_ms() -> float:
    """The running event loop's monotonic clock, in milliseconds (works with virtual time)."""
    return asyncio.get_running_loop().time() * 1000.0


@final
class ManualClock:
    """A clock that moves only when told to; for deterministic tests.

    >>> clock = ManualClock(100); clock.advance(5); clock()
    105.0
    """

    __slots__ = ("_now",)

    def __init__(self, start_ms: float = 0.0) -> None:
        self._now = float(start_ms)

    def __call__(self) -> float:
        return self._now

    def advance(self, ms: float) -> None:
        if not ms >= 0:  # also rejects NaN
            raise ValueError(f"a clock cannot move backwards (advance by {ms!r})")
        self._now += ms

    def set(self, now_ms: float) -> None:
        if not now_ms >= self._now:
            raise ValueError(f"a clock cannot move backwards ({self._now} -> {now_ms!r})")
        self._now = float(now_ms)

    def __repr__(self) -> str:
        return f"<ManualClock {self._now} ms>"


# Tolerance when reading the clock at a wake-up: a deadline goes to the loop in seconds and
# comes back in milliseconds, and the float round trip may land a hair short of it (asyncio
# itself fires a call_at up to its 1 ns clock resolution early). One nanosecond.
CLOCK_EPSILON_MS: Final = 1e-6
