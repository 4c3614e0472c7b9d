"""Consumer groups of KIP-848 (``group.protocol=consumer``) as Kafka's group coordinator
runs them, in memory: the members heartbeat (ConsumerGroupHeartbeat) and the coordinator
assigns the partitions itself (server-side assignors ``uniform`` and ``range``).

A group has an epoch, bumped by every change of membership or subscriptions; each bump
computes a new target assignment (the assignment epoch). Each member then reconciles
towards its target, as Kafka's CurrentAssignmentBuilder does: partitions it must give up
are revoked first (it keeps its epoch until a heartbeat reports them gone), then it moves
to the target's epoch with the partitions it gains, except those another member has not
released yet (it gets them at a later heartbeat, once released). A member's session ends
when it stops heartbeating for ``session_timeout_ms``; one that does not revoke within its
rebalance timeout is fenced (removed), as in Kafka.

:class:`ConsumerProtocol` acts on the consumer group it is given; the
:class:`~purgatory.kafka.coordinator.group_coordinator.GroupCoordinator` owns the groups
(a group id is a classic group's or a consumer group's) and builds it. Static membership
and client-side assignors of KIP-848 are not served.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.group_configs import GroupConfig
from purgatory.kafka.coordinator.groups import Assignment, HeartbeatResult

#: the type (and protocol type) of a KIP-848 group (ConsumerGroupHeartbeat)
CONSUMER: Final = "consumer"
#: Kafka's group.consumer.assignors: the first is the default
ASSIGNORS: Final = ("uniform", "range")
#: a member epoch: join (0), leave (-1), static leave (-2)
JOIN: Final = 0
LEAVE: Final = -1
STATIC_LEAVE: Final = -2

#: (topic id, partition)
Partition = tuple[uuid.UUID, int]


@final
@dataclass(eq=False, slots=True)
class ConsumerMember:
    member_id: str
    client_id: str
    rebalance_timeout_ms: int
    epoch: int = 0
    previous_epoch: int = -1
    instance_id: str | None = None
    rack_id: str | None = None
    topics: tuple[str, ...] = ()
    regex: str | None = None
    assignor: str | None = None
    assigned: Assignment = field(default_factory=dict)  # what it owns now, by our word
    revoking: Assignment = field(default_factory=dict)  # what it must give up first
    #: the assignment last sent, to send it again only when it changed
    sent: Assignment | None = None
    session: asyncio.TimerHandle | None = None
    revocation: asyncio.TimerHandle | None = None

    def state(self) -> str:
        return "unrevoked" if self.revoking else "stable"


@final
@dataclass(eq=False, slots=True)
class ConsumerGroup:
    type: ClassVar[str] = CONSUMER
    name: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    assignor: str = ASSIGNORS[0]

    def state(self) -> str:
        """Kafka's ConsumerGroup states, as DescribeGroups and ListGroups name them."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch != self.epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.revoking for m in self.members.values()):
            return "Reconciling"
        return "Stable"


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat as the protocol takes it: None (or -1 for the timeout)
    where the member sends nothing new."""

    group_id: str
    member_id: str
    epoch: int
    client_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topics: Sequence[str] | None = None
    regex: str | None = None
    assignor: str | None = None
    owned: Assignment | None = None


def _copy(assignment: Assignment) -> Assignment:
    return {topic: set(parts) for topic, parts in assignment.items() if parts}


def _minus(a: Assignment, b: Assignment) -> Assignment:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}


def _and(a: Assignment, b: Assignment) -> Assignment:
    return {t: ps & b.get(t, set()) for t, ps in a.items() if ps & b.get(t, set())}


def _union(a: Assignment, b: Assignment) -> Assignment:
    out = _copy(a)
    for t, ps in b.items():
        out.setdefault(t, set()).update(ps)
    return {t: ps for t, ps in out.items() if ps}


@final
class ConsumerProtocol:
    """ConsumerGroupHeartbeat on the consumer group each is given. ``topics`` gives the
    cluster's topics (name -> (id, partition count)) at each assignment;
    ``heartbeat_interval_ms`` and ``session_timeout_ms`` are Kafka's
    ``group.consumer.heartbeat.interval.ms`` and ``group.consumer.session.timeout.ms``;
    ``group_config`` gives a group's configs, whose ``consumer.*`` ones win over them."""

    def __init__(
        self,
        topics: Callable[[], Mapping[str, tuple[uuid.UUID, int]]],
        *,
        heartbeat_interval_ms: int = 5_000,
        session_timeout_ms: int = 45_000,
        group_config: Callable[[str], GroupConfig] | None = None,
    ) -> None:
        self.topics = topics
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self._group_config = group_config

    def heartbeat_interval(self, group: str) -> int:
        """The heartbeat interval group ``group``'s members are told: its
        ``consumer.heartbeat.interval.ms``, else the broker's."""
        if self._group_config is None:
            return self.heartbeat_interval_ms
        return self._group_config(group).consumer_heartbeat_interval_ms

    def session_timeout(self, group: str) -> int:
        """How long a member of group ``group`` may stay silent: its
        ``consumer.session.timeout.ms``, else the broker's."""
        if self._group_config is None:
            return self.session_timeout_ms
        return self._group_config(group).consumer_session_timeout_ms

    @staticmethod
    def close(group: ConsumerGroup) -> None:
        for member in group.members.values():
            _cancel(member)

    # -- the heartbeat ----------------------------------------------------------------------

    @staticmethod
    def refusal(request: HeartbeatRequest) -> HeartbeatResult | None:
        """Why a heartbeat is refused whatever the group (Kafka's checks, in its order);
        None: the group decides."""
        if not request.group_id:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, message="GroupId can't be empty.")
        if request.instance_id is not None:
            return HeartbeatResult(
                ErrorCode.UNSUPPORTED_VERSION, message="Static membership is not served here."
            )
        if request.assignor is not None and request.assignor not in ASSIGNORS:
            return HeartbeatResult(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                message=f"Assignor {request.assignor} is not supported. "
                f"Supported: {list(ASSIGNORS)}.",
            )
        if request.regex is not None:
            try:
                re.compile(request.regex)
            except re.error:
                return HeartbeatResult(ErrorCode.INVALID_REGULAR_EXPRESSION)
        if request.epoch == JOIN:
            if request.topics is None and request.regex is None:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST,
                    message="SubscribedTopicNames or SubscribedTopicRegex must be set in "
                    "first request.",
                )
            if request.rebalance_timeout_ms < 0:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST,
                    message="RebalanceTimeoutMs must be provided in first request.",
                )
        return None

    def leave(self, group: ConsumerGroup, member_id: str, epoch: int) -> HeartbeatResult:
        """A heartbeat with epoch -1 (or -2): the member leaves."""
        member = group.members.get(member_id)
        if member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
        self._remove(group, member)
        return HeartbeatResult(ErrorCode.NONE, member_id, epoch)

    def heartbeat(self, group: ConsumerGroup, request: HeartbeatRequest) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat to ``group`` (:meth:`refusal` passed), answered at
        once."""
        epoch, owned = request.epoch, request.owned
        member = group.members.get(request.member_id)
        if member is None:
            if epoch != JOIN:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            # v0: the coordinator names it
            member_id = request.member_id or str(uuid.uuid4())
            member = ConsumerMember(member_id, request.client_id, request.rebalance_timeout_ms)
            group.members[member_id] = member
            group.epoch += 1
        elif epoch != member.epoch and not (
            epoch == member.previous_epoch
            and owned is not None
            and not _minus(owned, member.assigned)
        ):
            # an epoch ahead, or behind with partitions it should not have: fenced
            return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH)
        if epoch == JOIN and member.epoch != 0:
            # a member that lost its state rejoins with its id: it owns nothing now
            member.assigned, member.revoking, member.sent = {}, {}, None
            member.epoch = 0
        if _update(member, request) and epoch != JOIN:
            group.epoch += 1
        self._session(group, member)
        if group.assignment_epoch != group.epoch:
            self._assign(group)
        self._reconcile(group, member, owned)
        answer: Assignment | None = None
        if member.sent is None or member.sent != member.assigned or owned is not None:
            answer = member.sent = _copy(member.assigned)
        return HeartbeatResult(ErrorCode.NONE, member.member_id, member.epoch, answer)

    # -- assigning --------------------------------------------------------------------------

    def subscribed_topics(self, group: ConsumerGroup) -> frozenset[str]:
        """The topics the group's members subscribe to (by name, or by a regex now)."""
        cluster = self.topics()
        return frozenset(t for m in group.members.values() for t in self._subscribed(m, cluster))

    def _subscribed(
        self, member: ConsumerMember, cluster: Mapping[str, tuple[uuid.UUID, int]]
    ) -> set[str]:
        names = {t for t in member.topics if t in cluster}
        if member.regex is not None:
            pattern = re.compile(member.regex)
            names |= {t for t in cluster if not t.startswith("__") and pattern.fullmatch(t)}
        return names

    def _assign(self, group: ConsumerGroup) -> None:
        """A new target assignment for the group's epoch."""
        cluster = self.topics()
        chosen = {m.assignor for m in group.members.values() if m.assignor}
        group.assignor = min(chosen) if len(chosen) == 1 else group.assignor
        subscribed = {m.member_id: self._subscribed(m, cluster) for m in group.members.values()}
        if group.assignor == "range":
            target = _range(subscribed, cluster)
        else:
            target = _uniform(subscribed, cluster, group.target)
        group.target = target
        group.assignment_epoch = group.epoch

    def _reconcile(
        self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None
    ) -> None:
        """Kafka's CurrentAssignmentBuilder, for one member at one heartbeat."""
        if member.revoking:
            if owned is None or _and(owned, member.revoking):
                return  # still owns some of what it must give up
            member.revoking = {}
            _cancel_revocation(member)
        target = group.target.get(member.member_id, {})
        if member.epoch == group.assignment_epoch and not _minus(target, member.assigned):
            return
        revoke = _minus(member.assigned, target)
        if revoke:
            member.assigned = _and(member.assigned, target)
            member.revoking = revoke
            loop = asyncio.get_running_loop()
            _cancel_revocation(member)
            member.revocation = loop.call_later(
                member.rebalance_timeout_ms / 1000, self._revocation_expired, group, member
            )
            return
        held = self._held_by_others(group, member)
        gained = _minus(target, member.assigned)
        member.assigned = _union(member.assigned, _minus(gained, held))
        if member.epoch != group.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch

    @staticmethod
    def _held_by_others(group: ConsumerGroup, member: ConsumerMember) -> Assignment:
        held: Assignment = {}
        for other in group.members.values():
            if other is not member:
                held = _union(held, _union(other.assigned, other.revoking))
        return held

    # -- sessions ---------------------------------------------------------------------------

    def _session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session is not None:
            member.session.cancel()
        member.session = asyncio.get_running_loop().call_later(
            self.session_timeout(group.name) / 1000, self._expired, group, member
        )

    def _expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if group.members.get(member.member_id) is member:
            self._remove(group, member)

    def _revocation_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if group.members.get(member.member_id) is member and member.revoking:
            self._remove(group, member)  # fenced: it kept partitions past its timeout

    def _remove(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        _cancel(member)
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        group.epoch += 1
        if group.members:
            self._assign(group)
        else:
            group.target = {}
            group.assignment_epoch = group.epoch

    # -- what other requests ask ----------------------------------------------------------

    @staticmethod
    def commit_error(
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        *,
        version: int,
        transactional: bool = False,
    ) -> ErrorCode:
        """OffsetCommit at ``version`` (TxnOffsetCommit: ``transactional``) for a consumer
        group: Kafka's ConsumerGroup.validateOffsetCommit. A commit with
        epoch -1 goes to an empty group, whatever member id it names; otherwise a member
        commits with its current epoch (STALE_MEMBER_EPOCH otherwise; ILLEGAL_GENERATION
        in a transaction, as Kafka's validateTransactionalOffsetCommit maps it), and with
        OffsetCommit v9+ (UNSUPPORTED_VERSION before)."""
        if epoch < 0 and not group.members:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if epoch != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION if transactional else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE


def _update(member: ConsumerMember, request: HeartbeatRequest) -> bool:
    """Take what the heartbeat sends anew; whether the subscription changed."""
    changed = False
    if request.topics is not None and tuple(sorted(request.topics)) != member.topics:
        member.topics, changed = tuple(sorted(request.topics)), True
    if request.regex is not None and request.regex != (member.regex or ""):
        member.regex, changed = request.regex or None, True
    if request.assignor is not None and request.assignor != member.assignor:
        member.assignor, changed = request.assignor, True
    if request.rebalance_timeout_ms >= 0:
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
    if request.rack_id is not None:
        member.rack_id = request.rack_id
    return changed


def _cancel_revocation(member: ConsumerMember) -> None:
    if member.revocation is not None:
        member.revocation.cancel()
        member.revocation = None


def _cancel(member: ConsumerMember) -> None:
    _cancel_revocation(member)
    if member.session is not None:
        member.session.cancel()
        member.session = None


def _range(
    subscribed: Mapping[str, set[str]], cluster: Mapping[str, tuple[uuid.UUID, int]]
) -> dict[str, Assignment]:
    """Kafka's range assignor: per topic, its subscribers (sorted) take contiguous runs."""
    target: dict[str, Assignment] = {m: {} for m in subscribed}
    for topic in sorted({t for ts in subscribed.values() for t in ts}):
        topic_id, count = cluster[topic]
        members = sorted(m for m, ts in subscribed.items() if topic in ts)
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            if size:
                target[member][topic_id] = set(range(start, start + size))
            start += size
    return target


def _uniform(
    subscribed: Mapping[str, set[str]],
    cluster: Mapping[str, tuple[uuid.UUID, int]],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Kafka's uniform assignor, in spirit: every partition to a member subscribed to its
    topic, as evenly as they can share them, each member keeping what it had where that
    stays even (sticky), the rest to whoever has fewest."""
    target: dict[str, Assignment] = {m: {} for m in subscribed}
    counts = dict.fromkeys(subscribed, 0)
    every = [
        (topic, cluster[topic][0], p)
        for topic in sorted({t for ts in subscribed.values() for t in ts})
        for p in range(cluster[topic][1])
    ]
    quota = -(-len(every) // max(len(subscribed), 1))  # at most this many each
    owner = {
        (topic_id, p): m for m, a in previous.items() for topic_id, ps in a.items() for p in ps
    }
    left = []
    for topic, topic_id, p in every:
        keeper = owner.get((topic_id, p))
        if (
            keeper is not None
            and keeper in subscribed
            and topic in subscribed[keeper]
            and counts[keeper] < quota
        ):
            target[keeper].setdefault(topic_id, set()).add(p)
            counts[keeper] += 1
        else:
            left.append((topic, topic_id, p))
    for topic, topic_id, p in left:
        candidates = [m for m in sorted(subscribed) if topic in subscribed[m]]
        chosen = min(candidates, key=lambda m: (counts[m], m))
        target[chosen].setdefault(topic_id, set()).add(p)
        counts[chosen] += 1
    return target
