"""KafkaBus across two processes: publish -> wake-up latency, and triggers/s one publisher
sustains, against ``purgatory serve --kafka-port`` (started here) or ``--bootstrap``.

    python examples/kafka_bus_latency.py --triggers 3000

The waiter process parks ``wait_until(version > v)`` on one key; the publisher writes
``version publish_time`` to a file, then publishes the key, one trigger every
``--interval-ms``; each wake-up is timed from the publish (CLOCK_MONOTONIC is shared by the
processes of one host). Then the publisher sends ``--triggers`` distinct keys as fast as it
can, one awaited ``publish`` at a time, and again with 100 publishes in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.bus import KafkaBus
from purgatory.percentiles import percentile


def read_state(path: Path) -> tuple[int, int]:
    try:
        version, published_ns = path.read_text().split()
        return int(version), int(published_ns)
    except (FileNotFoundError, ValueError):
        return 0, 0


async def waiter(bootstrap: str, state: Path, triggers: int) -> None:
    latencies_ms: list[float] = []
    async with (
        DelayedOperationPurgatory[DelayedOperation]("waiter") as purgatory,
        KafkaBus(bootstrap, name="waiter") as bus,
    ):
        bus.attach(purgatory)
        print(json.dumps({"event": "ready"}), flush=True)
        seen = 0
        while seen < triggers:
            last = seen
            ok = await purgatory.wait_until(
                lambda last=last: read_state(state)[0] > last, ["tick"], 10_000
            )
            woken_ns = time.monotonic_ns()
            seen, published_ns = read_state(state)
            if ok and seen == last + 1:  # woken by the trigger of the very next version
                latencies_ms.append((woken_ns - published_ns) / 1e6)
    print(json.dumps({"event": "done", "latencies_ms": latencies_ms}), flush=True)


async def publisher(bootstrap: str, state: Path, triggers: int, interval_s: float) -> None:
    proc = subprocess.Popen(  # noqa: ASYNC220 (started once, before the timing)
        [sys.executable, __file__, "--waiter", bootstrap, str(state), str(triggers)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["event"] == "ready"
    async with KafkaBus(bootstrap, name="publisher") as bus:
        for version in range(1, triggers + 1):
            state.write_text(f"{version} {time.monotonic_ns()}")  # noqa: ASYNC240 (µs)
            await bus.publish("tick")
            await asyncio.sleep(interval_s)
        done = json.loads(await asyncio.to_thread(proc.stdout.readline))
        proc.wait()
        latencies = sorted(done["latencies_ms"])
        print(
            f"publish -> wake-up in another process, {len(latencies)} of {triggers} "
            f"triggers: p50 {percentile(latencies, 50):.2f} ms, "
            f"p99 {percentile(latencies, 99):.2f} ms, max {latencies[-1]:.2f} ms"
        )
        started = time.perf_counter()
        for i in range(triggers):
            await bus.publish(f"key-{i}")
        elapsed = time.perf_counter() - started
        print(f"one awaited publish at a time: {triggers / elapsed:,.0f} triggers/s")
        started = time.perf_counter()
        pending: set[asyncio.Task[None]] = set()
        for i in range(triggers):
            if len(pending) >= 100:
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            pending.add(asyncio.create_task(bus.publish(f"key-{i}")))
        await asyncio.gather(*pending)
        elapsed = time.perf_counter() - started
        print(f"100 publishes in flight: {triggers / elapsed:,.0f} triggers/s")


def main() -> None:
    if sys.argv[1:2] == ["--waiter"]:
        bootstrap, state, triggers = sys.argv[2:5]
        asyncio.run(waiter(bootstrap, Path(state), int(triggers)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triggers", type=int, default=3000)
    parser.add_argument("--interval-ms", type=float, default=5.0)
    parser.add_argument("--bootstrap", help="an existing Kafka (topic 'purgatory' must exist)")
    args = parser.parse_args()
    server = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "purgatory",
                "serve",
                "--port",
                "0",
                "--kafka-port",
                "0",
                "--topic",
                "purgatory:3:3",
                "--log-level",
                "WARNING",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        server.stdout.readline()
        bootstrap = server.stdout.readline().split("=", 1)[1].strip()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(
                publisher(bootstrap, Path(tmp) / "state", args.triggers, args.interval_ms / 1000)
            )
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
