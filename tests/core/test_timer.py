"""SystemTimer: the async shell around the wheel (injected clock and virtual time)."""

from __future__ import annotations

import asyncio
import time

import pytest

from purgatory import ManualClock, SystemTimer, TimerTask


class Recorder(TimerTask):
    def __init__(self, delay_ms: int, log: list[tuple[int, float]], clock: object) -> None:
        super().__init__(delay_ms)
        self.log = log
        self.clock = clock

    def run(self) -> None:
        self.log.append((self.delay_ms, self.clock()))  # type: ignore[operator]


class Boom(TimerTask):
    def run(self) -> None:
        raise RuntimeError("boom")


@pytest.mark.asyncio
async def test_manual_clock_runs_each_task_at_its_deadline() -> None:
    clock = ManualClock(1_000)
    timer = SystemTimer("t", clock=clock)
    log: list[tuple[int, float]] = []
    for delay in (30, 10, 20, 0, -5, 20):
        timer.add(Recorder(delay, log, clock))
    assert timer.size == 6
    assert timer.run_due() == 2  # delay <= 0: due at once
    for _ in range(30):
        clock.advance(1)
        timer.run_due()
    assert log == [(0, 1000), (-5, 1000), (10, 1010), (20, 1020), (20, 1020), (30, 1030)]
    assert timer.size == 0


@pytest.mark.asyncio
async def test_fractional_clock_rounds_deadline_up() -> None:
    clock = ManualClock(100.6)
    timer = SystemTimer("t", clock=clock)
    log: list[tuple[int, float]] = []
    timer.add(Recorder(10, log, clock))  # deadline 110.6 -> due at 111, not 110
    clock.set(110.9)
    assert timer.run_due() == 0
    clock.set(111.0)
    assert timer.run_due() == 1


@pytest.mark.asyncio
async def test_readding_moves_the_task() -> None:
    clock = ManualClock(0)
    timer = SystemTimer("t", clock=clock)
    log: list[tuple[int, float]] = []
    task = Recorder(50, log, clock)
    timer.add(task)
    clock.advance(40)
    timer.add(task)  # now due at 90
    clock.advance(10)
    assert timer.run_due() == 0
    assert timer.size == 1
    clock.advance(40)
    assert timer.run_due() == 1
    assert log == [(50, 90)]


@pytest.mark.asyncio
async def test_failing_task_is_counted_and_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(0)
    timer = SystemTimer("t", clock=clock)
    log: list[tuple[int, float]] = []
    timer.add(Boom(5))
    timer.add(Recorder(5, log, clock))
    clock.advance(5)
    assert timer.run_due() == 2
    assert log == [(5, 5)]
    assert timer.statistics().task_errors == 1
    assert "boom" in caplog.text


@pytest.mark.asyncio
async def test_advance_clock_times_out_when_nothing_is_due() -> None:
    timer = SystemTimer("t", clock=ManualClock(0))
    assert await timer.advance_clock(0) is False
    with pytest.raises(ValueError, match="timeout_ms"):
        await timer.advance_clock(-1)


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_advance_clock_sleeps_exactly_until_the_deadline() -> None:
    loop = asyncio.get_running_loop()
    timer = SystemTimer("t")
    log: list[tuple[int, float]] = []

    def now() -> float:
        return loop.time() * 1000

    start = now()
    timer.add(Recorder(250, log, now))
    assert await timer.advance_clock(1_000) is True
    assert log == [(250, start + 250)]
    assert await timer.advance_clock(100) is False
    assert now() == start + 350


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_earlier_task_rearms_the_waiting_reaper() -> None:
    loop = asyncio.get_running_loop()
    timer = SystemTimer("t")
    log: list[tuple[int, float]] = []

    def now() -> float:
        return loop.time() * 1000

    start = now()
    timer.add(Recorder(10_000, log, now))
    waiting = asyncio.ensure_future(timer.advance_clock(None))
    await asyncio.sleep(0)  # the waiter is armed for 10 s
    timer.add(Recorder(5, log, now))
    assert await waiting is True
    assert log == [(5, start + 5)]
    await timer.advance_clock(None)
    assert log[-1] == (10_000, start + 10_000)
    # wake-ups: at 5 ms, at 8 s (the coarse bucket cascades to a finer wheel), at 10 s
    assert timer.statistics().wakeups == 3


@pytest.mark.asyncio
async def test_only_one_waiter_and_close_releases_it() -> None:
    timer = SystemTimer("t")
    waiting = asyncio.ensure_future(timer.advance_clock(None))
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="already being awaited"):
        await timer.advance_clock(0)
    timer.close()
    assert await waiting is False
    with pytest.raises(RuntimeError, match="closed"):
        timer.add(Boom(1))


@pytest.mark.asyncio
async def test_real_loop_smoke() -> None:
    """A few real milliseconds on the real loop: nothing runs early."""
    loop = asyncio.get_running_loop()
    timer = SystemTimer("t")
    log: list[tuple[int, float]] = []

    def now() -> float:
        return loop.time() * 1000

    start = now()
    for delay in (15, 5, 10):
        timer.add(Recorder(delay, log, now))
    while timer.size:
        await timer.advance_clock(1_000)
    assert [delay for delay, _ in log] == [5, 10, 15]
    for delay, ran_at in log:
        assert ran_at >= start + delay - 1e-6


def test_repr_and_statistics() -> None:
    timer = SystemTimer("orders", tick_ms=2, wheel_size=8)
    assert repr(timer) == "<SystemTimer 'orders' open size=0 tick=2ms>"
    stats = timer.statistics()
    assert (stats.name, stats.size, stats.tick_ms, stats.wheel_size) == ("orders", 0, 2, 8)
    with pytest.raises(ValueError, match="tick_ms"):
        SystemTimer("bad", tick_ms=0)


@pytest.mark.asyncio
async def test_default_clock_is_the_loops_monotonic_clock_at_full_resolution() -> None:
    # asyncio's loops' time() is time.monotonic(); uvloop's is the same clock truncated to
    # whole milliseconds. The timer reads time.monotonic on both, so a deadline is never
    # computed from a reading up to 1 ms stale (which would fire early in real time).
    loop = asyncio.get_running_loop()
    timer = SystemTimer("t")
    loop_before = loop.time() * 1000
    before = time.monotonic() * 1000
    now = timer.now_ms()
    after = time.monotonic() * 1000
    loop_after = loop.time() * 1000
    assert before <= now <= after
    assert loop_before <= now < loop_after + 1
    assert timer.now_ms() >= now


@pytest.mark.virtual_time
@pytest.mark.asyncio
async def test_an_unknown_loop_keeps_its_own_clock() -> None:
    loop = asyncio.get_running_loop()
    assert SystemTimer("t").now_ms() == loop.time() * 1000
