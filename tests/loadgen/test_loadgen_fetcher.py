"""``purgatory load``'s long-poll fetcher against a scripted server: it waits as long as a
503's ``Retry-After`` asks, and resumes from the log start after OFFSET_OUT_OF_RANGE."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from purgatory.loadgen.long_polls import SETTLE_S, Stats, _fetcher, _wait_parked


async def _run_fetcher(answers: list[web.Response], seconds: float) -> list[dict[str, Any]]:
    """Serve ``answers`` in turn (the last one from then on) to one fetcher for
    ``seconds``; returns the bodies it sent."""
    bodies: list[dict[str, Any]] = []

    async def fetch(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        answer = answers[min(len(bodies), len(answers)) - 1]
        return web.Response(status=answer.status, headers=answer.headers, body=answer.body)

    app = web.Application()
    app.router.add_post("/v1/fetch", fetch)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    args = argparse.Namespace(url=f"http://{host}:{port}", topic="t", max_wait_ms=100)
    stop = asyncio.Event()
    try:
        async with aiohttp.ClientSession() as session:
            task = asyncio.create_task(_fetcher(session, args, 0, 0, stop, Stats()))
            await asyncio.sleep(seconds)
            stop.set()
            await asyncio.wait_for(task, 5)
    finally:
        await runner.cleanup()
    return bodies


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )


@pytest.mark.asyncio
async def test_a_refused_fetcher_waits_as_long_as_retry_after_says() -> None:
    busy = _json(
        503, {"error": "TOO_MANY_PENDING_REQUESTS", "message": "full"}, {"Retry-After": "1"}
    )
    bodies = await _run_fetcher([busy], seconds=1.5)
    # at 0 s and 1 s; with the 0.1 s back-off it used before, about 15
    assert len(bodies) == 2


@pytest.mark.asyncio
async def test_a_fetcher_below_the_log_start_resumes_from_it() -> None:
    gone = _json(
        200,
        {"error": "OFFSET_OUT_OF_RANGE", "high_watermark": 9, "records": [], "log_start_offset": 7},
    )
    empty = _json(200, {"error": None, "high_watermark": 9, "records": [], "log_start_offset": 7})
    bodies = await _run_fetcher([gone, empty], seconds=0.3)
    assert [b["offset"] for b in bodies[:2]] == [0, 7]


@pytest.mark.asyncio
async def test_the_load_starts_once_the_parked_count_stops_growing() -> None:
    """A server parking fewer than --fetchers (its --max-pending) held the load for 30 s."""

    async def metrics(request: web.Request) -> web.Response:
        text = "# TYPE purgatory_http_parked_requests gauge\npurgatory_http_parked_requests 1.0\n"
        return web.Response(text=text)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    args = argparse.Namespace(url=f"http://{host}:{port}", fetchers=5)
    try:
        async with aiohttp.ClientSession() as session:
            started = asyncio.get_running_loop().time()
            assert await _wait_parked(session, args) == 1
            waited = asyncio.get_running_loop().time() - started
    finally:
        await runner.cleanup()
    assert SETTLE_S <= waited < SETTLE_S + 2
