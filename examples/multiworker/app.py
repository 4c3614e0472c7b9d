"""A long-poll job API as a real deployment runs it: several worker processes on one port,
job state in PostgreSQL, a trigger bus between the workers.

    pip install 'purgatory-aio[service,postgres]'
    python examples/multiworker/app.py --dsn postgresql://... --port 8080 --workers 4

- ``GET /jobs/{id}?after=V&timeout_ms=T`` parks until the job's version passes ``V`` (or
  ``T`` ms pass): ``{"changed": true, "version", "data", "worker"}``, or ``"changed": false``.
- ``POST /jobs/{id}`` with a JSON body stores it as the job's data and bumps its version in
  one transaction, then publishes the job's id on the bus.
- ``GET /healthz``: this worker's pid and how many waits it holds.

The workers share the port through SO_REUSEPORT, so a client's long poll and the update
that should answer it usually land in different processes: the bus carries the job id
across, and each worker's waiters re-read their job from PostgreSQL. The bus is a hint:
after any gap in its connection every waiter re-reads its job, so none is lost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
from collections.abc import AsyncIterator

import asyncpg
from aiohttp import web

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.bus import BusUnavailable, PostgresBus

MAX_TIMEOUT_MS = 60_000
SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id text PRIMARY KEY,
    version bigint NOT NULL,
    data jsonb NOT NULL
)
"""
UPDATE = """
INSERT INTO jobs (id, version, data) VALUES ($1, 1, $2::jsonb)
ON CONFLICT (id) DO UPDATE SET version = jobs.version + 1, data = EXCLUDED.data
RETURNING version
"""

POOL = web.AppKey("pool", asyncpg.Pool)
PURGATORY = web.AppKey("purgatory", DelayedOperationPurgatory[DelayedOperation])
BUS = web.AppKey("bus", PostgresBus)


async def get_job(request: web.Request) -> web.Response:
    job = request.match_info["id"]
    try:
        after = int(request.query.get("after", "0"))
        timeout_ms = int(request.query.get("timeout_ms", "30000"))
    except ValueError:
        raise web.HTTPBadRequest(text="after and timeout_ms must be integers") from None
    if not 0 <= timeout_ms <= MAX_TIMEOUT_MS:
        raise web.HTTPBadRequest(text=f"timeout_ms must be within 0..{MAX_TIMEOUT_MS}")
    pool = request.app[POOL]

    async def newer() -> bool:  # re-read on every trigger of the job's key
        return ((await pool.fetchval("SELECT version FROM jobs WHERE id = $1", job)) or 0) > after

    changed = await request.app[PURGATORY].wait_until(newer, [job], timeout_ms)
    row = await pool.fetchrow("SELECT version, data FROM jobs WHERE id = $1", job)
    version, data = (row["version"], json.loads(row["data"])) if row else (0, None)
    return web.json_response(
        {"changed": changed, "id": job, "version": version, "data": data, "worker": os.getpid()}
    )


async def post_job(request: web.Request) -> web.Response:
    job = request.match_info["id"]
    try:
        data = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="the body must be JSON") from None
    async with request.app[POOL].acquire() as conn, conn.transaction():
        version = await conn.fetchval(UPDATE, job, json.dumps(data))
    try:  # after the commit: whoever is woken must see the new version
        await request.app[BUS].publish(job)
        published = True
    except BusUnavailable:
        # Committed all the same; the other workers re-read every job when their bus is
        # back (and every recheck_interval_s while it is down).
        published = False
    return web.json_response(
        {"id": job, "version": version, "published": published, "worker": os.getpid()}
    )


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"worker": os.getpid(), "waiting": request.app[PURGATORY].watched})


def make_app(dsn: str) -> web.Application:
    app = web.Application(handler_args={"handler_cancellation": True})

    async def lifetime(app: web.Application) -> AsyncIterator[None]:
        async with (
            asyncpg.create_pool(dsn, min_size=1, max_size=8) as pool,
            DelayedOperationPurgatory[DelayedOperation]("jobs") as purgatory,
            PostgresBus(dsn, channel="jobs", name=f"jobs-{os.getpid()}") as bus,
        ):
            bus.attach(purgatory)
            app[POOL], app[PURGATORY], app[BUS] = pool, purgatory, bus
            yield

    app.cleanup_ctx.append(lifetime)
    app.router.add_get("/jobs/{id}", get_job)
    app.router.add_post("/jobs/{id}", post_job)
    app.router.add_get("/healthz", healthz)
    return app


async def serve_worker(dsn: str, host: str, port: int) -> None:
    runner = web.AppRunner(make_app(dsn), handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, host, port, reuse_port=True).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await runner.cleanup()


def worker(dsn: str, host: str, port: int) -> None:
    asyncio.run(serve_worker(dsn, host, port))


async def create_schema(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(SCHEMA)
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="PostgreSQL to keep the jobs in")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    asyncio.run(create_schema(args.dsn))
    spawn = multiprocessing.get_context("spawn")
    workers = [
        spawn.Process(target=worker, args=(args.dsn, args.host, args.port))
        for _ in range(args.workers)
    ]
    for process in workers:
        process.start()
    print(f"serving on http://{args.host}:{args.port} with {args.workers} workers", flush=True)

    def stop(signum: int, frame: object) -> None:
        for process in workers:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for process in workers:
        process.join()


if __name__ == "__main__":
    main()
