"""ListOffsets 1-11 and OffsetForLeaderEpoch 2-4: where in a partition's log a time, an
end or an epoch falls, answered by its leader from the batches it keeps (their headers
only, but for a search by timestamp inside the batch that holds it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.leadership import leads
from purgatory.kafka.handlers.units import ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.record_batches import WireBatch, max_timestamp_of
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.kafka.wire_errors import DecodeError
from purgatory.sim import Cluster
from purgatory.sim.batches import RecordBatch
from purgatory.sim.messages import READ_COMMITTED, READ_UNCOMMITTED

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        ListOffsetsPartitionResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
        ListOffsetsTopicResponse,
        OffsetForLeaderEpochEpochEndOffset,
        OffsetForLeaderEpochOffsetForLeaderTopicResult,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
    )

EARLIEST: Final = -2
LATEST: Final = -1
#: ListOffsets v7+: the record with the largest timestamp (KIP-734)
MAX_TIMESTAMP: Final = -3
#: ListOffsets v8+: the first offset on local storage (KIP-405); all of it is local here
EARLIEST_LOCAL: Final = -4


@final
@dataclass(frozen=True, eq=False)
class LogOffsetHandlers:
    """ListOffsets and OffsetForLeaderEpoch of simulated broker ``broker_id``."""

    cluster: Cluster
    broker_id: int

    def apis(self) -> ApiTable:
        return {
            ApiKey.LIST_OFFSETS: Api(*versions(ApiKey.LIST_OFFSETS), self.list_offsets),
            ApiKey.OFFSET_FOR_LEADER_EPOCH: Api(
                *versions(ApiKey.OFFSET_FOR_LEADER_EPOCH), self.offset_for_leader_epoch
            ),
        }

    # -- ListOffsets ---------------------------------------------------------------------

    def list_offsets(
        self, header: RequestHeader, request: ListOffsetsRequest
    ) -> ListOffsetsResponse:
        # v2+: read_committed (1) answers LATEST with the last stable offset, and
        # searches by time below it (Kafka's lastFetchableOffset)
        isolation = (
            int(request.isolation_level)
            if hasattr(request, "isolation_level")
            else READ_UNCOMMITTED
        )
        if isolation not in (READ_UNCOMMITTED, READ_COMMITTED):
            raise DecodeError(f"list offsets isolation_level {isolation}")
        committed = isolation == READ_COMMITTED
        topics: list[ListOffsetsTopicResponse] = []
        for topic in request.topics:
            partitions: list[ListOffsetsPartitionResponse] = []
            for part in topic.partitions:
                error, found_at, offset, epoch = self._offset_for(
                    topic.name, int(part.partition_index), int(part.timestamp), committed
                )
                partitions.append(
                    {
                        "partition_index": part.partition_index,
                        "error_code": error,
                        "timestamp": found_at,
                        "offset": offset,
                        "leader_epoch": epoch,
                    }
                )
            topics.append({"name": topic.name, "partitions": partitions})
        return respond(request, topics=topics)

    # -- OffsetForLeaderEpoch ------------------------------------------------------------

    def offset_for_leader_epoch(
        self, header: RequestHeader, request: OffsetForLeaderEpochRequest
    ) -> OffsetForLeaderEpochResponse:
        """Where each asked epoch ended (KIP-101, KIP-320): consumers detect a log
        truncated by an unclean election by comparing it with their position."""
        topics: list[OffsetForLeaderEpochOffsetForLeaderTopicResult] = []
        for topic in request.topics:
            partitions: list[OffsetForLeaderEpochEpochEndOffset] = []
            for part in topic.partitions:
                error, p = leads(self.cluster, self.broker_id, topic.topic, int(part.partition))
                answer: OffsetForLeaderEpochEpochEndOffset = {
                    "partition": part.partition,
                    "error_code": error,
                }
                # v2+
                current = (
                    int(part.current_leader_epoch) if hasattr(part, "current_leader_epoch") else -1
                )
                if error is ErrorCode.NONE and p is not None:
                    if current >= 0 and current != p.leader_epoch:
                        stale = current < p.leader_epoch
                        answer["error_code"] = (
                            ErrorCode.FENCED_LEADER_EPOCH
                            if stale
                            else ErrorCode.UNKNOWN_LEADER_EPOCH
                        )
                    else:
                        batches = self.cluster.stored_batches(
                            topic.topic, p.partition, p.log_start_offset, p.log_end_offset
                        )
                        epoch, end = _epoch_end(
                            batches, int(part.leader_epoch), p.leader_epoch, p.log_end_offset
                        )
                        answer["leader_epoch"] = epoch
                        answer["end_offset"] = end
                partitions.append(answer)
            topics.append({"topic": topic.topic, "partitions": partitions})
        return respond(request, topics=topics)

    def _offset_for(
        self, topic: str, index: int, timestamp: int, committed: bool = False
    ) -> tuple[ErrorCode, int, int, int]:
        """(error, timestamp found, offset, leader epoch) for one partition; ``committed``:
        read_committed, which reads up to the last stable offset instead of the HW."""
        error, p = leads(self.cluster, self.broker_id, topic, index)
        if error is not ErrorCode.NONE:
            return error, -1, -1, -1
        if p is None or p.leader is None:
            return ErrorCode.LEADER_NOT_AVAILABLE, -1, -1, -1
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return ErrorCode.NONE, -1, p.log_start_offset, p.leader_epoch
        end = p.high_watermark
        if committed:
            partition = self.cluster.partition(topic, index)
            end = end if partition is None else partition.last_stable_offset()
        if timestamp == LATEST:
            return ErrorCode.NONE, -1, end, p.leader_epoch
        batches = self.cluster.stored_batches(topic, index, p.log_start_offset, end)
        if timestamp == MAX_TIMESTAMP:
            found = _largest_timestamp(batches, p.log_start_offset, end)
        elif timestamp < 0:
            # -5 (latest tiered) and -6 (earliest pending upload): nothing is tiered
            # here, and Kafka answers those with no offset when nothing is
            return ErrorCode.NONE, -1, -1, p.leader_epoch
        else:
            found = _first_at_or_after(batches, timestamp, p.log_start_offset, end)
        if found is None:  # nothing that late: Kafka answers no offset, not an error
            return ErrorCode.NONE, -1, -1, p.leader_epoch
        return ErrorCode.NONE, *found


def _epoch_end(
    batches: list[RecordBatch], epoch: int, current_epoch: int, end: int
) -> tuple[int, int]:
    """(the largest epoch at or below ``epoch``, the offset where it ended), as Kafka's
    leader epoch cache answers it: the start of the first later epoch, or the log end for
    the current one; (-1, -1) for an epoch older than every batch kept."""
    if epoch >= current_epoch:
        return current_epoch, end
    known = -1
    for batch in batches:
        if batch.epoch > epoch:
            return (known, batch.base_offset) if known >= 0 else (-1, -1)
        known = batch.epoch
    return (known, end) if known >= 0 else (current_epoch, end)


def _largest_timestamp(
    batches: list[RecordBatch], start: int, end: int
) -> tuple[int, int, int] | None:
    """(timestamp, offset, epoch) of the first record in ``[start, end)`` with the largest
    timestamp, as Kafka's ListOffsets answers MAX_TIMESTAMP (KIP-734)."""
    best: tuple[int, int, int] | None = None
    for batch in batches:
        if batch.wire is None:
            continue
        for record in WireBatch(batch.wire).records():
            if start <= record.offset < end and (best is None or record.timestamp > best[0]):
                best = (record.timestamp, record.offset, batch.epoch)
    return best


def _first_at_or_after(
    batches: list[RecordBatch], timestamp: int, start: int, end: int
) -> tuple[int, int, int] | None:
    """(timestamp, offset, epoch) of the first record in ``[start, end)`` stamped at or
    after ``timestamp``, as Kafka finds it: the first batch whose max timestamp (read
    from its header, no record decoded) reaches it, then that batch's records. Batches
    written over HTTP carry no producer timestamp and are never found."""
    for batch in batches:
        if batch.wire is None or max_timestamp_of(batch.wire) < timestamp:
            continue
        for record in WireBatch(batch.wire).records():
            if start <= record.offset < end and record.timestamp >= timestamp:
                return record.timestamp, record.offset, batch.epoch
    return None


UNIT: Final = ListenerUnit(lambda c: LogOffsetHandlers(c.shared.cluster, c.broker_id))
