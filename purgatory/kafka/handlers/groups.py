"""DescribeGroups 0-4 and ListGroups 0-2 (the non-flexible versions): what the group
coordinator and the offset store know of each consumer group.

A group that only committed offsets (consumers that ``assign()`` their partitions) is a
group too, Empty with no protocol type, as in Kafka. Admin clients ask every broker for
ListGroups and merge the answers, so each broker lists only the groups it coordinates
(the broker FindCoordinator names), and each group is listed once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, final

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import Group, GroupState
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim.errors import ErrorCode

#: a group the coordinator does not know (DescribeGroups before v6 answers it NONE)
DEAD: Final = "Dead"
#: "not computed" in DescribeGroups v3+, as Kafka answers when not asked for them
_NO_AUTHORIZED_OPERATIONS: Final = -(2**31)


@final
class GroupHandlers:
    """DescribeGroups and ListGroups as broker ``broker_id`` answers them; ``coordinator_of``
    gives the id of the broker that coordinates a group."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        offsets: OffsetStore,
        broker_id: int,
        coordinator_of: Callable[[str], int],
    ) -> None:
        self.coordinator = coordinator
        self.offsets = offsets
        self.broker_id = broker_id
        self.coordinator_of = coordinator_of

    def apis(self) -> ApiTable:
        return {
            ApiKey.DESCRIBE_GROUPS: Api(0, 4, self.describe_groups),
            ApiKey.LIST_GROUPS: Api(0, 2, self.list_groups),
        }

    def _known(self) -> dict[str, Group | None]:
        """Every group by name: the coordinator's, then those that only committed."""
        known: dict[str, Group | None] = dict(self.coordinator.groups)
        for group in self.offsets.groups():
            known.setdefault(group, None)
        return known

    def describe_groups(self, header: RequestHeader, body: Reader) -> bytearray:
        version = header.api_version
        names = [body.string() for _ in range(body.array_length())]
        if version >= 3:
            body.int8()  # include_authorized_operations: no ACLs here
        known = self._known()
        out = Writer()
        if version >= 1:
            out.int32(0)  # throttle_time_ms
        out.int32(len(names))
        for name in names:
            out.int16(ErrorCode.NONE.wire).string(name)
            if name not in known:
                out.string(DEAD).string("").string("").int32(0)
            else:
                _describe(out, version, known[name])
            if version >= 3:
                out.int32(_NO_AUTHORIZED_OPERATIONS)
        return out.buf

    def list_groups(self, header: RequestHeader, body: Reader) -> bytearray:
        mine = [
            (name, "" if group is None else group.protocol_type)
            for name, group in self._known().items()
            if self.coordinator_of(name) == self.broker_id
        ]
        out = Writer()
        if header.api_version >= 1:
            out.int32(0)  # throttle_time_ms
        out.int16(ErrorCode.NONE.wire).int32(len(mine))
        for name, protocol_type in mine:
            out.string(name).string(protocol_type)
        return out.buf


def _describe(out: Writer, version: int, group: Group | None) -> None:
    """State, protocol type, protocol and members; as Kafka, a member's subscription and
    assignment only once the group is Stable (before, they are being decided)."""
    if group is None:  # offsets committed, never joined
        out.string(GroupState.EMPTY.value).string("").string("").int32(0)
        return
    stable = group.state is GroupState.STABLE
    out.string(group.state.value).string(group.protocol_type)
    out.string(group.protocol if stable else "").int32(len(group.members))
    for member in group.members.values():
        out.string(member.member_id)
        if version >= 4:
            out.string(None)  # group_instance_id: static membership is not kept
        out.string(member.client_id).string("")  # client_host: not kept
        out.nullable_bytes(member.metadata(group.protocol) if stable else b"")
        out.nullable_bytes(member.assignment if stable else b"")
