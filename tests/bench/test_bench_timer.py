"""The timer micro-benchmark runs its protocol correctly on both loops (no timing asserts)."""

from __future__ import annotations

import pytest

from purgatory.bench.timer_bench import draw_delays, run_timer_bench


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_timer_bench_small(loop: str) -> None:
    # run_timer_bench itself raises if a task survives cancellation or runs
    result = run_timer_bench(loop, tasks=5000, min_delay_ms=1, max_delay_ms=60_000)
    assert result.tasks == 5000
    for phases in (result.system_timer, result.call_later):
        assert min(phases.add_s, phases.cancel_s, phases.cleanup_s, phases.create_s) >= 0.0
    assert result.call_later.create_s == 0.0
    assert result.ratio > 0


def test_delays_are_reproducible_and_in_range() -> None:
    delays = draw_delays(10_000, 5, 9, seed=2)
    assert delays == draw_delays(10_000, 5, 9, seed=2)
    assert set(delays) == {5, 6, 7, 8, 9}


@pytest.mark.parametrize(("tasks", "lo", "hi"), [(0, 1, 10), (10, 0, 10), (10, 20, 10)])
def test_bad_arguments(tasks: int, lo: int, hi: int) -> None:
    with pytest.raises(ValueError, match=r"tasks|delay"):
        run_timer_bench("asyncio", tasks, lo, hi)
