"""The Kafka wire as the tests write and read it with kio: a request framed behind its
header, a response read back, one request and its answer on a connection of its own, and
an unsigned varint written independently of the product's encoder.

Imported as ``from kio_wire import ...`` (pytest puts this directory on ``sys.path``, as
for ``tests/bus/waits.py``)."""

from __future__ import annotations

import asyncio
import io
from typing import Any, NamedTuple

from kio.serial import entity_reader, entity_writer

from purgatory.kafka.handlers.partitions import PartitionHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type, response_type

#: how long a round trip may take, connecting to closing
TIMEOUT = 30.0


def uvarint(value: int) -> bytes:
    """``value`` as an unsigned varint: seven bits a byte, least significant first."""
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def request_frame(request: Any, *, correlation_id: int, client_id: str | None) -> bytes:
    """A kio request as a whole frame: its size, the request header its version calls for
    (``request.__header_schema__``), then the body, written by kio."""
    header_type = request.__header_schema__
    header = header_type(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    out = io.BytesIO()
    entity_writer(header_type)(out, header)
    entity_writer(type(request))(out, request)
    payload = out.getvalue()
    return len(payload).to_bytes(4, "big") + payload


class Response(NamedTuple):
    """A response frame read back by kio: its header and body, each with the bytes it
    took (so ``header_size + body_size`` is the whole frame when nothing is left over)."""

    header: Any
    header_size: int
    body: Any
    body_size: int


def read_response(frame: bytes, key: ApiKey | int, version: int) -> Response:
    """A response frame (without its size) of ``key`` v``version``, read by kio: the
    response header the version calls for, then the body."""
    cls = response_type(ApiKey(key), version)
    header, header_size = entity_reader(cls.__header_schema__)(frame, 0)
    body, body_size = entity_reader(cls)(frame, header_size)
    return Response(header, header_size, body, body_size)


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """The next frame on ``reader``, without its size."""
    size = int.from_bytes(await reader.readexactly(4), "big")
    return await reader.readexactly(size)


async def exchange(address: tuple[str, int], data: bytes, *, within_s: float = TIMEOUT) -> bytes:
    """``data`` written on a connection of its own to ``address``, and the one frame that
    answers it (without its size); the connection closed, all within ``within_s``."""
    async with asyncio.timeout(within_s):
        reader, writer = await asyncio.open_connection(*address)
        try:
            writer.write(data)
            return await read_frame(reader)
        finally:
            writer.close()
            await writer.wait_closed()


async def round_trip(
    address: tuple[str, int],
    request: Any,
    *,
    correlation_id: int = 1,
    client_id: str | None = "kio",
    within_s: float = TIMEOUT,
) -> bytes:
    """A kio request sent to ``address`` on a connection of its own (:func:`exchange`):
    the answer's frame, without its size, for :func:`read_response` (or another client's
    decoder) to read."""
    frame = request_frame(request, correlation_id=correlation_id, client_id=client_id)
    return await exchange(address, frame, within_s=within_s)


async def produce_to_t0(broker: PartitionHandlers, records: bytes) -> tuple[int, int]:
    """Produce v12 of ``records`` to t-0 with acks=1, handed to a broker's Produce handler
    as the server would (no connection): (error code, base offset)."""
    request = build(
        request_type(ApiKey.PRODUCE, 12),
        {
            "acks": 1,
            "timeout": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    answer = await broker.produce(RequestHeader(ApiKey.PRODUCE, 12, 1, "c"), request)
    assert answer is not None
    [topic] = answer.responses
    [partition] = topic.partition_responses
    return int(partition.error_code), partition.base_offset


class Wire:
    """One connection to a broker, kept open: requests written and answers read one at a
    time, with correlation ids counting up."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.correlation = reader, writer, 0

    async def kio(self, key: ApiKey | int, version: int, **values: Any) -> Any:
        """``key`` v``version`` built from ``values`` (:func:`build`), and its answer."""
        self.correlation += 1
        request = build(request_type(ApiKey(key), version), values)
        self.writer.write(request_frame(request, correlation_id=self.correlation, client_id="t"))
        frame = await read_frame(self.reader)
        return read_response(frame, request.__api_key__, request.__version__).body
