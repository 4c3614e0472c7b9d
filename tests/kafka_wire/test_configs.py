"""Topic and broker configs over the Kafka protocol: CreateTopics with Kafka's topic
configs, AlterConfigs and IncrementalAlterConfigs (every version through the handler;
confluent-kafka's, kafka-python's and aiokafka's admin clients over the wire) and what a
change does (retention, min.insync.replicas, max.message.bytes, dynamic broker configs);
ListConfigResources."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource as AioResource
from aiokafka.admin.config_resource import ConfigResourceType as AioType
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpResource
from kafka.admin import ConfigResourceType as KpType

from purgatory.errors import ErrorCode
from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.cluster_configs import ClusterConfigs
from purgatory.kafka.config_rules import as_text
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.configs import ConfigHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.record_batches import (
    compression_of,
    encode_batch,
    max_timestamp_of,
    recompressed,
    split_batches,
)
from purgatory.kafka.schemas import build, request_type, versions
from purgatory.kafka.topic_configs import TOPIC_CONFIGS, check_topic_config
from purgatory.sim import Cluster
from purgatory.sim.messages import ProduceRequest

TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _handlers(cluster: Cluster, static: dict[str, object] | None = None) -> ConfigHandlers:
    return ConfigHandlers(ClusterConfigs(cluster, BrokerConfigs(static or {})), 0, {})


def _call(handlers: ConfigHandlers, key: ApiKey, version: int, values: dict[str, Any]) -> Any:
    request = build(request_type(key, version), values)
    header = RequestHeader(key, version, 1, "test")
    return handlers.apis()[key][2](header, request)


def _describe(handlers: ConfigHandlers, kind: int, name: str) -> dict[str, Any]:
    high = versions(ApiKey.DESCRIBE_CONFIGS)[1]
    resource = {"resource_type": kind, "resource_name": name, "configuration_keys": None}
    response = _call(
        handlers,
        ApiKey.DESCRIBE_CONFIGS,
        high,
        {"resources": [resource], "include_synonyms": True},
    )
    [result] = response.results
    assert result.error_code.value == 0, result.error_message
    return {c.name: c for c in result.configs}


def _incremental(
    handlers: ConfigHandlers,
    version: int,
    resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
    validate_only: bool = False,
) -> list[tuple[int, str | None]]:
    response = _call(
        handlers,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        version,
        {
            "resources": [
                {
                    "resource_type": kind,
                    "resource_name": name,
                    "configs": [
                        {"name": n, "config_operation": op, "value": v} for n, op, v in configs
                    ],
                }
                for kind, name, configs in resources
            ],
            "validate_only": validate_only,
        },
    )
    return [(r.error_code.value, r.error_message) for r in response.responses]


def _alter(
    handlers: ConfigHandlers,
    version: int,
    resources: list[tuple[int, str, list[tuple[str, str | None]]]],
    validate_only: bool = False,
) -> list[tuple[int, str | None]]:
    response = _call(
        handlers,
        ApiKey.ALTER_CONFIGS,
        version,
        {
            "resources": [
                {
                    "resource_type": kind,
                    "resource_name": name,
                    "configs": [{"name": n, "value": v} for n, v in configs],
                }
                for kind, name, configs in resources
            ],
            "validate_only": validate_only,
        },
    )
    return [(r.error_code.value, r.error_message) for r in response.responses]


def test_every_topic_config_takes_its_default_and_refuses_what_kafka_refuses() -> None:
    for name, config in TOPIC_CONFIGS.items():
        default = config.kafka_default()
        assert check_topic_config(name, as_text(default)) == default, name
    assert check_topic_config("message.timestamp.difference.max.ms", "1000") == 1000
    assert check_topic_config("min.cleanable.dirty.ratio", "0.25") == 0.25
    assert check_topic_config("cleanup.policy", "compact, delete") == "compact,delete"
    assert check_topic_config("compression.gzip.level", "-1") == -1
    assert check_topic_config("leader.replication.throttled.replicas", "0:1,1:2") == "0:1,1:2"
    for name, bad in [
        ("retention.ms", "-2"),
        ("min.insync.replicas", "0"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("compression.type", "brotli"),
        ("compression.gzip.level", "0"),
        ("cleanup.policy", "delete,shred"),
        ("message.timestamp.type", "Now"),
        ("segment.bytes", "1024"),
        ("preallocate", "yes"),
        ("max.message.bytes", "2147483648"),  # past Java's int
        ("leader.replication.throttled.replicas", "0-1"),
    ]:
        with pytest.raises(ValueError, match=name):
            check_topic_config(name, bad)
    with pytest.raises(ValueError, match=r"Unknown topic config name: retention\.hours"):
        check_topic_config("retention.hours", "1")


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(versions(ApiKey.INCREMENTAL_ALTER_CONFIGS)[1] + 1))
async def test_incremental_alter_configs_sets_deletes_appends_and_subtracts(version: int) -> None:
    async with Cluster(brokers=3, seed=1, log_retention_ms=3_600_000) as cluster:
        await cluster.create_topic("t", 1, 3)
        handlers = _handlers(cluster)
        assert _incremental(
            handlers,
            version,
            [
                (
                    TOPIC,
                    "t",
                    [
                        ("cleanup.policy", APPEND, "compact"),  # from Kafka's default: delete
                        ("retention.ms", SET, "10000"),
                        ("compression.type", SET, "gzip"),
                    ],
                )
            ],
        ) == [(0, None)]
        configs = _describe(handlers, TOPIC, "t")
        assert configs["cleanup.policy"].value == "delete,compact"
        assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
            "10000",
            1,  # DYNAMIC_TOPIC_CONFIG
        )
        assert cluster.topic_config("t").retention_ms == 10_000  # the simulation follows
        assert _incremental(
            handlers,
            version,
            [
                (
                    TOPIC,
                    "t",
                    [
                        ("cleanup.policy", SUBTRACT, "delete,compact"),
                        ("retention.ms", DELETE, None),
                    ],
                )
            ],
        ) == [(0, None)]
        configs = _describe(handlers, TOPIC, "t")
        assert configs["cleanup.policy"].value == ""  # an empty list, as Kafka keeps it
        assert configs["compression.type"].value == "gzip"  # untouched
        assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
            "3600000",
            4,  # STATIC_BROKER_CONFIG: back to the broker's
        )
        assert cluster.topic_config("t").retention_ms == 3_600_000
        # each resource on its own, with Kafka's codes
        answers = _incremental(
            handlers,
            version,
            [
                (TOPIC, "nope", [("retention.ms", SET, "1")]),
                (TOPIC, "t", [("retention.ms", SET, "soon")]),
                (TOPIC, "t", [("retention.ms", APPEND, "1")]),
            ],
        )
        assert [code for code, _ in answers] == [3, 42, 42]  # a resource named twice
        answers = _incremental(
            handlers,
            version,
            [
                (TOPIC, "nope", [("retention.ms", SET, "1")]),
                (TOPIC, "t", [("retention.ms", SET, "soon"), ("no.such", SET, "1")]),
                (TOPIC, "", [("retention.ms", SET, "1")]),
                (BROKER, "0", [("num.partitions", SET, "3")]),
                (BROKER, "x", [("log.retention.ms", SET, "1")]),
                (GROUP, "g", [("share.record.lock.duration.ms", SET, "30000")]),
                (GROUP, "h", [("no.such.group.config", SET, "1")]),
            ],
        )
        assert answers[0] == (3, "Topic 'nope' does not exist")  # UNKNOWN_TOPIC_OR_PARTITION
        assert answers[1][0] == 40
        assert "retention.ms" in (answers[1][1] or "")
        assert answers[2][0] == 17  # INVALID_TOPIC_EXCEPTION: no topic may be named ""
        assert answers[3] == (42, "Cannot update these configs dynamically: Set(num.partitions)")
        assert answers[4][0] == 42  # INVALID_REQUEST: not a broker id
        assert answers[5] == (0, None)  # a group config, for a group that is not there yet
        assert answers[6] == (40, "Unknown group config name: no.such.group.config")
        # Kafka 4 no longer changes advertised.listeners while it runs (KAFKA-18405)
        advertised = [("advertised.listeners", SET, "PLAINTEXT://elsewhere:9092")]
        assert _incremental(handlers, version, [(BROKER, "0", advertised)]) == [
            (42, "Cannot update these configs dynamically: Set(advertised.listeners)")
        ]
        for configs_, code in [
            ([("retention.ms", APPEND, "1")], 40),  # not a list
            ([("retention.ms", SET, None)], 42),  # a null value
            ([("retention.ms", 9, "1")], 42),  # no such operation
            ([("retention.ms", SET, "1"), ("retention.ms", DELETE, None)], 42),  # twice
        ]:
            [(got, _)] = _incremental(handlers, version, [(TOPIC, "t", configs_)])
            assert got == code, configs_
        # validate_only checks and changes nothing
        assert _incremental(
            handlers, version, [(TOPIC, "t", [("retention.ms", SET, "5")])], validate_only=True
        ) == [(0, None)]
        assert cluster.topic_config("t").retention_ms == 3_600_000


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(versions(ApiKey.ALTER_CONFIGS)[1] + 1))
async def test_alter_configs_replaces_a_topics_configs(version: int) -> None:
    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", 1, 1, retention_ms=1000)
        handlers = _handlers(cluster)
        assert _describe(handlers, TOPIC, "t")["retention.ms"].config_source == 1
        assert _alter(handlers, version, [(TOPIC, "t", [("retention.bytes", "4096")])]) == [
            (0, None)
        ]
        configs = _describe(handlers, TOPIC, "t")
        # AlterConfigs replaces the whole set: retention.ms is the broker's again
        assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
            "-1",
            4,  # STATIC_BROKER_CONFIG: the cluster's own, not Kafka's default
        )
        assert configs["retention.bytes"].value == "4096"
        assert cluster.topic_config("t").retention_bytes == 4096
        answers = _alter(
            handlers,
            version,
            [
                (TOPIC, "t", [("retention.ms", None)]),
                (TOPIC, "u", [("retention.ms", "1")]),
                (BROKER, "", [("message.max.bytes", "5000")]),
            ],
            validate_only=True,
        )
        assert answers == [
            (42, "Null value not supported for : retention.ms"),
            (3, "Topic 'u' does not exist"),
            (0, None),
        ]
        # validate_only: still Kafka's default, not a dynamic config
        assert _describe(handlers, BROKER, "0")["message.max.bytes"].config_source == 5


@pytest.mark.asyncio
async def test_dynamic_broker_configs_reach_the_topics_that_inherit_them() -> None:
    async with Cluster(brokers=2, seed=1, log_retention_ms=3_600_000) as cluster:
        await cluster.create_topic("plain", 1, 2)
        await cluster.create_topic("own", 1, 2, retention_ms=1000)
        configs = ClusterConfigs(cluster, BrokerConfigs())
        broker0 = ConfigHandlers(configs, 0, {})
        broker1 = ConfigHandlers(configs, 1, {})
        assert _incremental(broker0, 1, [(BROKER, "", [("log.retention.ms", SET, "60000")])]) == [
            (0, None)
        ]
        described = _describe(broker0, TOPIC, "plain")["retention.ms"]
        assert (described.value, described.config_source) == ("60000", 3)  # DYNAMIC_DEFAULT
        assert [(s.name, s.value, s.source) for s in described.synonyms] == [
            ("log.retention.ms", "60000", 3),
            ("log.retention.ms", "3600000", 4),
            ("log.retention.hours", "168", 5),  # Kafka's null log.retention.ms comes from it
        ]
        assert cluster.topic_config("plain").retention_ms == 60_000
        assert cluster.topic_config("own").retention_ms == 1000  # its own wins
        assert cluster.log_defaults.retention_ms == 60_000  # topics created from now on
        # a topic's retention.bytes may be any negative (none), as in Kafka
        assert _incremental(broker0, 1, [(TOPIC, "plain", [("retention.bytes", SET, "-5")])]) == [
            (0, None)
        ]
        assert cluster.topic_config("plain").retention_bytes == -1
        assert _describe(broker0, TOPIC, "plain")["retention.bytes"].value == "-5"
        assert _incremental(broker0, 1, [(BROKER, "", [("log.retention.bytes", SET, "-1")])]) == [
            (0, None)
        ]
        # one broker's: only that broker's logs and answers
        assert configs.max_message_bytes("plain", 1) == 1_048_588  # kept until a change
        assert _incremental(broker0, 1, [(BROKER, "1", [("message.max.bytes", SET, "100")])]) == [
            (0, None)
        ]
        assert configs.max_message_bytes("plain", 1) == 100
        assert configs.max_message_bytes("plain", 0) == 1_048_588
        mine = _describe(broker1, BROKER, "1")["message.max.bytes"]
        assert (mine.value, mine.config_source, mine.read_only) == ("100", 2, False)
        assert _describe(broker0, BROKER, "0")["message.max.bytes"].value == "1048588"
        every = _describe(broker0, BROKER, "")  # the dynamic configs set for every broker
        assert set(every) == {"log.retention.ms", "log.retention.bytes", "min.insync.replicas"}
        # min.insync.replicas for every broker: acks=all produces need that many
        assert _incremental(broker0, 1, [(BROKER, "", [("min.insync.replicas", SET, "3")])]) == [
            (0, None)
        ]
        result = await cluster.produce(ProduceRequest("plain", 0, [(None, b"v")], acks=-1))
        assert result.error is ErrorCode.NOT_ENOUGH_REPLICAS
        assert _incremental(
            broker0, 1, [(BROKER, "", [("min.insync.replicas", DELETE, None)])]
        ) == [(0, None)]
        result = await cluster.produce(ProduceRequest("plain", 0, [(None, b"v")], acks=-1))
        assert result.error is ErrorCode.NONE


@pytest.mark.asyncio
async def test_a_lower_retention_ms_drops_records_on_the_next_retention_pass() -> None:
    # retention passes run every log_retention_check_interval_ms; the test calls the one
    # the leader would run next (ReplicaManager.apply_retention) instead of waiting
    async with Cluster(brokers=1, seed=1, log_retention_check_interval_ms=3_600_000) as cluster:
        await cluster.create_topic("t", 1, 1)
        handlers = _handlers(cluster)
        for _ in range(3):
            result = await cluster.produce(ProduceRequest("t", 0, [(None, b"v")], acks=-1))
            assert result.error is ErrorCode.NONE
        partition = cluster.topics["t"][0]
        leader = cluster.brokers[0].replica_manager
        assert not leader.apply_retention(partition)  # kept forever (the cluster's -1)
        assert _incremental(handlers, 1, [(TOPIC, "t", [("retention.ms", SET, "1")])]) == [
            (0, None)
        ]
        await asyncio.sleep(0.01)  # the batches are older than 1 ms now
        assert leader.apply_retention(partition)
        assert partition.logs[0].log_start_offset == 3


@pytest.mark.asyncio
async def test_list_config_resources_lists_topics_and_brokers() -> None:
    async with Cluster(brokers=2, seed=1) as cluster:
        await cluster.create_topic("t", 1, 1)
        handlers = _handlers(cluster)
        v0 = _call(handlers, ApiKey.LIST_CONFIG_RESOURCES, 0, {})
        assert (v0.error_code.value, v0.config_resources) == (0, ())  # no client metrics
        every = _call(handlers, ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": []})
        assert [(r.resource_type, r.resource_name) for r in every.config_resources] == [
            (TOPIC, "t"),
            (BROKER, "0"),
            (BROKER, "1"),
        ]
        brokers = _call(handlers, ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [BROKER]})
        assert [r.resource_name for r in brokers.config_resources] == ["0", "1"]
        loggers = _call(handlers, ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [8, 32]})
        assert (loggers.error_code.value, loggers.config_resources) == (0, ())  # none here
        bad = _call(handlers, ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [2, 99]})
        assert bad.error_code.value == 42  # INVALID_REQUEST: no such resource type


# -- real admin clients ------------------------------------------------------------------


def _confluent_round(bootstrap: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: dict[str, Any] = {}
    created = admin.create_topics(
        [
            NewTopic(
                "c",
                2,
                3,
                config={
                    "compression.type": "gzip",
                    "message.timestamp.difference.max.ms": "60000",
                    "min.cleanable.dirty.ratio": "0.3",
                },
            ),
            NewTopic("bad", 1, 1, config={"retention.hours": "1"}),
        ],
        request_timeout=10,
    )
    created["c"].result()
    try:
        created["bad"].result()
    except KafkaException as exc:
        out["bad"] = exc.args[0]
    res = ConfigResource(
        ResourceType.TOPIC,
        "c",
        incremental_configs=[
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
            ConfigEntry("retention.ms", "10000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    for future in admin.incremental_alter_configs([res]).values():
        future.result()
    [described] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "c")]).values()
    out["non_default"] = sorted(
        str(entry) for entry in described.result().values() if not entry.is_default
    )
    group = ConfigResource(
        ResourceType.GROUP,
        "g",
        incremental_configs=[
            ConfigEntry(
                "share.record.lock.duration.ms",
                "30000",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    for future in admin.incremental_alter_configs([group]).values():
        future.result()
    [described] = admin.describe_configs([ConfigResource(ResourceType.GROUP, "g")]).values()
    entries = described.result()
    out["group"] = {
        name: (entries[name].value, entries[name].source)
        for name in ("share.record.lock.duration.ms", "consumer.session.timeout.ms")
    }
    old = ConfigResource(ResourceType.TOPIC, "c", set_config={"max.message.bytes": "200"})
    with warnings.catch_warnings():  # AlterConfigs is deprecated, not gone (KIP-339)
        warnings.simplefilter("ignore", DeprecationWarning)
        futures = admin.alter_configs([old])
    for future in futures.values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000})
    errors: list[Any] = []
    producer.produce("c", b"x" * 1000, partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    out["produce"] = errors
    # min.insync.replicas above the 3 replicas: acks=all is refused (no retries: see it)
    raised = ConfigResource(
        ResourceType.TOPIC,
        "c",
        incremental_configs=[
            ConfigEntry("min.insync.replicas", "4", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([raised]).values():
        future.result()
    strict = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "enable.idempotence": False}
    )
    refused: list[Any] = []
    strict.produce("c", b"v", partition=0, on_delivery=lambda err, msg: refused.append(err))
    strict.flush(10)
    out["acks_all"] = refused
    return out


@pytest.mark.asyncio
async def test_confluent_creates_alters_describes_and_is_refused_as_by_kafka(
    door: KafkaFrontDoor,
) -> None:
    out = await asyncio.to_thread(_confluent_round, door.bootstrap)
    assert out["bad"].code() == 40  # INVALID_CONFIG
    assert "retention.hours" in out["bad"].str()
    assert out["non_default"] == [
        'cleanup.policy="delete,compact"',
        'compression.type="gzip"',
        'message.timestamp.difference.max.ms="60000"',  # deprecated, taken as Kafka 3 does
        'min.cleanable.dirty.ratio="0.3"',
        'min.insync.replicas="1"',  # a Kafka 4.1+ cluster-wide dynamic config (KIP-966)
        'retention.ms="10000"',
    ]
    # a group config (Kafka 4.0+), for a group that does not exist yet; the others are
    # the broker's (DEFAULT_CONFIG, as Kafka's ConfigHelper reports them)
    assert out["group"] == {
        "share.record.lock.duration.ms": ("30000", 8),  # GROUP_CONFIG
        "consumer.session.timeout.ms": ("45000", 5),
    }
    # AlterConfigs replaced the topic's configs with max.message.bytes alone; then
    # IncrementalAlterConfigs added min.insync.replicas
    own = {"max.message.bytes": 200, "min.insync.replicas": 4}
    assert door.cluster_configs.topic_overrides("c") == own
    [error] = out["produce"]
    assert error is not None
    assert error.code() == 10  # MESSAGE_TOO_LARGE
    [error] = out["acks_all"]
    assert error is not None
    assert error.code() == 19  # NOT_ENOUGH_REPLICAS


def _kafka_python_round(bootstrap: str) -> dict[str, Any]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.alter_configs([KpResource(KpType.TOPIC, "t", configs={"retention.ms": "120000"})])
        described = admin.describe_configs(
            [KpResource(KpType.TOPIC, "t"), KpResource(KpType.BROKER, 0)], config_filter="all"
        )
        dynamic = admin.describe_configs([KpResource(KpType.TOPIC, "t")], config_filter="dynamic")
        listed = admin.list_config_resources()
        return {"described": described, "listed": listed, "dynamic": dynamic}
    finally:
        admin.close()


@pytest.mark.asyncio
async def test_kafka_python_alters_describes_and_lists(door: KafkaFrontDoor) -> None:
    out = await asyncio.to_thread(_kafka_python_round, door.bootstrap)
    topic = out["described"]["topic"]["t"]
    assert topic["retention.ms"]["value"] == "120000"
    assert topic["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert topic["retention.bytes"]["read_only"] is False
    broker = out["described"]["broker"]["0"]
    host, port = door.addresses[0]
    assert broker["advertised.listeners"]["value"] == f"PLAINTEXT://{host}:{port}"
    assert broker["advertised.listeners"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert door.cluster.topic_config("t").retention_ms == 120_000
    assert "broker" in out["listed"]
    assert "topic" in out["listed"]
    # every topic config can be altered, so "dynamic" lists them all
    assert set(out["dynamic"]["topic"]["t"]) == set(TOPIC_CONFIGS)


@pytest.mark.asyncio
async def test_aiokafka_alters_a_topic_config(door: KafkaFrontDoor) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=door.bootstrap)
    await admin.start()
    try:
        resource = AioResource(AioType.TOPIC, "t", {"min.insync.replicas": "4"})
        await admin.alter_configs([resource])
        [answer] = await admin.describe_configs([AioResource(AioType.TOPIC, "t")])
    finally:
        await admin.close()
    [(_, _, _, _, entries)] = answer.resources
    values = {e[0]: e[1] for e in entries}
    assert values["min.insync.replicas"] == "4"
    # 3 replicas can never make 4 in sync: acks=all is refused, acks=1 is not
    result = await door.cluster.produce(ProduceRequest("t", 0, [(None, b"v")], acks=-1))
    assert result.error is ErrorCode.NOT_ENOUGH_REPLICAS
    result = await door.cluster.produce(ProduceRequest("t", 0, [(None, b"v")], acks=1))
    assert result.error is ErrorCode.NONE


def _compressed_round(bootstrap: str, codecs: dict[str, str]) -> dict[str, list[bytes]]:
    """Topics with each compression.type, written by a producer that compresses with
    another codec (or none), read back by a consumer."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(f"z-{n}", 1, 1, config={"compression.type": n}) for n in codecs]
    for future in admin.create_topics(topics, request_timeout=10).values():
        future.result()
    got: dict[str, list[bytes]] = {}
    for name, sent_with in codecs.items():
        topic = f"z-{name}"
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": sent_with})
        for i in range(50):
            producer.produce(topic, f"{name}-{i}".encode() * 20, key=b"k")
        producer.flush(10)
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
        )
        consumer.assign([ConfluentPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < 50 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        consumer.close()
        got[name] = values
    return got


@pytest.mark.asyncio
async def test_a_topics_compression_type_recompresses_what_it_stores(door: KafkaFrontDoor) -> None:
    # each topic's codec differs from the producer's, so every batch is rewritten
    codecs = {
        "gzip": "none",
        "snappy": "gzip",
        "lz4": "none",
        "zstd": "snappy",
        "uncompressed": "lz4",
        "producer": "gzip",
    }
    got = await asyncio.to_thread(_compressed_round, door.bootstrap, codecs)
    expected_codec = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4, "uncompressed": 0}
    expected_codec["producer"] = 1  # kept as the producer compressed it
    for name in codecs:
        assert got[name] == [f"{name}-{i}".encode() * 20 for i in range(50)], name
        [partition] = door.cluster.topics[f"z-{name}"]
        stored = door.cluster.stored_batches(f"z-{name}", 0, 0, partition.leo)
        assert stored, name
        assert {compression_of(b.wire or b"") for b in stored} == {expected_codec[name]}, name
    # aiokafka's own decoders read every rewritten batch too
    for name in codecs:
        consumer = AIOKafkaConsumer(bootstrap_servers=door.bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([AioPartition(f"z-{name}", 0)])
            values: list[bytes] = []
            while len(values) < 50:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                values += [m.value for messages in batches.values() for m in messages]
        finally:
            await consumer.stop()
        assert values == got[name], name


def test_a_recompressed_batch_keeps_its_header_and_records_and_a_valid_crc() -> None:
    [batch] = split_batches(encode_batch(0, 0, [(b"k", b"v" * 100), (None, b"w")], 1234))
    for codec in (1, 2, 3, 4, 0):
        again = recompressed(batch, codec)
        assert again.compression == codec
        assert again.crc_valid()
        again.check_framing()
        assert again.key_values() == [(b"k", b"v" * 100), (None, b"w")]
        assert (again.base_timestamp, again.record_count) == (1234, 2)
        assert again.producer_id == batch.producer_id
        batch = again
    assert recompressed(batch, 0) is batch  # already uncompressed: kept as is


def _log_append_time_round(bootstrap: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic("stamped", 1, 1, config={"message.timestamp.type": "LogAppendTime"})
    for future in admin.create_topics([new], request_timeout=10).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "gzip"})
    delivered: list[Any] = []
    before = int(time.time() * 1000)
    for i in range(3):
        producer.produce(
            "stamped",
            f"v{i}".encode(),
            timestamp=1000 + i,  # the producer's CreateTime: not what the topic keeps
            on_delivery=lambda err, msg: delivered.append((err, msg.timestamp())),
        )
    producer.flush(10)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "stamped", "auto.offset.reset": "earliest"}
    )
    consumer.assign([ConfluentPartition("stamped", 0, 0)])
    read: list[tuple[int, int]] = []
    deadline = time.monotonic() + 20
    while len(read) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read.append(message.timestamp())
    consumer.close()
    return {
        "before": before,
        "after": int(time.time() * 1000),
        "delivered": delivered,
        "read": read,
    }


@pytest.mark.asyncio
async def test_log_append_time_topics_stamp_batches_with_the_append_time(
    door: KafkaFrontDoor,
) -> None:
    out = await asyncio.to_thread(_log_append_time_round, door.bootstrap)
    low, high = out["before"], out["after"]
    assert [err for err, _ in out["delivered"]] == [None] * 3
    for kind, stamp_ms in [ts for _, ts in out["delivered"]] + out["read"]:
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        assert low <= stamp_ms <= high  # the broker's clock, not the producer's 1000
    stored = door.cluster.stored_batches("stamped", 0, 0, 3)
    assert all(low <= max_timestamp_of(b.wire or b"") <= high for b in stored)


def _timestamps_round(bootstrap: str) -> dict[str, int | None]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [
        NewTopic("recent", 1, 1, config={"message.timestamp.before.max.ms": "60000"}),
        NewTopic("appended", 1, 1, config={"message.timestamp.type": "LogAppendTime"}),
        # deprecated: bounds what before.max.ms leaves unbounded (KIP-937)
        NewTopic("old", 1, 1, config={"message.timestamp.difference.max.ms": "60000"}),
    ]
    for future in admin.create_topics(new, request_timeout=10).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "retries": 0})
    now = int(time.time() * 1000)
    hour = 3_600_000
    outcome: dict[str, int | None] = {}

    def send(label: str, topic: str, timestamp: int) -> None:
        def report(err: Any, msg: Any) -> None:
            outcome[label] = None if err is None else err.code()

        producer.produce(topic, b"v", timestamp=timestamp, on_delivery=report)
        producer.flush(10)

    send("recent, now", "recent", now)
    send("recent, an hour ago", "recent", now - hour)
    send("t, in two hours", "t", now + 2 * hour)  # Kafka 4's after.max.ms: one hour
    send("t, a year ago", "t", now - 365 * 24 * hour)  # before.max.ms: no bound
    send("appended, in two hours", "appended", now + 2 * hour)  # stamped, not checked
    send("old, an hour ago", "old", now - hour)
    send("old, now", "old", now)
    return outcome


@pytest.mark.asyncio
async def test_create_time_outside_the_topics_bounds_is_invalid_timestamp(
    door: KafkaFrontDoor,
) -> None:
    outcome = await asyncio.to_thread(_timestamps_round, door.bootstrap)
    assert outcome == {
        "recent, now": None,
        "recent, an hour ago": 32,  # INVALID_TIMESTAMP
        "t, in two hours": 32,
        "t, a year ago": None,
        "appended, in two hours": None,
        "old, an hour ago": 32,
        "old, now": None,
    }
