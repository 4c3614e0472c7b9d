"""ConsumerGroupHeartbeat 0-1 and ConsumerGroupDescribe 0-1: the consumer group protocol
of KIP-848 (``group.protocol=consumer``), answered by the
:class:`~purgatory.kafka.coordinator.group_coordinator.GroupCoordinator` (its consumer
groups). Partitions are named by topic id, as in Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, cast, final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.consumer import HeartbeatRequest
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import Assignment
from purgatory.kafka.handlers.member_assignments import (
    NO_AUTHORIZED_OPERATIONS,
    group_not_found,
    heartbeat_fields,
    named_assignment,
)
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import millis, respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        ConsumerGroupDescribeDescribedGroup,
        ConsumerGroupDescribeRequest,
        ConsumerGroupDescribeResponse,
        ConsumerGroupHeartbeatRequest,
        ConsumerGroupHeartbeatResponse,
    )

#: ConsumerGroupDescribe v1's member_type of a member that heartbeats (not a classic one)
_CONSUMER_MEMBER: Final = 1


@final
class ConsumerGroupHandlers:
    """The two KIP-848 handlers over the group coordinator; ``cluster`` names topics by
    id."""

    def __init__(self, coordinator: GroupCoordinator, cluster: Cluster) -> None:
        self.coordinator = coordinator
        self.cluster = cluster

    def apis(self) -> ApiTable:
        return {
            ApiKey.CONSUMER_GROUP_HEARTBEAT: Api(
                *versions(ApiKey.CONSUMER_GROUP_HEARTBEAT), self.consumer_group_heartbeat
            ),
            ApiKey.CONSUMER_GROUP_DESCRIBE: Api(
                *versions(ApiKey.CONSUMER_GROUP_DESCRIBE), self.consumer_group_describe
            ),
        }

    def consumer_group_heartbeat(
        self, header: RequestHeader, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        owned: Assignment | None = None
        if request.topic_partitions is not None:
            # kio reads a zero topic id as None: kept as a key, as ever (it names no topic)
            owned = cast(
                "Assignment", {tp.topic_id: set(tp.partitions) for tp in request.topic_partitions}
            )
        result = self.coordinator.consumer_heartbeat(
            HeartbeatRequest(
                request.group_id,
                request.member_id,
                request.member_epoch,
                header.client_id or "",
                instance_id=request.instance_id,
                rack_id=request.rack_id,
                rebalance_timeout_ms=millis(request.rebalance_timeout),
                topics=request.subscribed_topic_names,
                regex=(  # v1+
                    request.subscribed_topic_regex
                    if hasattr(request, "subscribed_topic_regex")
                    else None
                ),
                assignor=request.server_assignor,
                owned=owned,
            )
        )
        interval = self.coordinator.consumer.heartbeat_interval(request.group_id)
        return respond(request, **heartbeat_fields(result, interval))

    def consumer_group_describe(
        self, header: RequestHeader, request: ConsumerGroupDescribeRequest
    ) -> ConsumerGroupDescribeResponse:
        described: list[ConsumerGroupDescribeDescribedGroup] = []
        for name in request.group_ids:
            group = self.coordinator.consumer_group(name)
            if group is None:
                exists = name in self.coordinator.groups
                described.append({**group_not_found(name, "consumer", exists)})
                continue
            described.append(
                {
                    "group_id": name,
                    "error_code": ErrorCode.NONE,
                    "group_state": group.state(),
                    "group_epoch": group.epoch,
                    "assignment_epoch": group.assignment_epoch,
                    "assignor_name": group.assignor,
                    "authorized_operations": NO_AUTHORIZED_OPERATIONS,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "instance_id": m.instance_id,
                            "rack_id": m.rack_id,
                            "member_epoch": m.epoch,
                            "client_id": m.client_id,
                            "client_host": "",
                            "subscribed_topic_names": list(m.topics),
                            "subscribed_topic_regex": m.regex,
                            "assignment": named_assignment(self.cluster, m.assigned),
                            "target_assignment": named_assignment(
                                self.cluster, group.target.get(m.member_id, {})
                            ),
                            "member_type": _CONSUMER_MEMBER,
                        }
                        for m in group.members.values()
                    ],
                }
            )
        return respond(request, groups=described)


def _topic_ids(cluster: Cluster) -> dict[str, tuple[uuid.UUID, int]]:
    """The cluster's topics the assignors may hand out: name -> (id, partition count)."""
    out = {}
    for name, parts in cluster.topics.items():
        topic_id = cluster.topic_id(name)
        if topic_id is not None and not cluster.is_internal(name):
            out[name] = (topic_id, len(parts))
    return out


def topics_of(cluster: Cluster) -> Callable[[], dict[str, tuple[uuid.UUID, int]]]:
    """``topics`` for a :class:`GroupCoordinator` over ``cluster``."""
    return lambda: _topic_ids(cluster)


UNIT: Final = SharedUnit(lambda s: ConsumerGroupHandlers(s.coordinator, s.cluster))
