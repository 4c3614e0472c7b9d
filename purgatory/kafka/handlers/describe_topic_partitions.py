"""DescribeTopicPartitions (API key 75, version 0): Kafka 3.7+'s paginated topic metadata
(KIP-966), which newer admin clients use for ``describe_topics``; answered as Kafka's
``DescribeTopicPartitionsRequestHandler`` and KRaft metadata cache answer it.

Topics are answered in name order from the cursor's topic on (an empty list asks for
every topic), each from the cursor's partition (its own topic) or 0, at most
``response_partition_limit`` partitions in all (at least 1, at most Kafka's
``max.request.partition.size.limit`` default, 2000). Where the limit cuts a topic short,
``next_cursor`` names the next partition; where it runs out exactly at the end of a topic
and another follows, the next topic's partition 0. A topic asked for by name that does not
exist is UNKNOWN_TOPIC_OR_PARTITION (an invalid name INVALID_TOPIC_EXCEPTION), with the
zero topic id; with an empty list unknown topics cannot arise. A cursor whose topic is not
in a non-empty list, or whose partition is negative, fails the whole request with
INVALID_REQUEST for every topic asked, as Kafka does. Each partition: leader (-1 while
offline), leader epoch, replicas, ISR, the replicas on dead brokers as offline; eligible
leader replicas are not kept here (KIP-966's ELR is off, as by default): both lists are
empty. No authorizer runs here, so ``topic_authorized_operations`` keeps its default, as in
the other handlers.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import error_response, respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster
from purgatory.sim.errors import SimulationError
from purgatory.sim.validate import check_topic_name

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        DescribeTopicPartitionsRequest,
        DescribeTopicPartitionsResponse,
        DescribeTopicPartitionsResponseNextCursor,
        DescribeTopicPartitionsResponsePartition,
        DescribeTopicPartitionsResponseTopic,
    )

#: Kafka's ``max.request.partition.size.limit`` default
MAX_PARTITIONS: Final = 2000
_ZERO_ID: Final = uuid.UUID(int=0)


@final
class DescribeTopicPartitionsHandlers:
    """DescribeTopicPartitions over ``cluster``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def apis(self) -> ApiTable:
        return {
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: Api(
                *versions(ApiKey.DESCRIBE_TOPIC_PARTITIONS), self.describe_topic_partitions
            )
        }

    def describe_topic_partitions(
        self, header: RequestHeader, request: DescribeTopicPartitionsRequest
    ) -> DescribeTopicPartitionsResponse:
        cursor = request.cursor
        cursor_topic = "" if cursor is None else cursor.topic_name
        every = not request.topics
        if every:
            names = {name for name in self.cluster.topics if name >= cursor_topic}
        else:
            names = {t.name for t in request.topics if t.name >= cursor_topic}
            if cursor is not None and cursor.topic_name not in names:
                return error_response(request, ErrorCode.INVALID_REQUEST)
        if cursor is not None and cursor.partition_index < 0:
            return error_response(request, ErrorCode.INVALID_REQUEST)
        remaining = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
        topics: list[DescribeTopicPartitionsResponseTopic] = []
        next_cursor: DescribeTopicPartitionsResponseNextCursor | None = None
        for name in sorted(names):
            if remaining == 0:
                # the previous topic was answered in full: go on at this one's start
                next_cursor = {"topic_name": name, "partition_index": 0}
                break
            parts = self.cluster.topics.get(name)
            if parts is None:
                if not every:
                    topics.append(_unknown(name))
                continue
            start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
            upper = min(len(parts), start + remaining)
            alive = self.cluster.is_alive
            partitions: list[DescribeTopicPartitionsResponsePartition] = [
                {
                    "error_code": ErrorCode.NONE,
                    "partition_index": p.index,
                    "leader_id": -1 if p.leader is None else p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replica_nodes": list(p.replicas),
                    "isr_nodes": sorted(p.isr),
                    "eligible_leader_replicas": [],
                    "last_known_elr": [],
                    "offline_replicas": [b for b in p.replicas if not alive(b)],
                }
                for p in parts[start:upper]
            ]
            topics.append(
                {
                    "error_code": ErrorCode.NONE,
                    "name": name,
                    "topic_id": self.cluster.topic_id(name),
                    "is_internal": False,
                    "partitions": partitions,
                }
            )
            if upper < len(parts):
                next_cursor = {"topic_name": name, "partition_index": upper}
                break
            remaining -= len(partitions)
        return respond(request, topics=topics, next_cursor=next_cursor)


def _unknown(name: str) -> DescribeTopicPartitionsResponseTopic:
    try:
        check_topic_name(name)
    except SimulationError as invalid:
        error = invalid.code
    else:
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return {"error_code": error, "name": name, "topic_id": _ZERO_ID, "is_internal": False}


UNIT: Final = SharedUnit(lambda s: DescribeTopicPartitionsHandlers(s.cluster))
