"""DescribeProducers (API key 61, version 0): the idempotent producers active on a
partition, from the producer state of the asking broker's replica log, as Kafka's
``Partition.activeProducerState`` answers (KIP-664).

Each producer with state in the log (:mod:`purgatory.sim.producers`: those that wrote
to it, also when DeleteRecords or retention removed their batches): its id, epoch, the
sequence of its last record, its last batch's max timestamp (-1 for a batch not produced
over the Kafka wire, or when a transaction marker at a new epoch is all it wrote since:
sequence -1 then too), the epoch of the transaction coordinator that wrote its last marker
(-1: none), and the offset of the first batch of its ongoing transaction on the partition
(-1: none). Any replica answers from its own log, as in Kafka (admin clients ask the
leader); a broker that hosts no replica of the partition answers NOT_LEADER_OR_FOLLOWER,
an unknown partition or topic UNKNOWN_TOPIC_OR_PARTITION, an invalid topic name
INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.units import ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.record_batches import max_timestamp_of
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster
from purgatory.sim.batches import RecordBatch
from purgatory.sim.errors import SimulationError
from purgatory.sim.validate import check_topic_name

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        DescribeProducersPartitionResponse,
        DescribeProducersProducerState,
        DescribeProducersRequest,
        DescribeProducersResponse,
        DescribeProducersTopicResponse,
    )


@final
class DescribeProducersHandlers:
    """DescribeProducers of broker ``broker_id``."""

    def __init__(self, cluster: Cluster, broker_id: int) -> None:
        self.cluster = cluster
        self.broker_id = broker_id

    def apis(self) -> ApiTable:
        return {
            ApiKey.DESCRIBE_PRODUCERS: Api(
                *versions(ApiKey.DESCRIBE_PRODUCERS), self.describe_producers
            )
        }

    def describe_producers(
        self, header: RequestHeader, request: DescribeProducersRequest
    ) -> DescribeProducersResponse:
        topics: list[DescribeProducersTopicResponse] = []
        for topic in request.topics:
            error: ErrorCode | None = None
            message: str | None = None
            try:
                check_topic_name(topic.name)
            except SimulationError as invalid:
                error, message = invalid.code, invalid.message
            else:
                if topic.name not in self.cluster.topics:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            partitions: list[DescribeProducersPartitionResponse] = [
                {"partition_index": index, "error_code": error, "error_message": message}
                if error is not None
                else self._partition(topic.name, index)
                for index in topic.partition_indexes
            ]
            topics.append({"name": topic.name, "partitions": partitions})
        return respond(request, topics=topics)

    def _partition(self, topic: str, index: int) -> DescribeProducersPartitionResponse:
        p = self.cluster.partition(topic, index)
        if p is None:
            return {"partition_index": index, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        log = p.logs.get(self.broker_id)
        if log is None:
            return {"partition_index": index, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER}
        producers: list[DescribeProducersProducerState] = []
        for active in log.producers.active():
            batch = active.last_batch
            wire = batch.wire if isinstance(batch, RecordBatch) else None
            producers.append(
                {
                    "producer_id": active.producer_id,
                    "producer_epoch": active.epoch,
                    "last_sequence": active.last_sequence,
                    "last_timestamp": -1 if wire is None else max_timestamp_of(wire),
                    "coordinator_epoch": active.coordinator_epoch,
                    "current_txn_start_offset": log.txns.ongoing.get(active.producer_id, -1),
                }
            )
        return {
            "partition_index": index,
            "error_code": ErrorCode.NONE,
            "active_producers": producers,
        }


UNIT: Final = ListenerUnit(lambda c: DescribeProducersHandlers(c.shared.cluster, c.broker_id))
