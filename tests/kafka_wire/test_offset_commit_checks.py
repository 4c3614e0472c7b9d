"""OffsetCommit and TxnOffsetCommit refused as Kafka refuses them: a topic or partition the
cluster does not have is UNKNOWN_TOPIC_OR_PARTITION for that partition alone, before the
group coordinator is asked (KafkaApis.handleOffsetCommitRequest and
handleTxnOffsetCommitRequest); the group's checks in the order of ClassicGroup's and
ConsumerGroup's validateOffsetCommit (the member, its generation, then the group's
state). kio on both ends, the groups set up on the coordinators directly; then
confluent-kafka's admin ``alter_consumer_group_offsets``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio_wire import read_response, round_trip

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.consumer import HeartbeatRequest
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import GroupState, JoinResult
from purgatory.kafka.coordinator.offsets import Committed
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import build, kio_error, request_type

NONE = kio_error(ErrorCode.NONE)
UNKNOWN_TP = kio_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
TXN = "txn-checks"


async def _call(door: KafkaFrontDoor, api: ApiKey, version: int, /, **values: Any) -> Any:
    request = build(request_type(api, version), values)
    frame = await round_trip(door.addresses[0], request)
    return read_response(frame, api, version).body


def _topics(
    topics: dict[str, list[int]], version: int, door: KafkaFrontDoor, offset: int = 5
) -> list[dict[str, Any]]:
    """OffsetCommit's topics (by id at v10: a topic the cluster lacks by a fresh id)."""
    out = []
    for name, indexes in topics.items():
        partitions = [
            {"partition_index": i, "committed_offset": offset, "committed_metadata": None}
            for i in indexes
        ]
        if version >= 10:
            topic_id = door.cluster.topic_id(name) or uuid.uuid5(uuid.NAMESPACE_DNS, name)
            out.append({"topic_id": topic_id, "partitions": partitions})
        else:
            out.append({"name": name, "partitions": partitions})
    return out


async def _commit(
    door: KafkaFrontDoor,
    version: int,
    topics: dict[str, list[int]],
    *,
    group: str = "g",
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
) -> list[Any]:
    """OffsetCommit at ``version``: each partition's error, in the order asked."""
    values: dict[str, Any] = {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "topics": _topics(topics, version, door),
    }
    if version >= 7:
        values["group_instance_id"] = instance
    if 2 <= version <= 4:
        values["retention_time"] = -1
    answer = await _call(door, ApiKey.OFFSET_COMMIT, version, **values)
    return [p.error_code for t in answer.topics for p in t.partitions]


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [2, 5, 8, 9, 10])
async def test_a_commit_to_a_topic_or_partition_the_cluster_lacks_is_refused_for_it_alone(
    door: KafkaFrontDoor, version: int
) -> None:
    unknown_topic = kio_error(
        ErrorCode.UNKNOWN_TOPIC_ID if version >= 10 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    errors = await _commit(door, version, {"t": [0, 7], "nope": [0]})
    assert errors == [NONE, UNKNOWN_TP, unknown_topic]
    assert sorted(door.offsets.committed) == [("g", "t", 0)]
    # Only partitions nobody has: answered so before the group is looked at (a
    # generation for a group nobody knows would be ILLEGAL_GENERATION / GROUP_ID_NOT_FOUND).
    alone = await _commit(door, version, {"t": [2]}, group="stranger", generation=3, member="m")
    assert alone == [UNKNOWN_TP]
    assert "stranger" not in door.offsets.groups()


async def _completing(coordinator: GroupCoordinator) -> tuple[JoinResult, JoinResult]:
    """Static members a (leader) and b of group "g" in generation 2, CompletingRebalance:
    nobody has synced yet."""

    async def joined(instance: str, member_id: str = "") -> JoinResult:
        answer = coordinator.join(
            "g", member_id, "c", 10_000, 10_000, "consumer", [("range", b"r")], instance_id=instance
        )
        return answer if isinstance(answer, JoinResult) else await answer

    a = await joined("a")
    synced = coordinator.sync("g", a.generation, a.member_id, {a.member_id: b""})
    assert (synced if isinstance(synced, tuple) else await synced)[0] == ErrorCode.NONE
    b_joining = coordinator.join(
        "g", "", "c", 10_000, 10_000, "consumer", [("range", b"r")], instance_id="b"
    )
    assert isinstance(b_joining, asyncio.Future)  # parked: the group prepares a rebalance
    a2 = await joined("a", a.member_id)
    b = await b_joining
    assert (a2.generation, b.generation) == (2, 2)
    assert coordinator.groups["g"].state is GroupState.COMPLETING_REBALANCE
    return a2, b


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [2, 7, 9])
async def test_during_completing_rebalance_the_member_and_generation_are_checked_first(
    door: KafkaFrontDoor, version: int
) -> None:
    """ClassicGroup.validateOffsetCommit: the member, then the generation, and only then
    REBALANCE_IN_PROGRESS for a current member while the group completes its rebalance."""
    a, b = await _completing(door.coordinator)
    t0 = {"t": [0]}
    assert await _commit(door, version, t0, generation=1, member=a.member_id) == [
        kio_error(ErrorCode.ILLEGAL_GENERATION)
    ]
    assert await _commit(door, version, t0, generation=2, member="stranger") == [
        kio_error(ErrorCode.UNKNOWN_MEMBER_ID)
    ]
    assert await _commit(door, version, t0) == [kio_error(ErrorCode.UNKNOWN_MEMBER_ID)]
    if version >= 7:
        assert await _commit(door, version, t0, generation=2, member=b.member_id, instance="a") == [
            kio_error(ErrorCode.FENCED_INSTANCE_ID)
        ]
    assert await _commit(door, version, t0, generation=2, member=a.member_id) == [
        kio_error(ErrorCode.REBALANCE_IN_PROGRESS)
    ]
    assert door.offsets.committed == {}


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [8, 9])
async def test_a_group_known_by_its_offsets_alone_answers_a_generation_unknown_member(
    door: KafkaFrontDoor, version: int
) -> None:
    """Kafka keeps a group that only committed (a "simple" group, Empty): a generation
    given to it is a member it does not have, not a group nobody knows."""
    door.offsets.commit("simple", "t", 0, Committed(1, -1, ""))
    errors = await _commit(door, version, {"t": [0]}, group="simple", generation=3, member="m")
    assert errors == [kio_error(ErrorCode.UNKNOWN_MEMBER_ID)]
    assert door.offsets.position("simple", "t", 0).offset == 1


def _kip848_member(door: KafkaFrontDoor, group: str = "k") -> int:
    """Member "a" of KIP-848 group ``group``, subscribed to t: its member epoch."""
    answer = door.coordinator.consumer_heartbeat(
        HeartbeatRequest(group, "a", 0, "c", rebalance_timeout_ms=10_000, topics=["t"])
    )
    assert answer.error is ErrorCode.NONE
    return answer.epoch


@pytest.mark.asyncio
async def test_a_consumer_group_member_commits_from_version_9_and_an_empty_one_takes_any_id(
    door: KafkaFrontDoor,
) -> None:
    """ConsumerGroup.validateOffsetCommit: a KIP-848 member's OffsetCommit before v9 is
    UNSUPPORTED_VERSION; an epoch of -1 commits to an empty group, whatever member id."""
    epoch = _kip848_member(door)
    t0 = {"t": [0]}
    assert await _commit(door, 8, t0, group="k", generation=epoch, member="a") == [
        kio_error(ErrorCode.UNSUPPORTED_VERSION)
    ]
    assert await _commit(door, 9, t0, group="k", generation=epoch, member="a") == [NONE]
    door.coordinator.consumer_heartbeat(HeartbeatRequest("k", "a", -1, "c"))
    group = door.coordinator.consumer_group("k")
    assert group is not None
    assert not group.members
    assert await _commit(door, 9, t0, group="k", member="a") == [NONE]


# -- TxnOffsetCommit ---------------------------------------------------------------------


@pytest_asyncio.fixture
async def txn_door() -> AsyncIterator[KafkaFrontDoor]:
    """One broker (the coordinator of everything), topic t of 2 partitions."""
    configs = {"transaction.state.log.num.partitions": 1}
    async with AsyncEmbeddedKafka(brokers=1, seed=1, topics={"t": (2, 1)}, configs=configs) as k:
        yield k.front_door


async def _producer(door: KafkaFrontDoor) -> int:
    """A transactional producer, at epoch 0 (``__transaction_state`` made first, as
    FindCoordinator would)."""
    assert await door.transactions.ensure_topic() is ErrorCode.NONE
    init = await _call(
        door,
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id=TXN,
        transaction_timeout=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    assert (init.error_code, init.producer_epoch) == (NONE, 0)
    return int(init.producer_id)


async def _add_offsets(door: KafkaFrontDoor, pid: int, *groups: str) -> None:
    """The offsets of ``groups`` join the producer's transaction."""
    for group in groups:
        added = await _call(
            door,
            ApiKey.ADD_OFFSETS_TO_TXN,
            3,
            transactional_id=TXN,
            producer_id=pid,
            producer_epoch=0,
            group_id=group,
        )
        assert added.error_code == NONE


async def _txn_commit(
    door: KafkaFrontDoor,
    version: int,
    pid: int,
    topics: dict[str, list[int]],
    *,
    group: str = "g",
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
) -> list[Any]:
    values: dict[str, Any] = {
        "transactional_id": TXN,
        "group_id": group,
        "producer_id": pid,
        "producer_epoch": 0,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition_index": i, "committed_offset": 5, "committed_metadata": None}
                    for i in indexes
                ],
            }
            for name, indexes in topics.items()
        ],
    }
    if version >= 3:
        values.update(generation_id=generation, member_id=member, group_instance_id=instance)
    answer = await _call(door, ApiKey.TXN_OFFSET_COMMIT, version, **values)
    return [p.error_code for t in answer.topics for p in t.partitions]


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 2, 3, 4])
async def test_a_txn_commit_to_a_topic_or_partition_the_cluster_lacks_is_refused_for_it_alone(
    txn_door: KafkaFrontDoor, version: int
) -> None:
    door = txn_door
    pid = await _producer(door)
    # before anything is checked against the transaction (not yet given the group)
    assert await _txn_commit(door, version, pid, {"t": [9], "nope": [0]}) == [UNKNOWN_TP] * 2
    await _add_offsets(door, pid, "g")
    errors = await _txn_commit(door, version, pid, {"t": [0, 9], "nope": [0]})
    assert errors == [NONE, UNKNOWN_TP, UNKNOWN_TP]
    assert list(door.offsets.pending.get(("g", pid), {})) == [("t", 0)]


@pytest.mark.asyncio
async def test_a_txn_commit_is_checked_as_a_transactional_one(txn_door: KafkaFrontDoor) -> None:
    """OffsetMetadataManager.validateTransactionalOffsetCommit: no REBALANCE_IN_PROGRESS
    while the group completes a rebalance; the group instance id is checked; a KIP-848
    group's member commits with its epoch (another epoch: ILLEGAL_GENERATION); an empty
    group id is INVALID_GROUP_ID (GroupCoordinatorService)."""
    door = txn_door
    a, b = await _completing(door.coordinator)
    epoch = _kip848_member(door)
    pid = await _producer(door)
    await _add_offsets(door, pid, "g", "k", "")
    t0 = {"t": [0]}
    assert await _txn_commit(door, 3, pid, t0, generation=2, member=a.member_id) == [NONE]
    assert await _txn_commit(door, 3, pid, t0, generation=1, member=a.member_id) == [
        kio_error(ErrorCode.ILLEGAL_GENERATION)
    ]
    assert await _txn_commit(door, 3, pid, t0, member=b.member_id, instance="a") == [
        kio_error(ErrorCode.FENCED_INSTANCE_ID)
    ]
    assert await _txn_commit(door, 3, pid, t0, group="k", generation=epoch, member="a") == [NONE]
    assert await _txn_commit(door, 3, pid, t0, group="k", generation=epoch + 1, member="a") == [
        kio_error(ErrorCode.ILLEGAL_GENERATION)
    ]
    assert await _txn_commit(door, 3, pid, t0, group="k", generation=epoch, member="x") == [
        kio_error(ErrorCode.UNKNOWN_MEMBER_ID)
    ]
    assert await _txn_commit(door, 3, pid, t0, group="") == [kio_error(ErrorCode.INVALID_GROUP_ID)]
    assert sorted(door.offsets.pending) == [("g", pid), ("k", pid)]


# -- a real client ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_confluent_alter_consumer_group_offsets_of_a_topic_nobody_has(
    door: KafkaFrontDoor,
) -> None:
    """confluent-kafka's AdminClient: the partition of a topic that does not exist is
    refused UNKNOWN_TOPIC_OR_PARTITION, and nothing is committed."""
    from confluent_kafka import (
        ConsumerGroupTopicPartitions,
        KafkaError,
        KafkaException,
        TopicPartition,
    )
    from confluent_kafka.admin import AdminClient

    def alter() -> Any:
        admin = AdminClient({"bootstrap.servers": door.bootstrap})
        asked = ConsumerGroupTopicPartitions("admin-g", [TopicPartition("nope", 0, 5)])
        [future] = admin.alter_consumer_group_offsets([asked], request_timeout=10).values()
        try:
            return future.result()
        except KafkaException as exc:
            return exc.args[0]

    answer = await asyncio.to_thread(alter)
    if isinstance(answer, KafkaError):
        assert answer.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, answer
    else:
        [partition] = answer.topic_partitions
        assert partition.error is not None, partition
        assert partition.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert door.offsets.committed == {}


@pytest.mark.asyncio
async def test_an_offset_commit_keeps_the_members_session_a_txn_commit_does_not(
    txn_door: KafkaFrontDoor,
) -> None:
    """OffsetMetadataManager: commitOffset reschedules the member's heartbeat (Stable,
    PreparingRebalance); commitTransactionalOffset does not."""
    door = txn_door
    answer = door.coordinator.join("g", "", "c", 10_000, 10_000, "consumer", [("range", b"r")])
    a = answer if isinstance(answer, JoinResult) else await answer
    synced = door.coordinator.sync("g", a.generation, a.member_id, {a.member_id: b""})
    assert (synced if isinstance(synced, tuple) else await synced)[0] == ErrorCode.NONE
    member = door.coordinator.groups["g"].members[a.member_id]
    session = member.heartbeat
    pid = await _producer(door)
    await _add_offsets(door, pid, "g")
    t0 = {"t": [0]}
    assert await _txn_commit(door, 3, pid, t0, generation=1, member=a.member_id) == [NONE]
    assert member.heartbeat is session
    assert await _commit(door, 9, t0, generation=1, member=a.member_id) == [NONE]
    assert member.heartbeat is not session
