"""Slow and idle clients against a real ``purgatory serve`` process: header, body and idle
timeouts close them (a parked long poll is not idle), and malformed requests are refused in
one log line without a traceback."""

from __future__ import annotations

import asyncio
import json
import resource
import time
from collections.abc import Iterator

import pytest
from serve_process import Server

FETCH = json.dumps({"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 2500}).encode()


def request(path: str, body: bytes | None = None, *, close: bool = False) -> bytes:
    head = f"{'POST' if body is not None else 'GET'} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    if close:
        head += "Connection: close\r\n"
    return (head + "\r\n").encode() + (body or b"")


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, object]]:
    status_line = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    body = await reader.readexactly(length)
    return int(status_line.split()[1]), json.loads(body)


async def closed_after(reader: asyncio.StreamReader, limit_s: float) -> float:
    """Seconds until the server closes the connection (reads and drops what it sends)."""
    started = time.monotonic()
    async with asyncio.timeout(limit_s):
        while await reader.read(65536):
            pass
    return time.monotonic() - started


async def trickle(address: tuple[str, int], data: bytes, interval_s: float) -> tuple[bytes, float]:
    """Send ``data`` one byte per ``interval_s`` until the server closes the connection;
    return what it answered and how long the connection lasted."""
    reader, writer = await asyncio.open_connection(*address)
    started = time.monotonic()
    answer = b""
    try:
        for byte in data:
            writer.write(bytes([byte]))
            try:
                async with asyncio.timeout(interval_s):
                    answer = await reader.read(65536)
            except TimeoutError:
                continue
            try:
                while chunk := await asyncio.wait_for(reader.read(65536), 5):
                    answer += chunk
            except ConnectionResetError:
                # The server closed with our last byte unread: its kernel answers that byte
                # with a reset instead of the end of the stream (what it sent came first).
                pass
            break
        return answer, time.monotonic() - started
    finally:
        writer.close()


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server(
        "--topic",
        "t:2:1",
        "--header-timeout",
        "1",
        "--body-timeout",
        "1",
        "--idle-timeout",
        "1",
    )
    try:
        yield running
    finally:
        running.stop()


def test_a_slow_request_head_gets_408_and_is_closed(server: Server) -> None:
    # one byte every 0.2 s: the head would take 7 s
    answer, elapsed = asyncio.run(trickle(server.address, request("/healthz"), 0.2))
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b'"error":"REQUEST_TIMEOUT"' in answer
    assert 0.9 < elapsed < 3


def test_a_silent_connection_and_a_partial_body_are_closed(server: Server) -> None:
    async def main() -> tuple[float, bytes, float]:
        silent_reader, silent = await asyncio.open_connection(*server.address)
        reader, writer = await asyncio.open_connection(*server.address)
        writer.write(request("/v1/fetch", FETCH)[:-5])  # the head, most of the body
        silent_s, (answer, body_s) = await asyncio.gather(
            closed_after(silent_reader, 5), _answer_and_time(reader)
        )
        silent.close()
        writer.close()
        return silent_s, answer, body_s

    silent_s, answer, body_s = asyncio.run(main())
    assert 0.9 < silent_s < 3  # the header timeout counts from a new connection's start
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"the request body did not arrive within 1 s" in answer
    assert 0.9 < body_s < 3


async def _answer_and_time(reader: asyncio.StreamReader) -> tuple[bytes, float]:
    started = time.monotonic()
    answer = await asyncio.wait_for(reader.read(), 5)
    return answer, time.monotonic() - started


def test_idle_keep_alive_is_closed_but_a_parked_long_poll_is_not(server: Server) -> None:
    async def main() -> tuple[int, dict[str, object], float, float]:
        reader, writer = await asyncio.open_connection(*server.address)
        started = time.monotonic()
        writer.write(request("/v1/fetch", FETCH))  # parks 2.5 s: longer than every timeout
        status, body = await read_response(reader)
        parked_s = time.monotonic() - started
        idle_s = await closed_after(reader, 5)  # then idle on keep-alive
        writer.close()
        return status, body, parked_s, idle_s

    status, body, parked_s, idle_s = asyncio.run(main())
    assert status == 200
    assert body["records"] == []
    assert parked_s > 2.4
    assert 0.9 < idle_s < 3


def test_a_thousand_slowloris_sockets_are_closed_within_the_header_timeout() -> None:
    sockets = 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < sockets + 200:
        pytest.skip(f"needs {sockets + 200} open files, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, sockets + 200), hard))
    server = Server("--header-timeout", "2")

    async def main() -> list[tuple[bytes, float]]:
        head = request("/healthz")[:-2]  # 1 byte/s, never the final CRLF
        return await asyncio.gather(*(trickle(server.address, head, 1) for _ in range(sockets)))

    try:
        started = time.monotonic()
        held = asyncio.run(main())
        elapsed = time.monotonic() - started
        log = server.log()
    finally:
        assert server.stop() == 0
    assert len(held) == sockets
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer, _ in held)
    assert max(seconds for _, seconds in held) < 2 + 3  # the header timeout plus a few
    assert elapsed < 30
    assert log.count("no complete request header") <= 2  # one line per 10 s, not 1,000


def test_malformed_and_invalid_requests_log_one_line_and_no_traceback(server: Server) -> None:
    garbage = [
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nNo colon here\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n",  # TLS
        b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\n\r\n",  # request line too long
        b"POST /v1/produce HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: x\r\n\r\n",
    ]

    async def main() -> list[bytes]:
        answers = []
        for raw in garbage:
            reader, writer = await asyncio.open_connection(*server.address)
            writer.write(raw)
            answers.append(await asyncio.wait_for(reader.read(), 5))
            writer.close()
        reader, writer = await asyncio.open_connection(*server.address)
        writer.write(request("/v1/produce", b"{not json", close=True))
        answers.append(await asyncio.wait_for(reader.read(), 5))
        writer.close()
        return answers

    answers = asyncio.run(main())
    assert server.stop() == 0
    for answer in answers:
        assert answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request"), answer[:200]
        assert b'"error":"INVALID_REQUEST"' in answer
    log = server.log()
    assert "Traceback" not in log
    assert "ERROR" not in log
    refusals = [line for line in log.splitlines() if "bad request" in line]
    assert len(refusals) <= len(garbage)
