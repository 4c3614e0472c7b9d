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
from collections.abc import Callable
from typing import Any

from purgatory import DelayedOperationPurgatory, OperationRecord
from purgatory.sim.cluster import Cluster
from purgatory.sim.errors import ErrorCode
from purgatory.sim.invariants import InvariantChecker
from purgatory.sim.messages import DeleteRecordsRequest
from purgatory.sim.replica_manager import PURGATORY_NAMES
from purgatory.sim.scenarios import Scenario
from purgatory.sim.stats import StatsBook, format_table
from purgatory.sim.workload import Workload

SAMPLE_INTERVAL_S = 0.1

__all__ = ["format_table", "run_scenario"]


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
) -> dict[str, Any]:
    """Run ``scenario`` for ``duration_s`` seconds of loop time and return the summary
    (the ``--json`` object). ``listeners`` see every finished operation (e.g. a
    :class:`~purgatory.trace.TraceWriter`); ``on_fault(description)`` hears of each fault
    as it is injected (``TraceWriter.mark_fault``); ``check`` attaches the invariant
    checker."""
    if not duration_s > 0 or duration_s == float("inf"):
        raise ValueError(f"duration_s must be a finite number > 0, got {duration_s!r}")
    loop = asyncio.get_running_loop()
    wall_start = time.perf_counter()
    sim_start = loop.time()
    cluster = Cluster(scenario.brokers, seed=seed, **scenario.cluster_options)
    stats = StatsBook(PURGATORY_NAMES)
    cluster.add_op_observer(stats.add)
    purgatories = cluster.all_purgatories()
    for purgatory in purgatories:
        for listener in listeners:
            purgatory.add_listener(listener)
    checker = InvariantChecker(cluster) if check else None
    series: dict[str, list[int]] = {name: [] for name in PURGATORY_NAMES}
    background: list[asyncio.Task[None]] = []
    deletes: set[asyncio.Task[Any]] = set()
    async with cluster:
        topic = scenario.workload.topic
        await cluster.create_topic(
            topic, scenario.partitions, scenario.replication_factor, assignment=scenario.assignment
        )
        workload = Workload(cluster, scenario.workload, random.Random(f"{seed}/workload"))
        workload.start()

        async def faults() -> None:
            for event in sorted(scenario.faults, key=lambda e: e.at):
                await asyncio.sleep(max(0.0, sim_start + event.at * duration_s - loop.time()))
                if progress is not None:
                    progress(f"t={loop.time() - sim_start:6.1f}s fault: {event.description}\n")
                await event.action(cluster)
                if on_fault is not None:
                    on_fault(event.description)

        async def deleter() -> None:
            interval = scenario.delete_interval_ms / 1000.0
            while True:
                await asyncio.sleep(interval)
                for p in cluster.topics[topic]:
                    target = p.hw - scenario.delete_keep
                    if p.leader is not None and target > p.leader_log.log_start_offset:
                        request = DeleteRecordsRequest(topic, p.index, target, 5000)
                        task = loop.create_task(cluster.delete_records(request))
                        deletes.add(task)
                        task.add_done_callback(deletes.discard)

        async def sampler() -> None:
            ticks = 0
            per_second = round(1 / SAMPLE_INTERVAL_S)
            while True:
                await asyncio.sleep(SAMPLE_INTERVAL_S)
                ticks += 1
                for name, (watched, delayed) in _sizes(purgatories).items():
                    stats[name].sample(watched, delayed)
                    if ticks % per_second == 0:
                        series[name].append(watched)
                if checker is not None:
                    checker.sample()

        async def reporter() -> None:
            assert progress is not None
            last = dict(workload.counts)
            last_t = loop.time()
            while True:
                await asyncio.sleep(progress_interval_s)
                now = loop.time()
                span = max(now - last_t, 1e-9)
                counts = workload.counts
                rates = {k: (counts[k] - last[k]) / span for k in counts}
                sizes = " ".join(f"{n[0]}={w}" for n, (w, _) in _sizes(purgatories).items())
                progress(
                    f"\rt={now - sim_start:6.1f}s produce {rates['produce_requests']:8,.0f}/s "
                    f"fetch {rates['fetch_requests']:8,.0f}/s acked {workload.acked_records:,} "
                    f"in-flight {workload.in_flight:,} watched {sizes}  "
                    f"wall {time.perf_counter() - wall_start:.1f}s"
                )
                last, last_t = dict(counts), now

        background.append(loop.create_task(faults()))
        background.append(loop.create_task(sampler()))
        if scenario.delete_interval_ms > 0:
            background.append(loop.create_task(deleter()))
        if progress is not None:
            background.append(loop.create_task(reporter()))
        await asyncio.sleep(duration_s)
        for task in background:
            task.cancel()
        for task in background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await workload.stop()
        if deletes:
            await asyncio.gather(*deletes)
        if progress is not None:
            progress("\n")
        lost, given_up = workload.losses()
        sim_s = loop.time() - sim_start
        fetcher_rounds = sum(
            f.rounds for b in cluster.brokers.values() for f in b.replica_manager.fetchers.values()
        )
    if checker is not None:
        checker.check_accounting()
    wall_s = time.perf_counter() - wall_start
    counts = workload.counts
    requests = counts["produce_requests"] + counts["fetch_requests"] + fetcher_rounds
    operations = sum(s.operations for s in stats.values())
    # the throughput goal counts produce and fetch operations (consumer and follower)
    produce_fetch = stats["Produce"].operations + stats["Fetch"].operations
    summary: dict[str, Any] = {
        "scenario": scenario.name,
        "seed": seed,
        "duration_s": duration_s,
        "simulated_s": round(sim_s, 3),
        "acked_records": workload.acked_records,
        "lost_records": lost,
        # accepted losses, not violations: an unclean election was asked for
        "lost_to_unclean_elections": given_up,
        "unclean_elections": None if checker is None else checker.accepted_losses,
        "purgatories": {name: s.summary() for name, s in stats.items()},
        "requests": {**counts, "replica_fetches": fetcher_rounds},
        "client_errors": dict(sorted(workload.errors.items())),
        "faults": [f"{e.at:.2f}: {e.description}" for e in scenario.faults],
        "watched_per_s": series,
        "final_metadata": cluster.metadata().to_dict()["topics"],
        "violations": None if checker is None else checker.violations,
        "virtual_time": False,
        "wall_s": round(wall_s, 3),
        "requests_per_wall_s": round(requests / wall_s, 1),
        "operations_per_wall_s": round(operations / wall_s, 1),
        "produce_fetch_operations": produce_fetch,
        "ops_per_wall_s": round(produce_fetch / wall_s, 1),
    }
    return summary


def _sizes(purgatories: list[DelayedOperationPurgatory[Any]]) -> dict[str, tuple[int, int]]:
    """Watched entries and delayed operations per purgatory name, over every broker."""
    sizes = dict.fromkeys(PURGATORY_NAMES, (0, 0))
    for purgatory in purgatories:
        watched, delayed = sizes[purgatory.name]
        sizes[purgatory.name] = (watched + purgatory.watched, delayed + purgatory.num_delayed)
    return sizes


# Wall-clock fields: they differ between runs even on virtual time.
WALL_CLOCK_FIELDS = ("wall_s", "requests_per_wall_s", "operations_per_wall_s", "ops_per_wall_s")


def error_names() -> list[str]:
    return [code.value for code in ErrorCode]
