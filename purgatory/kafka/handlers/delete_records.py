"""DeleteRecords 0-1 (the non-flexible versions): an admin client moves partitions' log
start forward, and each answer waits in the leader's DeleteRecords purgatory (Kafka's
DelayedDeleteRecords) until every live replica's log start has passed the offset.

Sent to each partition's leader, as Kafka's admin clients do; another broker answers
NOT_LEADER_OR_FOLLOWER. Offset -1 means the high watermark; another negative offset or
one above the high watermark is OFFSET_OUT_OF_RANGE; one at or below the log start
deletes nothing and is answered at once, as by Kafka.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Final, final

from purgatory.kafka.codec import DecodeError, Reader, Writer
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster, DeleteRecordsRequest, DeleteRecordsResult
from purgatory.sim.errors import ErrorCode

#: DeleteRecords' "up to the high watermark"
HIGH_WATERMARK: Final = -1


@final
class DeleteRecordsHandlers:
    """The DeleteRecords handler of simulated broker ``broker_id``."""

    def __init__(self, cluster: Cluster, broker_id: int) -> None:
        self.cluster = cluster
        self.broker_id = broker_id

    def apis(self) -> ApiTable:
        return {ApiKey.DELETE_RECORDS: Api(0, 1, self.delete_records)}

    def delete_records(self, header: RequestHeader, body: Reader) -> Awaitable[bytearray]:
        # A partition named twice keeps its last offset, as Kafka reads the request.
        wanted: dict[tuple[str, int], int] = {}
        for _ in range(body.array_length()):
            topic = body.string()
            for _ in range(body.array_length()):
                index = body.int32()
                wanted[topic, index] = body.int64()
        timeout_ms = body.int32()
        if timeout_ms < 0:
            raise DecodeError(f"negative timeout {timeout_ms}")
        return self._delete_all(wanted, timeout_ms)

    async def _delete_all(self, wanted: dict[tuple[str, int], int], timeout_ms: int) -> bytearray:
        results = await asyncio.gather(
            *(
                self._delete(topic, index, offset, timeout_ms)
                for (topic, index), offset in wanted.items()
            )
        )
        by_topic: dict[str, list[tuple[int, DeleteRecordsResult]]] = {}
        for (topic, index), result in zip(wanted, results, strict=True):
            by_topic.setdefault(topic, []).append((index, result))
        out = Writer().int32(0).int32(len(by_topic))  # throttle_time_ms
        for topic, answers in by_topic.items():
            out.string(topic).int32(len(answers))
            for index, result in answers:
                out.int32(index).int64(result.low_watermark).int16(result.error.wire)
        return out.buf

    async def _delete(
        self, topic: str, index: int, offset: int, timeout_ms: int
    ) -> DeleteRecordsResult:
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
