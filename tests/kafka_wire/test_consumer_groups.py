"""KIP-848 consumer groups (``group.protocol=consumer``): ConsumerGroupHeartbeat with the
coordinator's own assignment (uniform, range), revocation before reassignment, epochs
and their fencing, ConsumerGroupDescribe, commits checked by member epoch; then three
librdkafka consumers sharing a topic, surviving one leaving, committing."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio_wire import Wire

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.groups import JoinResult
from purgatory.kafka.coordinator.offsets import Committed
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import kio_error


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(brokers=1, seed=1, topics={"t": (4, 1), "u": (2, 1)}) as k:
        yield k


@pytest_asyncio.fixture
async def wire(kafka: AsyncEmbeddedKafka) -> AsyncIterator[Wire]:
    reader, writer = await asyncio.open_connection(*kafka.front_door.addresses[0])
    try:
        yield Wire(reader, writer)
    finally:
        writer.close()
        await writer.wait_closed()


def _owned(answer: Any, door: KafkaFrontDoor) -> set[tuple[str, int]] | None:
    if answer.assignment is None:
        return None
    return {
        (door.cluster.topic_name(tp.topic_id) or "?", p)
        for tp in answer.assignment.topic_partitions
        for p in tp.partitions
    }


def _as_request(owned: set[tuple[str, int]], door: KafkaFrontDoor) -> list[dict[str, Any]]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic, p in sorted(owned):
        topic_id = door.cluster.topic_id(topic)
        assert topic_id is not None
        by_topic.setdefault(topic_id, []).append(p)
    return [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()]


async def _beat(
    wire: Wire,
    member: str,
    epoch: int,
    *,
    topics: list[str] | None = None,
    owned: list[dict[str, Any]] | None = None,
    assignor: str | None = None,
    rebalance_ms: int = -1,
    group: str = "g",
) -> Any:
    return await wire.kio(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=rebalance_ms,
        subscribed_topic_names=topics,
        subscribed_topic_regex=None,
        server_assignor=assignor,
        topic_partitions=owned,
    )


@pytest.mark.asyncio
async def test_members_join_revoke_before_reassignment_and_leave(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    door = kafka.front_door
    none = kio_error(ErrorCode.NONE)
    a = await _beat(wire, "a", 0, topics=["t"], owned=[], rebalance_ms=30_000)
    assert (a.error_code, a.member_id, a.member_epoch) == (none, "a", 1)
    assert _owned(a, door) == {("t", 0), ("t", 1), ("t", 2), ("t", 3)}
    assert a.heartbeat_interval.total_seconds() == 5  # group.consumer.heartbeat.interval.ms
    # b joins: epoch 2; a must first give up half, b gets nothing a still holds
    b = await _beat(wire, "b", 0, topics=["t"], owned=[], rebalance_ms=30_000)
    assert (b.member_epoch, _owned(b, door)) == (2, set())
    a_keeps = await _beat(wire, "a", 1)
    assert a_keeps.member_epoch == 1  # revoking: still its old epoch
    kept = _owned(a_keeps, door)
    assert kept is not None
    assert len(kept) == 2
    # a reports it gave the rest up: it moves to epoch 2; b then gets them
    a2 = await _beat(wire, "a", 1, owned=_as_request(kept, door))
    assert (a2.member_epoch, _owned(a2, door)) == (2, kept)
    b2 = await _beat(wire, "b", 2)
    assert _owned(b2, door) == {("t", p) for p in range(4)} - kept
    group = door.coordinator.consumer_group("g")
    assert group is not None
    assert group.state() == "Stable"
    # describe
    described = await wire.kio(
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        1,
        group_ids=["g", "nope"],
        include_authorized_operations=False,
    )
    g, nope = described.groups
    assert (g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        "Stable",
        2,
        2,
        "uniform",
    )
    assert sorted((m.member_id, m.member_epoch) for m in g.members) == [("a", 2), ("b", 2)]
    assert {m.member_id: tuple(m.subscribed_topic_names) for m in g.members} == {
        "a": ("t",),
        "b": ("t",),
    }
    assert nope.error_code == kio_error(ErrorCode.GROUP_ID_NOT_FOUND)
    # commits are checked against the member epoch (OffsetCommit v9)
    commit = {
        "group_id": "g",
        "member_id": "b",
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
    }
    stale = await wire.kio(ApiKey.OFFSET_COMMIT, 9, generation_id_or_member_epoch=1, **commit)
    fine = await wire.kio(ApiKey.OFFSET_COMMIT, 9, generation_id_or_member_epoch=2, **commit)
    assert stale.topics[0].partitions[0].error_code == kio_error(ErrorCode.STALE_MEMBER_EPOCH)
    assert fine.topics[0].partitions[0].error_code == none
    # a leaves (epoch -1): b gets everything at its next heartbeat
    left = await _beat(wire, "a", -1)
    assert (left.error_code, left.member_epoch) == (none, -1)
    b3 = await _beat(wire, "b", 2)
    assert b3.member_epoch == 3
    assert _owned(b3, door) == {("t", p) for p in range(4)}


@pytest.mark.asyncio
async def test_heartbeat_refusals(kafka: AsyncEmbeddedKafka, wire: Wire) -> None:
    def code(answer: Any) -> Any:
        return answer.error_code

    assert code(await _beat(wire, "x", 3, topics=["t"])) == kio_error(ErrorCode.UNKNOWN_MEMBER_ID)
    assert code(await _beat(wire, "x", 0, rebalance_ms=1000)) == kio_error(
        ErrorCode.INVALID_REQUEST
    )  # a first heartbeat names its subscription
    assert code(await _beat(wire, "x", 0, topics=["t"], assignor="sticky", rebalance_ms=1)) == (
        kio_error(ErrorCode.UNSUPPORTED_ASSIGNOR)
    )
    joined = await _beat(wire, "x", 0, topics=["t"], owned=[], rebalance_ms=1000)
    assert joined.member_epoch == 1
    assert code(await _beat(wire, "x", 5)) == kio_error(ErrorCode.FENCED_MEMBER_EPOCH)
    assert code(await _beat(wire, "nobody", -1)) == kio_error(ErrorCode.UNKNOWN_MEMBER_ID)


@pytest.mark.asyncio
async def test_the_range_assignor_and_a_member_that_keeps_what_it_must_revoke_is_fenced(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    door = kafka.front_door
    a = await _beat(wire, "a", 0, topics=["t", "u"], owned=[], assignor="range", rebalance_ms=200)
    assert _owned(a, door) == {("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 0), ("u", 1)}
    b = await _beat(wire, "b", 0, topics=["t", "u"], owned=[], assignor="range", rebalance_ms=200)
    assert b.member_epoch == 2
    # range: per topic, a takes the first half, b the second
    group = door.coordinator.consumer_group("g")
    assert group is not None
    assert group.target == {
        "a": {door.cluster.topic_id("t"): {0, 1}, door.cluster.topic_id("u"): {0}},
        "b": {door.cluster.topic_id("t"): {2, 3}, door.cluster.topic_id("u"): {1}},
    }
    await _beat(wire, "a", 1)  # told to revoke; never reports it did
    await asyncio.sleep(0.4)  # past its rebalance timeout (200 ms): fenced, removed
    assert list(group.members) == ["b"]
    again = await _beat(wire, "a", 1)
    assert again.error_code == kio_error(ErrorCode.UNKNOWN_MEMBER_ID)
    b2 = await _beat(wire, "b", 2)
    assert len(_owned(b2, door) or ()) == 6


@pytest.mark.asyncio
async def test_the_other_group_apis_see_a_consumer_group(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    door = kafka.front_door
    none = kio_error(ErrorCode.NONE)
    await _beat(wire, "a", 0, topics=["t"], owned=[], rebalance_ms=1000)
    door.offsets.commit("g", "t", 0, Committed(4, -1, ""))
    door.offsets.commit("g", "u", 0, Committed(2, -1, ""))
    listed = await wire.kio(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["consumer"])
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed.groups] == [
        ("g", "consumer", "consumer", "Stable")
    ]
    classic_only = await wire.kio(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["classic"])
    assert classic_only.groups == ()
    described = await wire.kio(
        ApiKey.DESCRIBE_GROUPS, 6, groups=["g"], include_authorized_operations=False
    )
    assert described.groups[0].error_code == kio_error(ErrorCode.GROUP_ID_NOT_FOUND)  # not classic
    # OffsetDelete: the topic its members subscribe to stays, the other goes
    deleted = await wire.kio(
        ApiKey.OFFSET_DELETE,
        0,
        group_id="g",
        topics=[
            {"name": "t", "partitions": [{"partition_index": 0}]},
            {"name": "u", "partitions": [{"partition_index": 0}]},
        ],
    )
    assert [(t.name, t.partitions[0].error_code) for t in deleted.topics] == [
        ("t", kio_error(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)),
        ("u", none),
    ]
    assert sorted(door.offsets.committed) == [("g", "t", 0)]
    # DeleteGroups: refused while it has members, then it goes with its offsets
    busy = await wire.kio(ApiKey.DELETE_GROUPS, 2, groups_names=["g"])
    assert busy.results[0].error_code == kio_error(ErrorCode.NON_EMPTY_GROUP)
    await _beat(wire, "a", -1)
    gone = await wire.kio(ApiKey.DELETE_GROUPS, 2, groups_names=["g"])
    assert gone.results[0].error_code == none
    assert door.coordinator.groups == {}
    assert door.offsets.committed == {}
    # a name a classic group with members holds is not a consumer group's
    joined = door.coordinator.join("classic", "", "c", 10_000, 10_000, "consumer", [("r", b"")])
    assert isinstance(joined, asyncio.Future)
    await joined
    taken = await _beat(wire, "x", 0, topics=["t"], owned=[], rebalance_ms=1000, group="classic")
    assert taken.error_code == kio_error(ErrorCode.GROUP_ID_NOT_FOUND)


@pytest.mark.asyncio
async def test_a_group_id_is_a_classic_group_or_a_consumer_group(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    """Kafka's rules (GroupMetadataManager, no online migration): a JoinGroup to a
    consumer group with members is GROUP_ID_NOT_FOUND, one to an empty consumer group
    turns it into a classic group (before: a classic group of the same name beside it); a
    consumer heartbeat other than a join to a classic group is GROUP_ID_NOT_FOUND (before:
    UNKNOWN_MEMBER_ID), a join to an empty classic group turns it into a consumer group."""
    door = kafka.front_door
    coordinator = door.coordinator
    not_found = kio_error(ErrorCode.GROUP_ID_NOT_FOUND)
    await _beat(wire, "a", 0, topics=["t"], owned=[], rebalance_ms=1000)
    refused = coordinator.join("g", "", "c", 10_000, 10_000, "consumer", [("r", b"")])
    assert refused == JoinResult(ErrorCode.GROUP_ID_NOT_FOUND)
    await _beat(wire, "a", -1)  # the consumer group is empty now
    joined = coordinator.join("g", "", "c", 10_000, 10_000, "consumer", [("r", b"")])
    assert isinstance(joined, asyncio.Future)
    member = (await joined).member_id
    assert coordinator.consumer_group("g") is None
    assert coordinator.classic_group("g") is not None
    described = await wire.kio(
        ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=["g"], include_authorized_operations=False
    )
    (classic,) = described.groups
    assert (classic.error_code, classic.error_message) == (
        not_found,
        "Group g is not a consumer group.",
    )
    assert (await _beat(wire, "a", -1)).error_code == not_found
    assert (await _beat(wire, "a", 1)).error_code == not_found
    assert coordinator.leave("g", [member]) == [ErrorCode.NONE]  # the classic group empties
    again = await _beat(wire, "a", 0, topics=["t"], owned=[], rebalance_ms=1000)
    assert again.error_code == kio_error(ErrorCode.NONE)
    assert coordinator.classic_group("g") is None
    assert coordinator.consumer_group("g") is not None


def test_three_librdkafka_consumers_share_a_topic_survive_a_leave_and_commit() -> None:
    from confluent_kafka import Consumer, Producer

    from purgatory.kafka.embedded import EmbeddedKafka

    configs = {"group.consumer.heartbeat.interval.ms": "200"}
    with EmbeddedKafka(brokers=3, seed=1, topics={"s": (6, 3)}, configs=configs) as kafka:
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
        for i in range(60):
            producer.produce("s", f"a{i}".encode(), partition=i % 6)
        producer.flush()

        def consumer() -> Any:
            member = Consumer(
                {
                    "bootstrap.servers": kafka.bootstrap_servers,
                    "group.id": "kip848",
                    "group.protocol": "consumer",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            member.subscribe(["s"])
            return member

        members = [consumer() for _ in range(3)]
        got: set[bytes] = set()

        def poll_until(done: Any, polled: list[Any]) -> None:
            deadline = time.monotonic() + 30
            while not done():
                assert time.monotonic() < deadline
                for member in polled:
                    message = member.poll(0.05)
                    if message is not None and message.error() is None:
                        got.add(message.value())

        try:
            poll_until(
                lambda: len(got) == 60 and all(len(m.assignment()) == 2 for m in members),
                members,
            )
            owned = [{p.partition for p in m.assignment()} for m in members]
            assert set.union(*owned) == set(range(6))  # shared, each partition once
            for member in members:
                member.commit(asynchronous=False)
            committed = kafka._get(lambda k: dict(k.front_door.offsets.committed))
            assert {key[1:]: v.offset for key, v in committed.items()} == {
                ("s", p): 10 for p in range(6)
            }
            members.pop().close()  # leaves (epoch -1): the other two take its partitions
            poll_until(lambda: all(len(m.assignment()) == 3 for m in members), members)
            producer.produce("s", b"late", partition=0)
            producer.flush()
            got.clear()
            poll_until(lambda: got == {b"late"}, members)  # nothing read twice
        finally:
            for member in members:
                member.close()
