"""Benchmark the trigger bus across processes: wake-up latency, triggers/s, coalescing.

    python tools/bus_bench.py --backend redis --url redis://127.0.0.1:6379/0
    python tools/bus_bench.py --backend all          # throwaway servers for each backend

Worker processes (``--workers``, default 4) park ``--waiters`` waits (default 10,000, split
between them), each on its own key; the state is a version per key in shared memory, so
reading it costs nothing next to the bus. The parent is the fifth process: it bumps each
key's version and publishes the key, paced at ``--rate`` keys/s, and every worker writes
the time its wait ended; latency is end minus publish on CLOCK_MONOTONIC, which all
processes share. The baseline is the same waits in one process, triggered with
``check_and_complete`` and no bus. Then:

- triggers/s: ``--triggers`` keys published as fast as ``--concurrency`` tasks can, until
  every worker has received the last one;
- coalescing: 1,000 waits per worker on one key, published ``--flood`` times in a row: how
  many checks the received triggers cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path
from typing import Any

import purgatory.bus
from purgatory import DelayedOperation, DelayedOperationPurgatory, event_loops
from purgatory.bus import Bus, testing

Purgatory = DelayedOperationPurgatory[DelayedOperation]
FLOOD_WAITERS = 1000


class Slots:
    """Three int64 arrays in shared memory: version, published_ns, woken_ns per slot."""

    def __init__(self, name: str | None, size: int) -> None:
        self.size = size
        self.memory = shared_memory.SharedMemory(name=name, create=name is None, size=24 * size)
        if name is not None:
            # Python < 3.13 has every process that attaches unlink the segment at its exit;
            # the parent, which made it, unlinks it.
            resource_tracker.unregister(self.memory._name, "shared_memory")  # type: ignore[attr-defined]
        view = self.memory.buf.cast("q")
        self.version, self.published, self.woken = (
            view[i * size : (i + 1) * size] for i in range(3)
        )

    def close(self) -> None:
        for view in (self.version, self.published, self.woken):
            view.release()
        self.memory.close()


def make_bus(spec: dict[str, Any]) -> Bus:
    spec = dict(spec)
    bus: Bus = getattr(purgatory.bus, spec.pop("kind"))(**spec)
    return bus


# -- a worker process ----------------------------------------------------------------------


async def run_worker(spec: dict[str, Any]) -> None:
    """Park ``spec["waits"]`` ([key, slot, threshold] each), say when parked, write each
    end time into its slot, print the bus's statistics once all ended."""
    slots = Slots(spec["shm"], spec["slots"])
    try:
        async with Purgatory("bench") as waiting, make_bus(spec["bus"]) as bus:
            bus.attach(waiting)

            async def wait(key: str, slot: int, threshold: int) -> None:
                version = slots.version
                await waiting.wait_until(lambda: version[slot] >= threshold, [key], 600_000)
                slots.woken[slot] = time.monotonic_ns()

            tasks = [asyncio.create_task(wait(*w)) for w in spec["waits"]]
            while waiting.watched < len(tasks) and not all(t.done() for t in tasks):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            print(json.dumps({"parked": len(tasks)}), flush=True)
            await asyncio.gather(*tasks)
            print(json.dumps(dataclasses.asdict(bus.statistics())), flush=True)
    finally:
        slots.close()


# -- the parent ------------------------------------------------------------------------------


@contextlib.contextmanager
def workers(
    bus: dict[str, Any], slots: Slots, waits: list[list[list[Any]]], loop: str
) -> Iterator[list[subprocess.Popen[str]]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    processes = []
    try:
        for share in waits:
            spec = {
                "bus": bus,
                "shm": slots.memory.name,
                "slots": slots.size,
                "waits": share,
                "loop": loop,
            }
            processes.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--worker", json.dumps(spec)],
                    stdout=subprocess.PIPE,
                    text=True,
                    env=env,
                )
            )
        for process in processes:
            assert process.stdout is not None
            line = process.stdout.readline()
            if not line:
                raise SystemExit(f"a worker exited ({process.wait()}) before parking")
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()


def statistics_of(processes: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    stats = []
    for process in processes:
        assert process.stdout is not None
        stats.append(json.loads(process.stdout.readline()))
        process.wait(timeout=30)
    return stats


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def latencies_ms(slots: Slots, count: int) -> list[float]:
    return [(slots.woken[i] - slots.published[i]) / 1e6 for i in range(count)]


async def paced(count: int, rate: float) -> AsyncIterator[int]:
    started = time.monotonic()
    for i in range(count):
        delay = started + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        yield i


async def latency_phase(bus_spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    slots = Slots(None, args.waiters)
    try:
        shares = [
            [[f"k{i}", i, 1] for i in range(w, args.waiters, args.workers)]
            for w in range(args.workers)
        ]
        with workers(bus_spec, slots, shares, args.loop) as processes:
            async with make_bus(bus_spec) as bus:
                async for i in paced(args.waiters, args.rate):
                    slots.version[i] = 1
                    slots.published[i] = time.monotonic_ns()
                    await bus.publish(f"k{i}")
            stats = await asyncio.to_thread(statistics_of, processes)
        values = latencies_ms(slots, args.waiters)
        return {
            "p50_ms": percentile(values, 0.5),
            "p99_ms": percentile(values, 0.99),
            "max_ms": max(values),
            "rechecks": sum(s["rechecks"] for s in stats),
        }
    finally:
        slots.close()
        slots.memory.unlink()


async def baseline_phase(args: argparse.Namespace) -> dict[str, Any]:
    """The same waits in one process, triggered directly: what the bus adds to."""
    slots = Slots(None, args.waiters)
    try:
        async with Purgatory("baseline") as waiting:
            version = slots.version

            async def wait(i: int) -> None:
                await waiting.wait_until(lambda: version[i] >= 1, [f"k{i}"], 600_000)
                slots.woken[i] = time.monotonic_ns()

            tasks = [asyncio.create_task(wait(i)) for i in range(args.waiters)]
            await asyncio.sleep(0)
            async for i in paced(args.waiters, args.rate):
                version[i] = 1
                slots.published[i] = time.monotonic_ns()
                await waiting.check_and_complete(f"k{i}")
            await asyncio.gather(*tasks)
        values = latencies_ms(slots, args.waiters)
        return {"p50_ms": percentile(values, 0.5), "p99_ms": percentile(values, 0.99)}
    finally:
        slots.close()
        slots.memory.unlink()


async def throughput_phase(bus_spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Triggers/s: every worker waits on the last key only; the others are checked and
    find no watcher, as most triggers in an app do."""
    slots = Slots(None, args.workers)
    last = f"t{args.triggers - 1}"
    try:
        shares = [[[last, w, 1]] for w in range(args.workers)]
        with workers(bus_spec, slots, shares, args.loop) as processes:
            async with make_bus(bus_spec) as bus:
                keys = iter(range(args.triggers - 1))
                started = time.monotonic_ns()

                async def publisher() -> None:
                    for j in keys:
                        await bus.publish(f"t{j}")

                await asyncio.gather(*(publisher() for _ in range(args.concurrency)))
                for w in range(args.workers):
                    slots.version[w] = 1
                await bus.publish(last)
                sent = time.monotonic_ns()
            stats = await asyncio.to_thread(statistics_of, processes)
        delivered = max(slots.woken[w] for w in range(args.workers))
        return {
            "published_per_s": args.triggers / ((sent - started) / 1e9),
            "delivered_per_s": args.triggers / ((delivered - started) / 1e9),
            "received_min": min(s["received"] for s in stats),
        }
    finally:
        slots.close()
        slots.memory.unlink()


async def flood_phase(bus_spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """One key published ``--flood`` times in a row, 1,000 waits on it in each worker."""
    slots = Slots(None, 1)
    try:
        shares = [[["hot", 0, args.flood]] * FLOOD_WAITERS for _ in range(args.workers)]
        with workers(bus_spec, slots, shares, args.loop) as processes:
            async with make_bus(bus_spec) as bus:
                for version in range(1, args.flood + 1):
                    slots.version[0] = version
                    await bus.publish("hot")
            stats = await asyncio.to_thread(statistics_of, processes)
        return {
            "received": sum(s["received"] for s in stats),
            "checks": sum(s["checks"] for s in stats),
            "coalesced": sum(s["coalesced"] for s in stats),
        }
    finally:
        slots.close()
        slots.memory.unlink()


async def bench(bus_spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    return {
        "latency": await latency_phase(bus_spec, args),
        "throughput": await throughput_phase(bus_spec, args),
        "flood": await flood_phase(bus_spec, args),
    }


def table(baseline: dict[str, Any], results: dict[str, dict[str, Any]]) -> str:
    """The figures as a Markdown table, as docs/performance.md shows them."""
    rows = [
        "| backend | wake-up p50 | p99 | triggers/s | flood: checks per 1,000 triggers |",
        "|---|---|---|---|---|",
        f"| none (one process, `check_and_complete`) | {baseline['p50_ms']:.3f} ms | "
        f"{baseline['p99_ms']:.3f} ms | | |",
    ]
    for backend, r in results.items():
        lat, flood = r["latency"], r["flood"]
        per_thousand = 1000 * flood["checks"] / max(1, flood["received"])
        rows.append(
            f"| {backend} | {lat['p50_ms']:.2f} ms | {lat['p99_ms']:.2f} ms | "
            f"{r['throughput']['delivered_per_s']:,.0f} | {per_thousand:.0f} |"
        )
    return "\n".join(rows)


@contextlib.contextmanager
def server_for(backend: str, url: str | None) -> Iterator[dict[str, Any]]:
    """The bus spec for ``backend``, on ``url`` or on a throwaway server."""
    with contextlib.ExitStack() as stack:
        if backend == "redis":
            url = url or stack.enter_context(testing.throwaway_redis()).url
            yield {"kind": "RedisBus", "url": url, "name": backend}
        elif backend == "postgres":
            url = url or stack.enter_context(testing.throwaway_postgres()).dsn
            yield {"kind": "PostgresBus", "dsn": url, "name": backend}
        elif backend == "kafka":
            url = url or stack.enter_context(testing.throwaway_kafka()).bootstrap_servers
            yield {"kind": "KafkaBus", "bootstrap_servers": url, "name": backend}
        else:
            raise SystemExit(f"unknown backend {backend!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["redis", "postgres", "kafka", "all"], default="all")
    parser.add_argument("--url", help="an existing server (default: a throwaway one)")
    parser.add_argument("--workers", type=int, default=4, help="waiting processes (4)")
    parser.add_argument(
        "--waiters", type=int, default=10_000, help="waits, one key each, split between them"
    )
    parser.add_argument("--rate", type=float, default=2000.0, help="keys/s in the latency run")
    parser.add_argument(
        "--triggers", type=int, default=20_000, help="keys published in the triggers/s run"
    )
    parser.add_argument(
        "--concurrency", type=int, default=32, help="publish calls in flight in that run"
    )
    parser.add_argument(
        "--flood", type=int, default=10_000, help="publishes of one key in the flood run"
    )
    parser.add_argument(
        "--loop", choices=event_loops.available_loops(), default="asyncio", help="every process's"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        spec = json.loads(args.worker)
        event_loops.run(run_worker(spec), spec["loop"])
        return 0
    if args.url is not None and args.backend == "all":
        parser.error("--url needs one --backend")
    baseline = event_loops.run(baseline_phase(args), args.loop)
    backends = ["redis", "postgres", "kafka"] if args.backend == "all" else [args.backend]
    results = {}
    for backend in backends:
        with server_for(backend, args.url) as spec:
            results[backend] = event_loops.run(bench(spec, args), args.loop)
    if args.json:
        print(json.dumps({"baseline": baseline, **results}, indent=2))
    else:
        print(table(baseline, results))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
