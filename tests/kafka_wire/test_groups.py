"""The group coordinator's state machine, on virtual time: generations, rebalances parked
in DelayedJoin, sessions ended by DelayedHeartbeat, and Kafka's error codes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import GroupState, JoinResult
from purgatory.sim.errors import ErrorCode

SESSION_MS = 10_000
REBALANCE_MS = 30_000
RANGE = [("range", b"r"), ("roundrobin", b"rr")]


@pytest_asyncio.fixture
async def coordinator() -> AsyncIterator[GroupCoordinator]:
    groups = GroupCoordinator()
    try:
        yield groups
    finally:
        await groups.close()


def join(
    groups: GroupCoordinator,
    member_id: str = "",
    protocols: list[tuple[str, bytes]] = RANGE,
    *,
    protocol_type: str = "consumer",
) -> JoinResult | asyncio.Future[JoinResult]:
    return groups.join("g", member_id, "c", SESSION_MS, REBALANCE_MS, protocol_type, protocols)


async def joined(groups: GroupCoordinator, member_id: str = "") -> JoinResult:
    answer = join(groups, member_id)
    result = answer if isinstance(answer, JoinResult) else await answer
    assert result.error == ErrorCode.NONE, result
    return result


async def sync(
    groups: GroupCoordinator, result: JoinResult, assignments: dict[str, bytes] | None = None
) -> tuple[ErrorCode, bytes]:
    answer = groups.sync("g", result.generation, result.member_id, assignments or {})
    return answer if isinstance(answer, tuple) else await answer


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_one_member_joins_leads_and_syncs_its_own_assignment(coordinator) -> None:
    first = await joined(coordinator)
    assert (first.generation, first.protocol, first.leader) == (1, "range", first.member_id)
    assert first.members == ((first.member_id, b"r"),)  # the leader sees every subscription
    assert coordinator.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert await sync(coordinator, first, {first.member_id: b"all"}) == (ErrorCode.NONE, b"all")
    assert coordinator.groups["g"].state is GroupState.STABLE
    assert coordinator.heartbeat("g", 1, first.member_id) == ErrorCode.NONE


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_second_member_rebalances_the_group_into_a_new_generation(coordinator) -> None:
    loop = asyncio.get_running_loop()
    first = await joined(coordinator)
    await sync(coordinator, first, {first.member_id: b"p0p1"})
    second = join(coordinator)
    assert isinstance(second, asyncio.Future)
    await asyncio.sleep(1)
    assert not second.done()  # parked in DelayedJoin until the first member rejoins
    assert [op.kind for op in coordinator.rebalances.pending_operations()] == ["join-group"]
    # The first member learns of the rebalance from its heartbeat, then rejoins.
    assert coordinator.heartbeat("g", 1, first.member_id) == ErrorCode.REBALANCE_IN_PROGRESS
    start = loop.time()
    again = await joined(coordinator, first.member_id)
    other = await second
    assert loop.time() == start  # completed by the rejoin, not by the timeout
    assert again.generation == other.generation == 2
    assert again.leader == other.leader == first.member_id  # the leader stays
    assert len(again.members) == 2
    assert other.members == ()
    # The follower's SyncGroup waits for the leader's assignment.
    waiting = asyncio.ensure_future(sync(coordinator, other))
    await asyncio.sleep(0)
    assert not waiting.done()
    plan = {first.member_id: b"p0", other.member_id: b"p1"}
    assert await sync(coordinator, again, plan) == (ErrorCode.NONE, b"p0")
    assert await waiting == (ErrorCode.NONE, b"p1")
    # A member of the old generation is fenced.
    assert coordinator.heartbeat("g", 1, first.member_id) == ErrorCode.ILLEGAL_GENERATION
    assert coordinator.commit_error("g", 1, first.member_id) == ErrorCode.ILLEGAL_GENERATION
    assert coordinator.commit_error("g", 2, first.member_id) == ErrorCode.NONE


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout(
    coordinator,
) -> None:
    loop = asyncio.get_running_loop()
    first = await joined(coordinator)
    await sync(coordinator, first, {first.member_id: b"x"})
    start = loop.time()
    second = join(coordinator)
    assert isinstance(second, asyncio.Future)
    # The first member keeps its session alive but never rejoins.
    while not second.done():
        await asyncio.sleep(SESSION_MS / 1000 / 3)
        coordinator.heartbeat("g", 1, first.member_id)
    result = await second
    assert loop.time() - start == pytest.approx(REBALANCE_MS / 1000, abs=SESSION_MS / 3000)
    assert (result.generation, result.leader) == (2, result.member_id)
    assert list(coordinator.groups["g"].members) == [result.member_id]
    assert coordinator.heartbeat("g", 2, first.member_id) == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_silent_member_is_evicted_at_its_session_timeout(coordinator) -> None:
    first = await joined(coordinator)
    await sync(coordinator, first, {first.member_id: b"x"})
    await asyncio.sleep(SESSION_MS / 1000 - 0.01)
    assert first.member_id in coordinator.groups["g"].members
    await asyncio.sleep(0.02)
    assert first.member_id not in coordinator.groups["g"].members
    group = coordinator.groups["g"]
    # Its leaving rebalanced the group, which, empty, moved to a new generation.
    assert (group.state, group.generation) == (GroupState.EMPTY, 2)
    assert coordinator.heartbeats.statistics().expired == 1


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_heartbeats_keep_a_member_past_many_session_timeouts(coordinator) -> None:
    first = await joined(coordinator)
    await sync(coordinator, first, {first.member_id: b"x"})
    for _ in range(20):
        await asyncio.sleep(SESSION_MS / 1000 / 2)
        assert coordinator.heartbeat("g", 1, first.member_id) == ErrorCode.NONE
    assert coordinator.groups["g"].state is GroupState.STABLE
    assert coordinator.heartbeats.statistics().expired == 0


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_leaving_rebalances_the_rest_and_the_last_one_empties_the_group(
    coordinator,
) -> None:
    first = await joined(coordinator)
    await sync(coordinator, first, {first.member_id: b"x"})
    second = join(coordinator)
    assert isinstance(second, asyncio.Future)
    again = await joined(coordinator, first.member_id)
    other = await second
    await asyncio.gather(sync(coordinator, again, {}), sync(coordinator, other))
    assert coordinator.leave("g", [first.member_id, "nobody"]) == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    # The leader left: the other member rejoins and leads generation 3.
    assert coordinator.heartbeat("g", 2, other.member_id) == ErrorCode.REBALANCE_IN_PROGRESS
    alone = await joined(coordinator, other.member_id)
    assert (alone.generation, alone.leader) == (3, other.member_id)
    assert coordinator.leave("g", [other.member_id]) == [ErrorCode.NONE]
    group = coordinator.groups["g"]
    assert (group.state, group.generation, group.members) == (GroupState.EMPTY, 4, {})
    # An empty group takes commits without membership (generation -1) only.
    assert coordinator.commit_error("g", -1, "") == ErrorCode.NONE
    assert coordinator.commit_error("g", 4, other.member_id) == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_member_id_required_then_the_id_joins_and_an_unused_id_expires(
    coordinator,
) -> None:
    def first_join() -> JoinResult:
        answer = coordinator.join(
            "g", "", "c", SESSION_MS, REBALANCE_MS, "consumer", RANGE, require_known_id=True
        )
        assert isinstance(answer, JoinResult)
        assert answer.error == ErrorCode.MEMBER_ID_REQUIRED
        return answer

    used = first_join()
    abandoned = first_join()
    member = await joined(coordinator, used.member_id)
    assert member.member_id == used.member_id
    assert list(coordinator.groups["g"].members) == [used.member_id]
    # The abandoned id holds no rebalance back and is forgotten with its session.
    assert abandoned.member_id in coordinator.groups["g"].pending
    await sync(coordinator, member, {member.member_id: b"x"})
    for _ in range(3):
        await asyncio.sleep(SESSION_MS / 1000 / 2)
        coordinator.heartbeat("g", 1, member.member_id)
    assert coordinator.groups["g"].pending == {}
    assert join(coordinator, abandoned.member_id) == JoinResult(
        ErrorCode.UNKNOWN_MEMBER_ID, abandoned.member_id
    )


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_groups_nobody_joined_are_not_kept(coordinator) -> None:
    """Refused joins and unused member ids leave nothing behind: a client cannot grow the
    coordinator's memory by asking for groups it never joins."""
    assert coordinator.join("g", "", "c", 10, 1, "consumer", RANGE).error == (
        ErrorCode.INVALID_SESSION_TIMEOUT
    )
    assert coordinator.join("g", "", "c", SESSION_MS, 1, "", RANGE).error == (
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    )
    for name in ("a", "b", "c"):
        answer = coordinator.join(
            name, "", "c", SESSION_MS, REBALANCE_MS, "consumer", RANGE, require_known_id=True
        )
        assert isinstance(answer, JoinResult)
        assert answer.error == ErrorCode.MEMBER_ID_REQUIRED
    assert sorted(coordinator.groups) == ["a", "b", "c"]
    await asyncio.sleep(SESSION_MS / 1000 + 0.01)
    assert coordinator.groups == {}


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_refusals(coordinator) -> None:
    first = await joined(coordinator)
    assert join(coordinator, "stranger") == JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, "stranger")
    assert join(coordinator, protocols=[("sticky", b"")]) == JoinResult(
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    )
    assert join(coordinator, protocol_type="connect") == JoinResult(
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    )
    assert coordinator.join("g", "", "c", 10, REBALANCE_MS, "consumer", RANGE) == JoinResult(
        ErrorCode.INVALID_SESSION_TIMEOUT
    )
    assert coordinator.join("", "", "c", SESSION_MS, 1, "consumer", RANGE) == JoinResult(
        ErrorCode.INVALID_GROUP_ID
    )
    assert coordinator.sync("g", 7, first.member_id, {}) == (ErrorCode.ILLEGAL_GENERATION, b"")
    assert coordinator.sync("h", 1, first.member_id, {}) == (ErrorCode.UNKNOWN_MEMBER_ID, b"")
    assert coordinator.heartbeat("h", 1, "x") == ErrorCode.UNKNOWN_MEMBER_ID
    # A member alone may switch protocols: that rebalances its group.
    answer = join(coordinator, first.member_id, [("sticky", b"s")])
    switched = answer if isinstance(answer, JoinResult) else await answer
    assert (switched.generation, switched.protocol) == (2, "sticky")
    # While the leader has not synced, commits wait for the rebalance.
    assert coordinator.commit_error("g", 2, first.member_id) == ErrorCode.REBALANCE_IN_PROGRESS
    assert coordinator.commit_error("other", 0, "x") == ErrorCode.ILLEGAL_GENERATION
    assert coordinator.commit_error("other", -1, "") == ErrorCode.NONE


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_close_answers_parked_joins_and_syncs(coordinator) -> None:
    first = await joined(coordinator)
    await sync(coordinator, first, {first.member_id: b"x"})
    second = join(coordinator)
    assert isinstance(second, asyncio.Future)
    await coordinator.close()
    assert (await second).error == ErrorCode.COORDINATOR_NOT_AVAILABLE


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(6))
async def test_membership_on_the_wire_decodes_with_kafka_python(coordinator, version: int) -> None:
    """JoinGroup v0-5 and SyncGroup, Heartbeat, LeaveGroup v0-3, one member's life, with
    kafka-python's own encoders and decoders as the oracle."""
    from kafka.protocol.consumer.group import (
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )

    from purgatory.kafka.codec import Reader
    from purgatory.kafka.handlers.membership import MembershipHandlers
    from purgatory.kafka.protocol import ApiKey, RequestHeader

    wire = MembershipHandlers(coordinator)
    small = min(version, 3)

    async def call(handler: Any, key: ApiKey, v: int, request: Any, response: Any) -> Any:
        answer = handler(RequestHeader(key, v, 1, "client"), Reader(request.encode()))
        if not isinstance(answer, bytearray):
            answer = await answer
        return response[v].decode(bytes(answer))

    def join_request(member_id: str) -> Any:
        fields: dict[str, Any] = {
            "group_id": "g",
            "session_timeout_ms": SESSION_MS,
            "member_id": member_id,
            "protocol_type": "consumer",
            "protocols": [("range", b"r")],
        }
        if version >= 1:
            fields["rebalance_timeout_ms"] = REBALANCE_MS
        if version >= 5:
            fields["group_instance_id"] = None
        return JoinGroupRequest[version](**fields)

    member_id = ""
    if version >= 4:
        first = await call(
            wire.join_group, ApiKey.JOIN_GROUP, version, join_request(""), JoinGroupResponse
        )
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED.number
        member_id = first.member_id
    joined = await call(
        wire.join_group, ApiKey.JOIN_GROUP, version, join_request(member_id), JoinGroupResponse
    )
    assert joined.error_code == 0
    assert (joined.generation_id, joined.protocol_name) == (1, "range")
    assert joined.leader == joined.member_id
    assert [(m.member_id, m.metadata) for m in joined.members] == [(joined.member_id, b"r")]
    if version >= 4:
        assert joined.member_id == member_id
    me = joined.member_id

    sync_fields: dict[str, Any] = {"group_id": "g", "generation_id": 1, "member_id": me}
    if small >= 3:
        sync_fields["group_instance_id"] = None
    sync = SyncGroupRequest[small](**sync_fields, assignments=[(me, b"plan")])
    synced = await call(wire.sync_group, ApiKey.SYNC_GROUP, small, sync, SyncGroupResponse)
    assert (synced.error_code, synced.assignment) == (0, b"plan")

    beat_fields = dict(sync_fields)
    beat = HeartbeatRequest[small](**beat_fields)
    beaten = await call(wire.heartbeat, ApiKey.HEARTBEAT, small, beat, HeartbeatResponse)
    assert beaten.error_code == 0

    if small >= 3:
        leave = LeaveGroupRequest[small](group_id="g", members=[(me, None)])
    else:
        leave = LeaveGroupRequest[small](group_id="g", member_id=me)
    left = await call(wire.leave_group, ApiKey.LEAVE_GROUP, small, leave, LeaveGroupResponse)
    assert left.error_code == 0
    if small >= 3:
        assert [(m.member_id, m.error_code) for m in left.members] == [(me, 0)]
    assert coordinator.groups["g"].members == {}
