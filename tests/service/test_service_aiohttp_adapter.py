"""One test per private aiohttp attribute that ``purgatory.service.aiohttp_adapter`` reads
or writes, against the installed aiohttp on a real loopback socket: an aiohttp release
that renames or repurposes one fails here, not silently in the connection limits."""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from packaging.requirements import Requirement

from purgatory.service.aiohttp_adapter import AdaptedAppRunner, AdaptedConnection, AdaptedServer

RELEASE: web.AppKey[asyncio.Event] = web.AppKey("release", asyncio.Event)
SEEN: web.AppKey[list[Any]] = web.AppKey("seen", list)


class Recording(AdaptedConnection):
    """A connection that records what the adapter says at the moments that matter."""

    def __init__(self, manager: web.Server, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self.parsed: list[tuple[int, bool | None]] = []  # (heads, body at EOF) per chunk
        self.keep_open = False
        self.asked_to_close_idle = 0
        self.idle_closed = False
        self.stop_keepalive = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # aiohttp arms its keep-alive timer here
        if self.stop_keepalive:
            self.stop_keepalive_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        body = self.latest_body()
        self.parsed.append((self.heads_received, None if body is None else body.is_eof()))

    def may_close_idle(self) -> bool:
        self.asked_to_close_idle += 1
        return not self.keep_open

    def closed_idle(self) -> None:
        self.idle_closed = True


class RecordingServer(AdaptedServer):
    def __init__(self, plain: web.Server, stop_keepalive: bool) -> None:
        super().__init__(plain)
        self.stop_keepalive = stop_keepalive
        self.made: list[Recording] = []

    def __call__(self) -> Recording:
        connection = Recording(self, loop=asyncio.get_running_loop(), **self.connection_kwargs)
        connection.stop_keepalive = self.stop_keepalive
        self.made.append(connection)
        return connection


class RecordingRunner(AdaptedAppRunner):
    def __init__(self, app: web.Application, stop_keepalive: bool, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.stop_keepalive = stop_keepalive

    def adapt_server(self, plain: web.Server) -> web.Server:
        return RecordingServer(plain, self.stop_keepalive)


async def hold(request: web.Request) -> web.Response:
    """Answers once released; records what the connection says while its handler runs."""
    connection = request.protocol
    assert isinstance(connection, AdaptedConnection)
    request.app[SEEN].append(
        (
            connection.handling_request,
            connection.current_request is request,
            connection.waiting_for_request,
        )
    )
    await request.read()
    await request.app[RELEASE].wait()
    return web.Response(text="ok")


@asynccontextmanager
async def serving(
    keepalive_s: float = 60.0, stop_keepalive: bool = False
) -> AsyncIterator[tuple[RecordingRunner, RecordingServer, tuple[str, int]]]:
    app = web.Application()
    app[RELEASE] = asyncio.Event()
    app[SEEN] = []
    app.router.add_post("/hold", hold)
    runner = RecordingRunner(app, stop_keepalive, keepalive_timeout=keepalive_s, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    server = runner.server
    assert isinstance(server, RecordingServer)
    try:
        yield runner, server, (host, port)
    finally:
        app[RELEASE].set()
        await runner.cleanup()


async def until(condition: Any, what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_installed_aiohttp_is_within_the_bound_the_adapter_was_checked_for() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    (spec,) = [
        Requirement(r)
        for r in pyproject["project"]["optional-dependencies"]["service"]
        if r.startswith("aiohttp")
    ]
    assert any(s.operator == "<" for s in spec.specifier), "aiohttp needs an upper bound"
    assert spec.specifier.contains(version("aiohttp"))


@pytest.mark.asyncio
async def test_server_kwargs_reach_each_connection() -> None:  # Server._kwargs
    async def handler(request: web.BaseRequest) -> web.Response:
        return web.Response()

    plain = web.Server(handler, keepalive_timeout=7.5, access_log=None)
    adapted = AdaptedServer(plain)
    assert adapted.connection_kwargs == {"keepalive_timeout": 7.5, "access_log": None}
    assert adapted.request_handler is plain.request_handler
    assert adapted().keepalive_timeout == 7.5


@pytest.mark.asyncio
async def test_the_runner_serves_the_adapted_server() -> None:  # AppRunner._make_server
    async with serving() as (_, server, address):
        _, writer = await asyncio.open_connection(*address)
        await until(lambda: server.made, "a connection")
        assert isinstance(server.made[0], Recording)
        writer.close()


@pytest.mark.asyncio
async def test_a_head_is_counted_and_its_body_seen_as_soon_as_parsed() -> None:
    # RequestHandler._request_count and ._messages
    async with serving() as (runner, server, address):
        reader, writer = await asyncio.open_connection(*address)
        writer.write(b"POST /hold HTTP/1.1\r\nHost: x\r\n")
        await until(lambda: server.made and server.made[0].parsed, "the first bytes")
        connection = server.made[0]
        assert connection.parsed == [(0, None)]  # half a head: nothing parsed yet
        writer.write(b"Content-Length: 4\r\n\r\nab")
        await until(lambda: connection.heads_received == 1, "the rest of the head")
        # counted in the very call that parsed it, with its body not all here yet
        assert next(eof for heads, eof in connection.parsed if heads == 1) is False
        runner.app[RELEASE].set()
        writer.write(b"cd")
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        writer.close()


@pytest.mark.asyncio
async def test_waiting_handling_and_current_request_follow_a_request() -> None:
    # RequestHandler._waiter, ._request_in_progress and ._current_request
    async with serving() as (runner, server, address):
        reader, writer = await asyncio.open_connection(*address)
        await until(lambda: server.made and server.made[0].waiting_for_request, "the wait")
        connection = server.made[0]
        assert not connection.handling_request
        assert connection.current_request is None
        writer.write(b"POST /hold HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        await until(lambda: runner.app[SEEN], "the handler")
        assert runner.app[SEEN] == [(True, True, False)]
        runner.app[RELEASE].set()
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        await until(lambda: connection.waiting_for_request, "keep-alive")
        assert not connection.handling_request
        assert connection.current_request is None
        writer.close()


@pytest.mark.asyncio
async def test_force_closing_says_force_close_was_called() -> None:  # ._force_close
    async with serving() as (_, server, address):
        _, writer = await asyncio.open_connection(*address)
        await until(lambda: server.made, "a connection")
        connection = server.made[0]
        assert not connection.force_closing
        connection.force_close()
        assert connection.force_closing
        writer.close()


@pytest.mark.asyncio
async def test_stopping_the_keepalive_timer_keeps_a_new_connection_open() -> None:
    # RequestHandler._keepalive_handle, armed by aiohttp for a new connection too
    async with serving(keepalive_s=0.1) as (_, server, address):
        _, writer = await asyncio.open_connection(*address)
        await until(lambda: server.made and server.made[0].idle_closed, "the idle close")
        writer.close()
    async with serving(keepalive_s=0.1, stop_keepalive=True) as (_, server, address):
        _, writer = await asyncio.open_connection(*address)
        await asyncio.sleep(0.4)
        connection = server.made[0]
        assert connection.transport is not None
        assert connection.asked_to_close_idle == 0
        writer.close()


@pytest.mark.asyncio
async def test_the_keepalive_timer_asks_before_closing_and_is_armed_again() -> None:
    # RequestHandler._process_keepalive, and ._keepalive_handle reset so it re-arms
    async with serving(keepalive_s=0.1) as (runner, server, address):
        reader, writer = await asyncio.open_connection(*address)
        await until(lambda: server.made, "a connection")
        connection = server.made[0]
        connection.keep_open = True
        await until(lambda: connection.asked_to_close_idle, "the timer")
        await asyncio.sleep(0.2)
        assert connection.transport is not None
        assert not connection.idle_closed
        connection.keep_open = False
        runner.app[RELEASE].set()
        writer.write(b"POST /hold HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        await until(lambda: connection.idle_closed, "the idle close after the response")
        assert connection.transport is None
        writer.close()
