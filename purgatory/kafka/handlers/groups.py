"""DescribeGroups 0-6 and ListGroups 0-5 (every version Kafka 4.x has, the flexible ones
included): what the group coordinator and the offset store know of each consumer group.

A group that only committed offsets (consumers that ``assign()`` their partitions) is a
group too, Empty with no protocol type, as in Kafka. Admin clients ask every broker for
ListGroups and merge the answers, so each broker lists only the groups it coordinates
(the broker FindCoordinator names), and each group is listed once.

As Kafka 4.x answers them: DescribeGroups v6+ answers a group nobody knows
GROUP_ID_NOT_FOUND with a message (before v6: no error, state Dead); ListGroups v4+
names each group's state and takes a filter of states, v5+ its type (``classic`` or
``consumer``, KIP-848's) and a filter of types, both filters case-insensitive.
DescribeGroups describes classic groups only (a consumer group is not found), as Kafka's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import ClassicGroup, GroupState
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.offsets_topic import OffsetsTopic
from purgatory.kafka.handlers.member_assignments import NO_AUTHORIZED_OPERATIONS
from purgatory.kafka.handlers.units import ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        DescribeGroupsDescribedGroup,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        ListGroupsListedGroup,
        ListGroupsRequest,
        ListGroupsResponse,
    )

#: a group the coordinator does not know (DescribeGroups before v6 answers it NONE)
DEAD: Final = "Dead"


@final
class GroupHandlers:
    """DescribeGroups and ListGroups as broker ``broker_id`` answers them; ListGroups lists
    the groups it coordinates (it leads their partition of ``offsets_topic``)."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        offsets: OffsetStore,
        broker_id: int,
        offsets_topic: OffsetsTopic,
    ) -> None:
        self.coordinator = coordinator
        self.offsets = offsets
        self.broker_id = broker_id
        self.offsets_topic = offsets_topic

    def apis(self) -> ApiTable:
        return {
            ApiKey.DESCRIBE_GROUPS: Api(*versions(ApiKey.DESCRIBE_GROUPS), self.describe_groups),
            ApiKey.LIST_GROUPS: Api(*versions(ApiKey.LIST_GROUPS), self.list_groups),
        }

    def describe_groups(
        self, header: RequestHeader, request: DescribeGroupsRequest
    ) -> DescribeGroupsResponse:
        described: list[DescribeGroupsDescribedGroup] = []
        for name in request.groups:
            group = self.coordinator.describe(name, self.offsets)
            if group is not None:
                described.append({"group_id": name, **_describe(group)})
            elif header.api_version >= 6:
                described.append(
                    {
                        "group_id": name,
                        "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
                        "error_message": f"Group {name} not found.",
                    }
                )
            else:
                described.append({"group_id": name, "group_state": DEAD})
        for answer in described:  # no ACLs here: not computed, whether asked or not
            answer["authorized_operations"] = NO_AUTHORIZED_OPERATIONS
        return respond(request, groups=described)

    async def list_groups(
        self, header: RequestHeader, request: ListGroupsRequest
    ) -> ListGroupsResponse:
        states: set[str] = set()
        types: set[str] = set()
        if hasattr(request, "states_filter"):  # v4+
            states = {s.strip().lower() for s in request.states_filter}
        if hasattr(request, "types_filter"):  # v5+
            types = {t.strip().lower() for t in request.types_filter}
        every = self.coordinator.listings(self.offsets)
        if every:  # a group lives in __consumer_offsets
            await self.offsets_topic.ensure()
        listed: list[ListGroupsListedGroup] = [
            {
                "group_id": group.group_id,
                "protocol_type": group.protocol_type,
                "group_state": group.state,
                "group_type": group.type,
            }
            for group in every
            if self.offsets_topic.coordinator(group.group_id) == self.broker_id
            and not (states and group.state.lower() not in states)
            and not (types and group.type not in types)
        ]
        return respond(request, error_code=ErrorCode.NONE, groups=listed)


def _describe(group: ClassicGroup) -> DescribeGroupsDescribedGroup:
    """State, protocol type, protocol and members; as Kafka, a member's subscription and
    assignment only once the group is Stable (before, they are being decided)."""
    stable = group.state is GroupState.STABLE
    return {
        "group_state": group.state.value,
        "protocol_type": group.protocol_type,
        "protocol_data": group.protocol if stable else "",
        "members": [
            {
                "member_id": member.member_id,
                "group_instance_id": member.instance_id,
                "client_id": member.client_id,
                "client_host": "",  # not kept
                "member_metadata": member.metadata(group.protocol) if stable else b"",
                "member_assignment": member.assignment if stable else b"",
            }
            for member in group.members.values()
        ],
    }


UNIT: Final = ListenerUnit(
    lambda c: GroupHandlers(
        c.shared.coordinator, c.shared.offsets, c.broker_id, c.shared.offsets_topic
    )
)
