"""The group coordinator, as Kafka 4's GroupMetadataManager: one map of groups, each group
id a classic group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup: :mod:`.classic` over
:mod:`.groups`) or a consumer group of KIP-848 (ConsumerGroupHeartbeat: :mod:`.consumer`).
The coordinator owns the map, the two purgatories (``Rebalance`` and ``Heartbeat``) and
their clock; each protocol acts on the group it is handed, built with what it needs.

A group id is one kind of group or the other, with Kafka's rules (no online migration
between the protocols is served): a ConsumerGroupHeartbeat that joins (epoch 0) an empty
classic group turns it into a consumer group, any other to a classic group is
GROUP_ID_NOT_FOUND ("not a consumer group"); a JoinGroup to an empty consumer group turns
it into a classic group, one to a consumer group with members is GROUP_ID_NOT_FOUND; a
SyncGroup, Heartbeat or LeaveGroup naming a consumer group finds no such member
(UNKNOWN_MEMBER_ID). The operations on whole groups (DeleteGroups, OffsetDelete,
ListGroups, DescribeGroups, the offset commit checks, offset expiry) are decided here by
the group's type.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias, assert_never, final

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.errors import ErrorCode
from purgatory.kafka.config_rules import Value
from purgatory.kafka.coordinator.classic import (
    ClassicProtocol,
    ClassicSettings,
    DelayedHeartbeat,
    DelayedJoin,
    JoinRequest,
    SyncRequest,
)
from purgatory.kafka.coordinator.consumer import (
    JOIN,
    LEAVE,
    STATIC_LEAVE,
    ConsumerGroup,
    ConsumerProtocol,
    HeartbeatRequest,
)
from purgatory.kafka.coordinator.group_configs import (
    KAFKA_BROKER_DEFAULTS,
    GroupConfig,
    GroupValue,
    check_group_configs,
)
from purgatory.kafka.coordinator.groups import (
    CLASSIC,
    CONSUMER_PROTOCOL_TYPE,
    MAX_SESSION_TIMEOUT_MS,
    MIN_SESSION_TIMEOUT_MS,
    ClassicGroup,
    GroupState,
    HeartbeatResult,
    JoinResult,
    SyncResult,
)
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.share import (
    ShareGroup,
    ShareHeartbeatRequest,
    ShareProtocol,
)

#: a group: one of Kafka's group types, told apart by its class (``type`` names it)
Group: TypeAlias = ClassicGroup | ConsumerGroup | ShareGroup

#: the newest OffsetCommit version (a commit check's default)
_NEWEST_OFFSET_COMMIT = 10


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The share groups' broker configs (``group.share.heartbeat.interval.ms``,
    ``group.share.session.timeout.ms``, ``group.share.max.size``) and who is told of a
    member that leaves (its share sessions and records go)."""

    heartbeat_interval_ms: int = 5_000
    session_timeout_ms: int = 45_000
    max_size: int = 200
    removed: Callable[[str, str], None] | None = None
    #: told of a share group DeleteGroups took (its share-partitions go)
    deleted: Callable[[str], None] | None = None


@dataclass(frozen=True, slots=True)
class GroupListing:
    """A group as ListGroups names it."""

    group_id: str
    protocol_type: str
    state: str
    type: str


def is_empty(group: Group) -> bool:
    """Whether ``group`` has no members (a classic one Empty, not rebalancing)."""
    if isinstance(group, ClassicGroup):
        return group.state is GroupState.EMPTY and not group.members
    if isinstance(group, ConsumerGroup | ShareGroup):
        return not group.members
    assert_never(group)


def _no_topics() -> Mapping[str, tuple[uuid.UUID, int]]:
    return {}


@final
class GroupCoordinator:
    """Every group; one coordinator serves every broker of the cluster. ``labels`` go on
    its two purgatories (metrics and traces). A JoinGroup's session timeout must lie in
    ``[min_session_timeout_ms, max_session_timeout_ms]`` (Kafka's
    ``group.min.session.timeout.ms`` and ``group.max.session.timeout.ms``);
    ``initial_rebalance_delay_ms`` is ``group.initial.rebalance.delay.ms``. ``topics``
    gives the cluster's topics (name -> (id, partition count)) to the consumer groups'
    assignors; ``heartbeat_interval_ms`` and ``consumer_session_timeout_ms`` are
    ``group.consumer.heartbeat.interval.ms`` and ``group.consumer.session.timeout.ms``;
    ``group_broker_configs``, the other broker configs the group configs fall back on or
    are bounded by (Kafka's names; unset: Kafka's defaults).

    Beside the groups it keeps each group id's own configs (the GROUP config resource),
    for groups that exist or not yet, as Kafka keeps them: :meth:`group_config` is a
    group's configs in force, which a KIP-848 consumer group's session timeout and
    heartbeat interval come from."""

    def __init__(
        self,
        min_session_timeout_ms: int = MIN_SESSION_TIMEOUT_MS,
        max_session_timeout_ms: int = MAX_SESSION_TIMEOUT_MS,
        labels: Mapping[str, str] | None = None,
        *,
        initial_rebalance_delay_ms: int = 0,
        topics: Callable[[], Mapping[str, tuple[uuid.UUID, int]]] = _no_topics,
        heartbeat_interval_ms: int = 5_000,
        consumer_session_timeout_ms: int = 45_000,
        group_broker_configs: Mapping[str, GroupValue] | None = None,
        share: ShareSettings | None = None,
    ) -> None:
        #: group id -> its group, of whichever type
        self.groups: dict[str, Group] = {}
        #: group id -> the group configs set for it (a group that may not exist yet)
        self.group_configs: dict[str, dict[str, GroupValue]] = {}
        #: the broker configs group configs fall back on, and their bounds
        self.group_broker_configs: dict[str, GroupValue] = {
            **KAFKA_BROKER_DEFAULTS,
            **(group_broker_configs or {}),
            "group.consumer.heartbeat.interval.ms": heartbeat_interval_ms,
            "group.consumer.session.timeout.ms": consumer_session_timeout_ms,
        }
        self.rebalances: DelayedOperationPurgatory[DelayedJoin] = DelayedOperationPurgatory(
            "Rebalance", labels=labels
        )
        self.heartbeats: DelayedOperationPurgatory[DelayedHeartbeat] = DelayedOperationPurgatory(
            "Heartbeat", labels=labels
        )
        settings = ClassicSettings(
            min_session_timeout_ms, max_session_timeout_ms, initial_rebalance_delay_ms
        )
        self.classic = ClassicProtocol(self.rebalances, self.heartbeats, settings, self._forget)
        self.consumer = ConsumerProtocol(
            topics,
            heartbeat_interval_ms=heartbeat_interval_ms,
            session_timeout_ms=consumer_session_timeout_ms,
            group_config=self.group_config,
        )
        share = ShareSettings() if share is None else share
        self._share_deleted = share.deleted
        self.share = ShareProtocol(
            topics,
            heartbeat_interval_ms=share.heartbeat_interval_ms,
            session_timeout_ms=share.session_timeout_ms,
            max_size=share.max_size,
            removed=share.removed,
            group_config=self.group_config,
        )

    # -- group configs ----------------------------------------------------------------------

    def group_config(self, group_id: str) -> GroupConfig:
        """Group ``group_id``'s configs in force: its own, else the broker's."""
        return GroupConfig(self.group_configs.get(group_id, {}), self.group_broker_configs)

    def check_group_configs(self, own: Mapping[str, Value | None]) -> dict[str, GroupValue]:
        """A group's configs checked as Kafka does (ValueError with Kafka's message)."""
        return check_group_configs(own, self.group_broker_configs)

    def set_group_configs(self, group_id: str, own: Mapping[str, GroupValue]) -> None:
        """Replace group ``group_id``'s own configs with ``own`` (checked); none: it has
        none left. A consumer group's members read them at their next heartbeat."""
        if own:
            self.group_configs[group_id] = dict(own)
        else:
            self.group_configs.pop(group_id, None)

    @property
    def min_session_timeout_ms(self) -> int:
        return self.classic.settings.min_session_timeout_ms

    @property
    def max_session_timeout_ms(self) -> int:
        return self.classic.settings.max_session_timeout_ms

    def now_ms(self) -> float:
        """The coordinator's clock (its purgatories' timer), in milliseconds."""
        return self.rebalances.timer.now_ms()

    @property
    def purgatories(self) -> dict[str, DelayedOperationPurgatory[DelayedOperation]]:
        return {"Rebalance": self.rebalances, "Heartbeat": self.heartbeats}  # type: ignore[dict-item]

    async def close(self) -> None:
        """Answer every parked JoinGroup and SyncGroup, end the consumer groups' sessions,
        then stop both purgatories."""
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                self.classic.close(group)
            elif isinstance(group, ConsumerGroup):
                self.consumer.close(group)
            else:
                self.share.close(group)
        await self.rebalances.shutdown()
        await self.heartbeats.shutdown()

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def share_group(self, group_id: str) -> ShareGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ShareGroup) else None

    def _forget(self, group: ClassicGroup) -> None:
        if self.groups.get(group.name) is group:
            del self.groups[group.name]

    # -- the classic protocol's requests ---------------------------------------------------

    def join(
        self,
        group_id: str,
        member_id: str,
        client_id: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        *,
        require_known_id: bool = False,
        instance_id: str | None = None,
        skip_assignment: bool = False,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """JoinGroup (:meth:`ClassicProtocol.join`): answered now, or parked until the
        rebalance completes. The group is kept once the join is accepted, not before."""
        if not group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, member_id)
        request = JoinRequest(
            member_id,
            client_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            require_known_id,
            instance_id,
            skip_assignment,
        )
        group = self.groups.get(group_id)
        classic = group if isinstance(group, ClassicGroup) else None
        refused = self.classic.refusal(classic, request)
        if refused is not None:
            return refused
        if (isinstance(group, ConsumerGroup) and group.members) or isinstance(group, ShareGroup):
            return JoinResult(ErrorCode.GROUP_ID_NOT_FOUND, member_id)  # not a classic group
        if classic is None:  # new, or in place of an empty consumer group
            classic = self.groups[group_id] = ClassicGroup(group_id)
        return self.classic.join(classic, request)

    def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes],
        *,
        protocol_type: str | None = None,
        protocol: str | None = None,
        instance_id: str | None = None,
    ) -> SyncResult | asyncio.Future[SyncResult]:
        """SyncGroup (:meth:`ClassicProtocol.sync`)."""
        group = self.classic_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, b""
        request = SyncRequest(
            generation, member_id, assignments, protocol_type, protocol, instance_id
        )
        return self.classic.sync(group, request)

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None = None
    ) -> ErrorCode:
        """Heartbeat (:meth:`ClassicProtocol.heartbeat`)."""
        group = self.classic_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return self.classic.heartbeat(group, generation, member_id, instance_id)

    def leave(
        self,
        group_id: str,
        member_ids: list[str],
        instance_ids: list[str | None] | None = None,
    ) -> list[ErrorCode]:
        """LeaveGroup (:meth:`ClassicProtocol.leave`): each member's error."""
        group = self.classic_group(group_id)
        if group is None:
            return [ErrorCode.UNKNOWN_MEMBER_ID] * len(member_ids)
        if instance_ids is None:
            instance_ids = [None] * len(member_ids)
        return self.classic.leave(group, member_ids, instance_ids)

    # -- the consumer protocol's request ---------------------------------------------------

    def consumer_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat (:meth:`ConsumerProtocol.heartbeat`), answered at
        once; a join (epoch 0) creates the group, in place of an empty classic one."""
        refused = self.consumer.refusal(request)
        if refused is not None:
            return refused
        group_id, epoch = request.group_id, request.epoch
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return HeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, message=f"Group {group_id} is not a consumer group."
            )
        if isinstance(group, ClassicGroup):
            if epoch != JOIN or group.members or group.pending:
                return HeartbeatResult(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    message=f"Group {group_id} is not a consumer group",
                )
            group = None  # an empty classic group becomes a consumer group
        if epoch in (LEAVE, STATIC_LEAVE):
            if group is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            return self.consumer.leave(group, request.member_id, epoch)
        if group is None:
            if epoch != JOIN:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = ConsumerGroup(group_id)
        return self.consumer.heartbeat(group, request)

    # -- the share protocol's request ------------------------------------------------------

    def share_heartbeat(self, request: ShareHeartbeatRequest) -> HeartbeatResult:
        """One ShareGroupHeartbeat (:meth:`ShareProtocol.heartbeat`), answered at once; a
        join (epoch 0) creates the group. A group id of another type is
        GROUP_ID_NOT_FOUND, as in Kafka (no conversion to or from share groups)."""
        refused = self.share.refusal(request)
        if refused is not None:
            return refused
        group_id = request.group_id
        group = self.groups.get(group_id)
        if group is not None and not isinstance(group, ShareGroup):
            return HeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, message=f"Group {group_id} is not a share group."
            )
        if request.epoch == LEAVE:
            if group is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            return self.share.leave(group, request.member_id)
        if group is None:
            if request.epoch != JOIN:
                return HeartbeatResult(
                    ErrorCode.GROUP_ID_NOT_FOUND, message=f"Group {group_id} not found."
                )
            group = self.groups[group_id] = ShareGroup(group_id)
        return self.share.heartbeat(group, request)

    # -- whole groups ----------------------------------------------------------------------

    def commit_error(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None = None,
        *,
        version: int = _NEWEST_OFFSET_COMMIT,
        committed: bool = False,
        transactional: bool = False,
    ) -> ErrorCode:
        """Whether OffsetCommit ``version`` (TxnOffsetCommit: ``transactional``) may write
        for ``group_id``, as its group's type checks it: a consumer group's member commits
        with its member epoch (``generation``; :meth:`ConsumerProtocol.commit_error`), a
        classic group's with its generation (:meth:`ClassicProtocol.commit_error`; a
        group nobody joined but that has ``committed`` offsets is there, Empty)."""
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return ErrorCode.GROUP_ID_NOT_FOUND  # Kafka: "is not a consumer group"
        if isinstance(group, ConsumerGroup):
            return self.consumer.commit_error(
                group, member_id, generation, version=version, transactional=transactional
            )
        return self.classic.commit_error(
            group,
            generation,
            member_id,
            instance_id,
            committed=committed,
            transactional=transactional,
        )

    def delete(self, group_id: str, offsets: OffsetStore) -> ErrorCode:
        """DeleteGroups, as Kafka's coordinator decides it: a group nobody knows (no
        membership, no committed offsets) GROUP_ID_NOT_FOUND; one that is not empty (it
        has members, or is rebalancing) NON_EMPTY_GROUP; otherwise the group and its
        committed offsets go (ids handed out with MEMBER_ID_REQUIRED but never used go
        with it), NONE."""
        group = self.groups.get(group_id)
        if group is None:
            return (
                ErrorCode.NONE if offsets.delete_group(group_id) else ErrorCode.GROUP_ID_NOT_FOUND
            )
        if not is_empty(group):
            return ErrorCode.NON_EMPTY_GROUP
        if isinstance(group, ClassicGroup):
            group.pending.clear()  # their sessions find them gone and stop
        if isinstance(group, ShareGroup) and self._share_deleted is not None:
            self._share_deleted(group_id)
        del self.groups[group_id]
        offsets.delete_group(group_id)
        return ErrorCode.NONE

    def delete_offsets(
        self, group_id: str, partitions: dict[str, list[int]], offsets: OffsetStore
    ) -> ErrorCode | dict[str, ErrorCode]:
        """OffsetDelete, as Kafka's coordinator decides it: a group nobody knows is
        GROUP_ID_NOT_FOUND, a live classic group of another protocol type than
        ``consumer`` NON_EMPTY_GROUP (both for the whole request); otherwise, per topic,
        one the group subscribes to is GROUP_SUBSCRIBED_TO_TOPIC and kept (a consumer
        group: its members' subscriptions now, whatever its state; a classic one: as of
        its generation's start, as in Kafka), the others' committed offsets go (NONE,
        whether or not there were any)."""
        group = self.groups.get(group_id)
        if group is None and group_id not in offsets.groups():
            return ErrorCode.GROUP_ID_NOT_FOUND
        subscribed: frozenset[str] | None = frozenset()
        if isinstance(group, ShareGroup):
            return ErrorCode.GROUP_ID_NOT_FOUND  # Kafka: "is not a consumer group"
        if isinstance(group, ConsumerGroup):
            subscribed = self.consumer.subscribed_topics(group)
        elif group is not None and group.state is not GroupState.EMPTY:
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return ErrorCode.NON_EMPTY_GROUP
            subscribed = group.subscribed
        answers = {}
        for topic, indexes in partitions.items():
            if subscribed is None or topic in subscribed:
                answers[topic] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            for index in indexes:
                offsets.delete(group_id, topic, index)
            answers[topic] = ErrorCode.NONE
        return answers

    def describe(self, group_id: str, offsets: OffsetStore) -> ClassicGroup | None:
        """The classic group DescribeGroups shows (None: not found). A group that only
        committed offsets is an Empty classic group with no protocol type, as in Kafka; a
        consumer group is not a classic group (Kafka's describeGroups)."""
        group = self.groups.get(group_id)
        if isinstance(group, ClassicGroup):
            return group
        if group is None and group_id in offsets.groups():
            return ClassicGroup(group_id)
        return None

    def listings(self, offsets: OffsetStore) -> list[GroupListing]:
        """Every group as ListGroups names it, then those that only committed offsets
        (Empty classic groups with no protocol type)."""
        listed = [_listing(group) for group in self.groups.values()]
        listed += [
            GroupListing(name, "", GroupState.EMPTY.value, CLASSIC)
            for name in offsets.groups()
            if name not in self.groups
        ]
        return listed

    def expire_offsets(self, offsets: OffsetStore, retention_ms: float) -> int:
        """Kafka's offset expiry, now (:meth:`OffsetStore.expire`): a group with members
        keeps its offsets; an empty classic group's expire ``retention_ms`` after its last
        rebalance left it Empty (if it never was left so, after each commit), an empty
        consumer group's and those committed without a group (``assign()`` consumers)
        ``retention_ms`` after each commit. An empty group left with no offsets goes, as
        in Kafka. Returns how many partitions' offsets went."""

        def since(group_id: str) -> float | None:
            group = self.groups.get(group_id)
            if group is None:
                return None
            if not is_empty(group):
                return math.inf
            return group.empty_since_ms if isinstance(group, ClassicGroup) else None

        gone = offsets.expire(retention_ms, since)
        for name in {group_id for group_id, _, _ in gone} - set(offsets.groups()):
            group = self.groups.get(name)
            if group is None or not is_empty(group):
                continue
            if not (isinstance(group, ClassicGroup) and group.pending):
                del self.groups[name]
        return len(gone)


def _listing(group: Group) -> GroupListing:
    if isinstance(group, ClassicGroup):
        return GroupListing(group.name, group.protocol_type, group.state.value, group.type)
    if isinstance(group, ConsumerGroup | ShareGroup):
        return GroupListing(group.name, group.type, group.state(), group.type)
    assert_never(group)
