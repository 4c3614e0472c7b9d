"""The connection server: ApiVersions, in-order responses while requests park, bad input.

Every test talks to a real socket on 127.0.0.1 and is bounded by asyncio.timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.protocol import ApiKey, RequestHeader, read_header
from purgatory.kafka.server import KafkaProtocolServer, ListenerLimits, ProtocolStats, Response
from purgatory.sim.errors import ErrorCode

TIMEOUT = 5.0


def request(key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    payload = Writer().int16(key).int16(version).int32(correlation_id).string("t").raw(body).buf
    return len(payload).to_bytes(4, "big") + bytes(payload)


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    size = int.from_bytes(await reader.readexactly(4), "big")
    frame = await reader.readexactly(size)
    return int.from_bytes(frame[:4], "big", signed=True), frame[4:]


class Parking:
    """A test API: LIST_OFFSETS echoes its int32 body; it waits for the gate when the
    body is negative, as a request parked in a purgatory would."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    def handle(self, header: RequestHeader, body: Reader) -> Response | asyncio.Future[Response]:
        value = body.int32()
        echo = Writer().int32(value).buf
        if value >= 0:
            return echo
        return asyncio.ensure_future(self._later(echo))

    async def _later(self, echo: bytearray) -> Response:
        await self.gate.wait()
        return echo


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[KafkaProtocolServer, int, Parking]]:
    server = KafkaProtocolServer()
    parking = Parking()
    server.register(ApiKey.LIST_OFFSETS, (0, 1), parking.handle)
    server.register(ApiKey.PRODUCE, (3, 3), lambda header, body: None)  # acks=0 style
    port = await server.start("127.0.0.1", 0)
    yield server, port, parking
    await server.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 1, 2])
async def test_api_versions_decodes_with_kafka_python(served, version: int) -> None:
    _, port, _ = served
    async with asyncio.timeout(TIMEOUT):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        api_versions = ApiVersionsRequest[version]()
        api_versions.with_header(correlation_id=42, client_id="c")
        writer.write(api_versions.encode(header=True, framed=True))
        correlation_id, body = await read_response(reader)
        writer.close()
    assert correlation_id == 42
    decoded = ApiVersionsResponse[version].decode(body)
    assert decoded.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys}
    assert keys == {0: (3, 3), 2: (0, 1), 18: (0, 2)}


@pytest.mark.asyncio
async def test_newer_api_versions_gets_unsupported_version_and_the_list(served) -> None:
    _, port, _ = served
    async with asyncio.timeout(TIMEOUT):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        # v3 uses a flexible header: client id, then an empty tagged-field section.
        writer.write(request(ApiKey.API_VERSIONS, 3, 9, b"\x00\x00\x00"))
        correlation_id, body = await read_response(reader)
        writer.close()
    assert correlation_id == 9
    decoded = ApiVersionsResponse[0].decode(body)
    assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION.number
    assert {k.api_key for k in decoded.api_keys} == {0, 2, 18}


@pytest.mark.asyncio
async def test_responses_keep_request_order_while_an_earlier_request_is_parked(served) -> None:
    _, port, parking = served
    async with asyncio.timeout(TIMEOUT):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request(ApiKey.LIST_OFFSETS, 0, 1, struct.pack(">i", -5)))
        writer.write(request(ApiKey.LIST_OFFSETS, 0, 2, struct.pack(">i", 7)))
        writer.write(request(ApiKey.PRODUCE, 3, 3))  # no response
        writer.write(request(ApiKey.LIST_OFFSETS, 1, 4, struct.pack(">i", 8)))
        # Nothing may come back while the first request is parked.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await reader.readexactly(1)
        parking.gate.set()
        answers = [await read_response(reader) for _ in range(3)]
        writer.close()
    assert answers == [
        (1, struct.pack(">i", -5)),
        (2, struct.pack(">i", 7)),
        (4, struct.pack(">i", 8)),
    ]


async def closes(port: int, data: bytes) -> bytes:
    """Send data and read until the server closes the connection; returns what came back."""
    async with asyncio.timeout(TIMEOUT):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data)
        writer.write_eof()
        received = await reader.read()
        writer.close()
        return received


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"\x7f\xff\xff\xff", "frame size"),
        (b"\x00\x00\x00\x02ab", "frame size"),
        (request(99, 0, 1), "unknown api key"),
        (request(ApiKey.LIST_OFFSETS, 5, 1, b"\x00\x00\x00\x01"), "unsupported version"),
        (request(ApiKey.LIST_OFFSETS, 0, 1, b"\x00"), "malformed request"),
        (b"\x00\x00\x00\x08\x00\x02\x00\x00\x00\x00\x00\x01", "malformed header"),
    ],
)
async def test_bad_input_closes_the_connection_is_counted_and_logged_once(
    served, data: bytes, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    server, port, _ = served
    with caplog.at_level(logging.WARNING, logger="purgatory.kafka"):
        assert await closes(port, data) == b""
        assert await closes(port, data) == b""
    assert server.stats.bad_input == {kind: 2}
    [line] = caplog.records
    assert line.levelno == logging.WARNING
    assert line.getMessage().startswith(f"kafka protocol: {kind} (")
    assert not line.exc_info  # the client's fault: no traceback
    # The server still serves the next client.
    answer = await closes(port, request(ApiKey.LIST_OFFSETS, 0, 5, b"\x00\x00\x00\x01"))
    assert answer == b"\x00\x00\x00\x08" + struct.pack(">ii", 5, 1)


@pytest.mark.asyncio
async def test_answers_owed_before_bad_input_are_still_written(served) -> None:
    server, port, _ = served
    good = request(ApiKey.LIST_OFFSETS, 0, 1, struct.pack(">i", 3))
    received = await closes(port, good + request(99, 0, 2))
    assert received[4:12] == struct.pack(">ii", 1, 3)
    assert server.stats.bad_input["unknown api key"] == 1


@pytest.mark.asyncio
async def test_truncated_frame_then_close_is_counted(served) -> None:
    server, port, _ = served
    assert await closes(port, b"\x00\x00\x01\x00abc") == b""
    assert server.stats.bad_input["truncated frame"] == 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=80))
def test_header_decoder_raises_only_decode_error(data: bytes) -> None:
    from purgatory.kafka.codec import DecodeError

    try:
        read_header(data)
    except DecodeError:
        pass


def test_bad_input_is_logged_again_after_the_interval_with_the_count_between(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    stats = ProtocolStats(log_interval_s=60.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="purgatory.kafka"):
        for t in (0.0, 1.0, 59.0, 60.0, 61.0):
            now[0] = t
            stats.bad("frame size", f"at {t}")
    assert stats.bad_input["frame size"] == 5
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "(at 0.0);" in messages[0]
    assert "(at 60.0); 2 more since the last line;" in messages[1]


@pytest.mark.asyncio
async def test_a_handler_bug_closes_the_connection_and_logs_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(header: RequestHeader, body: Reader) -> Response:
        raise RuntimeError("bug")

    server = KafkaProtocolServer()
    server.register(ApiKey.LIST_OFFSETS, (0, 0), broken)
    port = await server.start("127.0.0.1", 0)
    try:
        with caplog.at_level(logging.WARNING, logger="purgatory.kafka"):
            assert await closes(port, request(ApiKey.LIST_OFFSETS, 0, 1)) == b""
    finally:
        await server.close()
    assert server.stats.bad_input == {"internal error": 1}
    [line] = caplog.records
    assert line.exc_info is not None


@contextlib.asynccontextmanager
async def _limited(
    max_connections: int, idle_timeout_s: float
) -> AsyncIterator[tuple[KafkaProtocolServer, int, Parking]]:
    """A server within these limits (closed afterwards), its port and its parking API."""
    server = KafkaProtocolServer(ProtocolStats(), ListenerLimits(max_connections, idle_timeout_s))
    parking = Parking()
    server.register(ApiKey.LIST_OFFSETS, (0, 1), parking.handle)
    port = await server.start("127.0.0.1", 0)
    try:
        yield server, port, parking
    finally:
        await server.close()


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, value: int) -> bytes:
    writer.write(request(ApiKey.LIST_OFFSETS, 0, value, struct.pack(">i", value)))
    return (await read_response(reader))[1]


async def _until_open(server: KafkaProtocolServer, connections: int) -> None:
    for _ in range(500):
        if server.stats.connections == connections:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{server.stats.connections} connections open, not {connections}")


@pytest.mark.asyncio
async def test_a_connection_the_client_closes_is_let_go() -> None:
    """It was not: its responder waited for a second end marker, so every connection a
    client closed kept its task (and the server's count of it) until shutdown."""
    async with (
        _limited(max_connections=10, idle_timeout_s=60) as (server, port, _),
        asyncio.timeout(TIMEOUT),
    ):
        for i in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert await _echo(reader, writer, i) == struct.pack(">i", i)
            writer.close()
            await writer.wait_closed()
        await _until_open(server, 0)


@pytest.mark.asyncio
async def test_connections_past_the_limit_are_closed_at_once_and_counted() -> None:
    async with (
        _limited(max_connections=2, idle_timeout_s=60) as (server, port, _),
        asyncio.timeout(TIMEOUT),
    ):
        first = await asyncio.open_connection("127.0.0.1", port)
        second = await asyncio.open_connection("127.0.0.1", port)
        assert await _echo(*first, 1) == struct.pack(">i", 1)  # both are served
        assert await _echo(*second, 2) == struct.pack(">i", 2)
        assert server.stats.connections == 2
        assert await closes(port, b"") == b""  # the third: closed unread
        assert server.stats.closed["limit"] == 1
        first[1].close()
        await first[1].wait_closed()
        await _until_open(server, 1)  # the server notices the close
        third = await asyncio.open_connection("127.0.0.1", port)
        assert await _echo(*third, 3) == struct.pack(">i", 3)
        second[1].close()
        third[1].close()


@pytest.mark.asyncio
async def test_a_silent_connection_is_closed_but_one_waiting_for_a_parked_answer_is_not() -> None:
    async with (
        _limited(max_connections=10, idle_timeout_s=0.2) as (server, port, parking),
        asyncio.timeout(TIMEOUT),
    ):
        silent = await asyncio.open_connection("127.0.0.1", port)
        waiting = await asyncio.open_connection("127.0.0.1", port)
        waiting[1].write(request(ApiKey.LIST_OFFSETS, 0, 9, struct.pack(">i", -9)))
        assert await silent[0].read() == b""  # closed by the server
        assert server.stats.closed["idle_timeout"] == 1
        await asyncio.sleep(0.5)  # parked for longer than the idle timeout
        parking.gate.set()
        assert await read_response(waiting[0]) == (9, struct.pack(">i", -9))
        assert await waiting[0].read() == b""  # then idle, and closed
        assert server.stats.closed["idle_timeout"] == 2
        for _, writer in (silent, waiting):
            writer.close()


def test_bad_connection_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="max_connections must be >= 1"):
        ListenerLimits(max_connections=0)
    with pytest.raises(TypeError, match="max_connections must be an int"):
        ListenerLimits(max_connections=2.5)  # type: ignore[arg-type]
    for idle in (0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="idle_timeout_s must be finite and > 0"):
            ListenerLimits(idle_timeout_s=idle)
