"""Timer micro-benchmark: add and cancel N pending timeouts, SystemTimer vs call_later.

Both sides get the same delays (integers drawn uniformly from ``[min_delay_ms,
max_delay_ms]``), converted up front so conversion is not timed. Phases, in CPU seconds:

* ``create``: constructing the TimerTask objects (SystemTimer only: ``call_later`` builds
  its handle inside ``add``, so the task's construction is charged to the timer);
* ``add``: ``timer.add(task)`` / ``loop.call_later(delay, callback)``;
* ``cancel``: ``task.cancel()`` / ``handle.cancel()``;
* ``cleanup``: one loop iteration afterwards, so deferred work is counted (asyncio rebuilds
  its timer heap once more than half of it is cancelled handles).

The SystemTimer runs with a waiter in ``advance_clock``, as under a purgatory's reaper, so
re-arming its wake-up is part of the cost.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
from dataclasses import dataclass
from typing import Final, final

from purgatory._timer import SystemTimer
from purgatory._wheel import TimerTask

DEFAULT_TASKS: Final = 1_000_000
DEFAULT_MIN_DELAY_MS: Final = 1
DEFAULT_MAX_DELAY_MS: Final = 300_000


@final
class _NoopTask(TimerTask):
    __slots__ = ()

    def run(self) -> None:
        raise AssertionError("a benchmark task ran: it should have been cancelled")


def _noop() -> None:
    raise AssertionError("a benchmark handle ran: it should have been cancelled")


@dataclass(frozen=True, slots=True)
class TimerPhases:
    create_s: float
    add_s: float
    cancel_s: float
    cleanup_s: float

    @property
    def total_s(self) -> float:
        return self.create_s + self.add_s + self.cancel_s + self.cleanup_s


@dataclass(frozen=True, slots=True)
class TimerBenchResult:
    loop: str
    tasks: int
    min_delay_ms: int
    max_delay_ms: int
    system_timer: TimerPhases
    call_later: TimerPhases

    @property
    def ratio(self) -> float:
        """SystemTimer's total CPU over call_later's (target: <= 0.5)."""
        return self.system_timer.total_s / self.call_later.total_s

    @property
    def ratio_without_create(self) -> float:
        own = self.system_timer.total_s - self.system_timer.create_s
        return own / self.call_later.total_s


def draw_delays(n: int, min_delay_ms: int, max_delay_ms: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(min_delay_ms, max_delay_ms) for _ in range(n)]


@final
class _Laps:
    """CPU seconds per phase: each :meth:`lap` is the time since the previous one (the
    first: since construction, which collects garbage so no earlier garbage is charged)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        gc.collect()
        self._last = time.process_time()

    def lap(self) -> float:
        now = time.process_time()
        elapsed, self._last = now - self._last, now
        return elapsed


async def _cancel_all(
    laps: _Laps, pending: list[asyncio.TimerHandle] | list[_NoopTask]
) -> tuple[float, float]:
    """The ``cancel`` and ``cleanup`` phases, timed alike on both sides."""
    for item in pending:
        item.cancel()
    cancel_s = laps.lap()
    await asyncio.sleep(0)
    return cancel_s, laps.lap()


async def _bench_call_later(delays_s: list[float]) -> TimerPhases:
    call_later = asyncio.get_running_loop().call_later
    laps = _Laps()
    handles = [call_later(delay, _noop) for delay in delays_s]
    add_s = laps.lap()
    cancel_s, cleanup_s = await _cancel_all(laps, handles)
    del handles
    return TimerPhases(0.0, add_s, cancel_s, cleanup_s)


async def _bench_system_timer(delays_ms: list[int]) -> TimerPhases:
    timer = SystemTimer("bench")
    waiter = asyncio.get_running_loop().create_task(timer.advance_clock(None))
    await asyncio.sleep(0)  # the waiter is parked in advance_clock
    laps = _Laps()
    tasks = [_NoopTask(delay) for delay in delays_ms]
    create_s = laps.lap()
    add = timer.add
    for task in tasks:
        add(task)
    add_s = laps.lap()
    cancel_s, cleanup_s = await _cancel_all(laps, tasks)
    if timer.size != 0:
        raise AssertionError(f"{timer.size} tasks left in the timer after cancelling all")
    timer.close()
    ran = await waiter
    if ran:
        raise AssertionError("a cancelled task ran")
    return TimerPhases(create_s, add_s, cancel_s, cleanup_s)


async def _bench(delays_ms: list[int]) -> tuple[TimerPhases, TimerPhases]:
    delays_s = [delay / 1000.0 for delay in delays_ms]
    baseline = await _bench_call_later(delays_s)
    del delays_s
    ours = await _bench_system_timer(delays_ms)
    return ours, baseline


def run_timer_bench(
    loop: str,
    tasks: int = DEFAULT_TASKS,
    min_delay_ms: int = DEFAULT_MIN_DELAY_MS,
    max_delay_ms: int = DEFAULT_MAX_DELAY_MS,
    seed: int = 1,
) -> TimerBenchResult:
    """Add and cancel ``tasks`` timeouts on each side, on a fresh loop of kind ``loop``."""
    from purgatory.bench.runner import loop_factory

    if tasks < 1:
        raise ValueError(f"tasks must be >= 1, got {tasks}")
    if not 1 <= min_delay_ms <= max_delay_ms:
        raise ValueError(f"need 1 <= min delay <= max delay, got {min_delay_ms}..{max_delay_ms}")
    delays = draw_delays(tasks, min_delay_ms, max_delay_ms, seed)
    with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
        ours, baseline = runner.run(_bench(delays))
    return TimerBenchResult(loop, tasks, min_delay_ms, max_delay_ms, ours, baseline)
