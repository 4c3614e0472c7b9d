"""ElectLeaders (API key 43, versions 0-1): Kafka's admin request for preferred and unclean
leader elections, answered through the cluster's ElectLeader purgatory.

Any broker takes the request (the cluster parks it on the controller's broker, the one
Metadata names); a null partition list means every partition, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final, final

from purgatory.kafka.codec import DecodeError, Reader, Writer
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster, ElectLeadersRequest, ElectLeadersResult
from purgatory.sim.errors import ErrorCode
from purgatory.sim.messages import ElectionType

_ELECTION_TYPES: Final[dict[int, ElectionType]] = {0: "preferred", 1: "unclean"}


@final
class ElectionHandlers:
    """The ElectLeaders handler over ``cluster``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def apis(self) -> ApiTable:
        return {ApiKey.ELECT_LEADERS: Api(0, 1, self.elect_leaders)}

    def elect_leaders(self, header: RequestHeader, body: Reader) -> Awaitable[bytearray]:
        version = header.api_version
        election_type = body.int8() if version >= 1 else 0
        count = body.nullable_array_length()
        partitions: list[tuple[str, int]] = []
        if count is None:
            topics = self.cluster.metadata().topics
            partitions = [(t.name, p.partition) for t in topics for p in t.partitions]
        for _ in range(count or 0):
            topic = body.string()
            partitions += [(topic, body.int32()) for _ in range(body.array_length())]
        timeout_ms = body.int32()
        if election_type not in _ELECTION_TYPES:
            raise DecodeError(f"election type {election_type}")
        if timeout_ms < 0 or any(index < 0 for _, index in partitions):
            raise DecodeError("negative timeout or partition")
        request = ElectLeadersRequest(partitions, _ELECTION_TYPES[election_type], timeout_ms)
        return self._elect(version, request)

    async def _elect(self, version: int, request: ElectLeadersRequest) -> bytearray:
        result = await self.cluster.elect_leaders(request)
        return _encode(version, result)


def _encode(version: int, result: ElectLeadersResult) -> bytearray:
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for answer in result.partitions:
        by_topic.setdefault(answer.topic, []).append((answer.partition, answer.error))
    out = Writer().int32(0)  # throttle_time_ms
    if version >= 1:
        out.int16(result.error.wire)
    out.int32(len(by_topic))
    for topic, answers in by_topic.items():
        out.string(topic).int32(len(answers))
        for index, code in answers:
            out.int32(index).int16(code.wire).string(None if code is ErrorCode.NONE else code.value)
    return out.buf
