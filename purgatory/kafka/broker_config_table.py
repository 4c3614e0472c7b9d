"""The table of Kafka's broker configs (:data:`BROKER_CONFIGS`): each config with its
type, Kafka's default, the default here, its allowed values, what it does here, and
whether and where AlterConfigs may change it while the cluster runs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, final

from purgatory.kafka.config_rules import (
    INT_MAX,
    LONG_MAX,
    ConfigType,
    Rule,
    Scope,
    Value,
)
from purgatory.kafka.oauthbearer import JAAS_CONFIG, LOGIN_MODULE
from purgatory.kafka.sasl import MECHANISMS
from purgatory.sim.replica_selector import RACK_AWARE_REPLICA_SELECTOR

#: the authorizers ``authorizer.class.name`` may name (both enforce ACLs the same way here)
STANDARD_AUTHORIZER: Final = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_AUTHORIZER: Final = "kafka.security.authorizer.AclAuthorizer"


@final
@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """One broker config: Kafka's ``name``, ``type`` and ``kafka_default``; ``default``,
    the value here when nothing sets it (None: the cluster's own, as for the log retention
    ``purgatory serve`` and ``Cluster`` default apart); ``effect``, what it does here;
    ``rule``, the values allowed (for numbers, by default: at least 0, at most Java's
    bound); ``dynamic``: Kafka lets AlterConfigs change it while the broker runs (its
    DynamicBrokerConfig list), else it is read-only; ``scope``, where AlterConfigs may set
    a dynamic one, as Kafka's DynamicBrokerConfig says: ``cluster`` for one broker or
    every broker (resource ``""``), ``broker`` for one broker only, ``listener`` only
    under a listener prefix (``listener.name.NAME.``, one broker). A ``kafka_default`` of
    None is Kafka's null (DescribeConfigs reports no value, and no default synonym; see
    :data:`~purgatory.kafka.cluster_configs.DERIVED` for those in force nonetheless)."""

    name: str
    type: ConfigType
    kafka_default: Value | None
    default: Value | None
    effect: str
    rule: Rule = Rule(minimum=0)
    dynamic: bool = False
    scope: Scope = "cluster"

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
        "telemetry.max.bytes",
        ConfigType.INT,
        1 << 20,
        1 << 20,
        "largest metrics payload (after compression) a PushTelemetry may carry, else "
        "TELEMETRY_TOO_LARGE; GetTelemetrySubscriptions tells clients it",
        Rule(1),
    ),
    BrokerConfig(
        "log.retention.ms",
        ConfigType.LONG,
        None,  # Kafka's null: log.retention.hours (168) is in force
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
        "group.share.max.size",
        ConfigType.SHORT,
        200,
        200,
        "the most members a share group takes (GROUP_MAX_SIZE_REACHED beyond)",
        Rule(minimum=1, maximum=1000),
    ),
    BrokerConfig(
        "group.share.max.share.sessions",
        ConfigType.INT,
        2_000,
        2_000,
        "the most share sessions each broker keeps (SHARE_SESSION_LIMIT_REACHED beyond)",
        Rule(minimum=1),
    ),
    BrokerConfig(
        "share.auto.offset.reset",
        ConfigType.STRING,
        "latest",
        "latest",
        "where a share group starts reading a partition it has no state for (Kafka's group "
        "config, here a default for every share group)",
        Rule(choices=("latest", "earliest")),
    ),
    BrokerConfig(
        "share.isolation.level",
        ConfigType.STRING,
        "read_uncommitted",
        "read_uncommitted",
        "what share groups read: up to the high watermark, or read_committed up to the LSO "
        "without aborted records (Kafka's group config, here a default for every share group)",
        Rule(choices=("read_uncommitted", "read_committed")),
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
        dynamic=True,
        scope="broker",
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
        "replica.selector.class",
        ConfigType.STRING,
        None,
        None,
        "which replica a consumer that says its rack (client.rack, Fetch v11+) fetches "
        "from (KIP-392): Kafka's RackAwareReplicaSelector sends it to an in-sync follower "
        "in its rack; empty: the leader only",
        Rule(choices=("", RACK_AWARE_REPLICA_SELECTOR)),
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
        dynamic=True,
        scope="broker",
    ),
    BrokerConfig(
        "ssl.enabled.protocols",
        ConfigType.LIST,
        "TLSv1.2,TLSv1.3",
        "TLSv1.2,TLSv1.3",
        "the TLS versions the SSL and SASL_SSL listeners take",
        Rule(choices=("TLSv1.2", "TLSv1.3")),
        dynamic=True,
        scope="broker",
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
        dynamic=True,
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
        dynamic=True,
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
        "share.coordinator.state.topic.num.partitions",
        ConfigType.INT,
        50,
        50,
        "partitions of __share_group_state (fixed once it is created): a share-partition's "
        "share coordinator leads its partition",
        Rule(1),
    ),
    BrokerConfig(
        "share.coordinator.state.topic.replication.factor",
        ConfigType.INT,
        3,
        3,
        "replicas of each __share_group_state partition (at most the number of brokers)",
        Rule(1, (1 << 15) - 1),
    ),
    BrokerConfig(
        "share.coordinator.snapshot.update.records.per.snapshot",
        ConfigType.INT,
        500,
        500,
        "the ShareUpdate records written for a share-partition between two ShareSnapshot "
        "records of it",
        Rule(0),
    ),
    BrokerConfig(
        "transaction.partition.verification.enable",
        ConfigType.BOOLEAN,
        True,
        True,
        "KIP-890: a transactional produce to a partition not added to the transaction is "
        "refused (INVALID_TXN_STATE)",
        dynamic=True,
    ),
)

#: what a broker config the simulation keeps but does not act on says it does
KEPT_BROKER: Final = (
    "kept and reported (Kafka changes it while it runs); the simulation does not act on it"
)

#: dynamic broker configs the simulation acts on only as it starts: a change through
#: AlterConfigs is kept and reported, and the running cluster keeps its start value
APPLIED_AT_START: Final = frozenset(
    {
        "log.cleaner.backoff.ms",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
        "sasl.enabled.mechanisms",
        "ssl.client.auth",
        "ssl.enabled.protocols",
    }
)


def _kept(
    name: str,
    kind: ConfigType,
    default: Value | None,
    rule: Rule = Rule(),
    scope: Scope = "cluster",
) -> BrokerConfig:
    """A config of Kafka 4's dynamic broker config set the simulation keeps and reports."""
    return BrokerConfig(name, kind, default, default, KEPT_BROKER, rule, True, scope)


def _group(name: str, default: int, effect: str, rule: Rule = Rule(1)) -> BrokerConfig:
    """A static group coordinator config (its value bounds or defaults a group config)."""
    return BrokerConfig(name, ConfigType.INT, default, default, effect, rule)


_S, _I, _L, _D, _B = (
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.BOOLEAN,
)
_P, _C, _LS, _SH = ConfigType.PASSWORD, ConfigType.CLASS, ConfigType.LIST, ConfigType.SHORT
_BOUNDS = "bounds the group config {} (IncrementalAlterConfigs on a GROUP resource)"
_DEFAULTS = "the default of the group config {} (a group that sets none)"

#: Kafka 4's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs and the broker
#: quota configs) that the table above does not act on: taken, validated, kept, reported
_KEPT: Final = (
    # DynamicLogConfig: the broker synonyms of the topic configs
    _kept("log.segment.bytes", _I, 1 << 30, Rule(1 << 20)),
    # Kafka's null: log.roll.hours (168), log.roll.jitter.hours (0) are in force
    _kept("log.roll.ms", _L, None, Rule(1)),
    _kept("log.roll.jitter.ms", _L, None, Rule(0)),
    _kept("log.index.size.max.bytes", _I, 10 << 20, Rule(4)),
    _kept("log.flush.interval.messages", _L, LONG_MAX, Rule(1)),
    # Kafka's null: log.flush.scheduler.interval.ms (Long.MAX_VALUE) is in force
    _kept("log.flush.interval.ms", _L, None, Rule(0)),
    _kept("log.index.interval.bytes", _I, 4096, Rule(0)),
    _kept("log.cleaner.delete.retention.ms", _L, 86_400_000, Rule(0)),
    _kept("log.cleaner.min.compaction.lag.ms", _L, 0, Rule(0)),
    _kept("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX, Rule(1)),
    _kept("log.segment.delete.delay.ms", _L, 60_000, Rule(0)),
    _kept("log.cleaner.min.cleanable.ratio", _D, 0.5, Rule(0, 1)),
    _kept("unclean.leader.election.enable", _B, False),
    _kept("compression.gzip.level", _I, -1, Rule(1, 9, also=(-1,))),
    _kept("compression.lz4.level", _I, 9, Rule(1, 17)),
    _kept("compression.zstd.level", _I, 3, Rule(-131072, 22)),
    _kept("log.preallocate", _B, False),
    _kept("log.message.timestamp.difference.max.ms", _L, LONG_MAX, Rule(0)),
    _kept("log.message.timestamp.before.max.ms", _L, LONG_MAX, Rule(0)),
    _kept("log.message.timestamp.after.max.ms", _L, 3_600_000, Rule(0)),
    _kept("log.local.retention.ms", _L, -2, Rule(-2)),
    _kept("log.local.retention.bytes", _L, -2, Rule(-2)),
    # LogCleaner
    _kept("log.cleaner.threads", _I, 1, Rule(0)),
    _kept("log.cleaner.dedupe.buffer.size", _L, 128 << 20),
    _kept("log.cleaner.io.buffer.load.factor", _D, 0.9),
    _kept("log.cleaner.io.buffer.size", _I, 512 << 10, Rule(0)),
    _kept("log.cleaner.io.max.bytes.per.second", _D, 1.7976931348623157e308),
    # DynamicThreadPool (a change at most doubles or halves the value in force)
    _kept("num.io.threads", _I, 8, Rule(1)),
    _kept("num.replica.fetchers", _I, 1, Rule()),
    _kept("num.recovery.threads.per.data.dir", _I, 2, Rule(1)),
    _kept("background.threads", _I, 10, Rule(1)),
    _kept("metric.reporters", _LS, "org.apache.kafka.common.metrics.JmxReporter"),
    # DynamicListenerConfig: per broker, never for every broker
    _kept(
        "listener.security.protocol.map",
        _S,
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        scope="broker",
    ),
    _kept(
        "principal.builder.class",
        _C,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        scope="broker",
    ),
    _kept("ssl.protocol", _S, "TLSv1.3", scope="broker"),
    _kept("ssl.provider", _S, None, scope="broker"),
    _kept("ssl.cipher.suites", _LS, None, scope="broker"),
    _kept("ssl.keymanager.algorithm", _S, "SunX509", scope="broker"),
    _kept("ssl.trustmanager.algorithm", _S, "PKIX", scope="broker"),
    _kept("ssl.endpoint.identification.algorithm", _S, "https", scope="broker"),
    _kept("ssl.secure.random.implementation", _S, None, scope="broker"),
    _kept("ssl.engine.factory.class", _C, None, scope="broker"),
    _kept("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI", scope="broker"),
    _kept("sasl.jaas.config", _P, None, scope="broker"),
    _kept("sasl.kerberos.service.name", _S, None, scope="broker"),
    _kept("sasl.kerberos.kinit.cmd", _S, "/usr/bin/kinit", scope="broker"),
    _kept("sasl.kerberos.ticket.renew.window.factor", _D, 0.8, scope="broker"),
    _kept("sasl.kerberos.ticket.renew.jitter", _D, 0.05, scope="broker"),
    _kept("sasl.kerberos.min.time.before.relogin", _L, 60_000, scope="broker"),
    _kept("sasl.kerberos.principal.to.local.rules", _LS, "DEFAULT", scope="broker"),
    _kept("sasl.login.refresh.window.factor", _D, 0.8, Rule(0.5, 1.0), scope="broker"),
    _kept("sasl.login.refresh.window.jitter", _D, 0.05, Rule(0.0, 0.25), scope="broker"),
    _kept("sasl.login.refresh.min.period.seconds", _SH, 60, Rule(0, 900), scope="broker"),
    _kept("sasl.login.refresh.buffer.seconds", _SH, 300, Rule(0, 3600), scope="broker"),
    # SslConfigs.RECONFIGURABLE_CONFIGS: only under a listener prefix
    _kept("ssl.keystore.type", _S, "JKS", scope="listener"),
    _kept("ssl.keystore.location", _S, None, scope="listener"),
    _kept("ssl.keystore.password", _P, None, scope="listener"),
    _kept("ssl.key.password", _P, None, scope="listener"),
    _kept("ssl.keystore.certificate.chain", _P, None, scope="listener"),
    _kept("ssl.keystore.key", _P, None, scope="listener"),
    _kept("ssl.truststore.type", _S, "JKS", scope="listener"),
    _kept("ssl.truststore.location", _S, None, scope="listener"),
    _kept("ssl.truststore.password", _P, None, scope="listener"),
    _kept("ssl.truststore.certificates", _P, None, scope="listener"),
    # SocketServer and DynamicConnectionQuota (num.network.threads: DynamicListenerConfig)
    _kept("max.connections.per.ip", _I, INT_MAX),
    _kept("max.connections.per.ip.overrides", _S, ""),
    _kept("max.connections", _I, INT_MAX),
    _kept("max.connection.creation.rate", _I, INT_MAX),
    _kept("num.network.threads", _I, 3, Rule(1)),
    # DynamicRemoteLogConfig
    _kept("remote.log.index.file.cache.total.size.bytes", _L, 1 << 30, Rule(1)),
    _kept("remote.fetch.max.wait.ms", _I, 500, Rule(1)),
    _kept("remote.log.manager.copy.max.bytes.per.second", _L, LONG_MAX, Rule(1)),
    _kept("remote.log.manager.fetch.max.bytes.per.second", _L, LONG_MAX, Rule(1)),
    _kept("remote.list.offsets.request.timeout.ms", _L, 30_000, Rule(1)),
    # the broker quota configs (DynamicConfig.Broker)
    _kept("leader.replication.throttled.rate", _L, LONG_MAX),
    _kept("follower.replication.throttled.rate", _L, LONG_MAX),
    _kept("replica.alter.log.dirs.io.max.bytes.per.second", _L, LONG_MAX),
)

#: the group coordinator's bounds and defaults of the group configs (read-only)
_GROUPS: Final = (
    _group(
        "group.consumer.min.session.timeout.ms",
        45_000,
        _BOUNDS.format("consumer.session.timeout.ms"),
    ),
    _group(
        "group.consumer.max.session.timeout.ms",
        60_000,
        _BOUNDS.format("consumer.session.timeout.ms"),
    ),
    _group(
        "group.consumer.min.heartbeat.interval.ms",
        5_000,
        _BOUNDS.format("consumer.heartbeat.interval.ms"),
    ),
    _group(
        "group.consumer.max.heartbeat.interval.ms",
        15_000,
        _BOUNDS.format("consumer.heartbeat.interval.ms"),
    ),
    _group("group.share.session.timeout.ms", 45_000, _DEFAULTS.format("share.session.timeout.ms")),
    _group(
        "group.share.min.session.timeout.ms", 45_000, _BOUNDS.format("share.session.timeout.ms")
    ),
    _group(
        "group.share.max.session.timeout.ms", 60_000, _BOUNDS.format("share.session.timeout.ms")
    ),
    _group(
        "group.share.heartbeat.interval.ms", 5_000, _DEFAULTS.format("share.heartbeat.interval.ms")
    ),
    _group(
        "group.share.min.heartbeat.interval.ms",
        5_000,
        _BOUNDS.format("share.heartbeat.interval.ms"),
    ),
    _group(
        "group.share.max.heartbeat.interval.ms",
        15_000,
        _BOUNDS.format("share.heartbeat.interval.ms"),
    ),
    _group(
        "group.share.record.lock.duration.ms",
        30_000,
        _DEFAULTS.format("share.record.lock.duration.ms"),
        Rule(1000),
    ),
    _group(
        "group.share.min.record.lock.duration.ms",
        15_000,
        _BOUNDS.format("share.record.lock.duration.ms"),
        Rule(1000),
    ),
    _group(
        "group.share.max.record.lock.duration.ms",
        60_000,
        _BOUNDS.format("share.record.lock.duration.ms"),
        Rule(1000),
    ),
    _group(
        "group.share.delivery.count.limit",
        5,
        _DEFAULTS.format("share.delivery.count.limit"),
        Rule(2, 10),
    ),
    _group(
        "group.share.min.delivery.count.limit",
        2,
        _BOUNDS.format("share.delivery.count.limit"),
        Rule(2, 10),
    ),
    _group(
        "group.share.max.delivery.count.limit",
        10,
        _BOUNDS.format("share.delivery.count.limit"),
        Rule(2, 10),
    ),
    _group(
        "group.share.partition.max.record.locks",
        2_000,
        _DEFAULTS.format("share.partition.max.record.locks"),
        Rule(100, 10_000),
    ),
    _group(
        "group.share.min.partition.max.record.locks",
        100,
        _BOUNDS.format("share.partition.max.record.locks"),
        Rule(100, 10_000),
    ),
    _group(
        "group.share.max.partition.max.record.locks",
        4_000,
        _BOUNDS.format("share.partition.max.record.locks"),
        Rule(100, 10_000),
    ),
    _group(
        "group.streams.session.timeout.ms", 45_000, _DEFAULTS.format("streams.session.timeout.ms")
    ),
    _group(
        "group.streams.min.session.timeout.ms", 45_000, _BOUNDS.format("streams.session.timeout.ms")
    ),
    _group(
        "group.streams.max.session.timeout.ms", 60_000, _BOUNDS.format("streams.session.timeout.ms")
    ),
    _group(
        "group.streams.heartbeat.interval.ms",
        5_000,
        _DEFAULTS.format("streams.heartbeat.interval.ms"),
    ),
    _group(
        "group.streams.min.heartbeat.interval.ms",
        5_000,
        _BOUNDS.format("streams.heartbeat.interval.ms"),
    ),
    _group(
        "group.streams.max.heartbeat.interval.ms",
        15_000,
        _BOUNDS.format("streams.heartbeat.interval.ms"),
    ),
    _group(
        "group.streams.num.standby.replicas",
        0,
        _DEFAULTS.format("streams.num.standby.replicas"),
        Rule(0),
    ),
    _group(
        "group.streams.max.standby.replicas",
        2,
        _BOUNDS.format("streams.num.standby.replicas"),
        Rule(0),
    ),
    _group(
        "group.streams.initial.rebalance.delay.ms",
        3_000,
        _DEFAULTS.format("streams.initial.rebalance.delay.ms"),
        Rule(0),
    ),
)

#: every config taken, by name, in the order DescribeConfigs lists them
BROKER_CONFIGS: Final[Mapping[str, BrokerConfig]] = {
    c.name: c for c in (*_CONFIGS, *_GROUPS, *_KEPT)
}

#: the thread pools whose size a dynamic change at most doubles or halves (Kafka's
#: DynamicThreadPool)
THREAD_POOLS: Final = frozenset(
    {
        "num.io.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
    }
)

#: ``listener.name.NAME.CONFIG``: a listener's own value of a broker config
LISTENER_PREFIXED: Final = re.compile(r"listener\.name\.([^.]*)\.(.*)")
