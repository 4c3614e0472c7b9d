"""RedisBus figures: publish -> wake latency between two processes, and the triggers/s one
publisher sustains.

    redis-server --port 6390 --bind 127.0.0.1 --save '' --appendonly no &
    python examples/redis_bus_latency.py --url redis://127.0.0.1:6390/0 --triggers 3000

Latency: a waiter process parks ``wait_until(version >= i)`` on one key and says so; this
process then sets the version (a shared 8-byte file) and publishes the key; the waiter
reports when it woke (``time.monotonic`` is one clock for every process on the host).
Throughput: this process publishes distinct keys back to back (one publish call at a time,
then ``--concurrency`` at a time, then 100 keys a call) while a second bus, on its own
connection, receives them.
"""

from __future__ import annotations

import argparse
import asyncio
import mmap
import os
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.bus import RedisBus
from purgatory.percentiles import percentile

KEY = "latency"


def shared_version(path: str) -> mmap.mmap:
    """The version both processes see: 8 bytes of a file mapped in memory."""
    with open(path, "r+b") as file:
        return mmap.mmap(file.fileno(), 8)


def read_version(shared: mmap.mmap) -> int:
    version: int = struct.unpack_from("q", shared)[0]
    return version


async def waiter(url: str, channel: str, version_file: str, triggers: int) -> None:
    """The other process: park, say so, report the wake-up time; ``triggers`` times."""
    with shared_version(version_file) as shared:
        async with (
            DelayedOperationPurgatory[DelayedOperation]("waiter") as purgatory,
            RedisBus(url, channel=channel, name="waiter") as bus,
        ):
            bus.attach(purgatory)
            for i in range(1, triggers + 1):
                wait = asyncio.create_task(
                    purgatory.wait_until(lambda i=i: read_version(shared) >= i, [KEY], 10_000)
                )
                while purgatory.watched < 1 and not wait.done():  # noqa: ASYNC110
                    await asyncio.sleep(0)
                print("parked", flush=True)
                if not await wait:
                    raise SystemExit(f"trigger {i} timed out")
                print(f"woke {time.monotonic()!r}", flush=True)


async def latency(url: str, channel: str, triggers: int) -> list[float]:
    with tempfile.TemporaryDirectory() as directory:
        version_file = str(Path(directory, "version"))
        # created before the waiter process opens it
        Path(version_file).write_bytes(bytes(8))  # noqa: ASYNC240
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--waiter",
            "--url",
            url,
            "--channel",
            channel,
            "--triggers",
            str(triggers),
            "--version-file",
            version_file,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert child.stdout is not None
        samples: list[float] = []
        with shared_version(version_file) as shared:
            async with RedisBus(url, channel=channel, name="publisher") as bus:
                for i in range(1, triggers + 1):
                    assert (await child.stdout.readline()).startswith(b"parked")
                    struct.pack_into("q", shared, 0, i)
                    published = time.monotonic()
                    await bus.publish(KEY)
                    line = await child.stdout.readline()
                    samples.append(float(line.split()[1]) - published)
        if await child.wait() != 0:
            raise SystemExit("the waiter process failed")
    return samples


async def publish_all(publisher: RedisBus, batches: Iterator[int], per_call: int) -> None:
    """Publish ``per_call`` keys a call, from each first key ``batches`` hands out."""
    for first in batches:
        await publisher.publish(*(f"key-{i}" for i in range(first, first + per_call)))


async def throughput(url: str, channel: str, triggers: int, concurrency: int) -> None:
    async with (
        RedisBus(url, channel=channel, name="receiver") as receiver,
        RedisBus(url, channel=channel, name="publisher") as publisher,
    ):
        for in_flight, per_call in ((1, 1), (concurrency, 1), (1, 100)):
            before = receiver.statistics().received
            started = time.monotonic()
            batches = iter(range(0, triggers, per_call))
            await asyncio.gather(
                *(publish_all(publisher, batches, per_call) for _ in range(in_flight))
            )
            published = time.monotonic() - started
            while receiver.statistics().received - before < triggers:  # noqa: ASYNC110
                await asyncio.sleep(0.001)
            received = time.monotonic() - started
            print(
                f"throughput, {in_flight} publish call(s) in flight, {per_call} key(s) a call: "
                f"{triggers / published:,.0f} triggers/s published, all {triggers:,} received "
                f"after {received:.2f} s"
            )


async def main(args: argparse.Namespace) -> None:
    if args.waiter:
        await waiter(args.url, args.channel, args.version_file, args.triggers)
        return
    samples = sorted(await latency(args.url, args.channel, args.triggers))
    ms = [s * 1000 for s in samples]
    print(
        f"publish -> wake across processes, {len(ms)} triggers: p50 {percentile(ms, 50):.3f} ms, "
        f"p99 {percentile(ms, 99):.3f} ms, max {ms[-1]:.3f} ms"
    )
    await throughput(args.url, args.channel, args.triggers * 10, args.concurrency)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--channel", default="purgatory-latency")
    parser.add_argument("--triggers", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--waiter", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--version-file", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if os.environ.get("PURGATORY_LOOP") == "uvloop":
        import uvloop

        uvloop.run(main(arguments))
    else:
        asyncio.run(main(arguments))
