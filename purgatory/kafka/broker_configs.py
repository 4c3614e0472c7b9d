"""The broker configs a simulated cluster takes, by Kafka's names: one table of each
config's name, type, Kafka's default, the simulation's default and its bounds, read by
``purgatory serve --kafka-config NAME=VALUE``, by ``EmbeddedKafka(configs={...})`` and by
DescribeConfigs, which reports each with its value and where it comes from.

:func:`broker_configs` checks what was set (an unknown name or a bad value is a
ValueError naming it) and returns a :class:`BrokerConfigs`: the set values, and every
config's value in force. A value may be given as Kafka's text (``"2"``, ``"true"``) or
typed (``2``, ``True``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final, final

#: Java's int and long bounds: Kafka's INT and LONG configs refuse anything beyond
_SHORT_MAX: Final = (1 << 15) - 1
_INT_MAX: Final = (1 << 31) - 1
_LONG_MAX: Final = (1 << 63) - 1


class ConfigType(IntEnum):
    """A config's type (Kafka's ConfigType, DescribeConfigs v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    LIST = 7


@final
@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """One broker config: Kafka's ``name``, ``type`` (SHORT, INT, LONG or BOOLEAN) and
    ``kafka_default``; ``default``, the value here when nothing sets it (None: the
    cluster's own, as for the log retention ``purgatory serve`` and ``Cluster`` default
    apart); ``minimum`` and ``maximum`` (None: Java's short, int or long bound), the values
    allowed (numbers); ``effect``, what it does here."""

    name: str
    type: ConfigType
    kafka_default: int | bool
    default: int | bool | None
    effect: str
    minimum: int = 0
    maximum: int | None = None

    def parse(self, value: object) -> int | bool:
        """``value`` (Kafka's text or typed) checked; ValueError naming the config."""
        if self.type is ConfigType.BOOLEAN:
            if isinstance(value, bool):
                return value
            text = value.strip().lower() if isinstance(value, str) else None
            if text not in ("true", "false"):
                raise ValueError(f"{self.name}: expected true or false, got {value!r}")
            return text == "true"
        if isinstance(value, str):
            try:
                number = int(value.strip())
            except ValueError:
                raise ValueError(f"{self.name}: expected an integer, got {value!r}") from None
        elif isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            raise ValueError(f"{self.name}: expected an integer, got {value!r}")
        maximum = {ConfigType.SHORT: _SHORT_MAX, ConfigType.INT: _INT_MAX}.get(self.type, _LONG_MAX)
        maximum = maximum if self.maximum is None else self.maximum
        if not self.minimum <= number <= maximum:
            raise ValueError(f"{self.name}: must be in {self.minimum}..{maximum}, got {number}")
        return number


_CONFIGS: Final = (
    BrokerConfig(
        "num.partitions",
        ConfigType.INT,
        1,
        1,
        "partitions of an auto-created topic, and of a CreateTopics entry asking -1 (at "
        "most 10000 here: records live in memory)",
        minimum=1,
        maximum=10_000,
    ),
    BrokerConfig(
        "default.replication.factor",
        ConfigType.INT,
        1,
        1,
        "replication factor of an auto-created topic, and of a CreateTopics entry asking -1",
        minimum=1,
    ),
    BrokerConfig(
        "auto.create.topics.enable",
        ConfigType.BOOLEAN,
        True,
        False,
        "a Metadata request naming an unknown topic creates it (off here unless set)",
    ),
    BrokerConfig(
        "min.insync.replicas",
        ConfigType.INT,
        1,
        1,
        "in-sync replicas an acks=all produce needs, else NOT_ENOUGH_REPLICAS",
        minimum=1,
    ),
    BrokerConfig(
        "message.max.bytes",
        ConfigType.INT,
        1_048_588,
        1_048_588,
        "largest record batch a Produce may carry, else MESSAGE_TOO_LARGE",
    ),
    BrokerConfig(
        "log.retention.ms",
        ConfigType.LONG,
        604_800_000,
        None,
        "how long a topic that sets no retention.ms keeps records (-1: forever)",
        minimum=-1,
    ),
    BrokerConfig(
        "log.retention.bytes",
        ConfigType.LONG,
        -1,
        None,
        "bytes a partition of a topic that sets no retention.bytes keeps (-1: no limit)",
        minimum=-1,
    ),
    BrokerConfig(
        "group.min.session.timeout.ms",
        ConfigType.INT,
        6_000,
        6_000,
        "the shortest session.timeout.ms a JoinGroup may ask, else INVALID_SESSION_TIMEOUT",
    ),
    BrokerConfig(
        "group.max.session.timeout.ms",
        ConfigType.INT,
        1_800_000,
        1_800_000,
        "the longest session.timeout.ms a JoinGroup may ask, else INVALID_SESSION_TIMEOUT",
    ),
    BrokerConfig(
        "group.initial.rebalance.delay.ms",
        ConfigType.INT,
        3_000,
        0,
        "how long the first rebalance of an empty group waits for more members (0 here unless set)",
    ),
    BrokerConfig(
        "group.consumer.heartbeat.interval.ms",
        ConfigType.INT,
        5_000,
        5_000,
        "the heartbeat interval ConsumerGroupHeartbeat tells members of KIP-848 groups",
        minimum=1,
    ),
    BrokerConfig(
        "group.consumer.session.timeout.ms",
        ConfigType.INT,
        45_000,
        45_000,
        "how long a member of a KIP-848 group may go without heartbeating before it is removed",
        minimum=1,
    ),
    BrokerConfig(
        "offsets.retention.minutes",
        ConfigType.INT,
        10_080,
        10_080,
        "reported only: committed offsets are kept while the cluster runs",
        minimum=1,
    ),
    BrokerConfig(
        "offsets.topic.num.partitions",
        ConfigType.INT,
        50,
        50,
        "partitions of __consumer_offsets, created at the first FindCoordinator for a group; "
        "a group's coordinator is the leader of partition abs(hash(group)) % this",
        minimum=1,
    ),
    BrokerConfig(
        "offsets.topic.replication.factor",
        ConfigType.SHORT,
        3,
        None,
        "replicas of __consumer_offsets: unless set, 3 capped at the cluster's brokers (a "
        "one-broker cluster gets 1, as test Kafka images set); set above the brokers, "
        "FindCoordinator answers COORDINATOR_NOT_AVAILABLE, as Kafka does",
        minimum=1,
    ),
    BrokerConfig(
        "transaction.max.timeout.ms",
        ConfigType.INT,
        900_000,
        900_000,
        "reported only: transactions are not served yet",
        minimum=1,
    ),
    BrokerConfig(
        "transactional.id.expiration.ms",
        ConfigType.INT,
        604_800_000,
        604_800_000,
        "reported only: transactions are not served yet",
        minimum=1,
    ),
)

#: every config taken, by name, in the order DescribeConfigs lists them
BROKER_CONFIGS: Final[Mapping[str, BrokerConfig]] = {c.name: c for c in _CONFIGS}


@final
@dataclass(frozen=True)
class BrokerConfigs:
    """The broker configs of a cluster: ``explicit``, those set (checked), by name.
    :meth:`value` is one's value in force; the cluster's own retention is read from the
    cluster, not from here."""

    explicit: Mapping[str, int | bool] = field(default_factory=dict)

    def value(self, name: str) -> int | bool | None:
        """The config's value in force: as set, else the simulation's default (None: the
        cluster's own). KeyError for a name not in :data:`BROKER_CONFIGS`."""
        config = BROKER_CONFIGS[name]
        return self.explicit.get(name, config.default)

    def number(self, name: str) -> int:
        """The value in force of a config with a fixed default."""
        value = self.value(name)
        assert value is not None, name
        return int(value)

    def is_set(self, name: str) -> bool:
        return name in self.explicit


def broker_configs(configs: Mapping[str, object] | None = None) -> BrokerConfigs:
    """``configs`` (name -> Kafka's text or a typed value) checked against
    :data:`BROKER_CONFIGS`: ValueError naming an unknown config, a bad value, or a group
    session range whose minimum exceeds its maximum."""
    explicit: dict[str, int | bool] = {}
    for name, value in (configs or {}).items():
        config = BROKER_CONFIGS.get(name)
        if config is None:
            raise ValueError(f"unknown broker config {name!r} (known: {', '.join(BROKER_CONFIGS)})")
        explicit[name] = config.parse(value)
    checked = BrokerConfigs(explicit)
    low = checked.number("group.min.session.timeout.ms")
    high = checked.number("group.max.session.timeout.ms")
    if low > high:
        raise ValueError(
            f"group.min.session.timeout.ms ({low}) exceeds group.max.session.timeout.ms ({high})"
        )
    return checked


def parse_assignment(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (``--kafka-config``) split; ValueError without the ``=``."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"--kafka-config wants NAME=VALUE, got {text!r}")
    return name.strip(), value
