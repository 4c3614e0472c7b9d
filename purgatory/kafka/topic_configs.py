"""The table of Kafka's topic configs (:data:`TOPIC_CONFIGS`, Kafka 4's LogConfig list):
each config with its type, Kafka's default (a topic config that inherits one from a broker
config names it: its default is that broker config's value in force), its allowed values
and what it does here. CreateTopics, AlterConfigs and IncrementalAlterConfigs take them
for a topic; :func:`check_topic_config` checks one's value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, final

from purgatory.kafka.broker_config_table import BROKER_CONFIGS
from purgatory.kafka.config_rules import LONG_MAX, ConfigType, Rule, Value

#: what a topic config the simulation does not act on says it does
KEPT_ONLY: Final = "kept and reported; the simulation does not act on it"


@final
@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic config: Kafka's ``name`` and ``type``; ``synonym``, the broker config
    it inherits from when the topic sets none (Kafka's name; None: none); ``default``,
    Kafka's default (None: ``synonym``'s value in force, a broker config of
    :data:`BROKER_CONFIGS`); ``rule``, the values allowed; ``effect``, what it does here
    (None: :data:`KEPT_ONLY`)."""

    name: str
    type: ConfigType
    default: Value | None
    synonym: str | None
    rule: Rule = Rule()
    effect: str | None = None

    @property
    def enforced(self) -> bool:
        return self.effect is not None

    @property
    def doc(self) -> str:
        return KEPT_ONLY if self.effect is None else self.effect

    def parse(self, value: object) -> Value:
        return self.rule.parse(self.name, self.type, value)

    def kafka_default(self) -> Value:
        """Kafka's default: its own, or its broker synonym's."""
        if self.default is not None:
            return self.default
        assert self.synonym is not None
        default = BROKER_CONFIGS[self.synonym].kafka_default
        assert default is not None, self.name
        return default


_T = ConfigType
_LOG = "log."
_CLEANER = "log.cleaner."
_TOPIC: Final = (
    TopicConfig("segment.bytes", _T.INT, 1 << 30, _LOG + "segment.bytes", Rule(1 << 20)),
    TopicConfig("segment.ms", _T.LONG, 604_800_000, _LOG + "roll.ms", Rule(1)),
    TopicConfig("segment.jitter.ms", _T.LONG, 0, _LOG + "roll.jitter.ms", Rule(0)),
    TopicConfig("segment.index.bytes", _T.INT, 10 << 20, _LOG + "index.size.max.bytes", Rule(4)),
    TopicConfig("flush.messages", _T.LONG, LONG_MAX, _LOG + "flush.interval.messages", Rule(1)),
    TopicConfig("flush.ms", _T.LONG, LONG_MAX, _LOG + "flush.interval.ms", Rule(0)),
    TopicConfig(
        "retention.bytes",
        _T.LONG,
        None,
        "log.retention.bytes",
        Rule(),
        "bytes each partition keeps at least before its oldest batches go (negative: no "
        "limit), applied on each retention pass",
    ),
    TopicConfig(
        "retention.ms",
        _T.LONG,
        604_800_000,
        "log.retention.ms",
        Rule(-1),
        "how long a batch is kept after it was appended (-1: forever), applied on each "
        "retention pass",
    ),
    TopicConfig(
        "max.message.bytes",
        _T.INT,
        None,
        "message.max.bytes",
        Rule(0),
        "largest record batch a Produce may carry, else MESSAGE_TOO_LARGE",
    ),
    TopicConfig("index.interval.bytes", _T.INT, 4096, _LOG + "index.interval.bytes", Rule(0)),
    TopicConfig(
        "delete.retention.ms", _T.LONG, 86_400_000, _CLEANER + "delete.retention.ms", Rule(0)
    ),
    TopicConfig("min.compaction.lag.ms", _T.LONG, 0, _CLEANER + "min.compaction.lag.ms", Rule(0)),
    TopicConfig(
        "max.compaction.lag.ms", _T.LONG, LONG_MAX, _CLEANER + "max.compaction.lag.ms", Rule(1)
    ),
    TopicConfig("file.delete.delay.ms", _T.LONG, 60_000, _LOG + "segment.delete.delay.ms", Rule(0)),
    TopicConfig(
        "min.cleanable.dirty.ratio", _T.DOUBLE, 0.5, _CLEANER + "min.cleanable.ratio", Rule(0, 1)
    ),
    TopicConfig(
        "cleanup.policy", _T.LIST, None, "log.cleanup.policy", Rule(choices=("compact", "delete"))
    ),
    TopicConfig(
        "unclean.leader.election.enable", _T.BOOLEAN, False, "unclean.leader.election.enable"
    ),
    TopicConfig(
        "min.insync.replicas",
        _T.INT,
        None,
        "min.insync.replicas",
        Rule(1),
        "in-sync replicas an acks=all produce needs, else NOT_ENOUGH_REPLICAS",
    ),
    TopicConfig(
        "compression.type",
        _T.STRING,
        None,
        "compression.type",
        BROKER_CONFIGS["compression.type"].rule,
        "the codec batches are stored with: a batch the producer compressed otherwise is "
        "recompressed (producer: kept as sent; uncompressed: inflated)",
    ),
    TopicConfig(
        "compression.gzip.level", _T.INT, -1, "compression.gzip.level", Rule(1, 9, also=(-1,))
    ),
    TopicConfig("compression.lz4.level", _T.INT, 9, "compression.lz4.level", Rule(1, 17)),
    TopicConfig("compression.zstd.level", _T.INT, 3, "compression.zstd.level", Rule(-131072, 22)),
    TopicConfig("preallocate", _T.BOOLEAN, False, _LOG + "preallocate"),
    TopicConfig(
        "message.timestamp.type",
        _T.STRING,
        None,
        "log.message.timestamp.type",
        BROKER_CONFIGS["log.message.timestamp.type"].rule,
        "LogAppendTime: each batch is stamped with the time it is appended (its max "
        "timestamp and timestamp type; the Produce answer says when); CreateTime: it keeps "
        "the producer's timestamps",
    ),
    # deprecated by Kafka 3.6 (KIP-937) for the two below, taken as Kafka 3.x takes it
    TopicConfig(
        "message.timestamp.difference.max.ms",
        _T.LONG,
        LONG_MAX,
        _LOG + "message.timestamp.difference.max.ms",
        Rule(0),
        "deprecated: bounds how far a produced CreateTime may lie before (or after) the "
        "broker's clock where message.timestamp.before.max.ms (or after) leaves it unbounded",
    ),
    TopicConfig(
        "message.timestamp.before.max.ms",
        _T.LONG,
        LONG_MAX,
        _LOG + "message.timestamp.before.max.ms",
        Rule(0),
        "a produced record stamped (CreateTime) longer before the broker's clock is "
        "refused INVALID_TIMESTAMP",
    ),
    TopicConfig(
        "message.timestamp.after.max.ms",
        _T.LONG,
        3_600_000,
        _LOG + "message.timestamp.after.max.ms",
        Rule(0),
        "a produced batch whose max timestamp (CreateTime) lies further after the broker's "
        "clock is refused INVALID_TIMESTAMP",
    ),
    TopicConfig(
        "leader.replication.throttled.replicas",
        _T.LIST,
        "",
        None,
        Rule(pattern=r"\*|[0-9]+:[0-9]+"),
    ),
    TopicConfig(
        "follower.replication.throttled.replicas",
        _T.LIST,
        "",
        None,
        Rule(pattern=r"\*|[0-9]+:[0-9]+"),
    ),
    TopicConfig("remote.storage.enable", _T.BOOLEAN, False, None),
    TopicConfig("local.retention.ms", _T.LONG, -2, _LOG + "local.retention.ms", Rule(-2)),
    TopicConfig("local.retention.bytes", _T.LONG, -2, _LOG + "local.retention.bytes", Rule(-2)),
    TopicConfig("remote.log.copy.disable", _T.BOOLEAN, False, None),
    TopicConfig("remote.log.delete.on.disable", _T.BOOLEAN, False, None),
)

#: every topic config Kafka takes, by name, in Kafka's order
TOPIC_CONFIGS: Final[Mapping[str, TopicConfig]] = {c.name: c for c in _TOPIC}


def check_topic_config(name: str, value: object) -> Value:
    """One topic config's value (Kafka's text or typed) checked and typed: ValueError for
    an unknown name or a bad value, naming it."""
    config = TOPIC_CONFIGS.get(name)
    if config is None:
        raise ValueError(f"Unknown topic config name: {name}")
    if value is None:
        raise ValueError(f"{name}: a null value")
    return config.parse(value)


def check_topic_configs(configs: Mapping[str, Value]) -> None:
    """What Kafka checks across a topic's configs (all typed): ValueError if
    ``min.compaction.lag.ms`` exceeds ``max.compaction.lag.ms``."""
    low = configs.get("min.compaction.lag.ms", 0)
    high = configs.get("max.compaction.lag.ms", LONG_MAX)
    if isinstance(low, int) and isinstance(high, int) and low > high:
        raise ValueError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )
