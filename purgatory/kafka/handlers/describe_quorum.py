"""DescribeQuorum (API key 55, versions 0-2): the KRaft quorum of the cluster metadata log
(``__cluster_metadata`` partition 0), answered for the simulated controller as Kafka's
``KafkaRaftClient`` answers it (a broker forwards the request to the controller).

The simulation has one controller, on the lowest live broker (the one DescribeCluster and
Metadata name): the quorum is that single voter, its leader. Each change the controller
publishes (topics, leaders, ISRs, liveness) is a record of the metadata log, so the high
watermark is the number published so far, and the voter's log end offset with it. The
leader epoch starts at 1 and goes up each time the controller is found on another broker
(it moves when its broker crashes). The other live brokers are the observers, caught up
(they read the metadata in process). Timestamps (v1+) are now for the leader, as in
Kafka, and for the observers (they fetch all the time); directory ids (v2+) are the zero
id (none kept); ``nodes`` (v2+) gives the voter's listener at its broker's address.
Anything but exactly ``__cluster_metadata`` partition 0 is UNKNOWN_TOPIC_OR_PARTITION on
each partition asked, as Kafka answers it.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        DescribeQuorumNode,
        DescribeQuorumRequest,
        DescribeQuorumResponse,
        DescribeQuorumResponseTopics,
        DescribeQuorumResponseTopicsPartitions,
        DescribeQuorumResponseTopicsPartitionsCurrentVoters,
    )

METADATA_TOPIC: Final = "__cluster_metadata"
_NO_DIRECTORY: Final = uuid.UUID(int=0)
#: Kafka's message for UNKNOWN_TOPIC_OR_PARTITION (``Errors.message()``)
_UNKNOWN_MESSAGE: Final = "This server does not host this topic-partition."


@final
class DescribeQuorumHandlers:
    """DescribeQuorum over ``cluster``; ``addresses``: broker id -> (host, port) as the
    front door advertises them."""

    def __init__(self, cluster: Cluster, addresses: dict[int, tuple[str, int]]) -> None:
        self.cluster = cluster
        self.addresses = addresses
        self._leader: int | None = None
        self._epoch = 0

    def apis(self) -> ApiTable:
        return {
            ApiKey.DESCRIBE_QUORUM: Api(*versions(ApiKey.DESCRIBE_QUORUM), self.describe_quorum)
        }

    def describe_quorum(
        self, header: RequestHeader, request: DescribeQuorumRequest
    ) -> DescribeQuorumResponse:
        if not _asks_for_the_metadata_log(request):
            return respond(request, error_code=ErrorCode.NONE, topics=_unknown(request))
        leader = self.cluster.controller.active_broker
        if leader is None:  # every broker is down: no quorum to describe
            return respond(request, error_code=ErrorCode.NONE, topics=_leaderless())
        if leader != self._leader:
            self._leader = leader
            self._epoch += 1
        high_watermark = self.cluster.controller.metadata.version
        now = int(time.time() * 1000)
        observers = [
            b for b in sorted(self.cluster.brokers) if b != leader and self.cluster.is_alive(b)
        ]
        partition: DescribeQuorumResponseTopicsPartitions = {
            "partition_index": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "leader_id": leader,
            "leader_epoch": self._epoch,
            "high_watermark": high_watermark,
            "current_voters": [_replica(leader, high_watermark, now)],
            "observers": [_replica(b, high_watermark, now) for b in observers],
        }
        return respond(
            request,
            error_code=ErrorCode.NONE,
            error_message=None,
            topics=[{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
            nodes=_nodes(leader, self.addresses),
        )


def _asks_for_the_metadata_log(request: DescribeQuorumRequest) -> bool:
    """Whether the request names exactly ``__cluster_metadata`` partition 0."""
    topics = request.topics
    return (
        len(topics) == 1
        and topics[0].topic_name == METADATA_TOPIC
        and len(topics[0].partitions) == 1
        and topics[0].partitions[0].partition_index == 0
    )


def _unknown(request: DescribeQuorumRequest) -> list[DescribeQuorumResponseTopics]:
    """Every partition asked for, UNKNOWN_TOPIC_OR_PARTITION."""
    return [
        {
            "topic_name": t.topic_name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "error_message": _UNKNOWN_MESSAGE,
                }
                for p in t.partitions
            ],
        }
        for t in request.topics
    ]


def _leaderless() -> list[DescribeQuorumResponseTopics]:
    """The answer's topics when no broker is up to lead the quorum."""
    return [
        {
            "topic_name": METADATA_TOPIC,
            "partitions": [
                {
                    "partition_index": 0,
                    "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    "leader_id": -1,
                    "leader_epoch": -1,
                    "high_watermark": -1,
                }
            ],
        }
    ]


def _replica(
    broker: int, high_watermark: int, now: int
) -> DescribeQuorumResponseTopicsPartitionsCurrentVoters:
    """A voter or observer of the quorum, caught up to ``high_watermark`` as of ``now``."""
    return {
        "replica_id": broker,
        "replica_directory_id": _NO_DIRECTORY,
        "log_end_offset": high_watermark,
        "last_fetch_timestamp": now,
        "last_caught_up_timestamp": now,
    }


def _nodes(leader: int, addresses: dict[int, tuple[str, int]]) -> list[DescribeQuorumNode]:
    """The voter's listener (v2+), at its broker's address if it has one."""
    if leader not in addresses:
        return []
    host, port = addresses[leader]
    return [{"node_id": leader, "listeners": [{"name": "PLAINTEXT", "host": host, "port": port}]}]


# one for every broker: the quorum's leader and epoch are the same whichever is asked
UNIT: Final = SharedUnit(lambda s: DescribeQuorumHandlers(s.cluster, s.addresses))
