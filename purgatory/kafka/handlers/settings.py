"""The configs the simulation follows, by Kafka's names: a broker's log settings and a
topic's configs, each with where its value comes from. DescribeConfigs lists them, and
CreateTopics (v5+) answers a new topic's configs with the same entries.

Not a handler: the handler modules do not import each other, so what two of them share
lives here.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import IntEnum
from typing import NamedTuple

from purgatory.kafka.broker_configs import BROKER_CONFIGS, BrokerConfigs, ConfigType
from purgatory.kafka.coordinator.offsets_topic import default_replication_factor
from purgatory.sim import Cluster
from purgatory.sim.log import LogConfig

__all__ = ["Config", "ConfigType", "Source", "broker_configs_described", "topic_configs"]


class Source(IntEnum):
    """Where a config's value comes from (Kafka's ConfigSource)."""

    TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class Config(NamedTuple):
    """One config entry; ``synonyms`` are where the value would come from otherwise, in
    Kafka's order of precedence (name, value, source)."""

    name: str
    value: str
    source: Source
    type: ConfigType
    synonyms: tuple[tuple[str, str, Source], ...] = ()


def broker_setting(
    name: str, value: object, kafka_default: object, kind: ConfigType, explicit: bool = False
) -> Config:
    """A broker setting: from its static config when it was set (``explicit``) or differs
    from Kafka's default (the simulation's own defaults are its server.properties), else
    Kafka's default."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    static = explicit or value != kafka_default
    source = Source.STATIC_BROKER_CONFIG if static else Source.DEFAULT_CONFIG
    return Config(name, text, source, kind, ((name, text, source),))


def _from_cluster(cluster: Cluster) -> dict[str, int]:
    """The broker configs whose value in force is the cluster's own."""
    return {
        "log.retention.ms": cluster.log_defaults.retention_ms,
        "log.retention.bytes": cluster.log_defaults.retention_bytes,
        "min.insync.replicas": cluster.min_insync_replicas,
    }


def _fixed() -> list[Config]:
    """The broker settings that cannot be changed here: nothing is compacted, and batches
    keep the producer's timestamps."""
    return [
        broker_setting("log.cleanup.policy", "delete", "delete", ConfigType.LIST),
        broker_setting("log.message.timestamp.type", "CreateTime", "CreateTime", ConfigType.STRING),
    ]


def broker_configs_described(cluster: Cluster, configs: BrokerConfigs) -> dict[str, Config]:
    """Every broker config of :data:`~purgatory.kafka.broker_configs.BROKER_CONFIGS`
    (the same on every broker) with its value in force and its source, then the fixed
    ``log.cleanup.policy`` and ``log.message.timestamp.type``, by name, in the order a
    broker lists them."""
    own = _from_cluster(cluster)
    if not configs.is_set("offsets.topic.replication.factor"):  # sized to the cluster
        own["offsets.topic.replication.factor"] = default_replication_factor(cluster)
    settings = [
        broker_setting(
            name,
            own[name] if name in own else configs.value(name),
            config.kafka_default,
            config.type,
            configs.is_set(name),
        )
        for name, config in BROKER_CONFIGS.items()
    ]
    settings += _fixed()
    return {setting.name: setting for setting in settings}


def log_settings(cluster: Cluster, explicit: Collection[str] = ()) -> dict[str, Config]:
    """The broker settings (the same on every broker) that topic configs fall back on, by
    name; ``explicit``: the names that were set."""
    own = _from_cluster(cluster)
    settings = [
        broker_setting(
            name,
            own[name],
            BROKER_CONFIGS[name].kafka_default,
            BROKER_CONFIGS[name].type,
            name in explicit,
        )
        for name in own
    ]
    settings += _fixed()
    return {setting.name: setting for setting in settings}


def _topic_setting(name: str, value: int, broker: Config) -> Config:
    """A topic config that falls back on the broker setting ``broker``."""
    if str(value) == broker.value:
        return Config(name, broker.value, broker.source, broker.type, broker.synonyms)
    own = (name, str(value), Source.TOPIC_CONFIG)
    return Config(name, str(value), Source.TOPIC_CONFIG, broker.type, (own, *broker.synonyms))


def topic_configs(
    cluster: Cluster, config: LogConfig, explicit: Collection[str] = ()
) -> list[Config]:
    """The configs of a topic of ``cluster`` with retention ``config``: ``retention.ms``
    and ``retention.bytes`` (its own where they differ from the brokers'),
    ``cleanup.policy`` (``delete``: nothing is compacted), ``min.insync.replicas`` (the
    brokers') and ``message.timestamp.type`` (``CreateTime``); ``explicit``: the broker
    configs that were set."""
    broker = log_settings(cluster, explicit)
    return [
        _topic_setting("retention.ms", config.retention_ms, broker["log.retention.ms"]),
        _topic_setting("retention.bytes", config.retention_bytes, broker["log.retention.bytes"]),
        broker["log.cleanup.policy"]._replace(name="cleanup.policy"),
        broker["min.insync.replicas"],
        broker["log.message.timestamp.type"]._replace(name="message.timestamp.type"),
    ]
