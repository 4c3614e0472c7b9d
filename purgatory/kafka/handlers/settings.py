"""The configs the simulation follows, by Kafka's names: a broker's log settings and a
topic's configs, each with where its value comes from. DescribeConfigs lists them, and
CreateTopics (v5+) answers a new topic's configs with the same entries.

Not a handler: the handler modules do not import each other, so what two of them share
lives here.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from purgatory.sim import Cluster
from purgatory.sim.log import LogConfig


class Source(IntEnum):
    """Where a config's value comes from (Kafka's ConfigSource)."""

    TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    """A config's type (Kafka's ConfigType, DescribeConfigs v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    LIST = 7


class Config(NamedTuple):
    """One config entry; ``synonyms`` are where the value would come from otherwise, in
    Kafka's order of precedence (name, value, source)."""

    name: str
    value: str
    source: Source
    type: ConfigType
    synonyms: tuple[tuple[str, str, Source], ...] = ()


def broker_setting(name: str, value: object, kafka_default: object, kind: ConfigType) -> Config:
    """A broker setting: from its static config when it differs from Kafka's default."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    source = Source.DEFAULT_CONFIG if value == kafka_default else Source.STATIC_BROKER_CONFIG
    return Config(name, text, source, kind, ((name, text, source),))


def log_settings(cluster: Cluster) -> dict[str, Config]:
    """The broker settings (the same on every broker) that topic configs fall back on,
    by name, in the order a broker lists them."""
    log = cluster.log_defaults
    settings = [
        broker_setting("log.retention.ms", log.retention_ms, 604_800_000, ConfigType.LONG),
        broker_setting("log.retention.bytes", log.retention_bytes, -1, ConfigType.LONG),
        broker_setting("min.insync.replicas", cluster.min_insync_replicas, 1, ConfigType.INT),
        broker_setting("log.cleanup.policy", "delete", "delete", ConfigType.LIST),
        broker_setting("log.message.timestamp.type", "CreateTime", "CreateTime", ConfigType.STRING),
    ]
    return {setting.name: setting for setting in settings}


def _topic_setting(name: str, value: int, broker: Config) -> Config:
    """A topic config that falls back on the broker setting ``broker``."""
    if str(value) == broker.value:
        return Config(name, broker.value, broker.source, broker.type, broker.synonyms)
    own = (name, str(value), Source.TOPIC_CONFIG)
    return Config(name, str(value), Source.TOPIC_CONFIG, broker.type, (own, *broker.synonyms))


def topic_configs(cluster: Cluster, config: LogConfig) -> list[Config]:
    """The configs of a topic of ``cluster`` with retention ``config``: ``retention.ms``
    and ``retention.bytes`` (its own where they differ from the brokers'),
    ``cleanup.policy`` (``delete``: nothing is compacted), ``min.insync.replicas`` (the
    brokers') and ``message.timestamp.type`` (``CreateTime``)."""
    broker = log_settings(cluster)
    return [
        _topic_setting("retention.ms", config.retention_ms, broker["log.retention.ms"]),
        _topic_setting("retention.bytes", config.retention_bytes, broker["log.retention.bytes"]),
        broker["log.cleanup.policy"]._replace(name="cleanup.policy"),
        broker["min.insync.replicas"],
        broker["log.message.timestamp.type"]._replace(name="message.timestamp.type"),
    ]
