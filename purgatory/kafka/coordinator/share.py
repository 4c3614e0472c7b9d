"""Share groups of KIP-932 (Kafka 4.2's queues) as Kafka's group coordinator runs them, in
memory: the members heartbeat (ShareGroupHeartbeat) and the coordinator assigns the
partitions itself, as Kafka's ``SimpleAssignor`` does for share groups: every subscribed
partition goes to at least one member, and a partition may go to several members (the
records, not the partitions, are what the members share: each record is acquired by one
member at a time, :mod:`.share_partitions`).

The assignment here: the members (by id) take the partitions (by topic and index) in
turn, each partition to the subscribed member with the fewest so far; then a member left
with none takes the partition of its topics that has the fewest members. With more
partitions than members every partition has one member; with more members than
partitions every member has one partition, and the partitions are shared evenly.

A share group has no revocation: a member is told its new assignment at its next
heartbeat and moves to the group's epoch at once (a record it holds stays acquired until
it is acknowledged or its lock expires). A member's session ends when it stops
heartbeating for ``session_timeout_ms`` (``group.share.session.timeout.ms``); a group
takes at most ``max_size`` members (``group.share.max.size``).

:class:`ShareProtocol` acts on the share group it is given; the
:class:`~purgatory.kafka.coordinator.group_coordinator.GroupCoordinator` owns the groups.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.group_configs import GroupConfig
from purgatory.kafka.coordinator.groups import Assignment, HeartbeatResult

#: the type of a KIP-932 group (ShareGroupHeartbeat), as ListGroups names it
SHARE: Final = "share"
#: the one assignor of share groups (ShareGroupDescribe's assignor_name)
SIMPLE: Final = "simple"
#: a member epoch: join (0), leave (-1)
JOIN: Final = 0
LEAVE: Final = -1


@final
@dataclass(eq=False, slots=True)
class ShareMember:
    member_id: str
    client_id: str
    epoch: int = 0
    rack_id: str | None = None
    topics: tuple[str, ...] = ()
    assigned: Assignment = field(default_factory=dict)
    #: the assignment last sent, to send it again only when it changed
    sent: Assignment | None = None
    session: asyncio.TimerHandle | None = None


@final
@dataclass(eq=False, slots=True)
class ShareGroup:
    type: ClassVar[str] = SHARE
    name: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)

    def state(self) -> str:
        """Kafka's ShareGroup states, as ListGroups and ShareGroupDescribe name them."""
        return "Stable" if self.members else "Empty"


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    """A ShareGroupHeartbeat as the protocol takes it: None where the member sends
    nothing new."""

    group_id: str
    member_id: str
    epoch: int
    client_id: str
    rack_id: str | None = None
    topics: Sequence[str] | None = None


@final
class ShareProtocol:
    """ShareGroupHeartbeat on the share group each is given. ``topics`` gives the
    cluster's topics (name -> (id, partition count)) at each assignment;
    ``removed(group_id, member_id)`` is told of every member that leaves or whose session
    ends (its share sessions go and the records it holds are released)."""

    def __init__(
        self,
        topics: Callable[[], Mapping[str, tuple[uuid.UUID, int]]],
        *,
        heartbeat_interval_ms: int = 5_000,
        session_timeout_ms: int = 45_000,
        max_size: int = 200,
        removed: Callable[[str, str], None] | None = None,
        group_config: Callable[[str], GroupConfig] | None = None,
    ) -> None:
        self.topics = topics
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.max_size = max_size
        self.removed = removed
        self._group_config = group_config

    def heartbeat_interval(self, group: str) -> int:
        """The heartbeat interval group ``group``'s members are told: its
        ``share.heartbeat.interval.ms``, else the broker's."""
        if self._group_config is None:
            return self.heartbeat_interval_ms
        return self._group_config(group).number("share.heartbeat.interval.ms")

    def session_timeout(self, group: str) -> int:
        """How long a member of group ``group`` may stay silent: its
        ``share.session.timeout.ms``, else the broker's."""
        if self._group_config is None:
            return self.session_timeout_ms
        return self._group_config(group).number("share.session.timeout.ms")

    @staticmethod
    def close(group: ShareGroup) -> None:
        for member in group.members.values():
            if member.session is not None:
                member.session.cancel()

    @staticmethod
    def refusal(request: ShareHeartbeatRequest) -> HeartbeatResult | None:
        """Why a heartbeat is refused whatever the group (Kafka's
        throwIfShareGroupHeartbeatRequestIsInvalid); None: the group decides."""
        if not request.group_id:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, message="GroupId can't be empty.")
        if not request.member_id:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, message="MemberId can't be empty.")
        if request.epoch == JOIN and not request.topics:
            return HeartbeatResult(
                ErrorCode.INVALID_REQUEST,
                message="SubscribedTopicNames must be set in first request.",
            )
        if request.epoch < LEAVE:
            return HeartbeatResult(
                ErrorCode.INVALID_REQUEST,
                message=f"MemberEpoch is {request.epoch}, but must be greater than or equal to -1.",
            )
        return None

    def leave(self, group: ShareGroup, member_id: str) -> HeartbeatResult:
        """A heartbeat with epoch -1: the member leaves."""
        member = group.members.get(member_id)
        if member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
        self._remove(group, member)
        return HeartbeatResult(ErrorCode.NONE, member_id, LEAVE)

    def heartbeat(self, group: ShareGroup, request: ShareHeartbeatRequest) -> HeartbeatResult:
        """One ShareGroupHeartbeat to ``group`` (:meth:`refusal` passed), answered at
        once."""
        epoch = request.epoch
        member = group.members.get(request.member_id)
        if member is None:
            if epoch != JOIN:
                return HeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    message=f"Member {request.member_id} is not a member of group {group.name}.",
                )
            if len(group.members) >= self.max_size:
                return HeartbeatResult(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    message=f"The share group has reached its maximum capacity of "
                    f"{self.max_size} members.",
                )
            member = ShareMember(request.member_id, request.client_id)
            member.topics = tuple(request.topics or ())
            group.members[member.member_id] = member
            group.epoch += 1
        elif epoch == JOIN:
            member.sent = None  # a member that lost its state rejoins: tell it again
        elif epoch != member.epoch:
            return HeartbeatResult(
                ErrorCode.FENCED_MEMBER_EPOCH,
                message=f"The share group member has epoch {epoch}, the coordinator "
                f"{member.epoch}.",
            )
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.topics is not None and tuple(request.topics) != member.topics:
            member.topics = tuple(request.topics)
            group.epoch += 1
        self._session(group, member)
        if group.assignment_epoch != group.epoch or self._topics_changed(group):
            self._assign(group)
        member.assigned = _copy(group.target.get(member.member_id, {}))
        member.epoch = group.assignment_epoch
        answer: Assignment | None = None
        if member.sent is None or member.sent != member.assigned:
            answer = member.sent = _copy(member.assigned)
        return HeartbeatResult(ErrorCode.NONE, member.member_id, member.epoch, answer)

    # -- assigning --------------------------------------------------------------------------

    def subscribed_topics(self, group: ShareGroup) -> frozenset[str]:
        cluster = self.topics()
        return frozenset(t for m in group.members.values() for t in m.topics if t in cluster)

    def _topics_changed(self, group: ShareGroup) -> bool:
        """Whether a subscribed topic was created, deleted or grew since the assignment."""
        return group.target != _simple(group.members, self.topics())

    def _assign(self, group: ShareGroup) -> None:
        group.target = _simple(group.members, self.topics())
        if group.assignment_epoch == group.epoch:
            group.epoch += 1  # the metadata changed: a new group epoch, as in Kafka
        group.assignment_epoch = group.epoch

    # -- sessions ---------------------------------------------------------------------------

    def _session(self, group: ShareGroup, member: ShareMember) -> None:
        if member.session is not None:
            member.session.cancel()
        member.session = asyncio.get_running_loop().call_later(
            self.session_timeout(group.name) / 1000, self._expired, group, member
        )

    def _expired(self, group: ShareGroup, member: ShareMember) -> None:
        if group.members.get(member.member_id) is member:
            self._remove(group, member)

    def _remove(self, group: ShareGroup, member: ShareMember) -> None:
        if member.session is not None:
            member.session.cancel()
        del group.members[member.member_id]
        group.epoch += 1
        group.target = _simple(group.members, self.topics())
        group.assignment_epoch = group.epoch
        if self.removed is not None:
            self.removed(group.name, member.member_id)


def _copy(assignment: Assignment) -> Assignment:
    return {topic: set(parts) for topic, parts in assignment.items() if parts}


def _simple(
    members: Mapping[str, ShareMember], cluster: Mapping[str, tuple[uuid.UUID, int]]
) -> dict[str, Assignment]:
    """The share groups' simple assignment (see the module's docstring)."""
    target: dict[str, Assignment] = {m: {} for m in members}
    subscribed = {m.member_id: {t for t in m.topics if t in cluster} for m in members.values()}
    counts = dict.fromkeys(members, 0)
    sharers: dict[tuple[str, int], int] = {}
    for topic in sorted({t for ts in subscribed.values() for t in ts}):
        topic_id, count = cluster[topic]
        for p in range(count):
            candidates = sorted(m for m in members if topic in subscribed[m])
            chosen = min(candidates, key=lambda m: (counts[m], m))
            target[chosen].setdefault(topic_id, set()).add(p)
            counts[chosen] += 1
            sharers[(topic, p)] = 1
    for m in sorted(members):
        if counts[m] or not subscribed[m]:
            continue
        choices = [(t, p) for t in sorted(subscribed[m]) for p in range(cluster[t][1])]
        if not choices:
            continue
        topic, p = min(choices, key=lambda tp: (sharers[tp], tp))
        target[m].setdefault(cluster[topic][0], set()).add(p)
        counts[m] += 1
        sharers[(topic, p)] += 1
    return target
