"""Virtual time for asyncio: run minutes of timers in milliseconds, deterministically.

``VirtualTimeLoop`` is an ordinary selector event loop whose ``time()`` is virtual. When
nothing is ready to run and no I/O is pending, it jumps straight to the next scheduled
timer instead of sleeping (trio's MockClock with autojump, for asyncio). Everything that
reads ``loop.time()``, the purgatory's default clock included, sees the jump.

    purgatory.testing.run_virtual(main())
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _AutojumpSelector:
    """Wraps the loop's selector: a select() that would block advances virtual time."""

    def __init__(self, loop: VirtualTimeLoop, selector: selectors.BaseSelector) -> None:
        self._loop = loop
        self._selector = selector

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = self._selector.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:  # no timer at all: only real I/O or another thread can wake us
            return self._selector.select(None)
        self._loop._jump(timeout)
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._selector, name)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time that never sleeps while a timer is pending."""

    def __init__(self, start: float = 0.0) -> None:
        super().__init__()
        self._virtual_now = float(start)
        real: selectors.BaseSelector = self._selector  # type: ignore[has-type]
        self._selector = _AutojumpSelector(self, real)

    def time(self) -> float:
        return self._virtual_now

    def _jump(self, timeout: float) -> None:
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        # Land exactly on the next timer's instant: now + timeout may round just short of it.
        target = scheduled[0].when() if scheduled else self._virtual_now + timeout
        self._virtual_now = max(self._virtual_now, target)

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by hand (timers due by then run on the next turn)."""
        if not seconds >= 0:
            raise ValueError(f"virtual time cannot move backwards (advance by {seconds!r})")
        self._virtual_now += seconds


def virtual_loop_factory() -> asyncio.AbstractEventLoop:
    return VirtualTimeLoop()


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh :class:`VirtualTimeLoop`."""
    with asyncio.Runner(loop_factory=virtual_loop_factory) as runner:
        return runner.run(main)
