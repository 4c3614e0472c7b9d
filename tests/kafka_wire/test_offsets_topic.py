"""``__consumer_offsets``: an internal topic of the simulated cluster, created at the first
FindCoordinator for a group, with ``offsets.topic.num.partitions`` partitions and
``offsets.topic.replication.factor`` replicas; the leader of partition
``abs(java_hash(group)) % partitions`` coordinates the group (Kafka's rule). Metadata
marks it internal; clients' own filters hide it where they hide it from Kafka."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio_wire import read_frame, read_response, request_frame

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.offsets_topic import (
    GROUP_METADATA_TOPIC,
    java_string_hash,
    partition_for,
)
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import build, kio_error, request_type
from purgatory.sim import Cluster


def test_java_string_hash_and_the_partition_of_a_group() -> None:
    # Values Java's String.hashCode() gives
    assert java_string_hash("") == 0
    assert java_string_hash("g") == 103
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16: two units
    # the closed form, s[0]*31^(n-1) + ... + s[n-1] as a signed 32-bit int
    for text in ["console-consumer-12345", "my-group", "é"]:
        total = sum(ord(c) * 31 ** (len(text) - 1 - i) for i, c in enumerate(text)) % 2**32
        assert java_string_hash(text) == (total - 2**32 if total >= 2**31 else total)
    assert java_string_hash("my-group") < 0
    # Kafka's Utils.abs maps Integer.MIN_VALUE, the hash of this string, to 0
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("my-group", 7) == (abs(java_string_hash("my-group")) % 7)
    assert partition_for("g", 50) == 3


async def _kio(door: KafkaFrontDoor, broker: int, api: ApiKey, version: int, **values: Any) -> Any:
    reader, writer = await asyncio.open_connection(*door.addresses[broker])
    try:
        request = build(request_type(api, version), values)
        writer.write(request_frame(request, correlation_id=1, client_id="t"))
        _, _, answer, _ = read_response(
            await read_frame(reader), request.__api_key__, request.__version__
        )
        return answer
    finally:
        writer.close()
        await writer.wait_closed()


async def _find(door: KafkaFrontDoor, group: str, broker: int = 0) -> Any:
    answer = await _kio(
        door, broker, ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[group]
    )
    return answer.coordinators[0]


async def _metadata(door: KafkaFrontDoor, topics: list[str] | None) -> Any:
    return await _kio(
        door,
        0,
        ApiKey.METADATA,
        12,
        topics=None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


@pytest.mark.asyncio
async def test_the_first_find_coordinator_creates_it_and_its_leader_coordinates(
    door: KafkaFrontDoor,
) -> None:
    before = await _metadata(door, None)
    assert [t.name for t in before.topics] == ["t"]  # not before a group needs it
    found = await _find(door, "orders")
    assert found.error_code == kio_error(ErrorCode.NONE)
    partition = partition_for("orders", 50)
    leader = door.cluster.partition(GROUP_METADATA_TOPIC, partition).leader
    assert (found.node_id, found.port) == (leader, door.addresses[leader][1])
    # every broker names the same coordinator
    for broker in (1, 2):
        assert (await _find(door, "orders", broker)).node_id == leader
    listed = await _metadata(door, None)
    by_name = {t.name: t for t in listed.topics}
    internal = by_name[GROUP_METADATA_TOPIC]
    assert internal.is_internal
    assert not by_name["t"].is_internal
    assert len(internal.partitions) == 50
    assert {len(p.replica_nodes) for p in internal.partitions} == {3}  # 3 brokers: 3
    assert door.cluster.is_internal(GROUP_METADATA_TOPIC)
    # groups spread over the brokers as their partitions' leaders do
    leaders = {(await _find(door, f"group-{i}")).node_id for i in range(12)}
    assert leaders == {0, 1, 2}


@pytest.mark.asyncio
async def test_the_coordinator_moves_with_its_partition_leader(door: KafkaFrontDoor) -> None:
    found = await _find(door, "orders")
    await door.cluster.crash_broker(found.node_id)
    moved = await _find(door, "orders", broker=(found.node_id + 1) % 3)
    assert moved.error_code == kio_error(ErrorCode.NONE)
    assert moved.node_id != found.node_id
    partition = door.cluster.partition(GROUP_METADATA_TOPIC, partition_for("orders", 50))
    assert moved.node_id == partition.leader


@pytest.mark.asyncio
async def test_admin_requests_on_it_are_answered_as_kafka_answers_them(
    door: KafkaFrontDoor,
) -> None:
    leader = (await _find(door, "g")).node_id
    created = await _kio(
        door,
        0,
        ApiKey.CREATE_TOPICS,
        7,
        topics=[
            {
                "name": GROUP_METADATA_TOPIC,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        timeout=1000,
        validate_only=False,
    )
    assert created.topics[0].error_code == kio_error(ErrorCode.TOPIC_ALREADY_EXISTS)
    partition = door.cluster.partition(GROUP_METADATA_TOPIC, 0)
    deleted = await _kio(
        door,
        partition.leader,
        ApiKey.DELETE_RECORDS,
        2,
        topics=[
            {"name": GROUP_METADATA_TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}
        ],
        timeout=1000,
    )
    # Kafka: "Cannot delete records of internal topic __consumer_offsets"
    assert deleted.topics[0].partitions[0].error_code == kio_error(
        ErrorCode.INVALID_TOPIC_EXCEPTION
    )
    assert leader in door.cluster.brokers


@pytest.mark.asyncio
async def test_a_one_broker_cluster_gets_one_replica_and_configs_size_it() -> None:
    async with AsyncEmbeddedKafka(brokers=1, seed=1) as kafka:
        found = await _find(kafka.front_door, "g")
        assert (found.error_code, found.node_id) == (kio_error(ErrorCode.NONE), 0)
        assert list(kafka.cluster.partition(GROUP_METADATA_TOPIC, 0).replicas) == [0]
    configs = {"offsets.topic.num.partitions": "4", "offsets.topic.replication.factor": "2"}
    async with AsyncEmbeddedKafka(brokers=3, seed=1, configs=configs) as kafka:
        await _find(kafka.front_door, "g")
        parts = kafka.cluster.topics[GROUP_METADATA_TOPIC]
        assert [len(p.replicas) for p in parts] == [2, 2, 2, 2]
        assert kafka.topics() == {}  # the embedded cluster's own listing leaves it out


@pytest.mark.asyncio
async def test_a_replication_factor_above_the_brokers_leaves_groups_without_a_coordinator() -> None:
    configs = {"offsets.topic.replication.factor": "3"}
    async with AsyncEmbeddedKafka(brokers=1, seed=1, configs=configs) as kafka:
        found = await _find(kafka.front_door, "g")
        # as Kafka answers while it cannot create the topic: retriable, no node
        assert (found.error_code, found.node_id, found.host, found.port) == (
            kio_error(ErrorCode.COORDINATOR_NOT_AVAILABLE),
            -1,
            "",
            -1,
        )
        assert GROUP_METADATA_TOPIC not in kafka.cluster.topics
        v0 = await _kio(kafka.front_door, 0, ApiKey.FIND_COORDINATOR, 0, key="g")
        assert v0.error_code == kio_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)


@pytest.mark.asyncio
async def test_the_internal_flag_of_the_simulation() -> None:
    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("__transaction_state", 2, 1, internal=True)
        await cluster.create_topic("plain", 1, 1)
        assert cluster.is_internal("__transaction_state")
        assert not cluster.is_internal("plain")
        assert not cluster.is_internal("missing")
        with pytest.raises(TypeError):
            await cluster.create_topic("bad", 1, 1, internal=1)  # type: ignore[arg-type]
        await cluster.delete_topic("__transaction_state")
        assert not cluster.is_internal("__transaction_state")
        await cluster.create_topic("__transaction_state", 1, 1)  # again, not internal
        assert not cluster.is_internal("__transaction_state")


def test_clients_see_it_as_they_see_kafka_s(kafka_cluster: Any) -> None:
    """kafka-python's consumer hides internal topics (``exclude_internal_topics``), its
    admin ``list_topics`` does not (as with Kafka); librdkafka lists it too."""
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient, KafkaConsumer

    kafka_cluster.create_topic("plain", partitions=1, replication_factor=1)
    consumer = KafkaConsumer(bootstrap_servers=kafka_cluster.bootstrap_servers, group_id="g")
    try:
        consumer.poll(timeout_ms=100)  # FindCoordinator for "g": the topic is made
        assert GROUP_METADATA_TOPIC in kafka_cluster.cluster.topics
        assert consumer.topics() == {"plain"}
    finally:
        consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    try:
        assert sorted(admin.list_topics()) == [GROUP_METADATA_TOPIC, "plain"]
        [described] = admin.describe_topics([GROUP_METADATA_TOPIC])
        assert described["is_internal"] is True
        assert len(described["partitions"]) == 50
    finally:
        admin.close()
    listed = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers}).list_topics(
        timeout=10
    )
    assert set(listed.topics) == {GROUP_METADATA_TOPIC, "plain"}
