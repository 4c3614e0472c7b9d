"""The group coordinator's state machine, on virtual time: generations, rebalances parked
in DelayedJoin, sessions ended by DelayedHeartbeat, and Kafka's error codes; then every version
of the group APIs on the wire (membership, DescribeGroups, ListGroups, offsets)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio_wire import read_frame, read_response, request_frame

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import GroupState, JoinResult
from purgatory.kafka.coordinator.offsets import Committed
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import kio_error

SESSION_MS = 10_000
REBALANCE_MS = 30_000
RANGE = [("range", b"r"), ("roundrobin", b"rr")]


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
    assert first.members == ((first.member_id, None, b"r"),)  # the leader sees every subscription
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


# -- on the wire -------------------------------------------------------------------------
#
# Requests go over a real socket to an embedded cluster's broker. kafka-python's classes
# (generated from Kafka's schemas, independently of kio) encode each version's request and
# decode its answer: the oracle of every version. kio itself round-trips the highest.


class Wire:
    """One connection to a broker of an embedded cluster."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.correlation = 0

    async def _exchange(self, frame: bytes) -> bytes:
        self.writer.write(frame)
        return await read_frame(self.reader)

    async def ask(self, request: Any, response: Any) -> Any:
        """A kafka-python request (its version set) and the class of its answer."""
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id="tester")
        frame = await self._exchange(bytes(request.encode(header=True, framed=True)))
        answer = response.decode(frame, version=request.API_VERSION, header=True)
        assert answer.header.correlation_id == self.correlation
        return answer

    async def kio(self, request: Any) -> Any:
        """A kio request, answered with kio's response of its version."""
        self.correlation += 1
        frame = await self._exchange(
            request_frame(request, correlation_id=self.correlation, client_id="tester")
        )
        answer_header, size, answer, read = read_response(
            frame, request.__api_key__, request.__version__
        )
        assert answer_header.correlation_id == self.correlation
        assert size + read == len(frame)
        return answer


@pytest_asyncio.fixture
async def wire(door: Any) -> AsyncIterator[Wire]:
    reader, writer = await asyncio.open_connection(*door.addresses[0])
    try:
        yield Wire(reader, writer)
    finally:
        writer.close()
        await writer.wait_closed()


def kio_request(key: Any, version: int, **values: Any) -> Any:
    from purgatory.kafka.schemas import build, request_type

    return build(request_type(key, version), values)


async def kp_join(wire: Wire, version: int, member_id: str = "", group: str = "g") -> Any:
    from kafka.protocol.consumer.group import JoinGroupRequest, JoinGroupResponse

    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"r")
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[protocol],
        reason="test",
        version=version,
    )
    return await wire.ask(request, JoinGroupResponse)


async def kp_member(wire: Wire, version: int, group: str = "g") -> Any:
    """A member that joined (with the id MEMBER_ID_REQUIRED gave it, v4+) and leads."""
    member_id = ""
    if version >= 4:
        first = await kp_join(wire, version, group=group)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED.number
        assert first.generation_id == -1
        if version >= 7:
            assert (first.protocol_type, first.protocol_name) == (None, None)
        member_id = first.member_id
    joined = await kp_join(wire, version, member_id, group=group)
    assert joined.error_code == 0
    return joined


async def kp_sync(wire: Wire, version: int, joined: Any, **protocol: Any) -> Any:
    from kafka.protocol.consumer.group import SyncGroupRequest, SyncGroupResponse

    assignment = SyncGroupRequest.SyncGroupRequestAssignment(
        member_id=joined.member_id, assignment=b"plan"
    )
    request = SyncGroupRequest(
        group_id="g",
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        group_instance_id=None,
        assignments=[assignment],
        version=version,
        **protocol,
    )
    return await wire.ask(request, SyncGroupResponse)


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(10))
async def test_membership_every_version_on_the_wire(wire: Wire, door: Any, version: int) -> None:
    """JoinGroup v0-9 with SyncGroup, Heartbeat and LeaveGroup at the nearest version each
    has (0-5, 0-4, 0-5): one member's life, decoded by kafka-python."""
    from kafka.protocol.consumer.group import (
        HeartbeatRequest,
        HeartbeatResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
    )

    joined = await kp_member(wire, version)
    me = joined.member_id
    assert me.startswith("tester-")
    assert (joined.generation_id, joined.protocol_name, joined.leader) == (1, "range", me)
    assert [(m.member_id, m.metadata) for m in joined.members] == [(me, b"r")]
    if version >= 5:
        assert joined.members[0].group_instance_id is None
    if version >= 7:
        assert joined.protocol_type == "consumer"
    if version >= 9:
        assert joined.skip_assignment is False

    sync_version = min(version, 5)
    synced = await kp_sync(wire, sync_version, joined)
    assert (synced.error_code, synced.assignment) == (0, b"plan")
    if sync_version >= 5:
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")

    beat_version = min(version, 4)
    beat = HeartbeatRequest(
        group_id="g", generation_id=1, member_id=me, group_instance_id=None, version=beat_version
    )
    assert (await wire.ask(beat, HeartbeatResponse)).error_code == 0

    leave_version = min(version, 5)
    if leave_version >= 3:
        identity = LeaveGroupRequest.MemberIdentity(member_id=me, group_instance_id=None)
        leave = LeaveGroupRequest(group_id="g", members=[identity], version=leave_version)
    else:
        leave = LeaveGroupRequest(group_id="g", member_id=me, version=leave_version)
    left = await wire.ask(leave, LeaveGroupResponse)
    assert left.error_code == 0
    if leave_version >= 3:
        assert [(m.member_id, m.error_code) for m in left.members] == [(me, 0)]
    assert door.coordinator.groups["g"].members == {}
    assert door.stats.requests["JOIN_GROUP", version] == (2 if version >= 4 else 1)


@pytest.mark.asyncio
async def test_sync_group_v5_checks_the_protocol_it_is_given(wire: Wire) -> None:
    joined = await kp_member(wire, 9)
    wrong = await kp_sync(wire, 5, joined, protocol_type="consumer", protocol_name="sticky")
    assert wrong.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL.number
    assert (wrong.protocol_type, wrong.protocol_name, wrong.assignment) == (None, None, b"")
    other = await kp_sync(wire, 5, joined, protocol_type="connect", protocol_name=None)
    assert other.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL.number
    right = await kp_sync(wire, 5, joined, protocol_type="consumer", protocol_name="range")
    assert (right.error_code, right.protocol_name, right.assignment) == (0, "range", b"plan")


@pytest.mark.asyncio
async def test_leave_group_v3_plus_answers_each_member_and_an_unknown_group_at_the_top(
    wire: Wire, door: Any
) -> None:
    one = await kp_member(wire, 3)  # v3: no MEMBER_ID_REQUIRED
    await kp_sync(wire, 3, one)
    # a second member, on a connection of its own: its join parks until the first rejoins
    reader, writer = await asyncio.open_connection(*door.addresses[1])
    try:
        second = asyncio.ensure_future(kp_join(Wire(reader, writer), 3))
        while len(door.coordinator.groups["g"].members) < 2:  # noqa: ASYNC110 (no event)
            await asyncio.sleep(0.01)
        await kp_join(wire, 3, one.member_id)
        two = await second
    finally:
        writer.close()
        await writer.wait_closed()
    assert len(door.coordinator.groups["g"].members) == 2

    leave = kio_request(
        ApiKey.LEAVE_GROUP,
        5,
        group_id="g",
        members=[
            {"member_id": one.member_id, "group_instance_id": None, "reason": "done"},
            {"member_id": "nobody", "group_instance_id": "i-1"},
            {"member_id": two.member_id},
        ],
    )
    left = await wire.kio(leave)
    assert left.error_code == kio_error(ErrorCode.NONE)
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in left.members] == [
        (one.member_id, None, kio_error(ErrorCode.NONE)),
        ("nobody", "i-1", kio_error(ErrorCode.UNKNOWN_MEMBER_ID)),
        (two.member_id, None, kio_error(ErrorCode.NONE)),
    ]
    assert door.coordinator.groups["g"].members == {}
    unknown = await wire.kio(
        kio_request(ApiKey.LEAVE_GROUP, 5, group_id="nowhere", members=[{"member_id": "m"}])
    )
    assert (unknown.error_code, unknown.members) == (kio_error(ErrorCode.UNKNOWN_MEMBER_ID), ())


@pytest.mark.asyncio
async def test_membership_round_trips_kio_at_the_highest_versions(wire: Wire) -> None:
    """JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5 (flexible), with kio."""
    first = await wire.kio(
        kio_request(
            ApiKey.JOIN_GROUP,
            9,
            group_id="g",
            session_timeout=SESSION_MS,
            rebalance_timeout=REBALANCE_MS,
            member_id="",
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b"r"}],
            reason="starting",
        )
    )
    assert first.error_code == kio_error(ErrorCode.MEMBER_ID_REQUIRED)
    joined = await wire.kio(
        kio_request(
            ApiKey.JOIN_GROUP,
            9,
            group_id="g",
            session_timeout=SESSION_MS,
            rebalance_timeout=REBALANCE_MS,
            member_id=first.member_id,
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b"r"}],
        )
    )
    me = first.member_id
    assert joined.error_code == kio_error(ErrorCode.NONE)
    assert (joined.protocol_type, joined.protocol_name, joined.leader) == ("consumer", "range", me)
    assert (joined.member_id, joined.skip_assignment) == (me, False)
    assert [(m.member_id, m.metadata) for m in joined.members] == [(me, b"r")]
    synced = await wire.kio(
        kio_request(
            ApiKey.SYNC_GROUP,
            5,
            group_id="g",
            generation_id=joined.generation_id,
            member_id=me,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[{"member_id": me, "assignment": b"plan"}],
        )
    )
    assert (synced.error_code, synced.assignment) == (kio_error(ErrorCode.NONE), b"plan")
    assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    beat = await wire.kio(
        kio_request(ApiKey.HEARTBEAT, 4, group_id="g", generation_id=9, member_id=me)
    )
    assert beat.error_code == kio_error(ErrorCode.ILLEGAL_GENERATION)
    left = await wire.kio(
        kio_request(ApiKey.LEAVE_GROUP, 5, group_id="g", members=[{"member_id": me}])
    )
    assert [m.error_code for m in left.members] == [kio_error(ErrorCode.NONE)]


# -- DescribeGroups, ListGroups ----------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(7))
async def test_describe_groups_every_version(wire: Wire, door: Any, version: int) -> None:
    from kafka.protocol.admin.groups import DescribeGroupsRequest, DescribeGroupsResponse

    joined = await kp_member(wire, 9)
    await kp_sync(wire, 5, joined)
    door.offsets.commit("assigner", "t", 0, Committed(5, -1, ""))
    request = DescribeGroupsRequest(
        groups=["g", "assigner", "nowhere"], include_authorized_operations=True, version=version
    )
    g, assigner, nowhere = (await wire.ask(request, DescribeGroupsResponse)).groups
    assert (g.error_code, g.group_id, g.group_state) == (0, "g", "Stable")
    assert (g.protocol_type, g.protocol_data) == ("consumer", "range")
    [member] = g.members
    assert (member.member_id, member.client_id) == (joined.member_id, "tester")
    assert (member.member_metadata, member.member_assignment) == (b"r", b"plan")
    if version >= 3:
        assert g.authorized_operations is None  # kafka-python's reading of -2**31
    assert (assigner.error_code, assigner.group_state, assigner.members) == (0, "Empty", [])
    if version >= 6:
        assert nowhere.error_code == ErrorCode.GROUP_ID_NOT_FOUND.number
        assert (nowhere.error_message, nowhere.group_state) == ("Group nowhere not found.", "")
    else:
        assert (nowhere.error_code, nowhere.group_state) == (0, "Dead")


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(6))
async def test_list_groups_every_version_with_its_filters(
    wire: Wire, door: Any, version: int
) -> None:
    from kafka.protocol.admin.groups import ListGroupsRequest, ListGroupsResponse

    names = [f"g{i}" for i in range(8)]
    for name in names[:4]:
        await kp_member(wire, 9, group=name)  # CompletingRebalance: nobody synced
    for name in names[4:]:
        door.offsets.commit(name, "t", 0, Committed(1, -1, ""))  # Empty

    async def listed(**filters: Any) -> dict[str, tuple[str, ...]]:
        groups: dict[str, tuple[str, ...]] = {}
        for broker in door.addresses:  # each broker lists the groups it coordinates
            reader, writer = await asyncio.open_connection(*door.addresses[broker])
            try:
                request = ListGroupsRequest(version=version, **filters)
                answer = await Wire(reader, writer).ask(request, ListGroupsResponse)
            finally:
                writer.close()
                await writer.wait_closed()
            assert answer.error_code == 0
            for group in answer.groups:
                values = [group.protocol_type]
                if version >= 4:
                    values.append(group.group_state)
                if version >= 5:
                    values.append(group.group_type)
                groups[group.group_id] = tuple(values)
        return groups

    every = await listed()
    assert sorted(every) == names
    assert every["g0"] == ("consumer", "CompletingRebalance", "classic")[: max(1, version - 2)]
    assert every["g4"] == ("", "Empty", "classic")[: max(1, version - 2)]
    if version >= 4:
        assert sorted(await listed(states_filter=[" EMPTY"])) == names[4:]
        assert sorted(await listed(states_filter=["Stable"])) == []
    if version >= 5:
        assert sorted(await listed(types_filter=["Classic"])) == names
        assert await listed(types_filter=["consumer"]) == {}


@pytest.mark.asyncio
async def test_describe_and_list_groups_round_trip_kio_at_the_highest_versions(
    wire: Wire, door: Any
) -> None:
    door.offsets.commit("g", "t", 0, Committed(1, -1, ""))
    described = await wire.kio(
        kio_request(
            ApiKey.DESCRIBE_GROUPS, 6, groups=["g", "x"], include_authorized_operations=False
        )
    )
    assert [(g.group_id, g.error_code, g.group_state) for g in described.groups] == [
        ("g", kio_error(ErrorCode.NONE), "Empty"),
        ("x", kio_error(ErrorCode.GROUP_ID_NOT_FOUND), ""),
    ]
    listed = await wire.kio(kio_request(ApiKey.LIST_GROUPS, 5, states_filter=["empty"]))
    assert listed.error_code == kio_error(ErrorCode.NONE)
    assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] in (
        [("g", "Empty", "classic")],
        [],  # another broker coordinates it
    )


# -- OffsetCommit, OffsetFetch -----------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(2, 10))
async def test_offset_commit_and_fetch_every_version(wire: Wire, door: Any, version: int) -> None:
    """OffsetCommit v2-9 and OffsetFetch v1-9, decoded by kafka-python: a null metadata is
    fetched back "", as Kafka keeps it."""
    from kafka.protocol.consumer.group import (
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
    )

    topic_type = OffsetCommitRequest.OffsetCommitRequestTopic
    partition_type = topic_type.OffsetCommitRequestPartition
    partitions = [
        partition_type(
            partition_index=0, committed_offset=7, committed_leader_epoch=3, committed_metadata="m"
        ),
        partition_type(partition_index=1, committed_offset=9, committed_metadata=None),
    ]
    commit = OffsetCommitRequest(
        group_id="simple",
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=-1,
        topics=[topic_type(name="t", partitions=partitions)],
        version=version,
    )
    committed = await wire.ask(commit, OffsetCommitResponse)
    [topic] = committed.topics
    assert topic.name == "t"
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, 0), (1, 0)]
    epoch = 3 if version >= 6 else -1
    assert door.offsets.position("simple", "t", 0) == Committed(7, epoch, "m")
    assert door.offsets.position("simple", "t", 1) == Committed(9, -1, "")

    # a generation for a group nobody knows: GROUP_ID_NOT_FOUND from v9, before ILLEGAL_GENERATION
    stranger = OffsetCommitRequest(
        group_id="stranger",
        generation_id_or_member_epoch=3,
        member_id="m",
        retention_time_ms=-1,
        topics=[topic_type(name="t", partitions=partitions[:1])],
        version=version,
    )
    refused = (await wire.ask(stranger, OffsetCommitResponse)).topics[0].partitions[0].error_code
    expected = ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION
    assert refused == expected.number
    assert "stranger" not in door.offsets.groups()

    for fetch_version in {version - 1, version, min(version + 1, 9)}:
        wanted = [("t", [0, 1, 2])]
        if fetch_version >= 8:
            group_type = OffsetFetchRequest.OffsetFetchRequestGroup
            topics = [
                group_type.OffsetFetchRequestTopics(name=name, partition_indexes=indexes)
                for name, indexes in wanted
            ]
            fetch = OffsetFetchRequest(
                groups=[
                    group_type(group_id="simple", topics=topics),
                    group_type(group_id="simple", topics=None),
                    group_type(group_id="nobody", topics=None),
                ],
                version=fetch_version,
            )
            answer = await wire.ask(fetch, OffsetFetchResponse)
            asked, every, nobody = answer.groups
            assert [g.error_code for g in answer.groups] == [0, 0, 0]
            assert (nobody.group_id, nobody.topics) == ("nobody", [])
            got = asked.topics
            assert [
                (p.partition_index, p.committed_offset) for p in every.topics[0].partitions
            ] == [
                (0, 7),
                (1, 9),
            ]
        else:
            topic_fetch = OffsetFetchRequest.OffsetFetchRequestTopic
            fetch = OffsetFetchRequest(
                group_id="simple",
                topics=[topic_fetch(name=n, partition_indexes=i) for n, i in wanted],
                version=fetch_version,
            )
            answer = await wire.ask(fetch, OffsetFetchResponse)
            if fetch_version >= 2:
                assert answer.error_code == 0
            got = answer.topics
        [topic] = got
        assert topic.name == "t"
        fetched = [
            (p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for p in topic.partitions
        ]
        assert fetched == [(0, 7, "m", 0), (1, 9, "", 0), (2, -1, "", 0)]
        if fetch_version >= 5:
            assert [p.committed_leader_epoch for p in topic.partitions] == [epoch, -1, -1]


@pytest.mark.asyncio
async def test_offsets_round_trip_kio_at_the_highest_versions_served(wire: Wire, door: Any) -> None:
    """The highest versions the front door serves (v10: topics by id), flexible, with
    kio."""
    served = door.advertised()
    commit_version = served[ApiKey.OFFSET_COMMIT][1]
    fetch_version = served[ApiKey.OFFSET_FETCH][1]
    topic = {"name": "t", "topic_id": door.cluster.topic_id("t")}
    committed = await wire.kio(
        kio_request(
            ApiKey.OFFSET_COMMIT,
            commit_version,
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                {
                    **topic,
                    "partitions": [
                        {"partition_index": 1, "committed_offset": 4, "committed_metadata": None}
                    ],
                }
            ],
        )
    )
    [answered] = committed.topics
    assert [(p.partition_index, p.error_code) for p in answered.partitions] == [
        (1, kio_error(ErrorCode.NONE))
    ]
    fetched = await wire.kio(
        kio_request(
            ApiKey.OFFSET_FETCH,
            fetch_version,
            groups=[{"group_id": "g", "topics": [{**topic, "partition_indexes": [1]}]}],
        )
    )
    [group] = fetched.groups
    [partition] = group.topics[0].partitions
    assert (partition.committed_offset, partition.metadata) == (4, "")


@pytest.mark.asyncio
async def test_offsets_v10_name_topics_by_id(door: Any) -> None:
    """OffsetCommit and OffsetFetch v10 name topics by id; an id nobody knows is answered
    UNKNOWN_TOPIC_ID."""
    import uuid

    from purgatory.kafka.handlers.offsets import OffsetHandlers
    from purgatory.kafka.protocol import RequestHeader

    handlers = OffsetHandlers(door.offsets, door.coordinator, door.cluster)
    apis = handlers.apis()
    assert (apis[ApiKey.OFFSET_COMMIT].high, apis[ApiKey.OFFSET_FETCH].high) == (10, 10)
    known = door.cluster.topic_id("t")
    unknown = uuid.uuid4()

    def header(key: ApiKey) -> RequestHeader:
        return RequestHeader(key, 10, 1, "c")

    partitions = [{"partition_index": 0, "committed_offset": 3, "committed_metadata": "x"}]
    commit = kio_request(
        ApiKey.OFFSET_COMMIT,
        10,
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            {"topic_id": known, "partitions": partitions},
            {"topic_id": unknown, "partitions": partitions},
        ],
    )
    answer = handlers.offset_commit(header(ApiKey.OFFSET_COMMIT), commit)
    assert [(t.topic_id, t.partitions[0].error_code) for t in answer.topics] == [
        (known, kio_error(ErrorCode.NONE)),
        (unknown, kio_error(ErrorCode.UNKNOWN_TOPIC_ID)),
    ]
    assert door.offsets.position("g", "t", 0) == Committed(3, -1, "x")
    door.offsets.commit("g", "gone", 0, Committed(1, -1, ""))  # a topic with no id (deleted)
    fetch = kio_request(
        ApiKey.OFFSET_FETCH,
        10,
        groups=[
            {
                "group_id": "g",
                "topics": [
                    {"topic_id": known, "partition_indexes": [0]},
                    {"topic_id": unknown, "partition_indexes": [0]},
                ],
            },
            {"group_id": "g", "topics": None},
        ],
    )
    asked, every = handlers.offset_fetch(header(ApiKey.OFFSET_FETCH), fetch).groups
    assert [
        (t.topic_id, t.partitions[0].committed_offset, t.partitions[0].error_code)
        for t in asked.topics
    ] == [
        (known, 3, kio_error(ErrorCode.NONE)),
        (unknown, -1, kio_error(ErrorCode.UNKNOWN_TOPIC_ID)),
    ]
    assert [t.topic_id for t in every.topics] == [known]  # "gone" has no id to be named by
