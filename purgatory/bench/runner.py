"""Runs the workload against one implementation and measures it.

CPU time is ``time.process_time()`` from just before the implementation starts to just
after it stops (idle waiting for the last timeouts costs none); the requests' random draws
are made before that (:class:`~purgatory.bench.workload.RequestDraws`). Peak memory is
measured in a separate pass under ``tracemalloc``, which would otherwise inflate the CPU
figures.
"""

from __future__ import annotations

import asyncio
import gc
import math
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from purgatory import event_loops
from purgatory.bench.baselines import CallLaterBaseline, Floor, HeapBaseline, Implementation
from purgatory.bench.completion import CompletionDriver
from purgatory.bench.subject import PurgatoryImplementation
from purgatory.bench.workload import PurgatoryPerformanceConfig, RequestDraws, Tally
from purgatory.percentiles import percentile

IMPLEMENTATIONS: Final = ("floor", "call_later", "heap", "purgatory")
#: measured on request (--nowait): the purgatory's synchronous watch entry point
EXTRA_IMPLEMENTATIONS: Final = ("purgatory-nowait",)
LOOPS: Final = ("asyncio", "uvloop")

# How long after the last request the run may take before it is declared stuck.
_GRACE_S: Final = 30.0


class WorkloadStuck(RuntimeError):
    """Some operations never completed nor expired."""


def make_implementation(name: str, tally: Tally, cfg: PurgatoryPerformanceConfig) -> Implementation:
    if name == "floor":
        return Floor(tally, cfg.timeout_ms)
    if name == "call_later":
        return CallLaterBaseline(tally, cfg.timeout_ms)
    if name == "heap":
        return HeapBaseline(tally, cfg.timeout_ms)
    if name == "purgatory":
        return PurgatoryImplementation(tally, cfg.timeout_ms)
    if name == "purgatory-nowait":
        return PurgatoryImplementation(tally, cfg.timeout_ms, nowait=True)
    known = IMPLEMENTATIONS + EXTRA_IMPLEMENTATIONS
    raise ValueError(f"unknown implementation {name!r}; expected one of {known}")


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """``asyncio``, ``uvloop`` or ``virtual`` (purgatory.testing's virtual-time loop)."""
    if name == "virtual":
        from purgatory.testing import virtual_loop_factory

        return virtual_loop_factory
    if name not in LOOPS:
        raise ValueError(f"unknown loop {name!r}; expected asyncio, uvloop or virtual")
    return event_loops.loop_factory(name)


@dataclass(frozen=True, slots=True)
class LatenessSummary:
    count: int
    min_ms: float | None
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None

    @classmethod
    def of(cls, samples: list[float]) -> LatenessSummary:
        if not samples:
            return cls(0, None, None, None, None)
        ordered = sorted(samples)
        return cls(
            len(ordered),
            ordered[0],
            percentile(ordered, 50),
            percentile(ordered, 99),
            ordered[-1],
        )


@dataclass(frozen=True, slots=True)
class RunResult:
    implementation: str
    loop: str
    num: int
    target_rate: float | None
    achieved_rate: float  # requests / generation wall time
    cpu_s: float
    wall_s: float
    completed: int
    expired: int
    drawn_expired: int  # requests whose latency >= timeout: exactly these must expire
    duplicates: int
    lateness: LatenessSummary
    peak_heap_bytes: int | None = None  # tracemalloc pass only
    extra: dict[str, int] = field(default_factory=dict)

    @property
    def cpu_us_per_request(self) -> float:
        return self.cpu_s / self.num * 1e6


async def _generate(
    cfg: PurgatoryPerformanceConfig,
    draws: RequestDraws,
    impl: Implementation,
    driver: CompletionDriver,
) -> int:
    """Issue every request; return how many drew a latency >= the timeout."""
    loop = asyncio.get_running_loop()
    now = loop.time
    per_request = cfg.keys_per_request
    timeout = cfg.timeout_ms
    batch = cfg.batch
    gaps = draws.arrival_gaps_s
    latencies = draws.latencies_ms
    all_keys = draws.keys
    new_op = impl.new_op
    watch = impl.watch
    is_async = impl.watch_is_async
    to_driver = driver.add
    drawn_expired = 0
    arrival = now()
    unyielded = 0
    for i in range(cfg.num):
        if gaps is not None:
            # Open loop, Poisson arrivals (Kafka's exponential inter-arrival times): a
            # request goes out at its arrival time however far behind the loop is.
            arrival += gaps[i]
            if arrival > now():
                await asyncio.sleep(arrival - now())
                unyielded = 0
        # Even when behind schedule (or unpaced), let completions and expirations run.
        if unyielded >= batch:
            await asyncio.sleep(0)
            unyielded = 0
        unyielded += 1
        latency = latencies[i]
        keys = all_keys[i * per_request : (i + 1) * per_request]  # a fresh list, as drawn
        now_ms = now() * 1000.0
        op = new_op(now_ms + timeout)
        if latency < timeout:
            to_driver(op, int(now_ms) + latency)
        else:
            drawn_expired += 1
        if is_async:
            await watch(op, keys)  # type: ignore[misc]
        else:
            watch(op, keys)
    return drawn_expired


async def _measure(
    cfg: PurgatoryPerformanceConfig, name: str, loop_name: str, memory: bool
) -> RunResult:
    loop = asyncio.get_running_loop()
    tally = Tally(loop)
    impl = make_implementation(name, tally, cfg)
    driver = CompletionDriver(loop, impl.complete)
    draws = RequestDraws(cfg)
    gc.collect()
    if memory:
        tracemalloc.start()
        heap_before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    try:
        await impl.start()
        drawn_expired = await _generate(cfg, draws, impl, driver)
        generation_s = time.perf_counter() - wall0
        tally.expect(cfg.num if impl.expires() else cfg.num - drawn_expired)
        try:
            await asyncio.wait_for(asyncio.shield(tally.done), cfg.timeout_ms / 1000 + _GRACE_S)
        except TimeoutError:
            raise WorkloadStuck(
                f"{name}: {tally.target - tally.finished} of {tally.target} operations "
                f"neither completed nor expired within {_GRACE_S:.0f} s of the last request"
            ) from None
        await impl.stop()
        cpu_s = time.process_time() - cpu0
        wall_s = time.perf_counter() - wall0
        peak = None
        if memory:
            peak = tracemalloc.get_traced_memory()[1] - heap_before
    finally:
        if memory:
            tracemalloc.stop()
        driver.close()
    extra = {"driver_completions": driver.fired}
    if isinstance(impl, PurgatoryImplementation):
        stats = impl.purgatory.statistics()
        extra |= {
            "purgatory_completed": stats.completed,
            "purgatory_expired": stats.expired,
            "purges": stats.purges,
        }
    return RunResult(
        implementation=name,
        loop=loop_name,
        num=cfg.num,
        target_rate=cfg.rate,
        achieved_rate=cfg.num / generation_s if generation_s > 0 else math.inf,
        cpu_s=cpu_s,
        wall_s=wall_s,
        completed=tally.completed,
        expired=tally.expired,
        drawn_expired=drawn_expired,
        duplicates=tally.duplicates,
        lateness=LatenessSummary.of(list(tally.lateness_ms)),
        peak_heap_bytes=peak,
        extra=extra,
    )


def run_workload(
    cfg: PurgatoryPerformanceConfig,
    implementation: str,
    loop: str = "uvloop",
    *,
    memory: bool = False,
) -> RunResult:
    """Run the workload once on a fresh event loop of kind ``loop``."""
    if implementation not in IMPLEMENTATIONS + EXTRA_IMPLEMENTATIONS:
        raise ValueError(f"unknown implementation {implementation!r}")
    with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
        return runner.run(_measure(cfg, implementation, loop, memory))
