"""PostgresBus between two processes: publish-to-wake latency and triggers/s.

    python tools/bus_postgres_bench.py postgresql://postgres@127.0.0.1:5432/postgres \\
        [--triggers 3000] [--loop asyncio|uvloop]

A receiver process parks one waiter at a time on a fresh key; this process publishes the
key and the receiver reports when the waiter woke (CLOCK_MONOTONIC is shared by the
processes of one host). Then this process publishes ``--triggers`` keys as fast as one
publisher can, one key per publish, and the receiver reports when it has heard them all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.bus.postgres import PostgresBus


def _run(loop: str, coroutine: Any) -> Any:
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coroutine)
    return asyncio.run(coroutine)


async def receiver(dsn: str, channel: str, triggers: int) -> None:
    """Park a waiter on k<i>, say so, print its wake-up time; then count a flood."""
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with (
        DelayedOperationPurgatory[DelayedOperation]("bench") as purgatory,
        PostgresBus(dsn, channel=channel, name="receiver") as bus,
    ):
        bus.attach(purgatory)
        for i in range(triggers):
            calls = 0

            def woken() -> bool:
                nonlocal calls
                calls += 1
                return calls > 1  # false when parked, true at the first trigger

            wait = loop.create_task(purgatory.wait_until(woken, [f"k{i}"], 10_000))
            while purgatory.watched < 1:  # noqa: ASYNC110
                await asyncio.sleep(0)
            print("parked", flush=True)
            assert await wait
            print(time.monotonic(), flush=True)
        heard = bus.statistics().received
        print("flood", flush=True)
        while bus.statistics().received < heard + triggers:  # noqa: ASYNC110
            await asyncio.sleep(0.001)
        print(time.monotonic(), flush=True)
        await reader.readline()


async def publisher(args: argparse.Namespace, channel: str, child: subprocess.Popen[str]) -> None:
    """Publish each parked key, then the flood; the child's answers come on its stdout
    (read blocking: nothing else runs on this loop meanwhile)."""
    assert child.stdout is not None
    assert child.stdin is not None
    latencies: list[float] = []
    async with PostgresBus(args.dsn, channel=channel, name="publisher") as bus:
        for i in range(args.triggers):
            assert child.stdout.readline() == "parked\n"
            sent = time.monotonic()
            await bus.publish(f"k{i}")
            latencies.append(float(child.stdout.readline()) - sent)
        assert child.stdout.readline() == "flood\n"
        started = time.monotonic()
        for i in range(args.triggers):
            await bus.publish(f"f{i}")
        published = time.monotonic() - started
        heard = float(child.stdout.readline()) - started
        child.stdin.write("bye\n")
        child.stdin.flush()
    latencies.sort()
    ms = [x * 1000 for x in latencies]
    print(
        json.dumps(
            {
                "loop": args.loop,
                "triggers": args.triggers,
                "latency_ms": {
                    "p50": round(statistics.median(ms), 3),
                    "p99": round(ms[int(len(ms) * 0.99) - 1], 3),
                    "max": round(ms[-1], 3),
                },
                "publishes_per_s": round(args.triggers / published),
                "received_per_s": round(args.triggers / heard),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dsn")
    parser.add_argument("--triggers", type=int, default=3000)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--receiver", metavar="CHANNEL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.receiver:
        _run(args.loop, receiver(args.dsn, args.receiver, args.triggers))
        return
    channel = f"bench-{uuid.uuid4().hex[:8]}"
    child = subprocess.Popen(
        [sys.executable, __file__, args.dsn, "--receiver", channel, "--triggers",
         str(args.triggers), "--loop", args.loop],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _run(args.loop, publisher(args, channel, child))
    finally:
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


if __name__ == "__main__":
    main()
