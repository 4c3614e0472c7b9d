"""DescribeGroups 0-6 and ListGroups 0-5 (every version Kafka 4.x has, the flexible ones
included): what the group coordinator and the offset store know of each consumer group.

A group that only committed offsets (consumers that ``assign()`` their partitions) is a
group too, Empty with no protocol type, as in Kafka. Admin clients ask every broker for
ListGroups and merge the answers, so each broker lists only the groups it coordinates
(the broker FindCoordinator names), and each group is listed once.

As Kafka 4.x answers them: DescribeGroups v6+ answers a group nobody knows
GROUP_ID_NOT_FOUND with a message (before v6: no error, state Dead); ListGroups v4+
names each group's state and takes a filter of states, v5+ its type (every group here is
a ``classic`` one) and a filter of types, both filters case-insensitive.
"""

from __future__ import annotations

from typing import Any, Final, final

from purgatory.kafka.coordinator.consumer_groups import ConsumerGroup
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import Group, GroupState
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.offsets_topic import OffsetsTopic
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim.errors import ErrorCode

#: a group the coordinator does not know (DescribeGroups before v6 answers it NONE)
DEAD: Final = "Dead"
#: the type of a group of Kafka's classic group protocol (JoinGroup/SyncGroup)
CLASSIC: Final = "classic"
#: the type (and protocol type) of a KIP-848 group (ConsumerGroupHeartbeat)
CONSUMER: Final = "consumer"
#: "not computed" in DescribeGroups v3+, as Kafka answers when not asked for them
_NO_AUTHORIZED_OPERATIONS: Final = -(2**31)


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

    def _known(self) -> dict[str, Group | None]:
        """Every classic group by name: the coordinator's, then those that only committed
        (a KIP-848 group's committed offsets are its own)."""
        known: dict[str, Group | None] = dict(self.coordinator.groups)
        for group in self.offsets.groups():
            if group not in self._consumer_groups():
                known.setdefault(group, None)
        return known

    def _consumer_groups(self) -> dict[str, ConsumerGroup]:
        consumer = self.coordinator.consumer_groups
        return {} if consumer is None else consumer.groups

    def describe_groups(self, header: RequestHeader, request: Any) -> Any:
        known = self._known()
        described = []
        for name in request.groups:
            if name in known:
                described.append({"group_id": name, **_describe(known[name])})
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
        for group in described:  # no ACLs here: not computed, whether asked or not
            group["authorized_operations"] = _NO_AUTHORIZED_OPERATIONS
        return respond(request, groups=described)

    async def list_groups(self, header: RequestHeader, request: Any) -> Any:
        version = header.api_version
        states = {s.strip().lower() for s in request.states_filter} if version >= 4 else set()
        types = {t.strip().lower() for t in request.types_filter} if version >= 5 else set()
        known = self._known()
        if known or self._consumer_groups():  # a group lives in __consumer_offsets
            await self.offsets_topic.ensure()
        listed = []
        for name, group in known.items():
            if self.offsets_topic.coordinator(name) != self.broker_id:
                continue
            state = GroupState.EMPTY if group is None else group.state
            if (states and state.value.lower() not in states) or (types and CLASSIC not in types):
                continue
            listed.append(
                {
                    "group_id": name,
                    "protocol_type": "" if group is None else group.protocol_type,
                    "group_state": state.value,
                    "group_type": CLASSIC,
                }
            )
        for name, consumer in self._consumer_groups().items():  # KIP-848's, type "consumer"
            if self.offsets_topic.coordinator(name) != self.broker_id:
                continue
            state_name = consumer.state()
            if (states and state_name.lower() not in states) or (types and CONSUMER not in types):
                continue
            listed.append(
                {
                    "group_id": name,
                    "protocol_type": CONSUMER,
                    "group_state": state_name,
                    "group_type": CONSUMER,
                }
            )
        return respond(request, error_code=ErrorCode.NONE, groups=listed)


def _describe(group: Group | None) -> dict[str, Any]:
    """State, protocol type, protocol and members; as Kafka, a member's subscription and
    assignment only once the group is Stable (before, they are being decided)."""
    if group is None:  # offsets committed, never joined
        return {"group_state": GroupState.EMPTY.value, "protocol_type": "", "protocol_data": ""}
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
