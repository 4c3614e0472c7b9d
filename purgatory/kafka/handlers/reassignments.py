"""AlterPartitionReassignments (API key 45, versions 0-1) and ListPartitionReassignments
(46, version 0): KIP-455's partition reassignment, through the simulation's controller
(:meth:`purgatory.sim.Cluster.reassign_partition`).

Any broker takes them (a KRaft broker forwards them to the controller). Alter answers at
once, as Kafka's controller does: each partition in request order with its own code and
reason (an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION, a bad target
INVALID_REPLICA_ASSIGNMENT, a cancel (null replicas) with nothing in progress
NO_REASSIGNMENT_IN_PROGRESS, a replication factor change with v1's
``allow_replication_factor_change`` false INVALID_REPLICATION_FACTOR, which the response
echoes); the request's timeout is not waited on. The reassignment then runs in the
simulation: new replicas replicate and join the ISR, then the removed ones leave. List
shows the ones in progress (a null topic list: all; unknown topics and partitions not
being reassigned are left out, as in Kafka) with their replicas, adding and removing
brokers.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster
from purgatory.sim.errors import SimulationError

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        AlterPartitionReassignmentsReassignablePartitionResponse,
        AlterPartitionReassignmentsReassignableTopicResponse,
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        ListPartitionReassignmentsOngoingPartitionReassignment,
        ListPartitionReassignmentsOngoingTopicReassignment,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )


@final
class ReassignmentHandlers:
    """AlterPartitionReassignments and ListPartitionReassignments over ``cluster``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def apis(self) -> ApiTable:
        return {
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: Api(
                *versions(ApiKey.ALTER_PARTITION_REASSIGNMENTS), self.alter_reassignments
            ),
            ApiKey.LIST_PARTITION_REASSIGNMENTS: Api(
                *versions(ApiKey.LIST_PARTITION_REASSIGNMENTS), self.list_reassignments
            ),
        }

    def alter_reassignments(
        self, header: RequestHeader, request: AlterPartitionReassignmentsRequest
    ) -> Awaitable[AlterPartitionReassignmentsResponse]:
        return self._alter(request)

    async def _alter(
        self, request: AlterPartitionReassignmentsRequest
    ) -> AlterPartitionReassignmentsResponse:
        allow = (  # v1+
            request.allow_replication_factor_change
            if hasattr(request, "allow_replication_factor_change")
            else True
        )
        responses: list[AlterPartitionReassignmentsReassignableTopicResponse] = []
        for topic in request.topics:
            partitions: list[AlterPartitionReassignmentsReassignablePartitionResponse] = []
            for partition in topic.partitions:
                error, message = ErrorCode.NONE, None
                replicas = partition.replicas
                try:
                    await self.cluster.reassign_partition(
                        topic.name,
                        partition.partition_index,
                        None if replicas is None else list(replicas),
                        allow_replication_factor_change=allow,
                    )
                except SimulationError as refused:
                    error, message = refused.code, refused.message
                partitions.append(
                    {
                        "partition_index": partition.partition_index,
                        "error_code": error,
                        "error_message": message,
                    }
                )
            responses.append({"name": topic.name, "partitions": partitions})
        return respond(
            request,
            allow_replication_factor_change=allow,
            error_code=ErrorCode.NONE,
            error_message=None,
            responses=responses,
        )

    def list_reassignments(
        self, header: RequestHeader, request: ListPartitionReassignmentsRequest
    ) -> ListPartitionReassignmentsResponse:
        ongoing = self.cluster.partition_reassignments()
        if request.topics is not None:
            asked = {(t.name, i) for t in request.topics for i in t.partition_indexes}
            ongoing = [r for r in ongoing if (r.topic, r.partition) in asked]
        by_topic: dict[str, list[ListPartitionReassignmentsOngoingPartitionReassignment]] = {}
        for r in ongoing:
            by_topic.setdefault(r.topic, []).append(
                {
                    "partition_index": r.partition,
                    "replicas": r.replicas,
                    "adding_replicas": r.adding,
                    "removing_replicas": r.removing,
                }
            )
        topics: list[ListPartitionReassignmentsOngoingTopicReassignment] = [
            {"name": name, "partitions": ps} for name, ps in by_topic.items()
        ]
        return respond(request, error_code=ErrorCode.NONE, error_message=None, topics=topics)


UNIT: Final = SharedUnit(lambda s: ReassignmentHandlers(s.cluster))
