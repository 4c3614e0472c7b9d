"""Never early, in real time: expire many operations and compare each firing with its
submit time plus delay, both read from ``time.monotonic()``.

The loop's own clock may be coarser than the monotonic clock (uvloop counts whole
milliseconds), so this is the check that a deadline computed from it is never early.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.bench.runner import loop_factory
from purgatory.percentiles import percentile


class _Timed(DelayedOperation):
    """Never completes; remembers when it was submitted and when it expired."""

    def __init__(self, delay_ms: int, submitted_s: float) -> None:
        super().__init__(delay_ms)
        self.submitted_s = submitted_s
        self.expired_s = 0.0

    def try_complete(self) -> bool:
        return False

    def on_expiration(self) -> None:
        self.expired_s = time.monotonic()


@dataclass(frozen=True)
class DeadlineResult:
    loop: str
    operations: int
    early: int  # fired before submit time + delay
    worst_early_ms: float  # most negative lateness (0 if none early)
    lateness_p50_ms: float
    lateness_p99_ms: float
    lateness_max_ms: float


def measure_deadlines(
    loop: str, operations: int = 100_000, min_ms: int = 1, max_ms: int = 5_000, seed: int = 1
) -> DeadlineResult:
    """Submit ``operations`` with delays uniform over ``[min_ms, max_ms]`` and wait for all
    of them to expire; lateness is firing time minus (submit time + delay)."""
    rng = random.Random(seed)
    delays = [rng.randint(min_ms, max_ms) for _ in range(operations)]

    async def run() -> list[_Timed]:
        async with DelayedOperationPurgatory[_Timed]("deadlines") as purgatory:
            ops = []
            for i, delay in enumerate(delays):
                op = _Timed(delay, time.monotonic())
                purgatory.try_complete_else_watch_nowait(op, (i,))
                ops.append(op)
                if i % 1_000 == 999:
                    await asyncio.sleep(0)  # let due expirations run while submitting
            for op in ops:
                await op
            return ops

    with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
        ops = runner.run(run())
    lateness = sorted((op.expired_s - op.submitted_s) * 1000 - op.delay_ms for op in ops)
    return DeadlineResult(
        loop=loop,
        operations=operations,
        early=sum(1 for late in lateness if late < 0),
        worst_early_ms=min(0.0, lateness[0]),
        lateness_p50_ms=percentile(lateness, 50),
        lateness_p99_ms=percentile(lateness, 99),
        lateness_max_ms=lateness[-1],
    )
