"""Never early in real time, on every supported loop: 100k operations with timeouts over
1..5,000 ms, none fires before its submit time + delay by ``time.monotonic()``."""

from __future__ import annotations

import pytest

from purgatory.bench.deadlines import measure_deadlines


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_no_operation_fires_before_its_deadline_by_the_monotonic_clock(loop: str) -> None:
    result = measure_deadlines(loop, operations=100_000, min_ms=1, max_ms=5_000)
    assert result.early == 0, result
    assert result.lateness_p50_ms < 50, result  # on time, give or take a loaded machine
