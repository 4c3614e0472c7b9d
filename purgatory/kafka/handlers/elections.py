"""ElectLeaders (API key 43, versions 0-2): Kafka's admin request for preferred and unclean
leader elections, answered through the cluster's ElectLeader purgatory.

Any broker takes the request (the cluster parks it on the controller's broker, the one
Metadata names); a null partition list means every partition, as in Kafka. v0 has no
election type (it is a preferred election) and no top-level error. An unknown election
type, a negative timeout or partition index is malformed: the connection closes.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import millis, respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.kafka.wire_errors import DecodeError
from purgatory.sim import Cluster, ElectLeadersRequest, ElectLeadersResult
from purgatory.sim.messages import ElectionType

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        ElectLeadersPartitionResult,
        ElectLeadersReplicaElectionResult,
        ElectLeadersResponse,
    )
    from purgatory.kafka.messages import ElectLeadersRequest as ElectLeadersWire

_ELECTION_TYPES: Final[dict[int, ElectionType]] = {0: "preferred", 1: "unclean"}


@final
class ElectionHandlers:
    """The ElectLeaders handler over ``cluster``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def apis(self) -> ApiTable:
        return {ApiKey.ELECT_LEADERS: Api(*versions(ApiKey.ELECT_LEADERS), self.elect_leaders)}

    def elect_leaders(
        self, header: RequestHeader, request: ElectLeadersWire
    ) -> Awaitable[ElectLeadersResponse]:
        election_type = request.election_type if hasattr(request, "election_type") else 0  # v1+
        if request.topic_partitions is None:
            topics = self.cluster.metadata().topics
            partitions = [(t.name, p.partition) for t in topics for p in t.partitions]
        else:
            partitions = [
                (t.topic, index) for t in request.topic_partitions for index in t.partitions
            ]
        timeout_ms = millis(request.timeout)
        if election_type not in _ELECTION_TYPES:
            raise DecodeError(f"election type {election_type}")
        if timeout_ms < 0 or any(index < 0 for _, index in partitions):
            raise DecodeError("negative timeout or partition")
        election = ElectLeadersRequest(partitions, _ELECTION_TYPES[election_type], timeout_ms)
        return self._elect(request, election)

    async def _elect(
        self, request: ElectLeadersWire, election: ElectLeadersRequest
    ) -> ElectLeadersResponse:
        result = await self.cluster.elect_leaders(election)
        return respond(request, error_code=result.error, replica_election_results=_by_topic(result))


def _by_topic(result: ElectLeadersResult) -> list[ElectLeadersReplicaElectionResult]:
    """Each partition's answer, grouped by topic; a refusal carries its code's name."""
    by_topic: dict[str, list[ElectLeadersPartitionResult]] = {}
    for answer in result.partitions:
        code = answer.error
        by_topic.setdefault(answer.topic, []).append(
            {
                "partition_id": answer.partition,
                "error_code": code,
                "error_message": None if code is ErrorCode.NONE else code.value,
            }
        )
    return [{"topic": topic, "partition_result": answers} for topic, answers in by_topic.items()]


UNIT: Final = SharedUnit(lambda s: ElectionHandlers(s.cluster))
