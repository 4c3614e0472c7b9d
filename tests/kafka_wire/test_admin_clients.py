"""The admin surface through each real client, as a test suite would use it: create a
topic through the admin API, produce, consume in a group, then (the member still in its
group) describe the group, list groups, delete records and describe the topic's configs.
Plus the answers for what no client sends on its own: unknown groups and resources."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kafka.protocol.admin import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kio.schema.describe_configs.v4 import request as describe_v4
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.cluster_configs import ClusterConfigs
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.offsets import Committed, OffsetStore
from purgatory.kafka.coordinator.offsets_topic import OffsetsTopic
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.configs import ConfigHandlers
from purgatory.kafka.handlers.groups import GroupHandlers
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import encode_response, read_request, versions
from purgatory.kafka.topic_configs import KEPT_ONLY, TOPIC_CONFIGS
from purgatory.sim import Cluster

TIMEOUT = 60.0
RECORDS = 10


def _ask(handler: Any, request: Any, response_class: Any) -> Any:
    """Hand kafka-python's ``request`` to ``handler`` as the server does (decoded with
    kio) and decode the answer (encoded with kio) with ``response_class``."""
    version = request.API_VERSION
    request.with_header(correlation_id=1, client_id="c")
    frame = bytes(request.encode(header=True))
    answer = handler(*read_request(frame, ApiKey(request.API_KEY), version))
    return response_class[version].decode(encode_response(1, answer), header=True, framed=True)


async def _ask_later(handler: Any, request: Any, response_class: Any) -> Any:
    """:func:`_ask` for a handler that answers later (an awaitable)."""
    version = request.API_VERSION
    request.with_header(correlation_id=1, client_id="c")
    frame = bytes(request.encode(header=True))
    answer = await handler(*read_request(frame, ApiKey(request.API_KEY), version))
    return response_class[version].decode(encode_response(1, answer), header=True, framed=True)


class Seen(dict[str, Any]):
    """What one client saw, by step."""


def _kafka_python_flow(bootstrap: str) -> Seen:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    seen = Seen()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = None
    try:
        admin.create_topics([NewTopic("kp", 2, 3, topic_configs={"retention.ms": "3600000"})])
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for i in range(RECORDS):
            producer.send("kp", f"v{i}".encode(), partition=i % 2)
        producer.flush(10)
        producer.close(5)
        consumer = KafkaConsumer(
            "kp", bootstrap_servers=bootstrap, group_id="kp-g", auto_offset_reset="earliest"
        )
        got = 0
        deadline = time.monotonic() + 20
        while got < RECORDS and time.monotonic() < deadline:
            got += sum(len(m) for m in consumer.poll(500).values())
        seen["consumed"] = got
        group = admin.describe_groups(["kp-g"])["kp-g"]
        [member] = group["members"]
        assigned = member["member_assignment"]["assigned_partitions"]
        seen["group"] = (group["group_state"], group["protocol_type"], member["client_id"])
        seen["assigned"] = sorted((a["topic"], p) for a in assigned for p in a["partitions"])
        seen["listed"] = [g["group_id"] for g in admin.list_groups()]
        [answer] = admin.delete_records({TopicPartition("kp", 0): 3}).values()
        seen["low_watermark"] = answer["low_watermark"]
        configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp")], config_filter="all"
        )
        seen["configs"] = {name: c["value"] for name, c in configs["topic"]["kp"].items()}
    finally:
        if consumer is not None:
            consumer.close()
        admin.close()
    return seen


def _confluent_flow(bootstrap: str) -> Seen:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    seen = Seen()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic("ck", 2, 3, config={"retention.ms": "3600000"})
    admin.create_topics([new], request_timeout=10)["ck"].result()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce("ck", f"v{i}".encode(), partition=i % 2)
    assert producer.flush(10) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ck-g", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe(["ck"])
        got = 0
        deadline = time.monotonic() + 20
        while got < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            got += message is not None and message.error() is None
        seen["consumed"] = got
        group = admin.describe_consumer_groups(["ck-g"], request_timeout=10)["ck-g"].result()
        [member] = group.members
        seen["group"] = (group.state.name.capitalize(), "consumer", member.client_id)
        seen["assigned"] = sorted(
            (p.topic, p.partition) for p in member.assignment.topic_partitions
        )
        listed = admin.list_consumer_groups(request_timeout=10).result()
        seen["listed"] = [g.group_id for g in listed.valid]
        [deleted] = admin.delete_records([TopicPartition("ck", 0, 3)], request_timeout=10).values()
        seen["low_watermark"] = deleted.result().low_watermark
        [described] = admin.describe_configs([ConfigResource("topic", "ck")]).values()
        seen["configs"] = {name: c.value for name, c in described.result().items()}
    finally:
        consumer.close()
    return seen


async def _aiokafka_flow(bootstrap: str) -> Seen:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.protocol.group import MemberAssignment

    seen = Seen()
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    consumer = AIOKafkaConsumer(
        "ai", bootstrap_servers=bootstrap, group_id="ai-g", auto_offset_reset="earliest"
    )
    try:
        await admin.create_topics([NewTopic("ai", 2, 3, topic_configs={"retention.ms": "3600000"})])
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(RECORDS):
                await producer.send_and_wait("ai", f"v{i}".encode(), partition=i % 2)
        finally:
            await producer.stop()
        await consumer.start()
        got = 0
        while got < RECORDS:
            got += sum(len(m) for m in (await consumer.getmany(timeout_ms=500)).values())
        seen["consumed"] = got
        [response] = await admin.describe_consumer_groups(["ai-g"])
        [(_, _, state, protocol_type, _, members)] = response.groups
        [(_, client_id, _, _, assignment)] = members
        seen["group"] = (state, protocol_type, client_id)
        decoded = MemberAssignment.decode(assignment)
        seen["assigned"] = sorted((t, p) for t, ps in decoded.assignment for p in ps)
        seen["listed"] = [name for name, _ in await admin.list_consumer_groups()]
        deleted = await admin.delete_records({TopicPartition("ai", 0): RecordsToDelete(3)})
        seen["low_watermark"] = deleted[TopicPartition("ai", 0)]
        [configs] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "ai")])
        [(_, _, _, _, entries)] = configs.resources
        seen["configs"] = {entry[0]: entry[1] for entry in entries}
    finally:
        await consumer.stop()
        await admin.close()
    return seen


@pytest.mark.asyncio
@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "aiokafka"])
async def test_each_client_runs_the_admin_surface(door: KafkaFrontDoor, client: str) -> None:
    short = {"kafka-python": "kp", "confluent-kafka": "ck", "aiokafka": "ai"}[client]
    async with asyncio.timeout(TIMEOUT):
        if client == "aiokafka":
            seen = await _aiokafka_flow(door.bootstrap)
        else:
            flow = _kafka_python_flow if client == "kafka-python" else _confluent_flow
            seen = await asyncio.to_thread(flow, door.bootstrap)
    client_id = {
        "kafka-python": "kafka-python-",
        "confluent-kafka": "rdkafka",
        "aiokafka": "aiokafka-",
    }
    assert seen["consumed"] == RECORDS
    state, protocol_type, member_client = seen["group"]
    assert (state, protocol_type) == ("Stable", "consumer")
    assert member_client.startswith(client_id[client])
    assert seen["assigned"] == [(short, 0), (short, 1)]
    assert seen["listed"] == [f"{short}-g"]  # once, though every broker was asked
    assert seen["low_watermark"] == 3
    p = door.cluster.partition(short, 0)
    assert all(p.logs[b].log_start_offset == 3 for b in p.replicas)
    assert seen["configs"]["retention.ms"] == "3600000"
    assert seen["configs"]["cleanup.policy"] == "delete"
    assert seen["configs"]["min.insync.replicas"] == "1"
    assert not door.stats.bad_input


@pytest.mark.asyncio
async def test_groups_are_described_and_listed_as_kafka_does_for_every_version() -> None:
    coordinator = GroupCoordinator()
    offsets = OffsetStore()
    offsets.commit("assigner", "t", 0, Committed(5, -1, None))  # committed, never joined
    async with Cluster(brokers=2, seed=1) as cluster:
        # one partition of __consumer_offsets, led by broker 0: it coordinates every group
        groups_topic = OffsetsTopic(cluster, 1, 1)
        on_0 = GroupHandlers(coordinator, offsets, 0, groups_topic)
        on_1 = GroupHandlers(coordinator, offsets, 1, groups_topic)
        for version in range(5):
            request = DescribeGroupsRequest[version](
                groups=["assigner", "nope"], include_authorized_operations=False
            )
            response = _ask(on_1.describe_groups, request, DescribeGroupsResponse)
            assert [(g.error_code, g.group_id, g.group_state) for g in response.groups] == [
                (0, "assigner", "Empty"),
                (0, "nope", "Dead"),  # unknown: NONE and Dead before v6
            ]
        for version in range(3):
            request = ListGroupsRequest[version]()
            mine = await _ask_later(on_0.list_groups, request, ListGroupsResponse)
            other = await _ask_later(on_1.list_groups, request, ListGroupsResponse)
            assert [(g.group_id, g.protocol_type) for g in mine.groups] == [("assigner", "")]
            assert (mine.error_code, other.groups) == (0, [])  # only its coordinator lists it
        # a group lives in __consumer_offsets: listing one made it exist, internal
        assert cluster.is_internal("__consumer_offsets")
        assert cluster.partition("__consumer_offsets", 0).leader == 0
    await coordinator.close()


CONFIGS = versions(ApiKey.DESCRIBE_CONFIGS)


def _describe_configs(version: int, resources: list[tuple[int, str]]) -> Any:
    return DescribeConfigsRequest[version](
        resources=[(t, n, None) for t, n in resources],
        include_synonyms=True,
        include_documentation=False,
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(CONFIGS[0], CONFIGS[1] + 1))
async def test_describe_configs_answers_sources_synonyms_and_refusals(version: int) -> None:
    async with Cluster(brokers=3, seed=1, log_retention_ms=60_000) as cluster:
        await cluster.create_topic("own", 1, 1, retention_ms=1000)
        await cluster.create_topic("default", 1, 1)
        configs = ClusterConfigs(cluster, BrokerConfigs({"num.partitions": 3}))
        handlers = ConfigHandlers(configs, 1, {1: ("127.0.0.1", 9093)})
        request = _describe_configs(
            version,
            [
                *[(2, "own"), (2, "default"), (2, "nope"), (2, "no!")],
                *[(4, "1"), (4, "2"), (4, "x"), (8, "1")],
            ],
        )
        response = _ask(handlers.describe_configs, request, DescribeConfigsResponse)
    results = {(r.resource_type, r.resource_name): r for r in response.results}
    assert [(key, r.error_code) for key, r in results.items()] == [
        ((2, "own"), 0),
        ((2, "default"), 0),
        ((2, "nope"), 3),  # UNKNOWN_TOPIC_OR_PARTITION
        ((2, "no!"), 17),  # INVALID_TOPIC_EXCEPTION: no topic may have that name
        ((4, "1"), 0),
        ((4, "2"), 42),  # INVALID_REQUEST: another broker's configs
        ((4, "x"), 42),  # not a broker id
        ((8, "1"), 42),  # broker loggers are not described
    ]
    assert results[2, "nope"].error_message == "Topic 'nope' does not exist"
    assert "expected 1 or empty string" in (results[4, "2"].error_message or "")
    own = {c.name: c for c in results[2, "own"].configs}
    default = {c.name: c for c in results[2, "default"].configs}
    assert set(own) == set(TOPIC_CONFIGS)  # every topic config, as Kafka lists them
    assert (own["retention.ms"].value, default["retention.ms"].value) == ("1000", "60000")
    assert not any(c.read_only for c in own.values())  # topic configs can be altered
    broker = {c.name: c for c in results[4, "1"].configs}
    assert broker["log.retention.ms"].value == "60000"
    assert broker["auto.create.topics.enable"].value == "false"
    assert broker["advertised.listeners"].value == "PLAINTEXT://127.0.0.1:9093"
    assert not broker["listeners"].read_only  # per broker, dynamic in Kafka (kept only here)
    assert broker["advertised.listeners"].read_only  # not since Kafka 4.0 (KAFKA-18405)
    assert broker["num.partitions"].read_only  # Kafka does not change it while it runs
    assert not broker["log.retention.ms"].read_only  # it does this one
    assert own["retention.ms"].config_source == 1  # DYNAMIC_TOPIC_CONFIG
    assert default["retention.ms"].config_source == 4  # STATIC_BROKER_CONFIG
    assert default["cleanup.policy"].config_source == 5  # DEFAULT_CONFIG
    assert default["segment.bytes"].value == str(1 << 30)  # Kafka's default, kept only
    assert default["min.insync.replicas"].config_source == 3  # DYNAMIC_DEFAULT (KIP-966)
    assert [(s.name, s.value, s.source) for s in own["retention.ms"].synonyms] == [
        ("retention.ms", "1000", 1),
        ("log.retention.ms", "60000", 4),
        ("log.retention.hours", "168", 5),  # what Kafka derives its null log.retention.ms from
    ]
    assert [(s.name, s.value, s.source) for s in broker["num.partitions"].synonyms] == [
        ("num.partitions", "3", 4),
        ("num.partitions", "1", 5),
    ]
    assert own["remote.storage.enable"].synonyms == []  # no broker synonym, Kafka's default
    if version >= 3:
        assert own["retention.ms"].config_type == 5  # LONG
        assert own["min.cleanable.dirty.ratio"].config_type == 6  # DOUBLE
        assert own["cleanup.policy"].config_type == 7  # LIST
        assert own["retention.ms"].documentation is None  # not asked


@pytest.mark.asyncio
async def test_describe_configs_lists_the_keys_asked_and_every_one_for_none() -> None:
    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", 1, 1)
        handlers = ConfigHandlers(ClusterConfigs(cluster, BrokerConfigs()), 0, {})
        request = DescribeConfigsRequest[CONFIGS[1]](
            resources=[
                (2, "t", ["retention.ms", "no.such.config"]),
                (2, "t", []),  # empty: every config, as Kafka reads it
                (2, "t", None),
                (4, "", None),  # every broker: the dynamic configs set for all
            ],
            include_synonyms=False,
            include_documentation=True,
        )
        response = _ask(handlers.describe_configs, request, DescribeConfigsResponse)
    listed = [[c.name for c in r.configs] for r in response.results]
    every = list(TOPIC_CONFIGS)
    assert listed == [["retention.ms"], every, every, ["min.insync.replicas"]]
    assert all(not c.synonyms for r in response.results for c in r.configs)  # not asked
    docs = {c.name: c.documentation for c in response.results[1].configs}
    assert "retention pass" in (docs["retention.ms"] or "")
    assert docs["segment.bytes"] == KEPT_ONLY
    assert response.results[3].configs[0].config_source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG


@pytest.mark.asyncio
async def test_flexible_describe_configs_round_trips_over_a_socket(door: KafkaFrontDoor) -> None:
    """DescribeConfigs at its highest version, built and read with kio, through a listener."""
    request = describe_v4.DescribeConfigsRequest(
        resources=(
            describe_v4.DescribeConfigsResource(
                resource_type=2, resource_name="t", configuration_keys=None
            ),
            describe_v4.DescribeConfigsResource(
                resource_type=4, resource_name="2", configuration_keys=("num.partitions",)
            ),
        ),
        include_synonyms=True,
        include_documentation=True,
    )
    assert request.__version__ == CONFIGS[1]
    assert request.__flexible__
    frame = await round_trip(door.addresses[2], request, correlation_id=4, within_s=TIMEOUT)
    answer_header, used, response, size = read_response(frame, ApiKey.DESCRIBE_CONFIGS, CONFIGS[1])
    assert (answer_header.correlation_id, used + size) == (4, len(frame))
    topic, broker = response.results
    assert (topic.resource_name, topic.error_code) == ("t", KioError.none)
    assert (broker.resource_name, broker.error_code) == ("2", KioError.none)
    configs = {c.name: c for c in topic.configs}
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].config_type == 7  # LIST
    assert [(c.name, c.value) for c in broker.configs] == [("num.partitions", "1")]
    assert door.stats.requests["DESCRIBE_CONFIGS", CONFIGS[1]] == 1
    assert not door.stats.bad_input
