"""CreatePartitions (API key 37, versions 0-3): an admin client's ``create_partitions``,
growing a topic through the simulation's controller.

Any broker takes it (a KRaft broker forwards it to the controller; here there is one
cluster state). Each topic is answered on its own, in request order, with Kafka's codes
and reasons: an unknown topic UNKNOWN_TOPIC_OR_PARTITION, a count that is not an increase
INVALID_PARTITIONS ("Topic already has N partition(s)." / "... would not be an
increase."), above the broker's bound INVALID_PARTITIONS, an assignment that does not list
each new partition once with the topic's replication factor of distinct known brokers
INVALID_REPLICA_ASSIGNMENT, a name given twice INVALID_REQUEST ("Duplicate topic name.",
answered once). New partitions get replicas round-robin (or as assigned) and leaders at
once; Metadata shows them. ``validate_only`` checks and changes nothing. The request's
timeout is not waited on: the change is immediate.
"""

from __future__ import annotations

from collections import Counter
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
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreatePartitionsTopic,
        CreatePartitionsTopicResult,
    )


@final
class CreatePartitionsHandlers:
    """CreatePartitions over ``cluster``; a topic may grow to ``max_partitions``."""

    def __init__(self, cluster: Cluster, max_partitions: int) -> None:
        self.cluster = cluster
        self.max_partitions = max_partitions

    def apis(self) -> ApiTable:
        return {
            ApiKey.CREATE_PARTITIONS: Api(
                *versions(ApiKey.CREATE_PARTITIONS), self.create_partitions
            )
        }

    def create_partitions(
        self, header: RequestHeader, request: CreatePartitionsRequest
    ) -> Awaitable[CreatePartitionsResponse]:
        return self._create_partitions(request)

    async def _create_partitions(
        self, request: CreatePartitionsRequest
    ) -> CreatePartitionsResponse:
        named = Counter(topic.name for topic in request.topics)
        results: list[CreatePartitionsTopicResult] = []
        answered: set[str] = set()
        for topic in request.topics:
            if topic.name in answered:
                continue
            answered.add(topic.name)
            error: ErrorCode
            message: str | None
            if named[topic.name] > 1:
                error, message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
            else:
                error, message = await self._grow(topic, request.validate_only)
            results.append({"name": topic.name, "error_code": error, "error_message": message})
        return respond(request, results=results)

    async def _grow(
        self, topic: CreatePartitionsTopic, validate_only: bool
    ) -> tuple[ErrorCode, str | None]:
        if topic.count > self.max_partitions and topic.name in self.cluster.topics:
            return (
                ErrorCode.INVALID_PARTITIONS,
                f"a topic has at most {self.max_partitions} partitions here, asked for "
                f"{topic.count}",
            )
        assignment = (
            None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        )
        try:
            await self.cluster.create_partitions(
                topic.name, topic.count, assignment, validate_only=validate_only
            )
        except SimulationError as refused:
            return refused.code, refused.message
        return ErrorCode.NONE, None


UNIT: Final = SharedUnit(
    lambda s: CreatePartitionsHandlers(s.cluster, s.topic_defaults.max_partitions)
)
