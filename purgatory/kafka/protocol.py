"""Request framing, headers, API keys and the ApiVersions exchange.

A frame is a 4-byte big-endian size then that many bytes. A request header (v1, which every
non-flexible request uses) is api_key, api_version, correlation_id, client_id; the response
header (v0) is the correlation id alone.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final, NamedTuple

from purgatory.kafka.codec import Reader, Writer
from purgatory.sim.errors import ErrorCode

# Kafka's own default for socket.request.max.bytes is 100 MiB; a test broker needs far less,
# and a size prefix above this is taken for garbage and the connection closed.
MAX_FRAME_BYTES: Final = 16 * 1024 * 1024


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    DESCRIBE_CONFIGS = 32
    ELECT_LEADERS = 43


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def read_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Reader]:
    """Decode a request header; the returned reader is positioned at the request body."""
    reader = Reader(frame)
    header = RequestHeader(reader.int16(), reader.int16(), reader.int32(), None)
    client_id = reader.nullable_string()
    return header._replace(client_id=client_id), reader


def response_frame(correlation_id: int, body: bytes | bytearray) -> bytes:
    """Size prefix, response header v0, body."""
    return (
        (len(body) + 4).to_bytes(4, "big")
        + correlation_id.to_bytes(4, "big", signed=True)
        + bytes(body)
    )


# ApiVersions v3 moved to flexible encoding; we serve 0-2, and a client that asks for more
# gets UNSUPPORTED_VERSION with the list in the v0 layout and retries lower (KIP-511).
API_VERSIONS_MAX: Final = 2


def encode_api_versions(
    version: int, error: ErrorCode, supported: dict[ApiKey, tuple[int, int]]
) -> bytearray:
    """An ApiVersions response body: error, then (key, min, max) per supported API."""
    out = Writer().int16(error.wire).int32(len(supported))
    for key, (low, high) in sorted(supported.items()):
        out.int16(key).int16(low).int16(high)
    if version >= 1:
        out.int32(0)  # throttle_time_ms
    return out.buf
