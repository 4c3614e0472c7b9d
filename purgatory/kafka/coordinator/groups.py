"""A classic group (JoinGroup/SyncGroup) as Kafka's group coordinator keeps it: its state,
generation, leader, chosen protocol and members (each with its subscriptions, its
assignment and the JoinGroup or SyncGroup it has parked). :mod:`.classic` moves it along.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar, Final, final

from purgatory import DelayedOperation
from purgatory.errors import ErrorCode

#: the protocol type of Kafka consumers' groups (ConsumerProtocol.PROTOCOL_TYPE)
CONSUMER_PROTOCOL_TYPE: Final = "consumer"
#: the type of a group of Kafka's classic group protocol (ListGroups v5+)
CLASSIC: Final = "classic"

# Kafka's group.min.session.timeout.ms and group.max.session.timeout.ms defaults.
MIN_SESSION_TIMEOUT_MS: Final = 6_000
MAX_SESSION_TIMEOUT_MS: Final = 1_800_000


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class JoinResult:
    """A JoinGroup answer; ``members`` (member id, group instance id, metadata) goes to
    the leader only. ``skip_assignment`` (JoinGroup v9+, KIP-814) tells a static leader
    that rejoined a Stable group to keep the current assignment instead of computing one."""

    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol: str = ""
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


SyncResult = tuple[ErrorCode, bytes]


@final
@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    client_id: str = ""  # as its JoinGroup's header gave it (DescribeGroups shows it)
    instance_id: str | None = None  # its group.instance.id: a static member (KIP-345)
    session_timeout_ms: int = MIN_SESSION_TIMEOUT_MS
    rebalance_timeout_ms: int = MIN_SESSION_TIMEOUT_MS
    protocols: list[tuple[str, bytes]] = field(default_factory=list)
    assignment: bytes = b""
    join: asyncio.Future[JoinResult] | None = None  # its JoinGroup, while parked
    sync: asyncio.Future[SyncResult] | None = None  # its SyncGroup, while parked
    # its current session (a DelayedHeartbeat), told apart from older ones by identity
    heartbeat: DelayedOperation | None = None
    beat: bool = False  # a heartbeat came since the current DelayedHeartbeat was parked
    leaving: bool = False

    def metadata(self, protocol: str) -> bytes:
        return next(data for name, data in self.protocols if name == protocol)


@final
@dataclass(eq=False, slots=True)
class ClassicGroup:
    type: ClassVar[str] = CLASSIC
    name: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    # Ids handed out with MEMBER_ID_REQUIRED, not members until they join with them.
    pending: dict[str, Member] = field(default_factory=dict)
    # when its last rebalance left it Empty (the coordinator's clock): its committed
    # offsets expire offsets.retention.minutes after that
    empty_since_ms: float | None = None
    # The static members: group instance id -> the member id it holds now.
    static_members: dict[str, str] = field(default_factory=dict)
    # The topics the members of the current generation subscribe to (a "consumer"
    # group), as Kafka computes them when a generation starts; None: not known (no
    # generation yet, another protocol type, or metadata that does not parse).
    subscribed: frozenset[str] | None = None

    def all_joined(self) -> bool:
        return all(m.join is not None for m in self.members.values())

    def member_error(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's validateMember: an instance id given must be held by ``member_id``
        (FENCED_INSTANCE_ID if another member id holds it now, UNKNOWN_MEMBER_ID if
        nobody does), and the member must be in the group."""
        if instance_id is not None:
            holder = self.static_members.get(instance_id)
            if holder is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if holder != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]], member: str) -> bool:
        """Whether ``member`` (new, or rejoining) may join with these protocols: the
        group's protocol type and one protocol every other member supports too."""
        if not protocol_type or not protocols:
            return False
        if not self.members.keys() - {member}:
            return True  # alone in its group, a member may change protocols freely
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self._candidates(member))

    def _candidates(self, besides: str = "") -> set[str]:
        every = [
            {name for name, _ in m.protocols}
            for m in self.members.values()
            if m.member_id != besides
        ]
        return set.intersection(*every) if every else set()

    def select_protocol(self) -> str:
        """Each member votes for its first choice among the protocols all support."""
        candidates = self._candidates()
        votes = Counter(
            next(name for name, _ in m.protocols if name in candidates)
            for m in self.members.values()
        )
        return votes.most_common(1)[0][0]

    def subscribed_topics(self) -> frozenset[str] | None:
        """Kafka's computeSubscribedTopics: for a ``consumer`` group, the topics of every
        member's subscription (the consumer protocol's version-0 prefix, which every
        version starts with); None for another protocol type or metadata that does not
        parse."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = _subscription_topics(member.metadata(self.protocol))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)

    def subscriptions(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """What the leader is told: every member's id, instance id and metadata."""
        return tuple(
            (m.member_id, m.instance_id, m.metadata(self.protocol)) for m in self.members.values()
        )

    def join_result(self, member: Member) -> JoinResult:
        members = self.subscriptions() if member.member_id == self.leader else ()
        return JoinResult(
            ErrorCode.NONE, member.member_id, self.generation, self.protocol, self.leader, members
        )


def _subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a consumer protocol subscription: an int16 version, then an int32
    count of int16-length strings (every version starts so); None if it does not parse."""
    try:
        count = int.from_bytes(metadata[2:6], "big", signed=True)
        if len(metadata) < 6 or count < 0:
            return None
        topics, at = [], 6
        for _ in range(count):
            size = int.from_bytes(metadata[at : at + 2], "big", signed=True)
            if size < 0 or at + 2 + size > len(metadata):
                return None
            topics.append(metadata[at + 2 : at + 2 + size].decode())
            at += 2 + size
        return topics
    except UnicodeDecodeError:
        return None


#: a modern group member's partitions: topic id -> partition indexes (KIP-848, KIP-932)
Assignment = dict[uuid.UUID, set[int]]


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """What a consumer (KIP-848) or share (KIP-932) group heartbeat is answered."""

    error: ErrorCode
    member_id: str | None = None
    epoch: int = -1
    assignment: Assignment | None = None  # None: unchanged since the last answer
    message: str | None = None
