"""examples/long_poll_app.py, a long-poll endpoint on ``wait_until``, served for real on
loopback and driven by an HTTP client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from example_modules import load_example

app_module = load_example("long_poll_app")


@pytest_asyncio.fixture
async def server() -> AsyncIterator[tuple[str, web.Application]]:
    app = app_module.make_app()
    runner = web.AppRunner(app, handler_cancellation=True)  # as the example's main() runs it
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_a_put_wakes_the_parked_get(server: tuple[str, web.Application]) -> None:
    url, _ = server
    async with aiohttp.ClientSession() as http:
        poll = asyncio.create_task(http.get(f"{url}/docs/readme?after=0&timeout_ms=10000"))
        await asyncio.sleep(0.1)
        assert not poll.done()
        sent = time.monotonic()
        async with http.put(f"{url}/docs/readme", data="hello") as put:
            assert (await put.json())["woken"] == 1
        async with await poll as got:
            woke_after_s = time.monotonic() - sent
            assert got.status == 200
            assert await got.json() == {"name": "readme", "version": 1, "text": "hello"}
        assert woke_after_s < 2  # woken by the write, not by the 10 s timeout
        async with http.get(f"{url}/docs/readme?after=0") as again:  # already newer
            assert again.status == 200


@pytest.mark.asyncio
async def test_the_timeout_answers_not_modified(server: tuple[str, web.Application]) -> None:
    url, _ = server
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{url}/docs/other?after=0&timeout_ms=50") as got:
            assert got.status == 304
        async with http.get(f"{url}/docs/other?timeout_ms=soon") as bad:
            assert bad.status == 400


@pytest.mark.asyncio
async def test_a_client_that_hangs_up_leaves_no_wait(server: tuple[str, web.Application]) -> None:
    url, app = server
    purgatory = app[app_module.PURGATORY]
    async with aiohttp.ClientSession() as http:
        poll = asyncio.create_task(http.get(f"{url}/docs/readme?timeout_ms=30000"))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if purgatory.num_delayed == 1:
                break
        assert purgatory.num_delayed == 1
        poll.cancel()
        with pytest.raises(asyncio.CancelledError):
            await poll
    for _ in range(200):
        await asyncio.sleep(0.01)
        if purgatory.num_delayed == 0:
            break
    assert purgatory.num_delayed == 0
    assert purgatory.statistics().cancelled == 1
