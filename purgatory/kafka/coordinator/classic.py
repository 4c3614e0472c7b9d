"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as Kafka's
group coordinator runs it on a classic group, in memory.

A group moves Empty -> PreparingRebalance -> CompletingRebalance -> Stable. A rebalance is
a DelayedJoin parked in the "Rebalance" purgatory until every known member has sent its
JoinGroup or the longest rebalance timeout has passed (members that did not rejoin are
removed); then the generation goes up, the leader gets every member's subscription, and
SyncGroup hands out the leader's assignment. Each member's session is a DelayedHeartbeat
in the "Heartbeat" purgatory: each heartbeat completes it and parks the next one, and its
expiry removes the member and starts a rebalance. Both purgatories show in metrics and
traces like the broker's own.

With ``initial_rebalance_delay_ms`` (Kafka's ``group.initial.rebalance.delay.ms``; 0 here
unless set, 3000 in Kafka) the first rebalance of an empty group is an InitialDelayedJoin
instead: it waits that long for more members, and again (within the longest rebalance
timeout) while more keep joining, before the first generation is handed out.

Static membership (KIP-345): a member that joins with a ``group.instance.id`` holds it
until it leaves by that instance id or its session ends. Such a member that comes back
with no member id (a restarted consumer) takes over its instance's place under a new
member id, with its assignment, and a Stable group does not rebalance for it (unless the
protocol the group would choose changes); the old member id is fenced from then on
(FENCED_INSTANCE_ID). A rebalance does not drop a static member that did not rejoin in
time: only its session does.

:class:`ClassicProtocol` acts on the group it is given; the
:class:`~purgatory.kafka.coordinator.group_coordinator.GroupCoordinator` owns the groups and
the two purgatories, and builds it with them.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, TypeVar, final

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.groups import (
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)

T = TypeVar("T")


class DelayedJoin(DelayedOperation):
    """Kafka's DelayedJoin: done once every member has rejoined, else at the timeout."""

    __slots__ = ("group", "op_id", "protocol")
    kind: ClassVar[str] = "join-group"

    def __init__(self, protocol: ClassicProtocol, group: ClassicGroup, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.protocol = protocol
        self.group = group
        self.op_id = f"join-{group.name}-{group.generation + 1}"

    def try_complete(self) -> bool:
        return self.group.all_joined() and self.force_complete()

    def on_complete(self) -> None:
        self.protocol._complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """Kafka's InitialDelayedJoin: the first rebalance of an empty group completes only
    when its delay runs out, not when every member has joined; if members joined
    meanwhile and ``remaining_ms`` of the rebalance timeout is left, it waits once more."""

    __slots__ = ("members", "remaining_ms", "wait_ms")

    def __init__(
        self, protocol: ClassicProtocol, group: ClassicGroup, delay_ms: int, remaining_ms: int
    ) -> None:
        super().__init__(protocol, group, delay_ms)
        self.wait_ms = delay_ms
        self.remaining_ms = remaining_ms
        self.members = len(group.members)

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        self.protocol._initial_delay_over(self)


class DelayedHeartbeat(DelayedOperation):
    """Kafka's DelayedHeartbeat: done by the member's next heartbeat (or its leaving);
    expiring ends the member's session."""

    __slots__ = ("group", "member", "op_id", "protocol")
    kind: ClassVar[str] = "heartbeat"

    def __init__(
        self, protocol: ClassicProtocol, group: ClassicGroup, member: Member, op_id: str
    ) -> None:
        super().__init__(member.session_timeout_ms)
        self.protocol = protocol
        self.group = group
        self.member = member
        self.op_id = op_id

    def try_complete(self) -> bool:
        return (self.member.beat or self.member.leaving) and self.force_complete()

    def on_expiration(self) -> None:
        self.protocol._session_expired(self.group, self.member, self)


@dataclass(frozen=True, slots=True)
class ClassicSettings:
    """A JoinGroup's session timeout must lie in ``[min_session_timeout_ms,
    max_session_timeout_ms]`` (Kafka's ``group.min.session.timeout.ms`` and
    ``group.max.session.timeout.ms``); ``initial_rebalance_delay_ms`` is
    ``group.initial.rebalance.delay.ms``."""

    min_session_timeout_ms: int
    max_session_timeout_ms: int
    initial_rebalance_delay_ms: int = 0


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup as the protocol takes it (see :meth:`ClassicProtocol.join`)."""

    member_id: str
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_id: bool = False
    instance_id: str | None = None
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """A SyncGroup as the protocol takes it (see :meth:`ClassicProtocol.sync`)."""

    generation: int
    member_id: str
    assignments: dict[str, bytes]
    protocol_type: str | None = None
    protocol: str | None = None
    instance_id: str | None = None


@final
class ClassicProtocol:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup on the classic group each is given:
    rebalances park in ``rebalances``, sessions in ``heartbeats``; ``forget`` is called
    with a group nobody ever joined once its last pending member id expires."""

    def __init__(
        self,
        rebalances: DelayedOperationPurgatory[DelayedJoin],
        heartbeats: DelayedOperationPurgatory[DelayedHeartbeat],
        settings: ClassicSettings,
        forget: Callable[[ClassicGroup], None],
    ) -> None:
        self.rebalances = rebalances
        self.heartbeats = heartbeats
        self.settings = settings
        self._forget = forget
        self._ids = itertools.count(1)

    @staticmethod
    def close(group: ClassicGroup) -> None:
        """Answer every JoinGroup and SyncGroup ``group`` has parked: no coordinator now."""
        for member in group.members.values():
            _answer(member.join, JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            _answer(member.sync, (ErrorCode.COORDINATOR_NOT_AVAILABLE, b""))

    # -- the requests ----------------------------------------------------------------------

    def refusal(self, group: ClassicGroup | None, request: JoinRequest) -> JoinResult | None:
        """Why a JoinGroup to ``group`` (None: nobody knows it) is refused, in Kafka's
        order; None: it is accepted (the group is kept from then on, if new)."""
        member_id = request.member_id
        settings = self.settings
        timeout_ms = request.session_timeout_ms
        if not settings.min_session_timeout_ms <= timeout_ms <= settings.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        if member_id and group is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if group is None:
            group = ClassicGroup("")  # what a new group would accept
        if member_id and member_id not in group.pending:
            error = group.member_error(member_id, request.instance_id)
            if error is not ErrorCode.NONE:
                return JoinResult(error, member_id)
        if not group.supports(request.protocol_type, request.protocols, member_id):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        return None

    def join(
        self, group: ClassicGroup, request: JoinRequest
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """JoinGroup, accepted (:meth:`refusal`): answered now, or parked until the
        rebalance completes.

        With ``require_known_id`` (JoinGroup v4+, KIP-394), a new dynamic member is first
        answered MEMBER_ID_REQUIRED with its id and joins with that id: a first JoinGroup
        that the client gives up on (it moved to another coordinator, say) leaves no member
        behind for the next rebalance to wait on, only a pending id that expires with its
        session. A static member (``instance_id``) joins at once. ``skip_assignment``
        (JoinGroup v9+): a static leader that rejoins a Stable group may be told to skip
        the assignment (KIP-814).
        """
        member_id, instance_id = request.member_id, request.instance_id
        if not member_id and instance_id is not None and instance_id in group.static_members:
            return self._rejoin_static(group, request)
        if not member_id and request.require_known_id and instance_id is None:
            member = Member(f"{request.client_id or 'member'}-{uuid.uuid4()}", request.client_id)
            member.session_timeout_ms = request.session_timeout_ms
            group.pending[member.member_id] = member
            self._beat(group, member)  # the pending id expires with the session
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member.member_id)
        known = group.members.get(member_id)
        member = known or self._new_member(group, request)
        changed = member.protocols != request.protocols
        member.protocols = list(request.protocols)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if known is not None and group.state is not GroupState.PREPARING_REBALANCE:
            is_leader = member.member_id == group.leader
            if not changed and (group.state is GroupState.COMPLETING_REBALANCE or not is_leader):
                # Nothing new: the current generation stands (Kafka answers the same).
                self._beat(group, member)
                return group.join_result(member)
        # Answer an earlier JoinGroup of this member still parked: this one replaces it.
        _answer(member.join, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        self._beat(group, member)
        return self._joining(group, member)

    @staticmethod
    def _new_member(group: ClassicGroup, request: JoinRequest) -> Member:
        """A member joins: with the id handed out to it, or (static) a new one."""
        instance_id, client_id = request.instance_id, request.client_id
        pending = group.pending.pop(request.member_id, None)
        # Kafka names a static member after its instance id, a dynamic one its client id
        member = pending or Member(
            f"{instance_id or client_id or 'member'}-{uuid.uuid4()}", client_id, instance_id
        )
        if instance_id is not None:
            group.static_members[instance_id] = member.member_id
        group.members[member.member_id] = member
        group.protocol_type = request.protocol_type
        if not group.leader:
            group.leader = member.member_id
        return member

    def _rejoin_static(
        self, group: ClassicGroup, request: JoinRequest
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """A known static member came back without its member id (its consumer
        restarted): as Kafka's updateStaticMemberThenRebalanceOrCompleteJoin, it takes over
        the instance under a new member id with the old member's assignment; a JoinGroup
        or SyncGroup the old id has parked is answered FENCED_INSTANCE_ID. A Stable group
        whose chosen protocol stays answers at once with the current generation, and
        rebalances only if the protocol would change; one completing a rebalance starts
        another (the leader may have assigned to the old id)."""
        instance_id = request.instance_id
        assert instance_id is not None
        old = group.members.pop(group.static_members[instance_id])
        current_leader = group.leader
        member = Member(f"{instance_id}-{uuid.uuid4()}", old.client_id, instance_id)
        member.assignment = old.assignment
        member.protocols = list(request.protocols)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        group.members[member.member_id] = member
        group.static_members[instance_id] = member.member_id
        if group.leader == old.member_id:
            group.leader = member.member_id
        _answer(old.join, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old.member_id))
        _answer(old.sync, (ErrorCode.FENCED_INSTANCE_ID, b""))
        old.join = old.sync = None
        old.leaving = True  # its session ends here, without effect
        self.heartbeats.check_and_complete_nowait((group.name, old.member_id))
        self._beat(group, member)
        if group.state is GroupState.STABLE and group.select_protocol() == group.protocol:
            if request.skip_assignment:
                # KIP-814: the leader learns the members and keeps the current assignment.
                leader = member.member_id == group.leader
                return JoinResult(
                    ErrorCode.NONE,
                    member.member_id,
                    group.generation,
                    group.protocol,
                    group.leader,
                    group.subscriptions() if leader else (),
                    skip_assignment=leader,
                )
            # Before v9 the leader named is the old id: a static leader that restarted
            # takes itself for a follower and syncs, so no assignment is recomputed.
            return JoinResult(
                ErrorCode.NONE, member.member_id, group.generation, group.protocol, current_leader
            )
        return self._joining(group, member)

    def _joining(self, group: ClassicGroup, member: Member) -> asyncio.Future[JoinResult]:
        """``member``'s JoinGroup, parked until the rebalance it starts (or is part of)
        completes."""
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join = future
        if group.state is GroupState.PREPARING_REBALANCE:
            self.rebalances.check_and_complete_nowait(group.name)
        else:
            self._prepare_rebalance(group)
        return future

    def sync(
        self, group: ClassicGroup, request: SyncRequest
    ) -> SyncResult | asyncio.Future[SyncResult]:
        """SyncGroup: the leader's assignments go out to every member once it sends them.
        A ``protocol_type`` or ``protocol`` given (SyncGroup v5+) must be the group's."""
        member_id = request.member_id
        error = group.member_error(member_id, request.instance_id)
        if error is not ErrorCode.NONE:
            return error, b""
        member = group.members[member_id]
        if request.generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION, b""
        wrong_type = request.protocol_type not in (None, group.protocol_type)
        if wrong_type or request.protocol not in (None, group.protocol):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b""
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, b""
        self._beat(group, member)
        if group.state is GroupState.STABLE:
            return ErrorCode.NONE, member.assignment
        _answer(member.sync, (ErrorCode.REBALANCE_IN_PROGRESS, b""))
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync = future
        if member_id == group.leader:
            group.state = GroupState.STABLE
            for m in group.members.values():
                m.assignment = request.assignments.get(m.member_id, b"")
                _answer(m.sync, (ErrorCode.NONE, m.assignment))
                m.sync = None
        return future

    def heartbeat(
        self, group: ClassicGroup, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        error = group.member_error(member_id, instance_id)
        if error is not ErrorCode.NONE:
            return error
        member = group.members[member_id]
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._beat(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS  # the member learns it must rejoin
        return ErrorCode.NONE

    def leave(
        self, group: ClassicGroup, member_ids: list[str], instance_ids: list[str | None]
    ) -> list[ErrorCode]:
        """LeaveGroup: each member's error; those that left trigger a rebalance. A member
        may be named by its member id, by its instance id (a static member, with member id
        "": how an operator removes one) or both (then they must match: an old member id
        of the instance is FENCED_INSTANCE_ID). An id still pending (MEMBER_ID_REQUIRED)
        is simply forgotten."""
        errors = []
        for member_id, instance_id in zip(member_ids, instance_ids, strict=True):
            if not member_id and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")
                error = ErrorCode.NONE if member_id else ErrorCode.UNKNOWN_MEMBER_ID
            elif member_id in group.pending:
                group.pending.pop(member_id).leaving = True
                self.heartbeats.check_and_complete_nowait((group.name, member_id))
                errors.append(ErrorCode.NONE)
                continue
            else:
                error = group.member_error(member_id, instance_id)
            if error is ErrorCode.NONE:
                self._remove(group, group.members[member_id])
            errors.append(error)
        if ErrorCode.NONE in errors:
            self._members_changed(group)
        return errors

    def commit_error(
        self,
        group: ClassicGroup | None,
        generation: int,
        member_id: str,
        instance_id: str | None = None,
        *,
        committed: bool = False,
        transactional: bool = False,
    ) -> ErrorCode:
        """Whether OffsetCommit (TxnOffsetCommit: ``transactional``) may write for this
        group: Kafka's ClassicGroup.validateOffsetCommit, in its order. A consumer without
        membership (``assign()``, an admin) commits with generation -1, to an Empty group
        only; a member (a generation, a member id or an instance id given) must be in the
        group (a static member's old member id is FENCED_INSTANCE_ID) and in its
        generation; then, while the group completes a rebalance, a commit that is not
        transactional is REBALANCE_IN_PROGRESS. A group nobody joined but that has
        ``committed`` offsets is there (Empty) for Kafka: a generation given to it is
        UNKNOWN_MEMBER_ID; to a group nobody knows (None), ILLEGAL_GENERATION."""
        if group is None or group.state is GroupState.EMPTY:
            if generation < 0:
                return ErrorCode.NONE
            if group is None:
                return ErrorCode.UNKNOWN_MEMBER_ID if committed else ErrorCode.ILLEGAL_GENERATION
        if generation >= 0 or member_id or instance_id is not None:
            error = group.member_error(member_id, instance_id)
            if error is not ErrorCode.NONE:
                return error
            if generation != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional:
            return ErrorCode.UNKNOWN_MEMBER_ID  # without membership, to a group with members
        if transactional:
            return ErrorCode.NONE
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if group.state is not GroupState.EMPTY:
            self._beat(group, group.members[member_id])  # Stable, PreparingRebalance
        return ErrorCode.NONE

    # -- rebalancing -----------------------------------------------------------------------

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        for member in group.members.values():
            _answer(member.sync, (ErrorCode.REBALANCE_IN_PROGRESS, b""))
            member.sync = None
        was_empty = group.state is GroupState.EMPTY
        group.state = GroupState.PREPARING_REBALANCE
        timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay_ms = self.settings.initial_rebalance_delay_ms
        if was_empty and delay_ms > 0:
            join: DelayedJoin = InitialDelayedJoin(
                self, group, delay_ms, max(timeout_ms - delay_ms, 0)
            )
        else:
            join = DelayedJoin(self, group, timeout_ms)
        self.rebalances.try_complete_else_watch_nowait(join, [group.name])

    def _initial_delay_over(self, done: InitialDelayedJoin) -> None:
        """An initial delay ran out: wait once more if members joined meanwhile and the
        rebalance timeout allows (as Kafka does), else complete the rebalance."""
        group = done.group
        if len(group.members) > done.members and done.remaining_ms > 0 and group.members:
            delay_ms = min(done.wait_ms, done.remaining_ms)
            again = InitialDelayedJoin(
                self, group, delay_ms, max(done.remaining_ms - done.wait_ms, 0)
            )
            self.rebalances.try_complete_else_watch_nowait(again, [group.name])
            return
        self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """The rebalance is over: dynamic members that did not rejoin are out (static
        ones stay until their session ends, as in Kafka), the rest get the new
        generation. If members remain but none rejoined, wait another rebalance timeout."""
        for member in [m for m in group.members.values() if m.join is None]:
            if member.instance_id is None:
                self._remove(group, member)
        joined = [m for m in group.members.values() if m.join is not None]
        if group.members and not joined:
            timeout_ms = max(m.rebalance_timeout_ms for m in group.members.values())
            self.rebalances.try_complete_else_watch_nowait(
                DelayedJoin(self, group, timeout_ms), [group.name]
            )
            return
        group.generation += 1
        if not group.members:
            group.state = GroupState.EMPTY
            group.empty_since_ms = self.rebalances.timer.now_ms()
            group.protocol = group.leader = ""
            group.subscribed = frozenset()
            return
        group.protocol = group.select_protocol()
        group.subscribed = group.subscribed_topics()
        if group.leader not in group.members or group.members[group.leader].join is None:
            group.leader = joined[0].member_id  # a leader that did not rejoin leads no more
        group.state = GroupState.COMPLETING_REBALANCE
        for member in joined:
            _answer(member.join, group.join_result(member))
            member.join = None
            self._beat(group, member)

    def _members_changed(self, group: ClassicGroup) -> None:
        if group.state is GroupState.PREPARING_REBALANCE:
            self.rebalances.check_and_complete_nowait(group.name)
        elif group.state is not GroupState.EMPTY:
            self._prepare_rebalance(group)

    def _remove(self, group: ClassicGroup, member: Member) -> None:
        member.leaving = True
        self.heartbeats.check_and_complete_nowait((group.name, member.member_id))
        _answer(member.join, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        _answer(member.sync, (ErrorCode.UNKNOWN_MEMBER_ID, b""))
        del group.members[member.member_id]
        if member.instance_id is not None:
            group.static_members.pop(member.instance_id, None)

    # -- sessions --------------------------------------------------------------------------

    def _beat(self, group: ClassicGroup, member: Member) -> None:
        """The member is alive: complete its DelayedHeartbeat and park the next one."""
        key = (group.name, member.member_id)
        member.beat = True
        self.heartbeats.check_and_complete_nowait(key)
        member.beat = False
        member.heartbeat = DelayedHeartbeat(self, group, member, f"heartbeat-{next(self._ids)}")
        self.heartbeats.try_complete_else_watch_nowait(member.heartbeat, [key])

    def _session_expired(self, group: ClassicGroup, member: Member, op: DelayedHeartbeat) -> None:
        if member.heartbeat is op and group.pending.get(member.member_id) is member:
            del group.pending[member.member_id]  # never came back with its id
            if not group.members and not group.pending and not group.generation:
                self._forget(group)  # nobody ever joined: forget the group
            return
        if member.heartbeat is not op or group.members.get(member.member_id) is not member:
            return  # a newer heartbeat, or the member left meanwhile
        if member.join is not None or member.sync is not None:
            self._beat(group, member)  # waiting on us is no sign of death (Kafka agrees)
            return
        self._remove(group, member)
        self._members_changed(group)


def _answer(future: asyncio.Future[T] | None, result: T) -> None:
    if future is not None and not future.done():
        future.set_result(result)
