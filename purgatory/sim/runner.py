"""Run a scenario: cluster + workload + faults + observers, and produce the summary.

Runs on whatever loop is running: real time (asyncio or uvloop) or
:func:`purgatory.testing.run_virtual`, where a seed always gives the same summary (all
randomness comes from generators seeded from it, all time from the loop's clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any, final

from purgatory import DelayedOperationPurgatory, OperationRecord
from purgatory._outcomes import Outcome
from purgatory.percentiles import percentile
from purgatory.sim.cluster import Cluster
from purgatory.sim.invariants import InvariantChecker
from purgatory.sim.messages import DeleteRecordsRequest
from purgatory.sim.replica_manager import PURGATORY_NAMES
from purgatory.sim.scenarios import Scenario
from purgatory.sim.stats import PurgatoryStats, StatsBook
from purgatory.sim.summary import DurationPercentiles, PurgatorySummary, RunSummary
from purgatory.sim.workload import Workload
from purgatory.testing import VirtualTimeLoop

SAMPLE_INTERVAL_S = 0.1

__all__ = ["RunSummary", "run_scenario"]


async def run_scenario(
    scenario: Scenario,
    duration_s: float,
    seed: int,
    *,
    listeners: list[Callable[[OperationRecord], None]] = (),  # type: ignore[assignment]
    progress: Callable[[str], None] | None = None,
    progress_interval_s: float = 1.0,
    check: bool = True,
    on_fault: Callable[[str], None] | None = None,
) -> RunSummary:
    """Run ``scenario`` for ``duration_s`` seconds of loop time and return the summary.
    ``listeners`` see every finished operation (e.g. a
    :class:`~purgatory.trace.TraceWriter`); ``progress(text)`` hears of the run's progress
    every ``progress_interval_s`` and of each fault; ``on_fault(description)`` hears of each
    fault as it is injected (``TraceWriter.mark_fault``); ``check`` attaches the invariant
    checker."""
    if not duration_s > 0 or duration_s == float("inf"):
        raise ValueError(f"duration_s must be a finite number > 0, got {duration_s!r}")
    run = _ScenarioRun(scenario, duration_s, seed, listeners, check, progress, on_fault)
    return await run.run(progress_interval_s)


@final
class _ScenarioRun:
    """One run: the cluster and its observers, the background jobs that drive and watch it
    for the run's duration, and the figures its summary is made of."""

    def __init__(
        self,
        scenario: Scenario,
        duration_s: float,
        seed: int,
        listeners: list[Callable[[OperationRecord], None]],
        check: bool,
        progress: Callable[[str], None] | None,
        on_fault: Callable[[str], None] | None,
    ) -> None:
        self.scenario = scenario
        self.duration_s = duration_s
        self.seed = seed
        self.progress = progress
        self.on_fault = on_fault
        self.loop = asyncio.get_running_loop()
        self.wall_start = time.perf_counter()
        self.sim_start = self.loop.time()
        self.cluster = Cluster(scenario.brokers, seed=seed, **scenario.cluster_options)
        self.stats = StatsBook(PURGATORY_NAMES)
        self.cluster.add_op_observer(self.stats.add)
        self.purgatories = self.cluster.all_purgatories()
        for purgatory in self.purgatories:
            for listener in listeners:
                purgatory.add_listener(listener)
        self.checker = InvariantChecker(self.cluster) if check else None
        self.watched_per_s: dict[str, list[int]] = {name: [] for name in PURGATORY_NAMES}
        self._deletes: set[asyncio.Task[Any]] = set()

    async def run(self, progress_interval_s: float) -> RunSummary:
        scenario = self.scenario
        cluster = self.cluster
        async with cluster:
            await cluster.create_topic(
                scenario.workload.topic,
                scenario.partitions,
                scenario.replication_factor,
                assignment=scenario.assignment,
            )
            workload = Workload(cluster, scenario.workload, random.Random(f"{self.seed}/workload"))
            workload.start()
            await self._run_background(self._background_jobs(workload, progress_interval_s))
            await workload.stop()
            if self._deletes:
                await asyncio.gather(*self._deletes)
            if self.progress is not None:
                self.progress("\n")
            lost, given_up = workload.losses()
            simulated_s = self.loop.time() - self.sim_start
            fetcher_rounds = sum(
                f.rounds
                for b in cluster.brokers.values()
                for f in b.replica_manager.fetchers.values()
            )
        if self.checker is not None:
            self.checker.check_accounting()
        return self._summary(workload, lost, given_up, simulated_s, fetcher_rounds)

    def _background_jobs(
        self, workload: Workload, progress_interval_s: float
    ) -> list[Coroutine[Any, Any, None]]:
        jobs = [self._inject_faults(), self._sample_sizes()]
        if self.scenario.delete_interval_ms > 0:
            jobs.append(self._delete_records())
        if self.progress is not None:
            jobs.append(self._report_progress(self.progress, workload, progress_interval_s))
        return jobs

    async def _run_background(self, jobs: list[Coroutine[Any, Any, None]]) -> None:
        """Run ``jobs`` for the run's duration, then cancel them."""
        tasks = [self.loop.create_task(job) for job in jobs]
        await asyncio.sleep(self.duration_s)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _inject_faults(self) -> None:
        """Each fault at its fraction of the run's duration."""
        loop = self.loop
        for event in sorted(self.scenario.faults, key=lambda e: e.at):
            await asyncio.sleep(max(0.0, self.sim_start + event.at * self.duration_s - loop.time()))
            if self.progress is not None:
                self.progress(
                    f"t={loop.time() - self.sim_start:6.1f}s fault: {event.description}\n"
                )
            await event.action(self.cluster)
            if self.on_fault is not None:
                self.on_fault(event.description)

    async def _delete_records(self) -> None:
        """Every ``delete_interval_ms``, delete each partition's records up to
        ``delete_keep`` below its high watermark (requests are awaited in :meth:`run`)."""
        scenario = self.scenario
        interval = scenario.delete_interval_ms / 1000.0
        topic = scenario.workload.topic
        while True:
            await asyncio.sleep(interval)
            for p in self.cluster.topics[topic]:
                target = p.hw - scenario.delete_keep
                if p.leader is not None and target > p.leader_log.log_start_offset:
                    request = DeleteRecordsRequest(topic, p.index, target, 5000)
                    task = self.loop.create_task(self.cluster.delete_records(request))
                    self._deletes.add(task)
                    task.add_done_callback(self._deletes.discard)

    async def _sample_sizes(self) -> None:
        """The purgatories' sizes every :data:`SAMPLE_INTERVAL_S` (their maxima), once a
        second into :attr:`watched_per_s`; the invariant checker's samples alike."""
        ticks = 0
        per_second = round(1 / SAMPLE_INTERVAL_S)
        while True:
            await asyncio.sleep(SAMPLE_INTERVAL_S)
            ticks += 1
            for name, (watched, delayed) in _sizes(self.purgatories).items():
                self.stats[name].sample(watched, delayed)
                if ticks % per_second == 0:
                    self.watched_per_s[name].append(watched)
            if self.checker is not None:
                self.checker.sample()

    async def _report_progress(
        self, progress: Callable[[str], None], workload: Workload, interval_s: float
    ) -> None:
        """One line every ``interval_s``: request rates, acked records, purgatory sizes."""
        loop = self.loop
        last = dict(workload.counts)
        last_t = loop.time()
        while True:
            await asyncio.sleep(interval_s)
            now = loop.time()
            span = max(now - last_t, 1e-9)
            counts = workload.counts
            rates = {k: (counts[k] - last[k]) / span for k in counts}
            sizes = " ".join(f"{n[0]}={w}" for n, (w, _) in _sizes(self.purgatories).items())
            progress(
                f"\rt={now - self.sim_start:6.1f}s produce {rates['produce_requests']:8,.0f}/s "
                f"fetch {rates['fetch_requests']:8,.0f}/s acked {workload.acked_records:,} "
                f"in-flight {workload.in_flight:,} watched {sizes}  "
                f"wall {time.perf_counter() - self.wall_start:.1f}s"
            )
            last, last_t = dict(counts), now

    def _summary(
        self,
        workload: Workload,
        lost: int,
        given_up: int,
        simulated_s: float,
        fetcher_rounds: int,
    ) -> RunSummary:
        wall_s = time.perf_counter() - self.wall_start
        counts = workload.counts
        requests = counts["produce_requests"] + counts["fetch_requests"] + fetcher_rounds
        stats = self.stats
        operations = sum(s.operations for s in stats.values())
        produce_fetch = stats["Produce"].operations + stats["Fetch"].operations
        checker = self.checker
        return RunSummary(
            scenario=self.scenario.name,
            seed=self.seed,
            duration_s=self.duration_s,
            simulated_s=round(simulated_s, 3),
            acked_records=workload.acked_records,
            lost_records=lost,
            lost_to_unclean_elections=given_up,
            unclean_elections=None if checker is None else checker.accepted_losses,
            purgatories={name: _purgatory_summary(s) for name, s in stats.items()},
            requests={**counts, "replica_fetches": fetcher_rounds},
            client_errors=dict(sorted(workload.errors.items())),
            faults=[f"{e.at:.2f}: {e.description}" for e in self.scenario.faults],
            watched_per_s=self.watched_per_s,
            final_metadata=self.cluster.metadata().topics,
            violations=None if checker is None else checker.violations,
            virtual_time=isinstance(self.loop, VirtualTimeLoop),
            wall_s=round(wall_s, 3),
            requests_per_wall_s=round(requests / wall_s, 1),
            purgatory_operations_per_wall_s=round(operations / wall_s, 1),
            produce_fetch_operations=produce_fetch,
            produce_fetch_operations_per_wall_s=round(produce_fetch / wall_s, 1),
        )


def _purgatory_summary(stats: PurgatoryStats) -> PurgatorySummary:
    """What the summary says of one purgatory name's operations."""
    durations = sorted(stats.durations)

    def ms(q: float) -> float:
        return round(percentile(durations, q), 3) if durations else 0.0

    return PurgatorySummary(
        operations=stats.operations,
        completed=stats.outcomes.get(Outcome.COMPLETED, 0),
        expired=stats.outcomes.get(Outcome.EXPIRED, 0),
        cancelled=stats.outcomes.get(Outcome.CANCELLED, 0),
        errors=dict(sorted(stats.errors.items())),
        kinds=dict(sorted(stats.kinds.items())),
        duration_ms=DurationPercentiles(p50=ms(50), p99=ms(99), max=ms(100)),
        max_watched=stats.max_watched,
        max_delayed=stats.max_delayed,
    )


def _sizes(purgatories: list[DelayedOperationPurgatory[Any]]) -> dict[str, tuple[int, int]]:
    """Watched entries and delayed operations per purgatory name, over every broker."""
    sizes = dict.fromkeys(PURGATORY_NAMES, (0, 0))
    for purgatory in purgatories:
        watched, delayed = sizes[purgatory.name]
        sizes[purgatory.name] = (watched + purgatory.watched, delayed + purgatory.num_delayed)
    return sizes
