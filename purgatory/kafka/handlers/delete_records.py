"""DeleteRecords 0-2: an admin client moves partitions' log start forward, and each answer
waits in the leader's DeleteRecords purgatory (Kafka's DelayedDeleteRecords) until every
live replica's log start has passed the offset.

Sent to each partition's leader, as Kafka's admin clients do; another broker answers
NOT_LEADER_OR_FOLLOWER. Offset -1 means the high watermark; another negative offset or
one above the high watermark is OFFSET_OUT_OF_RANGE; one at or below the log start
deletes nothing and is answered at once, as by Kafka. An internal topic
(``__consumer_offsets``) is INVALID_TOPIC_EXCEPTION, as Kafka refuses to delete its
records. A negative timeout is malformed: the connection closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.units import ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import millis, respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.kafka.wire_errors import DecodeError
from purgatory.sim import Cluster, DeleteRecordsRequest, DeleteRecordsResult

if TYPE_CHECKING:
    from purgatory.kafka.messages import DeleteRecordsPartitionResult, DeleteRecordsResponse
    from purgatory.kafka.messages import DeleteRecordsRequest as DeleteRecordsWire

#: DeleteRecords' "up to the high watermark"
HIGH_WATERMARK: Final = -1


@final
class DeleteRecordsHandlers:
    """The DeleteRecords handler of simulated broker ``broker_id``."""

    def __init__(self, cluster: Cluster, broker_id: int) -> None:
        self.cluster = cluster
        self.broker_id = broker_id

    def apis(self) -> ApiTable:
        return {ApiKey.DELETE_RECORDS: Api(*versions(ApiKey.DELETE_RECORDS), self.delete_records)}

    def delete_records(
        self, header: RequestHeader, request: DeleteRecordsWire
    ) -> Awaitable[DeleteRecordsResponse]:
        # A partition named twice keeps its last offset, as Kafka reads the request.
        wanted: dict[tuple[str, int], int] = {
            (topic.name, p.partition_index): p.offset
            for topic in request.topics
            for p in topic.partitions
        }
        timeout_ms = millis(request.timeout)
        if timeout_ms < 0:
            raise DecodeError(f"negative timeout {timeout_ms}")
        return self._delete_all(request, wanted, timeout_ms)

    async def _delete_all(
        self, request: DeleteRecordsWire, wanted: dict[tuple[str, int], int], timeout_ms: int
    ) -> DeleteRecordsResponse:
        results = await asyncio.gather(
            *(
                self._delete(topic, index, offset, timeout_ms)
                for (topic, index), offset in wanted.items()
            )
        )
        by_topic: dict[str, list[DeleteRecordsPartitionResult]] = {}
        for (topic, index), result in zip(wanted, results, strict=True):
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": index,
                    "low_watermark": result.low_watermark,
                    "error_code": result.error,
                }
            )
        return respond(
            request,
            topics=[{"name": topic, "partitions": answers} for topic, answers in by_topic.items()],
        )

    async def _delete(
        self, topic: str, index: int, offset: int, timeout_ms: int
    ) -> DeleteRecordsResult:
        if self.cluster.is_internal(topic):  # Kafka checks this first, on any broker
            return DeleteRecordsResult(ErrorCode.INVALID_TOPIC_EXCEPTION)
        p = self.cluster.describe_partition(topic, index)
        if p is None:
            return DeleteRecordsResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if p.leader != self.broker_id or not self.cluster.is_alive(self.broker_id):
            return DeleteRecordsResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if offset < HIGH_WATERMARK:
            return DeleteRecordsResult(ErrorCode.OFFSET_OUT_OF_RANGE)
        return await self.cluster.delete_records(
            DeleteRecordsRequest(topic, index, offset, timeout_ms)
        )


UNIT: Final = ListenerUnit(lambda c: DeleteRecordsHandlers(c.shared.cluster, c.broker_id))
