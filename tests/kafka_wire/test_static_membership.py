"""Static membership (KIP-345, KIP-814) as Kafka's group coordinator runs it: a member with
a ``group.instance.id`` that comes back under a new member id takes its place and its
assignment without a rebalance; the old member id is fenced (FENCED_INSTANCE_ID); it
leaves by its instance id or when its session ends, and a rebalance does not drop it.
First the coordinator on virtual time, then kio round trips, then real clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio_wire import Wire

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import GroupState, JoinResult
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import kio_error

SESSION_MS = 10_000
REBALANCE_MS = 30_000
RANGE = [("range", b"r")]


def join(
    groups: GroupCoordinator,
    instance: str | None,
    member_id: str = "",
    protocols: list[tuple[str, bytes]] = RANGE,
    *,
    skip: bool = False,
) -> JoinResult | asyncio.Future[JoinResult]:
    return groups.join(
        "g",
        member_id,
        "c",
        SESSION_MS,
        REBALANCE_MS,
        "consumer",
        protocols,
        require_known_id=True,
        instance_id=instance,
        skip_assignment=skip,
    )


async def result(answer: JoinResult | asyncio.Future[JoinResult]) -> JoinResult:
    return answer if isinstance(answer, JoinResult) else await answer


async def sync(
    groups: GroupCoordinator,
    joined: JoinResult,
    instance: str | None,
    assignments: dict[str, bytes] | None = None,
) -> tuple[ErrorCode, bytes]:
    answer = groups.sync(
        "g", joined.generation, joined.member_id, assignments or {}, instance_id=instance
    )
    return answer if isinstance(answer, tuple) else await answer


async def stable_pair(groups: GroupCoordinator) -> tuple[JoinResult, JoinResult]:
    """Static members a (the leader) and b, Stable in generation 2, a owning b"A", b b"B"."""
    a = await result(join(groups, "a"))
    assert a.error == ErrorCode.NONE  # a static member joins without MEMBER_ID_REQUIRED
    await sync(groups, a, "a", {a.member_id: b"A"})
    b_answer = join(groups, "b")
    a2 = await result(join(groups, "a", a.member_id))
    b = await result(b_answer)
    assert (a2.generation, b.generation, a2.leader) == (2, 2, a.member_id)
    assert [m[:2] for m in a2.members] == [(a.member_id, "a"), (b.member_id, "b")]
    plan = {a.member_id: b"A", b.member_id: b"B"}
    assert await asyncio.gather(sync(groups, a2, "a", plan), sync(groups, b, "b")) == [
        (ErrorCode.NONE, b"A"),
        (ErrorCode.NONE, b"B"),
    ]
    return a2, b


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_restarted_static_member_keeps_its_assignment_without_a_rebalance(
    coordinator: GroupCoordinator,
) -> None:
    a, b = await stable_pair(coordinator)
    group = coordinator.groups["g"]
    # b restarts: a new JoinGroup with no member id and the same instance id.
    again = join(coordinator, "b")
    assert isinstance(again, JoinResult), "a Stable group answers at once"
    assert again.error == ErrorCode.NONE
    assert again.member_id != b.member_id
    assert again.member_id.startswith("b-")
    assert (again.generation, again.leader, again.members) == (2, a.member_id, ())
    assert group.state is GroupState.STABLE
    assert group.generation == 2
    assert await sync(coordinator, again, "b") == (ErrorCode.NONE, b"B")
    # the other member sees nothing happen
    assert coordinator.heartbeat("g", 2, a.member_id, "a") == ErrorCode.NONE
    # the old member id is fenced everywhere it is given with the instance id
    assert coordinator.heartbeat("g", 2, b.member_id, "b") == ErrorCode.FENCED_INSTANCE_ID
    assert await sync(coordinator, b, "b") == (ErrorCode.FENCED_INSTANCE_ID, b"")
    assert coordinator.commit_error("g", 2, b.member_id, "b") == ErrorCode.FENCED_INSTANCE_ID
    assert (await result(join(coordinator, "b", b.member_id))).error == (
        ErrorCode.FENCED_INSTANCE_ID
    )
    assert coordinator.leave("g", [b.member_id], ["b"]) == [ErrorCode.FENCED_INSTANCE_ID]
    # and without it, it is a member id nobody has
    assert coordinator.heartbeat("g", 2, b.member_id) == ErrorCode.UNKNOWN_MEMBER_ID
    assert coordinator.commit_error("g", 2, again.member_id, "b") == ErrorCode.NONE
    assert coordinator.rebalances.statistics().expired == 0


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_restarted_static_leader_skips_the_assignment_from_join_group_v9(
    coordinator: GroupCoordinator,
) -> None:
    a, b = await stable_pair(coordinator)
    # Before v9 the answer names the old leader id: the new one takes itself for a follower.
    old_style = await result(join(coordinator, "a"))
    assert (old_style.leader, old_style.members, old_style.skip_assignment) == (
        a.member_id,
        (),
        False,
    )
    assert await sync(coordinator, old_style, "a") == (ErrorCode.NONE, b"A")
    # v9+ (KIP-814): the leader is told it leads, who the members are, and to skip.
    new_style = await result(join(coordinator, "a", skip=True))
    assert new_style.leader == new_style.member_id
    assert new_style.skip_assignment
    assert [m[:2] for m in new_style.members] == [(b.member_id, "b"), (new_style.member_id, "a")]
    assert coordinator.groups["g"].generation == 2
    assert await sync(coordinator, new_style, "a") == (ErrorCode.NONE, b"A")


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_static_rejoin_that_changes_the_protocol_rebalances(
    coordinator: GroupCoordinator,
) -> None:
    a = await result(join(coordinator, "a"))
    await sync(coordinator, a, "a", {a.member_id: b"A"})
    # As in Kafka, the old member counts when checking a rejoin's protocols...
    unrelated = await result(join(coordinator, "a", protocols=[("sticky", b"s")]))
    assert unrelated.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # ...but once it is replaced the group chooses anew: sticky now, so it rebalances.
    again = await result(join(coordinator, "a", protocols=[("sticky", b"s"), ("range", b"r")]))
    assert (again.generation, again.protocol, again.leader) == (2, "sticky", again.member_id)


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_static_rejoin_during_a_rebalance_fences_the_parked_old_join(
    coordinator: GroupCoordinator,
) -> None:
    a, b = await stable_pair(coordinator)
    parked_old = join(coordinator, "b", b.member_id, protocols=[("range", b"changed")])
    assert isinstance(parked_old, asyncio.Future)  # b's new metadata starts a rebalance
    assert coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
    parked_new = join(coordinator, "b")
    assert (await parked_old).error == ErrorCode.FENCED_INSTANCE_ID
    a3, b3 = await asyncio.gather(result(join(coordinator, "a", a.member_id)), parked_new)
    assert (a3.generation, b3.generation) == (3, 3)
    assert {m[0] for m in a3.members} == {a.member_id, b3.member_id}


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_rebalance_keeps_a_static_member_that_did_not_rejoin_until_its_session_ends(
    coordinator: GroupCoordinator,
) -> None:
    loop = asyncio.get_running_loop()
    a, b = await stable_pair(coordinator)
    start = loop.time()
    c = join(coordinator, "c")  # a third member: a rebalance; a rejoins, b is silent
    assert isinstance(c, asyncio.Future)
    a3 = join(coordinator, "a", a.member_id)
    while not c.done():
        await asyncio.sleep(SESSION_MS / 1000 / 3)
        coordinator.heartbeat("g", 2, a.member_id, "a")
    # b's session (10 s) ends before the rebalance timeout (30 s): then all have joined
    joined = await c
    assert loop.time() - start == pytest.approx(SESSION_MS / 1000, abs=SESSION_MS / 2000)
    assert (await result(a3)).generation == joined.generation == 3
    assert "b" not in coordinator.groups["g"].static_members
    assert coordinator.heartbeat("g", 3, b.member_id, "b") == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_static_member_with_a_long_session_outlives_the_rebalance_timeout(
    coordinator: GroupCoordinator,
) -> None:
    a = await result(
        coordinator.join("g", "", "c", 60_000, 5_000, "consumer", RANGE, instance_id="a")
    )
    await sync(coordinator, a, "a", {a.member_id: b"A"})
    loop = asyncio.get_running_loop()
    start = loop.time()
    # a dynamic member joins; a (session 60 s) never rejoins: at the rebalance timeout
    # (5 s) the generation goes out to the newcomer, and a stays in the group.
    newcomer = await result(coordinator.join("g", "", "c", 60_000, 5_000, "consumer", RANGE))
    assert loop.time() - start == pytest.approx(5.0, abs=0.5)
    group = coordinator.groups["g"]
    assert (newcomer.generation, newcomer.leader) == (2, newcomer.member_id)
    assert set(group.members) == {a.member_id, newcomer.member_id}
    assert [m[0] for m in newcomer.members] == [a.member_id, newcomer.member_id]
    # a's heartbeat of the old generation tells it to rejoin
    assert coordinator.heartbeat("g", 1, a.member_id, "a") == ErrorCode.ILLEGAL_GENERATION


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_static_member_leaves_by_its_instance_id(coordinator: GroupCoordinator) -> None:
    a, _b = await stable_pair(coordinator)
    assert coordinator.leave("g", ["", ""], ["b", "nobody"]) == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    group = coordinator.groups["g"]
    assert list(group.members) == [a.member_id]
    assert group.static_members == {"a": a.member_id}
    assert group.state is GroupState.PREPARING_REBALANCE
    # b comes back under its instance id as a new member
    b_again = join(coordinator, "b")
    assert isinstance(b_again, asyncio.Future)
    a3 = await result(join(coordinator, "a", a.member_id))
    assert a3.generation == (await b_again).generation == 3


# -- the wire ---------------------------------------------------------------------------


@pytest_asyncio.fixture
async def wires(door: KafkaFrontDoor) -> AsyncIterator[tuple[Wire, Wire]]:
    connections = [await asyncio.open_connection(*door.addresses[i]) for i in (0, 1)]
    try:
        yield Wire(*connections[0]), Wire(*connections[1])
    finally:
        for _, writer in connections:
            writer.close()
            await writer.wait_closed()


def _join(version: int, instance: str, member_id: str = "") -> dict[str, Any]:
    return {
        "group_id": "g",
        "session_timeout": SESSION_MS,
        "rebalance_timeout": REBALANCE_MS,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"r"}],
        "reason": None,
    }


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [5, 9])
async def test_static_membership_on_the_wire(
    wires: tuple[Wire, Wire], door: KafkaFrontDoor, version: int
) -> None:
    """JoinGroup v5/v9, SyncGroup v3/v5, Heartbeat v3/v4, OffsetCommit v7/v9, LeaveGroup
    v3/v5 with ``group_instance_id``, kio on both ends."""
    one, two = wires
    sync_v, beat_v, commit_v, leave_v = (3, 3, 7, 3) if version == 5 else (5, 4, 9, 5)
    none = kio_error(ErrorCode.NONE)
    fenced = kio_error(ErrorCode.FENCED_INSTANCE_ID)
    first = await one.kio(ApiKey.JOIN_GROUP, version, **_join(version, "i-1"))
    assert first.error_code == none  # no MEMBER_ID_REQUIRED for a static member
    assert [(m.member_id, m.group_instance_id) for m in first.members] == [(first.member_id, "i-1")]
    synced = await one.kio(
        ApiKey.SYNC_GROUP,
        sync_v,
        group_id="g",
        generation_id=first.generation_id,
        member_id=first.member_id,
        group_instance_id="i-1",
        protocol_type="consumer",
        protocol_name="range",
        assignments=[{"member_id": first.member_id, "assignment": b"plan"}],
    )
    assert (synced.error_code, synced.assignment) == (none, b"plan")
    # The same instance comes back on another connection: same generation, same plan.
    second = await two.kio(ApiKey.JOIN_GROUP, version, **_join(version, "i-1"))
    assert second.error_code == none
    assert second.member_id != first.member_id
    assert second.generation_id == first.generation_id
    assert getattr(second, "skip_assignment", False) is (version >= 9)
    assert second.leader == (second.member_id if version >= 9 else first.member_id)
    resynced = await two.kio(
        ApiKey.SYNC_GROUP,
        sync_v,
        group_id="g",
        generation_id=second.generation_id,
        member_id=second.member_id,
        group_instance_id="i-1",
        protocol_type="consumer",
        protocol_name="range",
        assignments=[],
    )
    assert (resynced.error_code, resynced.assignment) == (none, b"plan")
    assert door.coordinator.groups["g"].generation == first.generation_id
    beat = {"group_id": "g", "generation_id": first.generation_id, "group_instance_id": "i-1"}
    old = await one.kio(ApiKey.HEARTBEAT, beat_v, member_id=first.member_id, **beat)
    new = await two.kio(ApiKey.HEARTBEAT, beat_v, member_id=second.member_id, **beat)
    assert (old.error_code, new.error_code) == (fenced, none)
    commit = await one.kio(
        ApiKey.OFFSET_COMMIT,
        commit_v,
        group_id="g",
        generation_id_or_member_epoch=first.generation_id,
        member_id=first.member_id,
        group_instance_id="i-1",
        retention_time=-1,
        topics=[
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": None}
                ],
            }
        ],
    )
    assert commit.topics[0].partitions[0].error_code == fenced
    described = await one.kio(ApiKey.DESCRIBE_GROUPS, 5, groups=["g"])
    assert [(m.member_id, m.group_instance_id) for m in described.groups[0].members] == [
        (second.member_id, "i-1")
    ]
    left = await one.kio(
        ApiKey.LEAVE_GROUP,
        leave_v,
        group_id="g",
        members=[{"member_id": "", "group_instance_id": "i-1", "reason": None}],
    )
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in left.members] == [
        ("", "i-1", none)
    ]
    assert door.coordinator.groups["g"].members == {}


# -- real clients ------------------------------------------------------------------------

CLIENT_TIMEOUT = 60.0


class Rebalances:
    """An aiokafka rebalance listener that counts what it is told."""

    def __init__(self) -> None:
        self.assigned: list[set[Any]] = []
        self.revoked = 0

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.revoked += 1

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.assigned.append(set(assigned))


async def _settled(*consumers: Any) -> None:
    while not all(len(c.assignment()) == 1 for c in consumers):
        await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))


@pytest.mark.asyncio
async def test_aiokafka_static_member_restarts_without_a_rebalance(door: KafkaFrontDoor) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    def consumer(instance: str) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            bootstrap_servers=door.bootstrap,
            group_id="static",
            group_instance_id=instance,
            enable_auto_commit=False,
            heartbeat_interval_ms=100,  # would hear of a rebalance at once
            session_timeout_ms=10_000,
        )

    class Listener(Rebalances, ConsumerRebalanceListener):  # type: ignore[misc]
        pass

    seen_a, seen_b, seen_b2 = Listener(), Listener(), Listener()
    a, b = consumer("a"), consumer("b")
    async with asyncio.timeout(CLIENT_TIMEOUT):
        a.subscribe(["t"], listener=seen_a)
        b.subscribe(["t"], listener=seen_b)
        await a.start()
        try:
            await b.start()
            await _settled(a, b)
            group = door.coordinator.groups["static"]
            generation, b_owned = group.generation, b.assignment()
            rounds_a = len(seen_a.assigned)
            joins = door.stats.requests_of("JOIN_GROUP")
            await b.stop()  # a static member sends no LeaveGroup: it stays in the group
            assert door.stats.requests_of("LEAVE_GROUP") == 0
            b2 = consumer("b")
            b2.subscribe(["t"], listener=seen_b2)
            await b2.start()
            try:
                await _settled(b2)
                for _ in range(10):  # a keeps heartbeating: no rebalance reaches it
                    await asyncio.gather(a.getmany(timeout_ms=100), b2.getmany(timeout_ms=100))
                assert b2.assignment() == b_owned
                assert seen_b2.assigned == [b_owned]
                assert len(seen_a.assigned) == rounds_a
                assert group.generation == generation
                assert door.stats.requests_of("JOIN_GROUP") == joins + 1  # b2's only
                assert {m.instance_id for m in group.members.values()} == {"a", "b"}
            finally:
                await b2.stop()
        finally:
            await a.stop()


def test_confluent_static_member_restarts_without_a_rebalance_and_a_twin_is_fenced(
    kafka_cluster: Any,
) -> None:
    import time

    from confluent_kafka import Consumer, KafkaError, KafkaException

    kafka_cluster.create_topic("s", partitions=2, replication_factor=1)
    assignments: dict[str, list[list[int]]] = {}
    errors: list[KafkaError] = []
    made: list[Any] = []

    def consumer(name: str, instance: str) -> Any:
        assignments[name] = []
        member = Consumer(
            {
                "bootstrap.servers": kafka_cluster.bootstrap_servers,
                "group.id": "static",
                "group.instance.id": instance,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 100,
                "enable.auto.commit": False,
                "error_cb": errors.append,
            }
        )
        member.subscribe(
            ["s"],
            on_assign=lambda _, parts: assignments[name].append([p.partition for p in parts]),
        )
        made.append(member)
        return member

    def poll_until(done: Any, *members: Any) -> None:
        deadline = time.monotonic() + CLIENT_TIMEOUT / 3
        while not done():
            assert time.monotonic() < deadline, [(e.code(), e.str(), e.fatal()) for e in errors]
            for member in members:
                try:
                    message = member.poll(0.05)
                except KafkaException as fatal:
                    errors.append(fatal.args[0])
                    continue
                if message is not None and message.error() is not None:
                    errors.append(message.error())

    try:
        a, b = consumer("a", "a"), consumer("b", "b")
        poll_until(lambda: len(a.assignment()) == len(b.assignment()) == 1, a, b)
        rounds_a = len(assignments["a"])
        b_owned = [p.partition for p in b.assignment()]
        b.close()  # static: no LeaveGroup, its place is kept for its session
        b2 = consumer("b2", "b")
        poll_until(lambda: len(b2.assignment()) == 1, a, b2)
        end = time.monotonic() + 1.5  # a heartbeats every 100 ms meanwhile
        poll_until(lambda: time.monotonic() > end, a, b2)
        assert [p.partition for p in b2.assignment()] == b_owned
        assert len(assignments["a"]) == rounds_a
        # A twin with the same instance id takes the place; b2, still running, is fenced.
        twin = consumer("twin", "b")
        # librdkafka makes FENCED_INSTANCE_ID (its text below) a fatal error of the consumer.
        fenced_text = "Static consumer fenced by other consumer with same group.instance.id"

        def fenced() -> bool:
            return any(e.code() == KafkaError._FATAL and fenced_text in e.str() for e in errors)

        poll_until(fenced, b2, twin)
        poll_until(lambda: len(twin.assignment()) == 1, a, twin)
        assert [p.partition for p in twin.assignment()] == b_owned
        assert len(assignments["a"]) == rounds_a
    finally:
        for member in made:
            member.close()  # closing twice is a no-op
