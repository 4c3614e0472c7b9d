"""The configs of a simulated cluster by Kafka's names: two tables beside each other, one
of the broker configs (:data:`BROKER_CONFIGS`) and one of the topic configs
(:data:`TOPIC_CONFIGS`, Kafka 4's LogConfig list), each config with its type, Kafka's
default (a topic config that inherits one from a broker config names it: its default is
that broker config's value in force), its allowed values and what it does here.

Broker configs are read by ``purgatory serve --kafka-config NAME=VALUE``, by
``EmbeddedKafka(configs={...})``, by DescribeConfigs, and those Kafka lets change while it
runs (``dynamic``) by AlterConfigs. Topic configs are what CreateTopics, AlterConfigs and
IncrementalAlterConfigs take for a topic.

:func:`broker_configs` checks what was set (an unknown name or a bad value is a
ValueError naming it) and returns a :class:`BrokerConfigs`: the set values, and every
config's value in force. A value may be given as Kafka's text (``"2"``, ``"true"``) or
typed (``2``, ``True``); :func:`check_topic_config` checks a topic config's text the same
way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final, final

from purgatory.kafka.oauthbearer import JAAS_CONFIG, LOGIN_MODULE, parse_jaas
from purgatory.kafka.sasl import MECHANISMS, enabled_mechanisms
from purgatory.kafka.tls import PrincipalMapper

#: Java's short, int and long bounds: SHORT, INT and LONG configs refuse anything beyond
_SHORT_MAX: Final = (1 << 15) - 1
_INT_MAX: Final = (1 << 31) - 1
_LONG_MAX: Final = (1 << 63) - 1

#: a config's value, typed: INT/LONG int, BOOLEAN bool, DOUBLE float, STRING/LIST str
#: (a LIST as Kafka prints it: its items joined by commas)
Value = int | bool | float | str

#: the authorizers ``authorizer.class.name`` may name (both enforce ACLs the same way here)
STANDARD_AUTHORIZER: Final = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_AUTHORIZER: Final = "kafka.security.authorizer.AclAuthorizer"


class ConfigType(IntEnum):
    """A config's type (Kafka's ConfigType, DescribeConfigs v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


@dataclass(frozen=True, slots=True)
class Rule:
    """What values a config takes, as Kafka's ConfigDef validators say: a number within
    ``minimum``..``maximum`` (None: Java's int or long bound) or one of ``also``; a STRING
    one of ``choices`` (none: any); a LIST of items each one of ``choices`` or matching
    ``pattern`` (neither: any)."""

    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    also: tuple[int, ...] = ()
    pattern: str | None = None

    def parse(self, name: str, kind: ConfigType, value: object) -> Value:
        """``value`` (Kafka's text or typed) checked and typed; ValueError naming ``name``."""
        if kind is ConfigType.BOOLEAN:
            if isinstance(value, bool):
                return value
            text = value.strip().lower() if isinstance(value, str) else None
            if text not in ("true", "false"):
                raise ValueError(f"{name}: expected true or false, got {value!r}")
            return text == "true"
        if kind is ConfigType.STRING:
            if not isinstance(value, str):
                raise ValueError(f"{name}: expected a string, got {value!r}")
            text = value.strip()
            if self.choices and text not in self.choices:
                raise ValueError(f"{name}: must be one of {list(self.choices)}, got {value!r}")
            return text
        if kind is ConfigType.LIST:
            return self._list(name, value)
        if kind is ConfigType.DOUBLE:
            return self._double(name, value)
        return self._integer(name, kind, value)

    def _list(self, name: str, value: object) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{name}: expected a comma-separated list, got {value!r}")
        items = [item.strip() for item in value.split(",")] if value.strip() else []
        for item in items:
            bad = (self.choices and item not in self.choices) or (
                self.pattern is not None and re.fullmatch(self.pattern, item) is None
            )
            if bad or not item:
                what = list(self.choices) if self.choices else "see its documentation"
                raise ValueError(f"{name}: item {item!r} of {value!r} is not allowed ({what})")
        return ",".join(items)

    def _double(self, name: str, value: object) -> float:
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                raise ValueError(f"{name}: expected a number, got {value!r}") from None
        elif isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        else:
            raise ValueError(f"{name}: expected a number, got {value!r}")
        low = -math.inf if self.minimum is None else self.minimum
        high = math.inf if self.maximum is None else self.maximum
        if not low <= number <= high:  # NaN too
            raise ValueError(f"{name}: must be in {low}..{high}, got {value!r}")
        return number

    def _integer(self, name: str, kind: ConfigType, value: object) -> int:
        if isinstance(value, str):
            try:
                number = int(value.strip())
            except ValueError:
                raise ValueError(f"{name}: expected an integer, got {value!r}") from None
        elif isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            raise ValueError(f"{name}: expected an integer, got {value!r}")
        bound = {ConfigType.SHORT: _SHORT_MAX, ConfigType.LONG: _LONG_MAX}.get(kind, _INT_MAX)
        low = -bound - 1 if self.minimum is None else int(self.minimum)
        high = bound if self.maximum is None else int(self.maximum)
        if not low <= number <= high and number not in self.also:
            also = f" or one of {list(self.also)}" if self.also else ""
            raise ValueError(f"{name}: must be in {low}..{high}{also}, got {number}")
        return number


def as_text(value: Value) -> str:
    """A value as Kafka prints it (``true``, ``0.5``, ``delete,compact``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@final
@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """One broker config: Kafka's ``name``, ``type`` and ``kafka_default``; ``default``,
    the value here when nothing sets it (None: the cluster's own, as for the log retention
    ``purgatory serve`` and ``Cluster`` default apart); ``effect``, what it does here;
    ``rule``, the values allowed (for numbers, by default: at least 0, at most Java's
    bound); ``dynamic``: Kafka lets AlterConfigs change it while the broker runs (its
    DynamicBrokerConfig list), else it is read-only; ``doc``: what DescribeConfigs says
    of it when asked (by default, ``effect``)."""

    name: str
    type: ConfigType
    kafka_default: Value
    default: Value | None
    effect: str
    rule: Rule = Rule(minimum=0)
    dynamic: bool = False

    def parse(self, value: object) -> Value:
        """``value`` (Kafka's text or typed) checked; ValueError naming the config."""
        return self.rule.parse(self.name, self.type, value)


_CONFIGS: Final = (
    BrokerConfig(
        "num.partitions",
        ConfigType.INT,
        1,
        1,
        "partitions of an auto-created topic, and of a CreateTopics entry asking -1 (at "
        "most 10000 here: records live in memory)",
        Rule(1, 10_000),
    ),
    BrokerConfig(
        "default.replication.factor",
        ConfigType.INT,
        1,
        1,
        "replication factor of an auto-created topic, and of a CreateTopics entry asking -1",
        Rule(1),
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
        "in-sync replicas an acks=all produce needs, else NOT_ENOUGH_REPLICAS (topics that "
        "set none)",
        Rule(1),
        dynamic=True,
    ),
    BrokerConfig(
        "message.max.bytes",
        ConfigType.INT,
        1_048_588,
        1_048_588,
        "largest record batch a Produce may carry, else MESSAGE_TOO_LARGE (topics that set "
        "no max.message.bytes)",
        dynamic=True,
    ),
    BrokerConfig(
        "log.retention.ms",
        ConfigType.LONG,
        604_800_000,
        None,
        "how long a topic that sets no retention.ms keeps records (-1: forever)",
        Rule(-1),
        dynamic=True,
    ),
    BrokerConfig(
        "log.retention.bytes",
        ConfigType.LONG,
        -1,
        None,
        "bytes a partition of a topic that sets no retention.bytes keeps (-1: no limit)",
        Rule(-1),
        dynamic=True,
    ),
    BrokerConfig(
        "log.cleanup.policy",
        ConfigType.LIST,
        "delete",
        "delete",
        "cleanup.policy of topics that set none: delete (retention), compact (the log "
        "cleaner), or both",
        Rule(choices=("compact", "delete")),
        dynamic=True,
    ),
    BrokerConfig(
        "compression.type",
        ConfigType.STRING,
        "producer",
        "producer",
        "compression.type of topics that set none: the codec their batches are stored "
        "with (producer: as the producer compressed them)",
        Rule(choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        dynamic=True,
    ),
    BrokerConfig(
        "log.message.timestamp.type",
        ConfigType.STRING,
        "CreateTime",
        "CreateTime",
        "message.timestamp.type of topics that set none: LogAppendTime stamps batches with "
        "the time they are appended",
        Rule(choices=("CreateTime", "LogAppendTime")),
        dynamic=True,
    ),
    BrokerConfig(
        "broker.session.timeout.ms",
        ConfigType.INT,
        9_000,
        9_000,
        "how long the controller waits for a broker that stops answering unheard of "
        "(crash_broker_unfenced) before fencing it",
        Rule(minimum=1),
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
        Rule(minimum=1),
    ),
    BrokerConfig(
        "group.consumer.session.timeout.ms",
        ConfigType.INT,
        45_000,
        45_000,
        "how long a member of a KIP-848 group may go without heartbeating before it is removed",
        Rule(minimum=1),
    ),
    BrokerConfig(
        "offsets.retention.minutes",
        ConfigType.INT,
        10_080,
        10_080,
        "committed offsets of a group with no members expire this long after it became "
        "empty (a group that never had members: after the commit)",
        Rule(1),
    ),
    BrokerConfig(
        "offsets.retention.check.interval.ms",
        ConfigType.LONG,
        600_000,
        600_000,
        "how often expired committed offsets are removed",
        Rule(1),
    ),
    BrokerConfig(
        "connections.max.reauth.ms",
        ConfigType.LONG,
        0,
        0,
        "how long a SASL session lasts before the client must re-authenticate (KIP-368); "
        "0: for ever",
    ),
    BrokerConfig(
        "quota.window.num",
        ConfigType.INT,
        11,
        11,
        "how many samples a client quota's rate is measured over",
        Rule(1),
    ),
    BrokerConfig(
        "quota.window.size.seconds",
        ConfigType.INT,
        1,
        1,
        "how long each sample of a client quota's rate lasts; a request or connection "
        "throttle is at most one",
        Rule(1),
    ),
    BrokerConfig(
        "connection.failed.authentication.delay.ms",
        ConfigType.INT,
        100,
        100,
        "how long a SASL connection whose authentication failed stays open after its error "
        "answer before it closes",
    ),
    BrokerConfig(
        "sasl.enabled.mechanisms",
        ConfigType.LIST,
        "GSSAPI",
        ",".join(MECHANISMS),
        "the mechanisms the SASL listeners offer, in the order SaslHandshake lists them: "
        "some of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (Kafka's default, "
        "GSSAPI, is not served here)",
        Rule(),
    ),
    BrokerConfig(
        JAAS_CONFIG,
        ConfigType.STRING,
        "",
        "",
        "the SASL_PLAINTEXT listener's OAUTHBEARER JAAS config: "
        f"{LOGIN_MODULE} required, with the unsecured validator's options "
        "(unsecuredValidatorPrincipalClaimName, unsecuredValidatorScopeClaimName, "
        "unsecuredValidatorRequiredScope, unsecuredValidatorAllowableClockSkewMs)",
        Rule(),
    ),
    BrokerConfig(
        "authorizer.class.name",
        ConfigType.STRING,
        "",
        "",
        "the authorizer: Kafka's StandardAuthorizer (or AclAuthorizer, the same here) "
        "enforces the ACLs; empty: none, every request allowed",
        Rule(choices=("", STANDARD_AUTHORIZER, ACL_AUTHORIZER)),
    ),
    BrokerConfig(
        "super.users",
        ConfigType.STRING,
        "",
        "",
        "principals (User:NAME;User:OTHER) the authorizer allows everything",
    ),
    BrokerConfig(
        "allow.everyone.if.no.acl.found",
        ConfigType.BOOLEAN,
        False,
        False,
        "the authorizer allows a resource no ACL matches (else denies it)",
    ),
    BrokerConfig(
        "ssl.client.auth",
        ConfigType.STRING,
        "none",
        "none",
        "whether an SSL listener asks for a client certificate: none, requested (a client "
        "without one is User:ANONYMOUS), required (one without is refused at the "
        "handshake); SASL_SSL listeners ask for none, as Kafka's unless listener-prefixed",
        Rule(choices=("none", "requested", "required")),
    ),
    BrokerConfig(
        "ssl.enabled.protocols",
        ConfigType.LIST,
        "TLSv1.2,TLSv1.3",
        "TLSv1.2,TLSv1.3",
        "the TLS versions the SSL and SASL_SSL listeners take",
        Rule(choices=("TLSv1.2", "TLSv1.3")),
    ),
    BrokerConfig(
        "ssl.principal.mapping.rules",
        ConfigType.STRING,
        "DEFAULT",
        "DEFAULT",
        "how a client certificate's subject (RFC 2253, CN=...,OU=...) becomes its "
        "principal's name: DEFAULT (as is) and RULE:pattern/replacement/[LU] rules, the "
        "first that matches",
    ),
    BrokerConfig(
        "offsets.topic.num.partitions",
        ConfigType.INT,
        50,
        50,
        "partitions of __consumer_offsets, created at the first FindCoordinator for a group; "
        "a group's coordinator is the leader of partition abs(hash(group)) % this",
        Rule(minimum=1),
    ),
    BrokerConfig(
        "offsets.topic.replication.factor",
        ConfigType.SHORT,
        3,
        None,
        "replicas of __consumer_offsets: unless set, 3 capped at the cluster's brokers (a "
        "one-broker cluster gets 1, as test Kafka images set); set above the brokers, "
        "FindCoordinator answers COORDINATOR_NOT_AVAILABLE, as Kafka does",
        Rule(minimum=1),
    ),
    BrokerConfig(
        "transaction.max.timeout.ms",
        ConfigType.INT,
        900_000,
        900_000,
        "the longest transaction.timeout.ms InitProducerId may ask, else "
        "INVALID_TRANSACTION_TIMEOUT",
        Rule(1),
    ),
    BrokerConfig(
        "transactional.id.expiration.ms",
        ConfigType.INT,
        604_800_000,
        604_800_000,
        "an idle transactional id (no transaction open) this long after its last change "
        "is removed: its next InitProducerId gets a new producer id",
        Rule(1),
    ),
    BrokerConfig(
        "log.cleaner.backoff.ms",
        ConfigType.LONG,
        15_000,
        15_000,
        "how often each broker's log cleaner looks for compacted logs due a clean",
        Rule(1),
    ),
    BrokerConfig(
        "producer.id.expiration.ms",
        ConfigType.INT,
        86_400_000,
        86_400_000,
        "an idle idempotent or transactional producer (no transaction open on the "
        "partition) is forgotten by each partition this long after its last write there "
        "(checked every 10 minutes); DeleteRecords and retention keep it",
        Rule(1),
    ),
    BrokerConfig(
        "transaction.state.log.num.partitions",
        ConfigType.INT,
        50,
        50,
        "partitions of __transaction_state (fixed once it is created): a transactional "
        "id's coordinator leads its partition",
        Rule(1),
    ),
    BrokerConfig(
        "transaction.state.log.replication.factor",
        ConfigType.INT,
        3,
        3,
        "replicas of each __transaction_state partition (at most the number of brokers)",
        Rule(1, (1 << 15) - 1),
    ),
    BrokerConfig(
        "transaction.partition.verification.enable",
        ConfigType.BOOLEAN,
        True,
        True,
        "KIP-890: a transactional produce to a partition not added to the transaction is "
        "refused (INVALID_TXN_STATE)",
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

    explicit: Mapping[str, Value] = field(default_factory=dict)

    def value(self, name: str) -> Value | None:
        """The config's value in force: as set, else the simulation's default (None: the
        cluster's own). KeyError for a name not in :data:`BROKER_CONFIGS`."""
        config = BROKER_CONFIGS[name]
        return self.explicit.get(name, config.default)

    def number(self, name: str) -> int:
        """The value in force of a config with a fixed default."""
        value = self.value(name)
        assert isinstance(value, int), name
        return int(value)

    def text(self, name: str) -> str:
        """The value in force of a STRING config."""
        value = self.value(name)
        assert isinstance(value, str), name
        return value

    def is_set(self, name: str) -> bool:
        return name in self.explicit


def broker_configs(configs: Mapping[str, object] | None = None) -> BrokerConfigs:
    """``configs`` (name -> Kafka's text or a typed value) checked against
    :data:`BROKER_CONFIGS`: ValueError naming an unknown config, a bad value, a group
    session range whose minimum exceeds its maximum, a SASL mechanism not served or an
    OAUTHBEARER JAAS config that does not read."""
    explicit: dict[str, Value] = {}
    for name, value in (configs or {}).items():
        config = BROKER_CONFIGS.get(name)
        if config is None:
            raise ValueError(f"unknown broker config {name!r} (known: {', '.join(BROKER_CONFIGS)})")
        explicit[name] = config.parse(value)
    checked = BrokerConfigs(explicit)
    enabled_mechanisms(checked.text("sasl.enabled.mechanisms"))
    try:
        parse_jaas(checked.text(JAAS_CONFIG))
    except ValueError as exc:
        raise ValueError(f"{JAAS_CONFIG}: {exc}") from None
    if not checked.text("ssl.enabled.protocols"):
        raise ValueError("ssl.enabled.protocols: enable TLSv1.2, TLSv1.3 or both")
    PrincipalMapper(checked.text("ssl.principal.mapping.rules"))  # ValueError if it is bad
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


# -- topic configs ---------------------------------------------------------------------------

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
        return BROKER_CONFIGS[self.synonym].kafka_default


_T = ConfigType
_LOG = "log."
_CLEANER = "log.cleaner."
_TOPIC: Final = (
    TopicConfig("segment.bytes", _T.INT, 1 << 30, _LOG + "segment.bytes", Rule(1 << 20)),
    TopicConfig("segment.ms", _T.LONG, 604_800_000, _LOG + "roll.ms", Rule(1)),
    TopicConfig("segment.jitter.ms", _T.LONG, 0, _LOG + "roll.jitter.ms", Rule(0)),
    TopicConfig("segment.index.bytes", _T.INT, 10 << 20, _LOG + "index.size.max.bytes", Rule(4)),
    TopicConfig("flush.messages", _T.LONG, _LONG_MAX, _LOG + "flush.interval.messages", Rule(1)),
    TopicConfig("flush.ms", _T.LONG, _LONG_MAX, _LOG + "flush.interval.ms", Rule(0)),
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
        None,
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
        "max.compaction.lag.ms", _T.LONG, _LONG_MAX, _CLEANER + "max.compaction.lag.ms", Rule(1)
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
        _LONG_MAX,
        _LOG + "message.timestamp.difference.max.ms",
        Rule(0),
        "deprecated: bounds how far a produced CreateTime may lie before (or after) the "
        "broker's clock where message.timestamp.before.max.ms (or after) leaves it unbounded",
    ),
    TopicConfig(
        "message.timestamp.before.max.ms",
        _T.LONG,
        _LONG_MAX,
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
    high = configs.get("max.compaction.lag.ms", _LONG_MAX)
    if isinstance(low, int) and isinstance(high, int) and low > high:
        raise ValueError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )
