"""Drive the multi-worker job API: park clients across its workers, update every job from
outside, check that every client is answered with the new version.

    python examples/multiworker/drive.py                 # a throwaway PostgreSQL, 4 workers
    python examples/multiworker/drive.py --dsn postgresql://... --clients 1000

It starts ``app.py`` (and, without ``--dsn``, a throwaway PostgreSQL server), creates the
jobs, parks one long poll per client (``GET /jobs/{id}?after=1``), waits until the workers
hold them all, then posts one update per job: each POST lands in whichever worker the
kernel picks, so most clients are woken through the bus. Exits 1 unless every client was
answered with ``changed: true``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import aiohttp

from purgatory.bus.testing import free_port, throwaway_postgres

APP = Path(__file__).with_name("app.py")


@contextlib.contextmanager
def running_app(dsn: str, port: int, workers: int) -> Iterator[subprocess.Popen[bytes]]:
    app = subprocess.Popen(
        [sys.executable, str(APP), "--dsn", dsn, "--port", str(port), "--workers", str(workers)]
    )
    try:
        yield app
    finally:
        app.send_signal(signal.SIGTERM)
        try:
            app.wait(timeout=15)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait()


async def fresh_get(url: str) -> dict[str, object]:
    """GET on a connection of its own, so that SO_REUSEPORT picks a worker for each."""
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session,
        session.get(url) as response,
    ):
        response.raise_for_status()
        answer: dict[str, object] = await response.json()
        return answer


async def waiting_per_worker(base: str, workers: int, deadline: float) -> dict[int, int]:
    """Ask /healthz on fresh connections until every worker has answered recently."""
    seen: dict[int, int] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(aiohttp.ClientError):
            health = await fresh_get(f"{base}/healthz")
            seen[int(str(health["worker"]))] = int(str(health["waiting"]))
            if len(seen) == workers:
                return seen
        await asyncio.sleep(0.01)
    raise SystemExit(f"only {len(seen)} of {workers} workers answered /healthz in time")


async def drive(base: str, clients: int, workers: int, timeout_ms: int) -> int:
    deadline = time.monotonic() + 60
    await waiting_per_worker(base, workers, deadline)
    jobs = [f"job-{i}" for i in range(clients)]
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        for job in jobs:
            async with session.post(f"{base}/jobs/{job}", json={"step": 1}) as response:
                response.raise_for_status()

        async def long_poll(job: str) -> tuple[dict[str, object], float]:
            url = f"{base}/jobs/{job}?after=1&timeout_ms={timeout_ms}"
            async with session.get(url) as response:
                response.raise_for_status()
                return await response.json(), time.monotonic()

        polls = [asyncio.create_task(long_poll(job)) for job in jobs]
        parked: dict[int, int] = {}
        while sum(parked.values()) < clients:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {sum(parked.values())} of {clients} clients parked")
            parked = await waiting_per_worker(base, workers, deadline)
        print(f"parked {clients} clients; waits per worker: {sorted(parked.values())}")

        updated_at: dict[str, float] = {}
        updated_by: dict[str, object] = {}
        for job in jobs:
            updated_at[job] = time.monotonic()
            async with session.post(f"{base}/jobs/{job}", json={"step": 2}) as response:
                response.raise_for_status()
                updated_by[job] = (await response.json())["worker"]
        answers = await asyncio.gather(*polls)

    changed = [a for a, _ in answers if a["changed"] and a["version"] == 2]
    crossed = sum(1 for a, _ in answers if a["worker"] != updated_by[str(a["id"])])
    latencies = sorted((t - updated_at[str(a["id"])]) * 1000 for a, t in answers)
    p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]
    print(f"updates per worker: {sorted(Counter(updated_by.values()).values())}")
    print(
        f"answered {len(changed)} of {clients} with the new version, {crossed} of them "
        f"woken through the bus (update to answer: p50 {p50:.1f} ms, p99 {p99:.1f} ms)"
    )
    return 0 if len(changed) == clients else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="an existing PostgreSQL (default: start a throwaway one)")
    parser.add_argument("--clients", type=int, default=200, help="long polls (default 200)")
    parser.add_argument("--workers", type=int, default=4, help="app workers (default 4)")
    parser.add_argument("--timeout-ms", type=int, default=30_000, help="each poll's timeout")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.workers < 1:
        parser.error("--clients and --workers must be >= 1")
    port = free_port()
    with contextlib.ExitStack() as stack:
        dsn = args.dsn or stack.enter_context(throwaway_postgres()).dsn
        stack.enter_context(running_app(dsn, port, args.workers))
        return asyncio.run(
            drive(f"http://127.0.0.1:{port}", args.clients, args.workers, args.timeout_ms)
        )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
