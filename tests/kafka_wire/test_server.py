"""The connection server: ApiVersions, in-order responses while requests park, bad input.

The test API is ListOffsets through Kafka's schemas (kio): its handler answers each
partition with its timestamp as the offset, and parks (as a request in a purgatory
would) while the request names topic ``park``. Every test talks to a real socket on
127.0.0.1 and is bounded by asyncio.timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kio_wire import exchange, read_frame, read_response, request_frame

from purgatory.errors import ErrorCode
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.schemas import build, request_type, respond, versions
from purgatory.kafka.server import KafkaProtocolServer, ListenerLimits, Response

TIMEOUT = 5.0
LIST_OFFSETS = ApiKey.LIST_OFFSETS
#: the ListOffsets versions the test server serves (the schemas have 1-11)
SERVED = (1, 9)


def request(
    key: int, version: int, correlation_id: int, values: dict[str, Any] | None = None
) -> bytes:
    """A whole request frame, written by kio from Kafka's schema of ``key`` v``version``
    (``values`` for the body; fields not given take their default)."""
    body = build(request_type(ApiKey(key), version), values or {})
    return request_frame(body, correlation_id=correlation_id, client_id="t")


def raw(key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A frame with a v1 request header (client id ``t``) and ``body`` as given."""
    payload = struct.pack(">hhih", key, version, correlation_id, 1) + b"t" + body
    return len(payload).to_bytes(4, "big") + payload


def cut(frame: bytes, drop: int) -> bytes:
    """``frame`` without its last ``drop`` bytes, its size prefix saying so."""
    payload = frame[4:-drop]
    return len(payload).to_bytes(4, "big") + payload


def offsets(version: int, correlation_id: int, value: int, topic: str = "t") -> bytes:
    """A ListOffsets request for partition 0 of ``topic`` at timestamp ``value``."""
    partition = {"partition_index": 0, "timestamp": value}
    return request(
        LIST_OFFSETS,
        version,
        correlation_id,
        {"topics": [{"name": topic, "partitions": [partition]}]},
    )


def answer(key: ApiKey, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of a response frame (without its size), read by kio."""
    header, _, body, _ = read_response(frame, key, version)
    return int(header.correlation_id), body


async def read_offsets(reader: asyncio.StreamReader, version: int) -> tuple[int, int]:
    """(correlation id, the offset answered) of the next ListOffsets response."""
    correlation_id, body = answer(LIST_OFFSETS, version, await read_frame(reader))
    [topic] = body.topics
    [partition] = topic.partitions
    return correlation_id, partition.offset


class Parking:
    """ListOffsets answering each partition its timestamp as the offset; parked on the
    gate while the request names topic ``park``."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    def handle(self, header: RequestHeader, request: Any) -> Response | asyncio.Future[Response]:
        answer = respond(
            request,
            topics=[
                {
                    "name": topic.name,
                    "partitions": [
                        {"partition_index": p.partition_index, "offset": p.timestamp}
                        for p in topic.partitions
                    ],
                }
                for topic in request.topics
            ],
        )
        if all(topic.name != "park" for topic in request.topics):
            return answer
        return asyncio.ensure_future(self._later(answer))

    async def _later(self, answer: Response) -> Response:
        await self.gate.wait()
        return answer


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[KafkaProtocolServer, int, Parking]]:
    server = KafkaProtocolServer()
    parking = Parking()
    server.register(LIST_OFFSETS, SERVED, parking.handle)
    server.register(ApiKey.PRODUCE, (3, 3), lambda header, body: None)  # acks=0 style
    port = await server.start("127.0.0.1", 0)
    yield server, port, parking
    await server.close()


REGISTERED = {0: (3, 3), 2: SERVED, 18: versions(ApiKey.API_VERSIONS)}


async def _api_versions(port: int, data: bytes) -> bytes:
    return await exchange(("127.0.0.1", port), data, within_s=TIMEOUT)


def _kafka_python_api_versions(version: int, correlation_id: int) -> bytes:
    fields = {}
    if version >= 3:
        fields = {"client_software_name": "kafka-python", "client_software_version": "9.9"}
    api_versions = ApiVersionsRequest[version](**fields)
    api_versions.with_header(correlation_id=correlation_id, client_id="c")
    return bytes(api_versions.encode(header=True, framed=True))


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_api_versions_decodes_with_kafka_python_and_kio(served, version: int) -> None:
    server, port, _ = served
    frame = await _api_versions(port, _kafka_python_api_versions(version, 42))
    assert int.from_bytes(frame[:4], "big") == 42
    decoded = ApiVersionsResponse[version].decode(frame[4:])
    assert decoded.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys}
    assert keys == REGISTERED
    correlation_id, body = answer(ApiKey.API_VERSIONS, version, frame)
    assert correlation_id == 42
    assert body.error_code == ErrorCode.NONE.number
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == REGISTERED
    assert server.stats.requests == {("API_VERSIONS", version): 1}
    assert server.stats.requests_of("API_VERSIONS") == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [3, 4])
async def test_the_client_software_named_in_api_versions_is_counted_and_logged_once(
    served, version: int, caplog: pytest.LogCaptureFixture
) -> None:
    server, port, _ = served
    with caplog.at_level(logging.INFO, logger="purgatory.kafka"):
        async with asyncio.timeout(TIMEOUT):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                for correlation_id in (1, 2):  # asked twice on one connection: one client
                    writer.write(_kafka_python_api_versions(version, correlation_id))
                    assert answer(ApiKey.API_VERSIONS, version, await read_frame(reader))[0] == (
                        correlation_id
                    )
            finally:
                writer.close()
        await _api_versions(port, _kafka_python_api_versions(version, 3))  # a second one
    assert server.stats.clients == {("kafka-python", "9.9"): 2}
    lines = [r.getMessage() for r in caplog.records if "client kafka-python" in r.getMessage()]
    assert len(lines) == 2
    assert lines[0].endswith("to broker 0: client kafka-python 9.9")


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [5, 99])
async def test_newer_api_versions_gets_a_v0_unsupported_version_with_the_ranges(
    served, version: int
) -> None:
    server, port, _ = served
    # a v4 request (header v2, a body kio wrote) claiming a newer version
    data = bytearray(request(ApiKey.API_VERSIONS, 4, 9, {"client_software_name": "x"}))
    data[6:8] = version.to_bytes(2, "big")
    frame = await _api_versions(port, bytes(data))
    assert int.from_bytes(frame[:4], "big") == 9
    decoded = ApiVersionsResponse[0].decode(frame[4:])
    assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION.number
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == REGISTERED
    _, body = answer(ApiKey.API_VERSIONS, 0, frame)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION.number
    assert server.stats.requests == {("API_VERSIONS", 0): 1}
    assert server.stats.bad_input == {}  # the usual negotiation, not bad input


@pytest.mark.asyncio
async def test_responses_keep_request_order_while_an_earlier_request_is_parked(served) -> None:
    server, port, parking = served
    async with asyncio.timeout(TIMEOUT):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(offsets(1, 1, 5, topic="park"))
        writer.write(offsets(9, 2, 7))
        writer.write(request(ApiKey.PRODUCE, 3, 3, {"acks": 0}))  # no response
        writer.write(offsets(4, 4, 8))
        # Nothing may come back while the first request is parked.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await reader.readexactly(1)
        parking.gate.set()
        answers = [
            await read_offsets(reader, 1),
            await read_offsets(reader, 9),
            await read_offsets(reader, 4),
        ]
        writer.close()
    assert answers == [(1, 5), (2, 7), (4, 8)]
    assert server.stats.requests == {
        ("LIST_OFFSETS", 1): 1,
        ("LIST_OFFSETS", 9): 1,
        ("LIST_OFFSETS", 4): 1,
        ("PRODUCE", 3): 1,
    }
    assert server.stats.requests_of("LIST_OFFSETS") == 3


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
        (raw(99, 0, 1), "unknown api key"),
        (raw(ApiKey.FETCH, 4, 1), "unknown api key"),  # known to Kafka, not served here
        (offsets(10, 1, 1), "unsupported version"),  # a version the server does not serve
        (raw(LIST_OFFSETS, 0, 1, b"\x00\x00\x00\x01"), "unsupported version"),
        (cut(offsets(1, 1, 1), 3), "malformed request"),  # a frame cut inside its body
        (raw(LIST_OFFSETS, 1, 1, b"\x00"), "malformed request"),
        # a whole header but no client id behind it
        (b"\x00\x00\x00\x08\x00\x02\x00\x01\x00\x00\x00\x01", "malformed request"),
        # the client id runs past the frame
        (b"\x00\x00\x00\x0a\x00\x02\x00\x01\x00\x00\x00\x01\x00\x09", "malformed request"),
    ],
    ids=[
        "huge size",
        "tiny size",
        "unknown key",
        "key not served",
        "version above",
        "version below",
        "cut body",
        "garbage body",
        "no client id",
        "client id past the end",
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
    received = await closes(port, offsets(2, 5, 1))
    assert answer(LIST_OFFSETS, 2, received[4:])[0] == 5
    assert int.from_bytes(received[:4], "big") == len(received) - 4


@pytest.mark.asyncio
async def test_answers_owed_before_bad_input_are_still_written(served) -> None:
    server, port, _ = served
    received = await closes(port, offsets(1, 1, 3) + offsets(5, 2, 4) + raw(99, 0, 3))
    reader = asyncio.StreamReader()
    reader.feed_data(received)
    reader.feed_eof()
    assert await read_offsets(reader, 1) == (1, 3)
    assert await read_offsets(reader, 5) == (2, 4)
    assert await reader.read() == b""
    assert server.stats.bad_input == {"unknown api key": 1}


@pytest.mark.asyncio
async def test_truncated_frame_then_close_is_counted(served) -> None:
    server, port, _ = served
    assert await closes(port, b"\x00\x00\x01\x00abc") == b""
    whole = offsets(3, 1, 1)
    assert await closes(port, whole[: len(whole) // 2]) == b""
    assert server.stats.bad_input == {"truncated frame": 2}


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
@pytest.mark.parametrize("parked", [False, True])
async def test_a_handler_bug_closes_the_connection_and_logs_its_traceback(
    parked: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A handler that raises, or whose parked answer raises: the connection closes, the
    bug is counted and logged with its traceback, and the server serves on."""

    async def later() -> Response:
        raise RuntimeError("bug")

    def broken(header: RequestHeader, request: Any) -> Response:
        if parked:
            return later()
        raise RuntimeError("bug")

    server = KafkaProtocolServer()
    server.register(LIST_OFFSETS, SERVED, broken)
    port = await server.start("127.0.0.1", 0)
    try:
        with caplog.at_level(logging.WARNING, logger="purgatory.kafka"):
            assert await closes(port, offsets(1, 1, 1)) == b""
        frame = await _api_versions(port, _kafka_python_api_versions(0, 7))
        assert int.from_bytes(frame[:4], "big") == 7  # still serving
    finally:
        await server.close()
    assert server.stats.bad_input == {"internal error": 1}
    [line] = caplog.records
    assert line.exc_info is not None
    assert "RuntimeError('bug')" in line.getMessage()


@pytest.mark.asyncio
async def test_a_response_that_does_not_fit_its_schema_is_a_handler_bug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler answering a ListOffsets with a Produce response (another schema) or
    with a value kio cannot write: counted as an internal error, nothing half-written."""
    server = KafkaProtocolServer()
    server.register(LIST_OFFSETS, SERVED, lambda header, request: object())
    port = await server.start("127.0.0.1", 0)
    try:
        with caplog.at_level(logging.WARNING, logger="purgatory.kafka"):
            assert await closes(port, offsets(1, 1, 1)) == b""
    finally:
        await server.close()
    assert server.stats.bad_input == {"internal error": 1}


def test_registering_versions_the_schemas_lack_is_refused() -> None:
    server = KafkaProtocolServer()
    with pytest.raises(ValueError, match=r"LIST_OFFSETS v0-3: the schemas have 1-11"):
        server.register(LIST_OFFSETS, (0, 3), Parking().handle)
    with pytest.raises(ValueError, match=r"PRODUCE v3-14: the schemas have 3-13"):
        server.register(ApiKey.PRODUCE, (3, 14), Parking().handle)
    server.register(LIST_OFFSETS, (1, 11), Parking().handle)
    assert server.supported() == {
        LIST_OFFSETS: (1, 11),
        ApiKey.API_VERSIONS: versions(ApiKey.API_VERSIONS),
    }


@contextlib.asynccontextmanager
async def _limited(
    max_connections: int, idle_timeout_s: float
) -> AsyncIterator[tuple[KafkaProtocolServer, int, Parking]]:
    """A server within these limits (closed afterwards), its port and its parking API."""
    server = KafkaProtocolServer(ProtocolStats(), ListenerLimits(max_connections, idle_timeout_s))
    parking = Parking()
    server.register(LIST_OFFSETS, SERVED, parking.handle)
    port = await server.start("127.0.0.1", 0)
    try:
        yield server, port, parking
    finally:
        await server.close()


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, value: int) -> int:
    writer.write(offsets(2, value, value))
    correlation_id, offset = await read_offsets(reader, 2)
    assert correlation_id == value
    return offset


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
            assert await _echo(reader, writer, i) == i
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
        assert await _echo(*first, 1) == 1  # both are served
        assert await _echo(*second, 2) == 2
        assert server.stats.connections == 2
        assert await closes(port, b"") == b""  # the third: closed unread
        assert server.stats.closed["limit"] == 1
        first[1].close()
        await first[1].wait_closed()
        await _until_open(server, 1)  # the server notices the close
        third = await asyncio.open_connection("127.0.0.1", port)
        assert await _echo(*third, 3) == 3
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
        waiting[1].write(offsets(6, 9, -9, topic="park"))
        assert await silent[0].read() == b""  # closed by the server
        assert server.stats.closed["idle_timeout"] == 1
        await asyncio.sleep(0.5)  # parked for longer than the idle timeout
        parking.gate.set()
        assert await read_offsets(waiting[0], 6) == (9, -9)
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
