"""Broker configs by Kafka's names (``purgatory serve --kafka-config``,
``EmbeddedKafka(configs=...)``): each takes effect as in Kafka, DescribeConfigs reports
it with its source, and an unknown name or a bad value is refused naming it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from purgatory.errors import ErrorCode
from purgatory.kafka.broker_config_table import BROKER_CONFIGS
from purgatory.kafka.broker_configs import broker_configs
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.embedded import EmbeddedKafka
from purgatory.testing import ServeProcess

STATIC, DEFAULT = 4, 5  # Kafka's ConfigSource STATIC_BROKER_CONFIG, DEFAULT_CONFIG


@pytest.mark.parametrize(
    ("configs", "named"),
    [
        ({"no.such.config": "1"}, "no.such.config"),
        ({"num.partitions": "two"}, "num.partitions"),
        ({"num.partitions": 0}, "num.partitions"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
        ({"message.max.bytes": 1 << 40}, "message.max.bytes"),
        ({"group.min.session.timeout.ms": 9000, "group.max.session.timeout.ms": 8000}, "group.min"),
        ({"default.replication.factor": 4}, "default.replication.factor"),
    ],
)
def test_embedded_kafka_refuses_an_unknown_config_or_a_bad_value(
    configs: dict[str, object], named: str
) -> None:
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        EmbeddedKafka(brokers=3, configs=configs)


def test_values_are_kafkas_text_or_typed() -> None:
    configs = broker_configs(
        {"num.partitions": " 2 ", "auto.create.topics.enable": "TRUE", "log.retention.ms": -1}
    )
    assert configs.explicit == {
        "num.partitions": 2,
        "auto.create.topics.enable": True,
        "log.retention.ms": -1,
    }
    assert configs.value("group.min.session.timeout.ms") == 6000  # Kafka's default
    assert configs.value("group.initial.rebalance.delay.ms") == 0  # today's, unless set


def _kafka_python_journey(bootstrap: str) -> dict[str, object]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    from kafka.errors import MessageSizeTooLargeError

    seen: dict[str, object] = {}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
        )
        seen["broker"] = {
            name: (c["value"], c["config_source"]) for name, c in described["broker"]["0"].items()
        }
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        producer.send("auto", b"x").get(20)  # auto-created, with num.partitions
        seen["partitions"] = sorted(producer.partitions_for("auto"))
        with pytest.raises(MessageSizeTooLargeError):
            producer.send("auto", b"y" * 4000, partition=0).get(20)
    finally:
        producer.close(5)
    consumer = KafkaConsumer(
        "auto",
        bootstrap_servers=bootstrap,
        group_id="short-sessions",
        session_timeout_ms=1000,
        heartbeat_interval_ms=300,
        auto_offset_reset="earliest",
    )
    try:
        got = 0
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got += sum(len(m) for m in consumer.poll(300).values())
        seen["consumed"] = got
        seen["assigned"] = sorted(p.partition for p in consumer.assignment())
    finally:
        consumer.close()
    return seen


def test_kafka_python_sees_the_configs_and_they_take_effect() -> None:
    configs = {
        "num.partitions": "2",
        "auto.create.topics.enable": "true",
        "group.min.session.timeout.ms": "1000",
        "message.max.bytes": "3000",
        "log.retention.ms": str(604_800_000),
        "offsets.retention.minutes": "60",
    }
    with EmbeddedKafka(brokers=1, configs=configs) as kafka:
        seen = _kafka_python_journey(kafka.bootstrap_servers)
        assert kafka.topics() == {"auto": 2}
    assert seen["partitions"] == [0, 1]
    assert seen["consumed"] == 1
    assert seen["assigned"] == [0, 1]  # joined with a 1 s session
    broker = seen["broker"]
    assert isinstance(broker, dict)
    assert set(BROKER_CONFIGS) <= set(broker)
    assert broker["num.partitions"] == ("2", "STATIC_BROKER_CONFIG")
    assert broker["group.min.session.timeout.ms"] == ("1000", "STATIC_BROKER_CONFIG")
    assert broker["message.max.bytes"] == ("3000", "STATIC_BROKER_CONFIG")
    assert broker["offsets.retention.minutes"] == ("60", "STATIC_BROKER_CONFIG")
    assert broker["log.retention.ms"] == (
        "604800000",
        "STATIC_BROKER_CONFIG",
    )  # set, though Kafka's default
    assert broker["group.max.session.timeout.ms"] == ("1800000", "DEFAULT_CONFIG")
    assert broker["transaction.max.timeout.ms"] == ("900000", "DEFAULT_CONFIG")
    # the simulation's own default, unlike Kafka's: as from its server.properties
    assert broker["group.initial.rebalance.delay.ms"] == ("0", "STATIC_BROKER_CONFIG")


def test_without_configs_the_session_bounds_are_kafkas() -> None:
    with EmbeddedKafka(brokers=1) as kafka:
        bounds = kafka._get(
            lambda k: (
                k.front_door.coordinator.min_session_timeout_ms,
                k.front_door.coordinator.max_session_timeout_ms,
            )
        )
    assert bounds == (6000, 1_800_000)


@pytest.mark.kafka_cluster(brokers=1, configs={"min.insync.replicas": 1, "num.partitions": 3})
def test_the_marker_takes_configs(kafka_cluster: EmbeddedKafka) -> None:
    assert kafka_cluster._get(lambda k: k.front_door.configs.number("num.partitions")) == 3


@pytest.mark.asyncio
async def test_the_first_rebalance_of_an_empty_group_waits_the_initial_delay() -> None:
    coordinator = GroupCoordinator(1000, 60_000, initial_rebalance_delay_ms=300)
    try:
        protocols = [("range", b"")]
        start = time.monotonic()
        first = coordinator.join("g", "", "a", 10_000, 10_000, "consumer", protocols)
        await asyncio.sleep(0.1)
        second = coordinator.join("g", "", "b", 10_000, 10_000, "consumer", protocols)
        assert isinstance(first, asyncio.Future)
        assert isinstance(second, asyncio.Future)
        assert not first.done()  # everyone known joined, but the delay runs
        joined = await asyncio.gather(first, second)
        waited = time.monotonic() - start
        # a member joined during the delay: it waited once more (Kafka's InitialDelayedJoin)
        assert 0.55 < waited < 5
        assert {j.error for j in joined} == {ErrorCode.NONE}
        assert {j.generation for j in joined} == {1}
    finally:
        await coordinator.close()


@pytest.mark.asyncio
async def test_without_the_delay_the_first_rebalance_completes_at_once() -> None:
    coordinator = GroupCoordinator(1000, 60_000)
    try:
        joined = coordinator.join("g", "", "a", 10_000, 10_000, "consumer", [("range", b"")])
        assert isinstance(joined, asyncio.Future)
        result = await asyncio.wait_for(joined, 1)
        assert (result.error, result.generation) == (ErrorCode.NONE, 1)
    finally:
        await coordinator.close()


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--kafka-config", "no.such.config=1"], "no.such.config"),
        (["--kafka-config", "num.partitions=two"], "num.partitions"),
        (["--kafka-config", "num.partitions"], "NAME=VALUE"),
        (
            ["--kafka-auto-create-topics", "--kafka-config", "auto.create.topics.enable=false"],
            "auto.create.topics.enable",
        ),
        (["--retention-ms", "5000", "--kafka-config", "log.retention.ms=7000"], "log.retention"),
    ],
)
def test_serve_refuses_an_unknown_config_or_a_bad_value(flags: list[str], named: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "purgatory", "serve", "--port", "0", "--kafka-port", "0", *flags],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert named in result.stderr
    assert "--kafka-config" in result.stderr or "NAME=VALUE" in result.stderr


@pytest.mark.asyncio
async def test_serve_applies_its_configs() -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    server = ServeProcess(
        "--kafka-port",
        "0",
        "--kafka-config",
        "min.insync.replicas=2",
        "--kafka-config",
        "log.retention.ms=120000",
        "--kafka-config",
        "num.partitions=2",
        "--kafka-auto-create-topics",
    )
    addresses = server.start()
    try:
        assert addresses.bootstrap_servers is not None
        admin = AIOKafkaAdminClient(bootstrap_servers=addresses.bootstrap_servers)
        await admin.start()
        try:
            [answer] = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER, "0")]
            )
        finally:
            await admin.close()
    finally:
        server.stop()
    [(_, _, _, _, configs)] = answer.resources
    values = {c[0]: (c[1], c[3]) for c in configs}
    # a Kafka 4.1+ cluster's controller writes min.insync.replicas as a cluster-wide
    # dynamic config when it first starts (KIP-966), with the static value
    assert values["min.insync.replicas"] == ("2", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert values["log.retention.ms"] == ("120000", STATIC)
    assert values["num.partitions"] == ("2", STATIC)
    assert values["auto.create.topics.enable"] == ("true", STATIC)


def test_every_broker_config_is_declared_once() -> None:
    from purgatory.kafka import broker_config_table as table_module

    declared = [
        c.name
        for table in (table_module._CONFIGS, table_module._GROUPS, table_module._KEPT)
        for c in table
    ]
    assert sorted(name for name in set(declared) if declared.count(name) > 1) == []
