"""What the modern groups' APIs share on the wire: ConsumerGroupHeartbeat (KIP-848) and
ShareGroupHeartbeat (KIP-932) answer a heartbeat alike, and their Describe APIs name a
member's partitions alike (by topic id and name) and a group they do not find alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.groups import Assignment, HeartbeatResult
from purgatory.sim import Cluster

if TYPE_CHECKING:
    from typing import TypedDict

    from purgatory.kafka.messages import (
        ConsumerGroupDescribeResponseGroupsMembersAssignment,
        ConsumerGroupHeartbeatAssignment,
        ConsumerGroupHeartbeatResponseFields,
    )

    class GroupNotFound(TypedDict):
        """The fields both Describe APIs' group entries share: each takes it as ``{**it}``."""

        group_id: str
        error_code: ErrorCode
        error_message: str
        group_state: str
        group_epoch: int
        assignment_epoch: int
        assignor_name: str
        members: tuple[()]
        authorized_operations: int


#: a described group's authorized operations "not computed": no authorizer runs here (the
#: authorization table fills them in when asked)
NO_AUTHORIZED_OPERATIONS: Final = -(2**31)


def heartbeat_fields(
    result: HeartbeatResult, interval_ms: int
) -> ConsumerGroupHeartbeatResponseFields:
    """The answer to a consumer or share group heartbeat (the two APIs' answers have the
    same fields): the member's epoch, the interval it is told, and its assignment when it
    changed (None: unchanged)."""
    assignment: ConsumerGroupHeartbeatAssignment | None = None
    if result.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": sorted(parts)}
                for topic_id, parts in sorted(result.assignment.items())
            ]
        }
    return {
        "error_code": result.error,
        "error_message": result.message,
        "member_id": result.member_id,
        "member_epoch": result.epoch,
        "heartbeat_interval": interval_ms,
        "assignment": assignment,
    }


def named_assignment(
    cluster: Cluster, assignment: Assignment
) -> ConsumerGroupDescribeResponseGroupsMembersAssignment:
    """A member's partitions as the Describe APIs give them: by topic id and name (the
    consumer and share groups' assignments and target assignments have the same fields)."""
    return {
        "topic_partitions": [
            {
                "topic_id": topic_id,
                "topic_name": cluster.topic_name(topic_id) or "",
                "partitions": sorted(parts),
            }
            for topic_id, parts in sorted(assignment.items())
        ]
    }


def group_not_found(group_id: str, kind: str, exists: bool) -> GroupNotFound:
    """A ``kind`` group Describe API's entry for a group it does not find (``exists``: one
    of another type), as Kafka's coordinator answers it: GROUP_ID_NOT_FOUND with its
    message, Dead, no epochs."""
    what = f"is not a {kind} group" if exists else "not found"
    return {
        "group_id": group_id,
        "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
        "error_message": f"Group {group_id} {what}.",
        "group_state": "Dead",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": (),
        "authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }
