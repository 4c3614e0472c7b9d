"""Kafka 4's dynamic broker configs (every one AlterConfigs may set, acted on or only kept
and reported), GROUP config resources (Kafka 4.0+) and the defaults DescribeConfigs
reports: through the handlers with kio, over a socket, with confluent-kafka's and
kafka-python's admin clients, on EmbeddedKafka and ``purgatory serve``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpResource
from kafka.admin import ConfigResourceType as KpType
from kio_wire import Wire

from purgatory.kafka.broker_config_table import BROKER_CONFIGS
from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.cluster_configs import ClusterConfigs
from purgatory.kafka.coordinator.group_configs import GROUP_CONFIGS, KAFKA_BROKER_DEFAULTS
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.handlers.configs import ConfigHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type, versions
from purgatory.sim import Cluster
from purgatory.testing import ServeProcess

TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND = 0, 1, 2
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, GROUP_CONFIG = 2, 3, 4, 5, 8


def _call(handlers: ConfigHandlers, key: ApiKey, version: int, values: dict[str, Any]) -> Any:
    request = build(request_type(key, version), values)
    return handlers.apis()[key][2](RequestHeader(key, version, 1, "test"), request)


def _describe(handlers: ConfigHandlers, kind: int, name: str) -> dict[str, Any]:
    resource = {"resource_type": kind, "resource_name": name, "configuration_keys": None}
    response = _call(
        handlers,
        ApiKey.DESCRIBE_CONFIGS,
        versions(ApiKey.DESCRIBE_CONFIGS)[1],
        {"resources": [resource], "include_synonyms": True},
    )
    [result] = response.results
    assert result.error_code.value == 0, result.error_message
    return {c.name: c for c in result.configs}


def _incremental(
    handlers: ConfigHandlers, kind: int, name: str, configs: list[tuple[str, int, str | None]]
) -> tuple[int, str | None]:
    response = _call(
        handlers,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": kind,
                    "resource_name": name,
                    "configs": [
                        {"name": n, "config_operation": op, "value": v} for n, op, v in configs
                    ],
                }
            ],
            "validate_only": False,
        },
    )
    [answer] = response.responses
    return answer.error_code.value, answer.error_message


def _shown(entry: Any) -> tuple[Any, ...]:
    return (entry.value, entry.config_source, [(s.name, s.value, s.source) for s in entry.synonyms])


@pytest.mark.asyncio
async def test_every_dynamic_broker_config_is_taken_reported_and_deleted() -> None:
    async with Cluster(brokers=2, seed=1) as cluster:
        configs = ClusterConfigs(cluster, BrokerConfigs())
        handlers = ConfigHandlers(configs, 0, {})
        name = "sasl.kerberos.min.time.before.relogin"
        assert _incremental(handlers, BROKER, "0", [(name, SET, "120000")]) == (0, None)
        assert _shown(_describe(handlers, BROKER, "0")[name]) == (
            "120000",
            DYNAMIC_BROKER,
            [(name, "120000", DYNAMIC_BROKER), (name, "60000", DEFAULT)],
        )
        assert not _describe(handlers, BROKER, "0")[name].read_only
        assert _incremental(handlers, BROKER, "0", [(name, DELETE, None)]) == (0, None)
        assert _describe(handlers, BROKER, "0")[name].config_source == DEFAULT
        # for every broker: the resource "" lists it
        for config, value in [
            ("log.cleaner.threads", "2"),
            ("max.connections", "1000"),
            ("num.io.threads", "12"),
        ]:
            assert _incremental(handlers, BROKER, "", [(config, SET, value)]) == (0, None)
            assert _describe(handlers, BROKER, "0")[config].config_source == DYNAMIC_DEFAULT
            assert _describe(handlers, BROKER, "")[config].value == value
        # a bad value, as Kafka's ConfigAdminManager answers it (INVALID_REQUEST)
        assert _incremental(handlers, BROKER, "0", [(name, SET, "soon")]) == (
            42,
            f"Invalid value soon for configuration {name}: Not a number of type LONG",
        )
        code, message = _incremental(handlers, BROKER, "0", [("num.io.threads", SET, "100")])
        assert code == 42
        assert "value should not be greater than double the current value 12" in (message or "")
        # the SSL stores only under a listener prefix; per-listener ones for one broker
        assert _incremental(handlers, BROKER, "0", [("ssl.keystore.location", SET, "/k")]) == (
            42,
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix: Set(ssl.keystore.location)",
        )
        assert _incremental(handlers, BROKER, "", [("ssl.cipher.suites", SET, "A")]) == (
            42,
            "Cannot update these configs at default cluster level, broker id must be "
            "specified: Set(ssl.cipher.suites)",
        )
        prefixed = "listener.name.ssl.ssl.keystore.location"
        secret = "listener.name.ssl.ssl.keystore.password"
        assert _incremental(
            handlers, BROKER, "0", [(prefixed, SET, "/k.jks"), (secret, SET, "hush")]
        ) == (0, None)
        described = _describe(handlers, BROKER, "0")
        assert _shown(described[prefixed]) == (
            "/k.jks",
            DYNAMIC_BROKER,
            # Kafka lists no null default (ssl.keystore.location's) as a synonym
            [(prefixed, "/k.jks", DYNAMIC_BROKER)],
        )
        assert (described[secret].value, described[secret].is_sensitive) == (None, True)
        assert _incremental(handlers, BROKER, "0", [("ssl.cipher.suites", SET, "A,B")]) == (0, None)
        # the topic configs' broker synonyms reach the topics that inherit them
        await cluster.create_topic("t", 1, 2)
        assert _incremental(handlers, BROKER, "", [("log.segment.bytes", SET, "2097152")]) == (
            0,
            None,
        )
        segment = _describe(handlers, TOPIC, "t")["segment.bytes"]
        assert (segment.value, segment.config_source) == ("2097152", DYNAMIC_DEFAULT)
        assert cluster.topic_config("t").segment_bytes == 2_097_152
        # a config Kafka does not change while it runs is still refused
        assert _incremental(handlers, BROKER, "0", [("num.partitions", SET, "3")])[0] == 42


def test_the_dynamic_set_is_kafkas() -> None:
    dynamic = {n for n, c in BROKER_CONFIGS.items() if c.dynamic}
    for name in (
        "sasl.kerberos.min.time.before.relogin",
        "log.cleaner.threads",
        "num.io.threads",
        "max.connections",
        "ssl.keystore.location",
        "ssl.cipher.suites",
        "remote.fetch.max.wait.ms",
        "leader.replication.throttled.rate",
        "producer.id.expiration.ms",
        "metric.reporters",
    ):
        assert name in dynamic
    assert "num.partitions" not in dynamic
    # the group coordinator's fallbacks are the broker table's defaults
    for name, value in KAFKA_BROKER_DEFAULTS.items():
        assert BROKER_CONFIGS[name].kafka_default == value, name


@pytest.mark.asyncio
async def test_group_configs_are_kept_checked_and_reported() -> None:
    async with Cluster(brokers=1, seed=1) as cluster:
        coordinator = GroupCoordinator()
        handlers = ConfigHandlers(ClusterConfigs(cluster, BrokerConfigs()), 0, {}, coordinator)
        described = _describe(handlers, GROUP, "g")
        assert set(described) == set(GROUP_CONFIGS)
        assert _shown(described["consumer.session.timeout.ms"]) == (
            "45000",
            DEFAULT,
            [("consumer.session.timeout.ms", "45000", DEFAULT)],
        )
        assert described["share.auto.offset.reset"].value == "latest"
        ok = [
            ("consumer.session.timeout.ms", SET, "50000"),
            ("consumer.heartbeat.interval.ms", SET, "6000"),
            ("share.record.lock.duration.ms", SET, "20000"),
            ("share.auto.offset.reset", SET, "by_duration:PT1H"),
            ("share.isolation.level", SET, "read_committed"),
        ]
        assert _incremental(handlers, GROUP, "g", ok) == (0, None)
        described = _describe(handlers, GROUP, "g")
        assert _shown(described["consumer.session.timeout.ms"]) == (
            "50000",
            GROUP_CONFIG,
            [("consumer.session.timeout.ms", "50000", GROUP_CONFIG)],
        )
        config = coordinator.group_config("g")  # the accessor share groups read
        assert config.consumer_session_timeout_ms == 50_000
        assert config.share_record_lock_duration_ms == 20_000
        assert config.share_isolation_level == "read_committed"
        assert coordinator.consumer.heartbeat_interval("g") == 6000
        assert coordinator.consumer.heartbeat_interval("other") == 5000
        for change, answer in [
            (
                ("consumer.session.timeout.ms", SET, "30000"),
                "consumer.session.timeout.ms must be greater than or equal to "
                "group.consumer.min.session.timeout.ms",
            ),
            (
                ("consumer.heartbeat.interval.ms", SET, "20000"),
                "consumer.heartbeat.interval.ms must be less than or equal to "
                "group.consumer.max.heartbeat.interval.ms",
            ),
            (
                ("share.record.lock.duration.ms", SET, "500"),
                "Invalid value 500 for configuration share.record.lock.duration.ms: Value "
                "must be at least 1000",
            ),
            (
                ("share.isolation.level", SET, "dirty"),
                "Invalid value dirty for configuration share.isolation.level: String must be "
                "one of: read_committed, read_uncommitted",
            ),
            (("nope", SET, "1"), "Unknown group config name: nope"),
            (
                ("share.isolation.level", APPEND, "x"),
                "Can't APPEND to key share.isolation.level because its type is not LIST.",
            ),
        ]:
            assert _incremental(handlers, GROUP, "g", [change]) == (40, answer)
        assert _incremental(handlers, GROUP, "", ok)[0] == 42  # no default group resource
        # DELETE: back to the broker's
        delete = [("consumer.session.timeout.ms", DELETE, None)]
        assert _incremental(handlers, GROUP, "g", delete) == (0, None)
        assert coordinator.group_config("g").consumer_session_timeout_ms == 45_000
        # AlterConfigs replaces the group's configs
        response = _call(
            handlers,
            ApiKey.ALTER_CONFIGS,
            2,
            {
                "resources": [
                    {
                        "resource_type": GROUP,
                        "resource_name": "g",
                        "configs": [{"name": "share.delivery.count.limit", "value": "3"}],
                    }
                ],
                "validate_only": False,
            },
        )
        assert response.responses[0].error_code.value == 0
        assert coordinator.group_config("g").own == {"share.delivery.count.limit": 3}
        listed = _call(handlers, ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [GROUP]})
        assert [r.resource_name for r in listed.config_resources] == ["g"]
        await coordinator.close()


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(brokers=1, seed=1, topics={"t": (2, 1)}) as k:
        yield k


@pytest.mark.asyncio
async def test_a_consumer_group_is_told_its_group_configs_heartbeat_interval_over_the_wire(
    kafka: AsyncEmbeddedKafka,
) -> None:
    reader, writer = await asyncio.open_connection(*kafka.front_door.addresses[0])
    wire = Wire(reader, writer)
    try:
        set_ = await wire.kio(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                {
                    "resource_type": GROUP,
                    "resource_name": "g",
                    "configs": [
                        {
                            "name": "consumer.heartbeat.interval.ms",
                            "config_operation": SET,
                            "value": "7000",
                        }
                    ],
                }
            ],
            validate_only=False,
        )
        assert set_.responses[0].error_code.value == 0
        answer = await wire.kio(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            group_id="g",
            member_id="m",
            member_epoch=0,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=30_000,
            subscribed_topic_names=["t"],
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=[],
        )
        assert answer.error_code.value == 0
        assert answer.heartbeat_interval.total_seconds() == 7
        described = await wire.kio(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[
                {
                    "resource_type": GROUP,
                    "resource_name": "g",
                    "configuration_keys": ["consumer.heartbeat.interval.ms"],
                }
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        [entry] = described.results[0].configs
        assert (entry.value, entry.config_source) == ("7000", GROUP_CONFIG)
    finally:
        writer.close()
        await writer.wait_closed()


def _confluent_round(bootstrap: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = "sasl.kerberos.min.time.before.relogin"
    out: dict[str, Any] = {}

    def alter(op: AlterConfigOpType, value: str | None) -> None:
        entry = ConfigEntry(name, value, incremental_operation=op)
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result()

    def described() -> Any:
        [future] = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
        return future.result()[name]

    alter(AlterConfigOpType.SET, "90000")
    entry = described()
    out["set"] = (entry.value, int(entry.source), entry.is_default, entry.is_read_only)
    alter(AlterConfigOpType.DELETE, None)
    entry = described()
    out["deleted"] = (entry.value, int(entry.source), entry.is_default)
    [future] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "t")]).values()
    retention = future.result()["retention.ms"]
    out["retention"] = (retention.value, int(retention.source), retention.is_default)
    return out


def test_confluent_and_kafka_python_set_describe_and_delete_dynamic_configs() -> None:
    with EmbeddedKafka(brokers=1, seed=1, topics={"t": (1, 1)}) as kafka:
        out = _confluent_round(kafka.bootstrap_servers)
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        try:
            admin.alter_configs([KpResource(KpType.BROKER, "0", configs={"num.io.threads": "9"})])
            described = admin.describe_configs(
                [KpResource(KpType.BROKER, "0")], config_filter="all"
            )
        finally:
            admin.close()
    assert out["set"] == ("90000", DYNAMIC_BROKER, False, False)
    assert out["deleted"] == ("60000", DEFAULT, True)
    # Kafka 4's default retention, as Kafka's DescribeConfigs reports it
    assert out["retention"] == ("604800000", DEFAULT, True)
    threads = described["broker"]["0"]["num.io.threads"]
    assert (threads["value"], threads["config_source"]) == ("9", "DYNAMIC_BROKER_CONFIG")


@pytest.mark.asyncio
async def test_serve_reports_its_retention_as_a_static_broker_config() -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AioResource
    from aiokafka.admin.config_resource import ConfigResourceType as AioType

    server = ServeProcess("--kafka-port", "0", "--topic", "t:1:1")
    addresses = server.start()
    try:
        assert addresses.bootstrap_servers is not None
        admin = AIOKafkaAdminClient(bootstrap_servers=addresses.bootstrap_servers)
        await admin.start()
        try:
            [answer] = await admin.describe_configs(
                [AioResource(AioType.TOPIC, "t")], include_synonyms=True
            )
        finally:
            await admin.close()
    finally:
        server.stop()
    [(_, _, _, _, configs)] = answer.resources
    entries = {c[0]: c for c in configs}
    _, value, _, source, _, synonyms = entries["retention.ms"][:6]
    # one hour, set by purgatory serve as server.properties would set it
    assert (value, source) == ("3600000", STATIC)
    assert [tuple(s) for s in synonyms] == [
        ("log.retention.ms", "3600000", STATIC),
        ("log.retention.hours", "168", DEFAULT),  # Kafka derives its null log.retention.ms from it
    ]
    assert entries["segment.bytes"][1:4:2] == (str(1 << 30), DEFAULT)
