"""The configs of a running cluster, by Kafka's names, and where each value comes from:
:class:`ClusterConfigs` holds the broker configs it started with, those AlterConfigs set
since (for every broker or for one), and each topic's own configs; it resolves a topic's
configs against a broker's as Kafka does, and hands the simulation the values it acts on
(retention, ``min.insync.replicas``). DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, CreateTopics and Produce (``max.message.bytes``) read it.

The front door builds one; the configs and topics handlers share it (the handler modules
do not import each other).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from functools import partial
from typing import Final, NamedTuple, final

from purgatory.errors import ErrorCode
from purgatory.kafka.broker_config_table import (
    APPLIED_AT_START,
    BROKER_CONFIGS,
    LISTENER_PREFIXED,
    THREAD_POOLS,
    BrokerConfig,
)
from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.config_rules import LONG_MAX, ConfigType, Value, as_text
from purgatory.kafka.coordinator.offsets_topic import default_replication_factor
from purgatory.kafka.topic_configs import (
    TOPIC_CONFIGS,
    TopicConfig,
    check_topic_config,
    check_topic_configs,
)
from purgatory.sim import Cluster
from purgatory.sim.errors import SimulationError
from purgatory.sim.log import LogConfig
from purgatory.sim.validate import check_int

__all__ = [
    "ADVERTISED_LISTENERS",
    "LISTENER_ADDRESSES",
    "LISTENER_PREFIXED",
    "ClusterConfigs",
    "Config",
    "ConfigType",
    "Source",
]

#: compression.type -> the codec of a record batch's attributes (producer: none forced)
_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class Source(IntEnum):
    """Where a config's value comes from (Kafka's ConfigSource)."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


#: a synonym of a config entry: (name, value, source); a value None is Kafka's null
Synonym = tuple[str, str | None, Source]

#: the listeners a broker is bound to, reported as bound: ``listeners`` a per-broker
#: dynamic config (kept, not acted on, when AlterConfigs sets it), ``advertised.listeners``
#: read-only (Kafka 4.0 took it out of the dynamic configs, KAFKA-18405)
LISTENER_ADDRESSES: Final = ("advertised.listeners", "listeners")
ADVERTISED_LISTENERS: Final = "advertised.listeners"

#: the listener-prefixed configs Kafka sets for every broker too (the others: per broker)
_CLUSTER_LEVEL_LISTENER: Final = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)


class Config(NamedTuple):
    """One config entry as DescribeConfigs reports it; ``synonyms`` are every place its
    value is set, in Kafka's order of precedence (the first one is in force)."""

    name: str
    value: str | None
    source: Source
    type: ConfigType
    synonyms: tuple[Synonym, ...]
    read_only: bool
    doc: str

    @property
    def sensitive(self) -> bool:
        """A password: DescribeConfigs reports no value."""
        return self.type is ConfigType.PASSWORD


#: the broker configs whose Kafka default is null but which are in force nonetheless,
#: through a config Kafka lists apart (not kept here): the value in force then, that config
#: and its default. DescribeConfigs names that config as the default synonym after the
#: config's own values, as Kafka's ConfigHelper does.
DERIVED: Final[Mapping[str, tuple[Value, str, Value]]] = {
    "log.retention.ms": (604_800_000, "log.retention.hours", 168),
    "log.roll.ms": (604_800_000, "log.roll.hours", 168),
    "log.roll.jitter.ms": (0, "log.roll.jitter.hours", 0),
    "log.flush.interval.ms": (LONG_MAX, "log.flush.scheduler.interval.ms", LONG_MAX),
}


def _in_force(name: str, config: BrokerConfig) -> Value | None:
    """What a broker runs with when nothing sets ``name``: Kafka's default, else the value
    Kafka derives."""
    return DERIVED[name][0] if name in DERIVED else config.kafka_default


@final
class ClusterConfigs:
    """The configs of ``cluster``, started with the broker configs ``static``.

    Like a Kafka 4.1+ cluster (KIP-966: its controller writes the cluster-wide
    ``min.insync.replicas`` when it first starts), ``min.insync.replicas`` is a dynamic
    default broker config from the start, with the static value."""

    def __init__(self, cluster: Cluster, static: BrokerConfigs) -> None:
        self.cluster = cluster
        own: dict[str, Value] = {
            "log.retention.ms": cluster.log_defaults.retention_ms,
            "log.retention.bytes": cluster.log_defaults.retention_bytes,
            "min.insync.replicas": cluster.min_insync_replicas,
        }
        if not static.is_set("offsets.topic.replication.factor"):  # sized to the cluster
            own["offsets.topic.replication.factor"] = default_replication_factor(cluster)
        #: the static values (set, else the simulation's defaults or the cluster's own)
        self.static: dict[str, Value] = {}
        #: the names set statically or whose simulation default differs from Kafka's
        self.static_set: set[str] = set()
        for name, config in BROKER_CONFIGS.items():
            value = own[name] if name in own else static.value(name)
            if value is None:  # Kafka's null, not set
                continue
            self.static[name] = value
            if static.is_set(name) or value != _in_force(name, config):
                self.static_set.add(name)
        #: AlterConfigs' values for every broker (resource name "") and for one, by name
        self.dynamic_default: dict[str, Value] = {
            "min.insync.replicas": self.static["min.insync.replicas"]
        }
        self.dynamic: dict[int, dict[str, Value]] = {}
        #: each topic's own configs, by topic id (a topic created again starts afresh)
        self._topics: dict[uuid.UUID, dict[str, Value]] = {}
        #: the topic configs Produce reads, in force, by (name, topic id, broker)
        self._produce_configs: dict[tuple[str, uuid.UUID | None, int], Value] = {}

    # -- brokers ---------------------------------------------------------------------------

    def broker_chain(self, name: str, broker: int) -> list[tuple[str, Value | None, Source]]:
        """Every value broker config ``name`` has on ``broker``, most binding first:
        AlterConfigs' for the broker, for every broker, the static one, Kafka's
        default; a listener's own (``listener.name.NAME.CONFIG``), then the config's."""
        chain: list[tuple[str, Value | None, Source]] = []
        own = self.dynamic.get(broker, {})
        if name in own:
            chain.append((name, own[name], Source.DYNAMIC_BROKER_CONFIG))
        if name in self.dynamic_default:
            chain.append((name, self.dynamic_default[name], Source.DYNAMIC_DEFAULT_BROKER_CONFIG))
        config = BROKER_CONFIGS.get(name)
        if config is not None:
            if name in self.static_set:
                chain.append((name, self.static[name], Source.STATIC_BROKER_CONFIG))
            if config.kafka_default is not None:  # Kafka lists no null default
                chain.append((name, config.kafka_default, Source.DEFAULT_CONFIG))
            elif name in DERIVED and chain:
                # what Kafka derives it from, listed once the config has a value of its own
                _, source, default = DERIVED[name]
                chain.append((source, default, Source.DEFAULT_CONFIG))
        else:
            prefixed = LISTENER_PREFIXED.fullmatch(name)
            if prefixed is not None and prefixed[2] in BROKER_CONFIGS:
                chain += self.broker_chain(prefixed[2], broker)
        return chain

    def broker_value(self, name: str, broker: int) -> Value:
        """A broker config's value in force on ``broker`` (one whose default is not null,
        or is derived)."""
        chain = self.broker_chain(name, broker)
        value = chain[0][1] if chain else DERIVED[name][0]
        assert value is not None, name
        return value

    def _broker_config(self, name: str, config: BrokerConfig, broker: int) -> Config:
        chain = self.broker_chain(name, broker)
        synonyms = tuple((n, as_text(v), s) for n, v, s in chain)
        _, value, source = chain[0] if chain else (name, None, Source.DEFAULT_CONFIG)
        doc = config.effect
        if name in APPLIED_AT_START:
            doc += " (applied at start: a dynamic change is kept and reported only)"
        return Config(name, as_text(value), source, config.type, synonyms, not config.dynamic, doc)

    def broker_configs(self, broker: int) -> list[Config]:
        """Every broker config of ``broker``, as DescribeConfigs lists them: Kafka's, then
        the listener-prefixed ones AlterConfigs set for it or for every broker."""
        out = [self._broker_config(n, c, broker) for n, c in BROKER_CONFIGS.items()]
        for name in dict.fromkeys([*self.dynamic.get(broker, {}), *self.dynamic_default]):
            prefixed = LISTENER_PREFIXED.fullmatch(name)
            if prefixed is not None and name not in BROKER_CONFIGS:
                out.append(self._broker_config(name, BROKER_CONFIGS[prefixed[2]], broker))
        return out

    def _known(self, name: str) -> tuple[BrokerConfig | None, bool]:
        """The broker config ``name`` sets (None: none) and whether it names a listener."""
        config = BROKER_CONFIGS.get(name)
        if config is not None:
            return config, False
        prefixed = LISTENER_PREFIXED.fullmatch(name)
        if prefixed is not None:
            return BROKER_CONFIGS.get(prefixed[2]), True
        return None, False

    def check_broker(
        self, broker: int | None, changes: Mapping[str, Value | None]
    ) -> dict[str, Value | None]:
        """``changes`` (a value, or None to remove) checked as Kafka's DynamicBrokerConfig
        checks them: SimulationError INVALID_CONFIG for an unknown name; INVALID_REQUEST
        (Kafka's ConfigAdminManager turns every ConfigException into it) for one Kafka
        does not change while it runs, a security config without its listener prefix, a
        bad value, a per-broker config for every broker, a thread pool more than doubled
        or halved."""
        checked: dict[str, Value | None] = {}
        fixed, unprefixed, per_broker = [], [], []
        for name in changes:
            if name == ADVERTISED_LISTENERS:
                fixed.append(name)
                continue
            if name in LISTENER_ADDRESSES:
                continue
            config, prefixed = self._known(name)
            if config is None:
                raise SimulationError(
                    ErrorCode.INVALID_CONFIG,
                    f"unknown broker config {name!r} (known here: {', '.join(BROKER_CONFIGS)})",
                )
            if not config.dynamic and not prefixed:
                fixed.append(name)
            elif config.scope == "listener" and not prefixed:
                unprefixed.append(name)
        _refuse(fixed, "Cannot update these configs dynamically")
        _refuse(
            unprefixed,
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix",
        )
        for name, value in changes.items():
            if value is None:
                checked[name] = None
                continue
            config, prefixed = self._known(name)
            if config is None:  # listeners, advertised.listeners
                checked[name] = _parsed(_listeners, value, ErrorCode.INVALID_REQUEST)
                per_broker.append(name)
                continue
            checked[name] = _parsed(config.parse, value, ErrorCode.INVALID_REQUEST)
            if (
                (config.name not in _CLUSTER_LEVEL_LISTENER)
                if prefixed
                else config.scope != "cluster"
            ):
                per_broker.append(name)
        if broker is None:
            _refuse(
                [n for n in per_broker if checked[n] is not None],
                "Cannot update these configs at default cluster level, broker id must be specified",
            )
        for name in THREAD_POOLS & checked.keys():
            self._check_pool(name, checked[name], broker)
        return checked

    def _check_pool(self, name: str, value: Value | None, broker: int | None) -> None:
        """Kafka's DynamicThreadPool check, against the value in force on ``broker``."""
        old = self.broker_value(name, 0 if broker is None else broker)
        assert isinstance(old, int)
        if value is None or value == old:
            return
        assert isinstance(value, int)
        why = f"Dynamic thread count update validation failed for {name}={value}, "
        if value <= 0:
            why += "value should be at least 1"
        elif value < old / 2:
            why += f"value should be at least half the current value {old}"
        elif value > old * 2:
            why += f"value should not be greater than double the current value {old}"
        else:
            return
        # as Kafka words it: its ConfigException wrapped in another's (name, value) form
        raise SimulationError(
            ErrorCode.INVALID_REQUEST,
            f"Invalid value org.apache.kafka.common.config.ConfigException: {why} for "
            "configuration Invalid dynamic configuration",
        )

    def alter_broker(
        self, broker: int | None, changes: Mapping[str, Value | None], validate_only: bool
    ) -> None:
        """Set (a value) or remove (None) dynamic broker configs of ``broker`` (None: of
        every broker), checked first as Kafka does (:meth:`check_broker`). Takes effect
        at once: the topics that inherit it follow."""
        checked = self.check_broker(broker, changes)
        if validate_only:
            return
        for name in list(self.cluster.topics):  # what each topic has of its own, first
            self.topic_overrides(name)
        target = self.dynamic_default if broker is None else self.dynamic.setdefault(broker, {})
        for name, value in checked.items():
            if value is None:
                target.pop(name, None)
            else:
                target[name] = value
        default = self.cluster.log_defaults  # what cluster.create_topic falls back on
        self.cluster.log_defaults = LogConfig(
            self._int(self.broker_value("log.retention.bytes", -1), lowest=-1),
            self._int(self.broker_value("log.retention.ms", -1), lowest=-1),
            default.min_insync_replicas,
        )
        self._produce_configs.clear()
        for name in list(self.cluster.topics):
            self.apply(name)

    # -- topics ----------------------------------------------------------------------------

    def topic_overrides(self, name: str) -> dict[str, Value] | None:
        """Topic ``name``'s own configs (None: no such topic). A topic created without
        them (through the cluster itself) has those retention settings of its own that
        differ from the brokers' (taken before any broker config changes)."""
        topic_id = self.cluster.topic_id(name)
        if topic_id is None:
            return None
        own = self._topics.get(topic_id)
        if own is None:
            own = {}
            config = self.cluster.topic_config(name)
            if config is not None:
                for key, value in (
                    ("retention.ms", config.retention_ms),
                    ("retention.bytes", config.retention_bytes),
                ):
                    if value != self.topic_value(key, {}, 0):
                        own[key] = value
            self._topics[topic_id] = own
        return own

    def topic_chain(
        self, config: TopicConfig, own: Mapping[str, Value], broker: int
    ) -> list[tuple[str, Value | None, Source]]:
        """Every value topic config ``config`` has for a topic with configs ``own`` on
        ``broker``, most binding first: the topic's, then its broker synonym's."""
        chain: list[tuple[str, Value | None, Source]] = []
        if config.name in own:
            chain.append((config.name, own[config.name], Source.DYNAMIC_TOPIC_CONFIG))
        if config.synonym is not None:
            chain += self.broker_chain(config.synonym, broker)
            if config.synonym not in BROKER_CONFIGS:  # not kept here: Kafka's default
                chain.append((config.synonym, config.kafka_default(), Source.DEFAULT_CONFIG))
        return chain

    def topic_value(self, name: str, own: Mapping[str, Value], broker: int) -> Value:
        """Topic config ``name``'s value in force on ``broker``."""
        config = TOPIC_CONFIGS[name]
        chain = self.topic_chain(config, own, broker)
        value = chain[0][1] if chain else config.kafka_default()
        assert value is not None, name
        return value

    def topic_configs(self, own: Mapping[str, Value], broker: int) -> list[Config]:
        """Every topic config of a topic with configs ``own``, on ``broker``, as
        DescribeConfigs lists them (none is read-only: AlterConfigs changes them)."""
        out = []
        for name, config in TOPIC_CONFIGS.items():
            chain = self.topic_chain(config, own, broker)
            value = chain[0][1] if chain else config.kafka_default()
            source = chain[0][2] if chain else Source.DEFAULT_CONFIG
            synonyms = tuple((n, as_text(v), s) for n, v, s in chain)
            out.append(
                Config(name, as_text(value), source, config.type, synonyms, False, config.doc)
            )
        return out

    def check_topic(self, configs: Iterable[tuple[str, object]]) -> dict[str, Value]:
        """A topic's configs as a request gives them, checked and typed:
        SimulationError INVALID_CONFIG naming an unknown config or a bad value."""
        checked: dict[str, Value] = {}
        configs = list(configs)
        nulls = [name for name, value in configs if value is None]
        if nulls:
            raise SimulationError(
                ErrorCode.INVALID_CONFIG,
                f"Null value not supported for topic configs: {','.join(nulls)}",
            )
        for name, value in configs:
            checked[name] = _parsed(partial(check_topic_config, name), value)
        try:
            check_topic_configs(checked)
        except ValueError as exc:
            raise SimulationError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return checked

    def log_config(self, own: Mapping[str, Value], broker: int) -> LogConfig:
        """What the simulation acts on for a topic with configs ``own`` on ``broker``."""
        policy = str(self.topic_value("cleanup.policy", own, broker)).split(",")
        ratio = self.topic_value("min.cleanable.dirty.ratio", own, broker)
        assert isinstance(ratio, float | int)
        return LogConfig(
            self._int(self.topic_value("retention.bytes", own, broker), lowest=-1),
            self._int(self.topic_value("retention.ms", own, broker), lowest=-1),
            self._int(self.topic_value("min.insync.replicas", own, broker)),
            compact="compact" in policy,
            delete="delete" in policy,
            segment_bytes=self._int(self.topic_value("segment.bytes", own, broker)),
            segment_ms=self._int(self.topic_value("segment.ms", own, broker)),
            delete_retention_ms=self._int(self.topic_value("delete.retention.ms", own, broker)),
            min_compaction_lag_ms=self._int(self.topic_value("min.compaction.lag.ms", own, broker)),
            max_compaction_lag_ms=self._int(self.topic_value("max.compaction.lag.ms", own, broker)),
            min_cleanable_dirty_ratio=float(ratio),
        )

    def created(self, name: str, own: Mapping[str, Value]) -> None:
        """Topic ``name`` was just created with configs ``own``: keep and apply them."""
        topic_id = self.cluster.topic_id(name)
        assert topic_id is not None, name
        self._topics[topic_id] = dict(own)
        self.apply(name)

    def alter_topic(self, name: str, own: Mapping[str, Value], validate_only: bool) -> None:
        """Replace topic ``name``'s own configs with ``own`` (checked with
        :meth:`check_topic`); SimulationError UNKNOWN_TOPIC_OR_PARTITION for no such
        topic. Takes effect at once (retention on its next pass)."""
        if self.topic_overrides(name) is None:
            raise SimulationError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        if validate_only:
            return
        topic_id = self.cluster.topic_id(name)
        assert topic_id is not None
        self._topics[topic_id] = dict(own)
        self.apply(name)

    def apply(self, name: str) -> None:
        """Hand the simulation topic ``name``'s configs in force, on each broker."""
        self._produce_configs.clear()  # rare: a config changed
        own = self.topic_overrides(name)
        if own is not None:
            self.cluster.set_topic_config(name, lambda broker: self.log_config(own, broker))

    def _in_force(self, name: str, topic: str, broker: int) -> Value:
        """Topic config ``name`` of ``topic`` on ``broker``; what Produce asks on every
        request, so kept until a config changes."""
        key = (name, self.cluster.topic_id(topic), broker)
        value = self._produce_configs.get(key)
        if value is None:
            own = self.topic_overrides(topic) or {}
            value = self._produce_configs[key] = self.topic_value(name, own, broker)
        return value

    def max_message_bytes(self, topic: str, broker: int) -> int:
        """The largest batch a Produce to ``topic`` may carry, on ``broker``."""
        return self._int(self._in_force("max.message.bytes", topic, broker))

    def codec(self, topic: str, broker: int) -> int | None:
        """The codec ``topic``'s batches are stored with on ``broker`` (its
        compression.type: 0 uncompressed, 1 gzip, 2 snappy, 3 lz4, 4 zstd), None for
        ``producer`` (as the producer sent them)."""
        return _CODECS.get(str(self._in_force("compression.type", topic, broker)))

    def timestamp_bounds(self, topic: str, broker: int) -> tuple[int, int] | None:
        """How far a produced record's CreateTime may lie before and after the broker's
        clock for ``topic`` on ``broker`` (message.timestamp.before.max.ms and
        .after.max.ms); None for a LogAppendTime topic, whose batches are stamped."""
        if self.log_append_time(topic, broker):
            return None
        before = self._int(self._in_force("message.timestamp.before.max.ms", topic, broker))
        after = self._int(self._in_force("message.timestamp.after.max.ms", topic, broker))
        # the deprecated message.timestamp.difference.max.ms bounds a side left unbounded,
        # as Kafka 3.6+ reads it (KIP-937)
        difference = self._in_force("message.timestamp.difference.max.ms", topic, broker)
        unbounded = TOPIC_CONFIGS["message.timestamp.difference.max.ms"].kafka_default()
        before = self._int(difference) if before == unbounded else before
        after = self._int(difference) if after == unbounded else after
        return before, after

    def log_append_time(self, topic: str, broker: int) -> bool:
        """Whether ``topic``'s batches are stamped with the time they are appended
        (message.timestamp.type LogAppendTime) on ``broker``."""
        return self._in_force("message.timestamp.type", topic, broker) == "LogAppendTime"

    def compacted(self, topic: str, broker: int) -> bool:
        """Whether ``topic``'s cleanup.policy on ``broker`` compacts it."""
        policy = str(self._in_force("cleanup.policy", topic, broker))
        return "compact" in policy.split(",")

    def topics_with_configs(self) -> list[str]:
        """The topics there are (every topic has configs, Kafka's defaults at least)."""
        return list(self.cluster.topics)

    @staticmethod
    def _int(value: Value, lowest: int | None = None) -> int:
        assert isinstance(value, int), value  # an INT or LONG config
        # Kafka reads any negative retention as none; the simulation wants -1
        return max(value, lowest) if lowest is not None else value


def _parsed(
    parse: Callable[[object], Value],
    value: object,
    code: ErrorCode = ErrorCode.INVALID_CONFIG,
) -> Value:
    """``parse(value)``, its ValueError as ``code`` (INVALID_CONFIG unless said)."""
    try:
        return parse(value)
    except ValueError as exc:
        raise SimulationError(code, str(exc)) from None


def _refuse(names: list[str], why: str) -> None:
    """INVALID_REQUEST naming ``names`` as Kafka does (a Scala Set), if there are any."""
    if names:
        raise SimulationError(ErrorCode.INVALID_REQUEST, f"{why}: Set({', '.join(names)})")


def _listeners(value: object) -> Value:
    """``listeners`` or ``advertised.listeners``: NAME://HOST:PORT, comma separated."""
    text = str(value).strip()
    for item in filter(None, (part.strip() for part in text.split(","))):
        if "://" not in item:
            raise ValueError(
                f"Invalid value {text} for configuration listeners: Unable to parse {item} "
                "to a broker endpoint"
            )
    return text


@dataclass(frozen=True, slots=True)
class TopicDefaults:
    """The broker settings topic creation follows, with Kafka's names and defaults.

    ``auto_create`` (``auto.create.topics.enable``): a Metadata request that names an
    unknown topic, and allows it, creates the topic. Kafka enables it by default; here it
    is off unless asked for, so that a typo in a topic name is an error, not a new topic.
    ``num_partitions`` (``num.partitions``) and ``replication_factor``
    (``default.replication.factor``), both 1 as in Kafka, size an auto-created topic and
    a CreateTopics entry that asks for the broker's default (-1). ``max_partitions``
    bounds one topic (records live in memory here; Kafka has no such bound).
    :meth:`of` reads them all from the broker configs."""

    auto_create: bool = False
    num_partitions: int = 1
    replication_factor: int = 1
    max_partitions: int = 10_000

    @classmethod
    def of(cls, configs: BrokerConfigs) -> TopicDefaults:
        """The topic creation settings of the broker configs ``configs``."""
        return cls(
            auto_create=bool(configs.value("auto.create.topics.enable")),
            num_partitions=configs.number("num.partitions"),
            replication_factor=configs.number("default.replication.factor"),
        )

    def __post_init__(self) -> None:
        if not isinstance(self.auto_create, bool):
            raise TypeError(f"auto_create must be a bool, got {self.auto_create!r}")
        check_int("max_partitions", self.max_partitions, 1)
        check_int("num_partitions", self.num_partitions, 1, self.max_partitions)
        check_int("replication_factor", self.replication_factor, 1)
