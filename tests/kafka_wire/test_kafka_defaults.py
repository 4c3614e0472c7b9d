"""A config nobody set is reported as Kafka 4 reports its default: every topic config and
every broker config DescribeConfigs lists for an embedded cluster built with no settings,
value, source and synonyms, against Kafka's sources (LogConfig, ServerLogConfigs,
TopicConfig, ConfigHelper); the cluster's own defaults apart, each reported as a set
value (STATIC_BROKER_CONFIG over Kafka's default) and named in docs/kafka.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from purgatory.kafka.broker_config_table import BROKER_CONFIGS
from purgatory.kafka.config_rules import LONG_MAX, as_text
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.handlers.configs import ConfigHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type, versions

TOPIC, BROKER = 2, 4
STATIC, DYNAMIC_DEFAULT, DEFAULT = 4, 3, 5  # Kafka's ConfigSource
DOCS = Path(__file__).parents[2] / "docs" / "kafka.md"
WEEK_MS, LONG = "604800000", str(LONG_MAX)

#: Kafka 4's topic config defaults (LogConfig, TopicConfig), as DescribeConfigs reports them
KAFKA_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": LONG,
    "flush.ms": LONG,
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": LONG,
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": LONG,
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": WEEK_MS,
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": WEEK_MS,
    "unclean.leader.election.enable": "false",
}

#: broker configs whose Kafka default is null: reported without a value and, having no
#: default, without synonyms (ConfigHelper lists only non-null defaults). The *.ms log
#: configs are in force through the *.hours (and scheduler) configs Kafka lists apart.
KAFKA_NULL_BROKER_DEFAULTS = {
    "log.retention.ms",
    "log.roll.ms",
    "log.roll.jitter.ms",
    "log.flush.interval.ms",
    "replica.selector.class",
    "ssl.cipher.suites",
    "ssl.provider",
    "sasl.jaas.config",
}

#: Kafka 4's broker defaults (ServerLogConfigs, ServerConfigs, ReplicationConfigs, ...)
KAFKA_BROKER_DEFAULTS = {
    "log.retention.bytes": "-1",
    "log.segment.bytes": "1073741824",
    "log.cleanup.policy": "delete",
    "log.index.interval.bytes": "4096",
    "log.index.size.max.bytes": "10485760",
    "log.flush.interval.messages": LONG,
    "log.cleaner.delete.retention.ms": "86400000",
    "log.message.timestamp.after.max.ms": "3600000",
    "message.max.bytes": "1048588",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "num.recovery.threads.per.data.dir": "2",
    "compression.type": "producer",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": WEEK_MS,
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
}

#: the topic configs whose broker synonym has a null default in Kafka: no synonym
NO_SYNONYM = {"retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"}

#: the embedded cluster's own defaults (docs/kafka.md, "Broker configs")
OWN_DEFAULTS = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "offsets.topic.replication.factor": "1",
}

Entry = tuple[str | None, int, list[tuple[str, str | None, int]]]


async def _described(kind: int, name: str) -> dict[str, Entry]:
    async with AsyncEmbeddedKafka(brokers=1, topics={"t": 1}) as kafka:
        door = kafka.front_door
        handlers = ConfigHandlers(
            door.cluster_configs, 0, door.addresses, door.coordinator, door.client_metrics
        )
        high = versions(ApiKey.DESCRIBE_CONFIGS)[1]
        values: dict[str, Any] = {
            "resources": [
                {"resource_type": kind, "resource_name": name, "configuration_keys": None}
            ],
            "include_synonyms": True,
        }
        request = build(request_type(ApiKey.DESCRIBE_CONFIGS, high), values)
        header = RequestHeader(ApiKey.DESCRIBE_CONFIGS, high, 1, "test")
        response = handlers.apis()[ApiKey.DESCRIBE_CONFIGS][2](header, request)
    [result] = response.results
    return {
        c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
        for c in result.configs
    }


@pytest.mark.asyncio
async def test_every_topic_config_nobody_set_is_reported_as_kafkas_default() -> None:
    described = await _described(TOPIC, "t")
    assert KAFKA_TOPIC_DEFAULTS.keys() <= described.keys()
    wrong = {}
    for name, (value, source, synonyms) in described.items():
        expected = KAFKA_TOPIC_DEFAULTS.get(name, value)
        if name == "min.insync.replicas":  # KIP-966: a dynamic cluster default from the start
            want: Entry = (expected, DYNAMIC_DEFAULT, synonyms)
        elif name in NO_SYNONYM:
            want = (expected, DEFAULT, [])
        else:
            want = (expected, DEFAULT, [(synonyms[0][0], expected, DEFAULT)] if synonyms else [])
        if (value, source, synonyms) != want:
            wrong[name] = (value, source, synonyms)
    assert wrong == {}


@pytest.mark.asyncio
async def test_every_broker_config_nobody_set_is_reported_as_kafkas_default() -> None:
    described = await _described(BROKER, "0")
    wrong = {}
    for name, (value, source, synonyms) in described.items():
        if name in ("listeners", "advertised.listeners"):  # as bound
            continue
        config = BROKER_CONFIGS[name]
        kafka = None if config.kafka_default is None else as_text(config.kafka_default)
        if name in OWN_DEFAULTS:
            want: Entry = (
                OWN_DEFAULTS[name],
                STATIC,
                [(name, OWN_DEFAULTS[name], STATIC), (name, kafka, DEFAULT)],
            )
        elif name == "min.insync.replicas":  # KIP-966
            want = ("1", DYNAMIC_DEFAULT, [(name, "1", DYNAMIC_DEFAULT), (name, "1", DEFAULT)])
        elif name in KAFKA_NULL_BROKER_DEFAULTS:
            want = (None, DEFAULT, [])
        else:
            expected = KAFKA_BROKER_DEFAULTS.get(name, kafka)
            want = (expected, DEFAULT, [] if expected is None else [(name, expected, DEFAULT)])
        if (value, source, synonyms) != want:
            wrong[name] = (value, source, synonyms)
    assert wrong == {}
    assert KAFKA_BROKER_DEFAULTS.keys() <= described.keys()
    assert KAFKA_NULL_BROKER_DEFAULTS <= described.keys()


def test_the_clusters_own_defaults_are_documented() -> None:
    docs = DOCS.read_text()
    assert [name for name in OWN_DEFAULTS if f"`{name}`" not in docs] == []
