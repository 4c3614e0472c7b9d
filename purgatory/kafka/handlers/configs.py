"""DescribeConfigs 0-3 (the non-flexible versions): the configs of a topic, and of the
broker asked, that the simulation actually follows, with Kafka's names.

A topic has ``retention.ms`` and ``retention.bytes`` (its own if it was created with
them, else the brokers'), ``cleanup.policy`` (always ``delete``: nothing is compacted),
``min.insync.replicas`` (the brokers', for every topic) and ``message.timestamp.type``
(``CreateTime``: batches keep the producer's timestamps). A broker (resource name: its
id) has the settings those come from, and topic creation's. Nothing here can be altered
over the wire, so every config is read-only. An unknown topic is answered
UNKNOWN_TOPIC_OR_PARTITION, another broker's id or another resource type
INVALID_REQUEST, each with its reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Final, NamedTuple, final

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster
from purgatory.sim.errors import ErrorCode, SimulationError


class Resource(IntEnum):
    """Kafka's ConfigResource types served here."""

    TOPIC = 2
    BROKER = 4


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


#: topic creation's broker settings: Kafka's default, type
_CREATION: Final[dict[str, tuple[object, ConfigType]]] = {
    "num.partitions": (1, ConfigType.INT),
    "default.replication.factor": (1, ConfigType.INT),
    "auto.create.topics.enable": (True, ConfigType.BOOLEAN),
}


def _broker_setting(name: str, value: object, kafka_default: object, kind: ConfigType) -> Config:
    """A broker setting: from its static config when it differs from Kafka's default."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    source = Source.DEFAULT_CONFIG if value == kafka_default else Source.STATIC_BROKER_CONFIG
    return Config(name, text, source, kind, ((name, text, source),))


def _topic_setting(name: str, value: int, broker: Config) -> Config:
    """A topic config that falls back on the broker setting ``broker``."""
    if str(value) == broker.value:
        return Config(name, broker.value, broker.source, broker.type, broker.synonyms)
    own = (name, str(value), Source.TOPIC_CONFIG)
    return Config(name, str(value), Source.TOPIC_CONFIG, broker.type, (own, *broker.synonyms))


@final
class ConfigHandlers:
    """The DescribeConfigs handler of broker ``broker_id``; ``creation``: its topic
    creation settings by Kafka's names (``num.partitions``, ``default.replication.factor``,
    ``auto.create.topics.enable``)."""

    def __init__(self, cluster: Cluster, broker_id: int, creation: Mapping[str, int]) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.creation = creation

    def apis(self) -> ApiTable:
        return {ApiKey.DESCRIBE_CONFIGS: Api(0, 3, self.describe_configs)}

    def _broker_configs(self) -> list[Config]:
        log, creation = self.cluster.log_defaults, self.creation
        return [
            _broker_setting("log.retention.ms", log.retention_ms, 604_800_000, ConfigType.LONG),
            _broker_setting("log.retention.bytes", log.retention_bytes, -1, ConfigType.LONG),
            _broker_setting(
                "min.insync.replicas", self.cluster.min_insync_replicas, 1, ConfigType.INT
            ),
            *(
                _broker_setting(name, creation[name], kafka_default, kind)
                for name, (kafka_default, kind) in _CREATION.items()
            ),
            _broker_setting("log.cleanup.policy", "delete", "delete", ConfigType.LIST),
            _broker_setting(
                "log.message.timestamp.type", "CreateTime", "CreateTime", ConfigType.STRING
            ),
        ]

    def _topic_configs(self, name: str) -> list[Config]:
        config = self.cluster.topic_config(name)
        if config is None:
            raise SimulationError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        broker = {c.name: c for c in self._broker_configs()}
        return [
            _topic_setting("retention.ms", config.retention_ms, broker["log.retention.ms"]),
            _topic_setting(
                "retention.bytes", config.retention_bytes, broker["log.retention.bytes"]
            ),
            broker["log.cleanup.policy"]._replace(name="cleanup.policy"),
            broker["min.insync.replicas"],
            broker["log.message.timestamp.type"]._replace(name="message.timestamp.type"),
        ]

    def _configs(self, resource_type: int, name: str) -> list[Config]:
        if resource_type == Resource.TOPIC:
            return self._topic_configs(name)
        if resource_type == Resource.BROKER:
            if name not in ("", str(self.broker_id)):
                raise SimulationError(
                    ErrorCode.INVALID_REQUEST,
                    f"broker {self.broker_id} describes its own configs ({self.broker_id!r} "
                    f"or ''), not {name!r}",
                )
            return self._broker_configs()
        raise SimulationError(
            ErrorCode.INVALID_REQUEST,
            f"resource type {resource_type}: only topics (2) and brokers (4) are described",
        )

    def describe_configs(self, header: RequestHeader, body: Reader) -> bytearray:
        version = header.api_version
        resources: list[tuple[int, str, list[str] | None]] = []
        for _ in range(body.array_length()):
            resource_type, name = body.int8(), body.string()
            count = body.nullable_array_length()
            keys = None if count is None else [body.string() for _ in range(count)]
            resources.append((resource_type, name, keys))
        synonyms = version >= 1 and body.int8() != 0
        if version >= 3:
            body.int8()  # include_documentation: none is kept
        out = Writer().int32(0).int32(len(resources))  # throttle_time_ms
        for resource_type, name, keys in resources:
            try:
                configs = [
                    c for c in self._configs(resource_type, name) if keys is None or c.name in keys
                ]
                error, message = ErrorCode.NONE, None
            except SimulationError as refused:
                configs, error, message = [], refused.code, refused.message
            out.int16(error.wire).string(message).int8(resource_type).string(name)
            out.int32(len(configs))
            for config in configs:
                _encode(out, version, config, synonyms)
        return out.buf


def _encode(out: Writer, version: int, config: Config, synonyms: bool) -> None:
    out.string(config.name).string(config.value).int8(1)  # read_only
    if version == 0:
        out.int8(config.source is Source.DEFAULT_CONFIG)  # is_default
    else:
        out.int8(config.source)
    out.int8(0)  # is_sensitive
    if version >= 1:
        listed = config.synonyms if synonyms else ()
        out.int32(len(listed))
        for name, value, source in listed:
            out.string(name).string(value).int8(source)
    if version >= 3:
        out.int8(config.type).string(None)  # documentation
