"""One Kafka listener per simulated broker and security protocol: broker ``i`` on
``host:base_port + i`` (PLAINTEXT), and with ``sasl_port`` a SASL_PLAINTEXT listener beside
it on ``host:sasl_port + i``, with ``ssl_port`` an SSL one, with ``sasl_ssl_port`` a
SASL_SSL one.

The front door owns what the brokers share (the group coordinator, the offset store, the
producer ids, the counters), gathers it in one :class:`~purgatory.kafka.handlers.units.Shared`
context, and serves on every listener the handler units of
:mod:`purgatory.kafka.handlers.registry`: the shared ones built once, the others for each
listener (its broker, its protocol's addresses).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, final

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.errors import ErrorCode
from purgatory.kafka.acls import Acls, Authorizer, parse_super_users
from purgatory.kafka.authorization import Caller, authorized, unruled
from purgatory.kafka.broker_config_table import BROKER_CONFIGS
from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.client_metrics import ClientMetrics
from purgatory.kafka.cluster_configs import ClusterConfigs, TopicDefaults
from purgatory.kafka.coordinator.group_configs import KAFKA_BROKER_DEFAULTS, GroupConfig
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator, ShareSettings
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.offsets_topic import OffsetsTopic
from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.coordinator.share_partitions import SharePartitions
from purgatory.kafka.coordinator.share_records import ShareConfig
from purgatory.kafka.coordinator.share_state import ShareCoordinators, ShareStateSettings
from purgatory.kafka.coordinator.transactions import TransactionCoordinators
from purgatory.kafka.coordinator.txn_metadata import TxnSettings
from purgatory.kafka.faults import Faults
from purgatory.kafka.features import Features
from purgatory.kafka.handlers.consumer_groups import topics_of
from purgatory.kafka.handlers.registry import serve, shared_tables
from purgatory.kafka.handlers.topics import TopicHandlers
from purgatory.kafka.handlers.units import Addresses, Listener, QuotaStore, Shared
from purgatory.kafka.oauthbearer import JAAS_CONFIG, parse_jaas
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.quotas import ClientQuotas, QuotaWindow
from purgatory.kafka.record_batches import WireBatch, encode_batch
from purgatory.kafka.sasl import Credentials, SaslListener, enabled_mechanisms
from purgatory.kafka.server import KafkaProtocolServer, ListenerLimits
from purgatory.kafka.throttling import Throttle, Throttler
from purgatory.kafka.tls import TlsListener, TlsMaterial, TlsSettings, tls_settings
from purgatory.sim import Cluster

#: the security protocols, in the order the front door starts their listeners
PLAINTEXT: Final = "PLAINTEXT"
SASL_PLAINTEXT: Final = "SASL_PLAINTEXT"
SSL: Final = "SSL"
SASL_SSL: Final = "SASL_SSL"


@final
@dataclass(eq=False, slots=True)
class _Listeners:
    """Every broker's listener of one security protocol: the first port (0: free
    ports), the addresses bound and the servers running, by broker id."""

    protocol: str
    port: int
    addresses: Addresses = field(default_factory=dict)
    servers: dict[int, KafkaProtocolServer] = field(default_factory=dict)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")


def _state_batch(key: bytes, value: bytes | None) -> WireBatch:
    """One ``__transaction_state`` (or ``__share_group_state``) record as a Kafka batch,
    stamped now: a tombstone's value null, as Kafka's coordinators write it."""
    return WireBatch(bytearray(encode_batch(0, -1, [(key, value)], int(time.time() * 1000))))


@final
class KafkaFrontDoor:
    """Serves the Kafka protocol for every broker of ``cluster``; ``base_port`` 0 lets each
    listener pick a free port (tests), and Metadata advertises the ports actually bound.
    ``limits`` bound the connections of all the listeners together; ``configs`` are the
    broker configs by Kafka's names (:mod:`purgatory.kafka.broker_configs`): topic
    creation's defaults and whether a Metadata request creates unknown topics
    (``auto.create.topics.enable``; off by default here), the group session bounds and
    initial rebalance delay, the largest batch a Produce may carry; those the cluster
    keeps (retention, ``min.insync.replicas``) it must have been built with. :attr:`faults`
    holds the per-request fault rules of every listener.

    With ``sasl_port`` (0: free ports) each broker also has a SASL_PLAINTEXT listener,
    whose clients log in as one of ``users`` (name -> password; :mod:`purgatory.kafka.sasl`)
    and are told the SASL listeners' addresses (:attr:`sasl_addresses`) in Metadata;
    ``base_port`` None leaves out the plaintext ones (:attr:`addresses` is then the SASL
    listeners').

    With ``ssl_port`` each broker has an SSL listener (:attr:`ssl_addresses`), with
    ``sasl_ssl_port`` a SASL_SSL one (:attr:`sasl_ssl_addresses`): :meth:`start` makes
    the certificates they serve (:attr:`tls`, :mod:`purgatory.kafka.tls`), removed at
    :meth:`close`. Every listener tells its clients its own protocol's addresses.

    With ``authorizer.class.name`` set, :attr:`authorizer` enforces :attr:`acls` on every
    listener (:mod:`purgatory.kafka.authorization`): SASL clients as ``User:NAME``,
    SSL ones as their certificate's mapped subject, others as ``User:ANONYMOUS``."""

    def __init__(
        self,
        cluster: Cluster,
        host: str,
        base_port: int | None,
        limits: ListenerLimits | None = None,
        *,
        configs: BrokerConfigs | None = None,
        users: Mapping[str, str] | None = None,
        sasl_port: int | None = None,
        ssl_port: int | None = None,
        sasl_ssl_port: int | None = None,
        features: Mapping[str, int] | None = None,
    ) -> None:
        #: the listeners by security protocol, those asked for only
        self.listeners = _listeners(base_port, sasl_port, ssl_port, sasl_ssl_port)
        self.cluster = cluster
        self.host = host
        self.base_port = base_port
        self.sasl_port = sasl_port
        self.ssl_port = ssl_port
        self.sasl_ssl_port = sasl_ssl_port
        self.limits = ListenerLimits() if limits is None else limits
        self.stats = ProtocolStats()
        first = next(iter(self.listeners.values()))
        #: broker id -> (host, port) of its plaintext listener (of the first of its
        #: SASL_PLAINTEXT, SSL, SASL_SSL ones if none)
        self.addresses: Addresses = first.addresses
        #: broker id -> (host, port) of its SASL_PLAINTEXT listener
        self.sasl_addresses = _addresses(self.listeners, SASL_PLAINTEXT)
        #: broker id -> (host, port) of its SSL listener
        self.ssl_addresses = _addresses(self.listeners, SSL)
        #: broker id -> (host, port) of its SASL_SSL listener
        self.sasl_ssl_addresses = _addresses(self.listeners, SASL_SSL)
        #: the certificates of the TLS listeners, made at :meth:`start` (None before, and
        #: without TLS listeners)
        self.tls: TlsMaterial | None = None
        self.configs = BrokerConfigs() if configs is None else configs
        #: the cluster's finalized feature levels (ApiVersions, UpdateFeatures)
        self.features = Features(features)
        self._make_coordinators(cluster)
        self._expiry: asyncio.Task[None] | None = None
        #: every config of the cluster: the brokers', AlterConfigs', the topics'
        self.cluster_configs = ClusterConfigs(cluster, self.configs)
        #: client telemetry (KIP-714): the client-metrics subscriptions, the client
        #: instances, what they pushed
        self.client_metrics = ClientMetrics(self.configs.number("telemetry.max.bytes"))
        # Metadata's auto-creation (CreateTopics' handlers are the topics unit's)
        self._topics = TopicHandlers(cluster, TopicDefaults.of(self.configs), self.cluster_configs)
        self.credentials = Credentials(users or {})
        self.sasl = _sasl_listener(self.credentials, self.configs)
        self.acls = Acls()
        self.authorizer = _authorizer(self.acls, self.configs)
        #: the client quotas in force (``quota.window.num`` samples of
        #: ``quota.window.size.seconds``), what they throttled; AlterClientQuotas sets them
        self.quotas = _client_quotas(self.configs)
        #: throttled connections wait here (Kafka's throttled channels' delay queue)
        self.throttles: DelayedOperationPurgatory[Throttle] = DelayedOperationPurgatory(
            "Throttle", labels={"broker": "all"}
        )
        self.throttler = _throttler(cluster, self.configs, self.quotas, self.throttles)
        #: the client quotas AlterClientQuotas set: entity -> quota key -> value
        self.client_quotas: QuotaStore = {}
        self._state = self._shared_state()
        self._shared = shared_tables(self._state)
        tls = ssl_port is not None or sasl_ssl_port is not None
        #: the TLS listeners' settings (None without TLS listeners)
        self.tls_settings = _tls_settings(self.configs) if tls else None
        self._tls_contexts: dict[tuple[int, bool], ssl.SSLContext] = {}
        #: per-request fault rules, for every listener (none by default)
        self.faults = Faults(self._faults_active, cluster.topic_name)

    def _make_coordinators(self, cluster: Cluster) -> None:
        """The coordinators every broker shares: one group coordinator (with the
        share-partitions, their share coordinators and the committed offsets) and the
        transaction coordinators."""
        #: each broker's share coordinator: the share-partitions' durable state, in
        #: __share_group_state
        self.share_coordinators = _share_coordinators(cluster, self.configs)
        #: the share-partitions of every share group (KIP-932), each its leader's, written
        #: to __share_group_state and loaded from there by a new leader
        self.shares = _share_partitions(cluster, self.configs, self.share_coordinators)
        self.coordinator = _group_coordinator(cluster, self.configs, self.shares)
        self.shares.group_config = self._share_config
        # commits are timed by the coordinator's clock, as groups turning Empty are
        self.offsets = OffsetStore(self.coordinator.now_ms)
        #: __consumer_offsets: its partitions' leaders coordinate the groups
        self.offsets_topic = _offsets_topic(cluster, self.configs)
        self.producer_ids = ProducerIds()
        self.transactions = _transaction_coordinators(
            cluster, self.producer_ids, self.offsets, self.configs
        )

    def _shared_state(self) -> Shared:
        """What every listener's handler units are built from."""
        return Shared(
            cluster=self.cluster,
            broker_configs=self.configs,
            configs=self.cluster_configs,
            topic_defaults=self._topics.defaults,
            coordinator=self.coordinator,
            offsets=self.offsets,
            offsets_topic=self.offsets_topic,
            producer_ids=self.producer_ids,
            transactions=self.transactions,
            shares=self.shares,
            client_metrics=self.client_metrics,
            stats=self.stats,
            credentials=self.credentials,
            acls=self.acls,
            features=self.features,
            authorizing=self.authorizer is not None,
            addresses=self.addresses,
            auto_create=self._topics.auto_create,
            quotas_changed=self._quotas_changed,
        )

    def _share_config(self, group_id: str) -> ShareConfig:
        return _share_config(self.shares.config, self.coordinator.group_config(group_id))

    @property
    def purgatories(self) -> dict[str, DelayedOperationPurgatory[DelayedOperation]]:
        """The group coordinator's (Rebalance, Heartbeat), the transaction
        coordinators' (TxnTimeout, TxnSettle, TxnIdExpiration), the share groups'
        (ShareFetch) and the quota throttles' (Throttle); the cluster has its own."""
        return {
            **self.coordinator.purgatories,
            **self.transactions.purgatories,
            "ShareFetch": self.shares.fetches,  # type: ignore[dict-item]
            "Throttle": self.throttles,  # type: ignore[dict-item]
        }

    def _quotas_changed(self, store: QuotaStore) -> None:
        """AlterClientQuotas changed the store: in force at once, on every listener (no
        quota set: no listener pays for them)."""
        self.client_quotas = store
        self.quotas.update(store)
        throttler = self.throttler if self.quotas.active else None
        for server in self._all_servers():
            server.throttler = throttler

    def _make_tls(self) -> None:
        """The certificates, made once (before the first TLS listener starts)."""
        if self.tls is None and self.tls_settings is not None:
            self.tls = TlsMaterial(sorted(self.cluster.brokers), [self.host])

    async def start(self, *, consecutive_ports: bool = False) -> None:
        """Every broker's listeners, then the work in the background (offset expiry, the
        share locks' timer). ``consecutive_ports``: free ports, broker ``i`` on the first
        + i (see :meth:`_start_on_consecutive_ports`)."""
        self._make_tls()
        if consecutive_ports:
            await self._start_on_consecutive_ports()
        else:
            for broker_id in sorted(self.cluster.brokers):
                port = None
                if self.base_port is not None:
                    port = self.base_port + broker_id if self.base_port else 0
                await self.start_listener(broker_id, port)
        if self._expiry is None:
            self._expiry = asyncio.get_running_loop().create_task(self._expire_offsets_loop())
        await self.shares.start()

    async def _start_on_consecutive_ports(self, attempts: int = 50) -> None:
        """Every broker's listener on free ports, broker i on the first + i (as a nonzero
        ``--kafka-port`` places them), so that a restart with ``--kafka-port FIRST`` puts
        each broker back where it was: the first binds port 0, the others the ports after
        it; if one is taken, all close and it tries again."""
        brokers = sorted(self.cluster.brokers)
        for _ in range(attempts):
            await self.start_listener(brokers[0], 0)
            base = self.addresses[brokers[0]][1] - brokers[0]
            try:
                for broker in brokers[1:]:
                    await self.start_listener(broker, base + broker)
            except (OSError, OverflowError):
                for broker in brokers:
                    await self.stop_listener(broker)
                continue
            return
        raise OSError(f"found no {len(brokers)} consecutive free ports for the Kafka listeners")

    def expire_offsets(self) -> int:
        """One pass of Kafka's offset expiry: committed offsets of groups without members
        older than ``offsets.retention.minutes`` go (see :meth:`GroupCoordinator.expire_offsets`);
        returns how many. The front door runs one every
        ``offsets.retention.check.interval.ms``."""
        retention_ms = self.configs.number("offsets.retention.minutes") * 60_000
        return self.coordinator.expire_offsets(self.offsets, retention_ms)

    async def _expire_offsets_loop(self) -> None:
        interval_s = self.configs.number("offsets.retention.check.interval.ms") / 1000.0
        while True:
            await asyncio.sleep(interval_s)
            self.expire_offsets()

    async def start_listener(
        self,
        broker_id: int,
        port: int | None = None,
        sasl_port: int | None = None,
        ssl_port: int | None = None,
        sasl_ssl_port: int | None = None,
    ) -> None:
        """Listen for broker ``broker_id`` again (after :meth:`stop_listener`), on
        ``port`` (default: the port it had, so clients find it where Metadata said), and
        with SASL, SSL and SASL_SSL listeners on ``sasl_port``, ``ssl_port`` and
        ``sasl_ssl_port`` (each by default: the one it had, else the front door's first
        port of that protocol + ``broker_id``, else a free one)."""
        if self.listening(broker_id):
            raise RuntimeError(f"broker {broker_id} is listening already")
        self._make_tls()
        asked = {PLAINTEXT: port, SASL_PLAINTEXT: sasl_port, SSL: ssl_port, SASL_SSL: sasl_ssl_port}
        for protocol, listeners in self.listeners.items():
            bind = asked[protocol]
            if bind is None:
                known = listeners.addresses.get(broker_id)
                first = listeners.port
                bind = known[1] if known else first + broker_id if first else 0
            server = self._server(broker_id, listeners)
            try:
                bound = await server.start(self.host, bind)
            except BaseException:
                await self.stop_listener(broker_id)
                raise
            listeners.addresses[broker_id] = (self.host, bound)
            listeners.servers[broker_id] = server

    def _tls_listener(self, broker_id: int, sasl: bool) -> TlsListener:
        """What broker ``broker_id``'s SSL (SASL_SSL with ``sasl``) listener serves."""
        assert self.tls is not None
        assert self.tls_settings is not None
        settings = self.tls_settings
        key = (broker_id, sasl)
        context = self._tls_contexts.get(key)
        if context is None:
            # Kafka asks a SASL_SSL client for no certificate unless the listener's own
            # ssl.client.auth says so (KIP-684): the SASL login says who it is
            own = TlsSettings("none", settings.protocols) if sasl else settings
            context = self._tls_contexts[key] = self.tls.server_context(broker_id, own)
        return TlsListener(context, settings.mapper, settings.handshake_timeout_s)

    def _server(self, broker_id: int, listeners: _Listeners) -> KafkaProtocolServer:
        """Broker ``broker_id``'s listener of ``listeners``' protocol, not started:
        advertising that protocol's addresses, authenticating its clients with SASL
        and/or TLS as the protocol says."""
        addresses = listeners.addresses
        server = KafkaProtocolServer(
            self.stats,
            self.limits,
            broker_id,
            sasl=self.sasl if listeners.sasl else None,
            tls=self._tls_listener(broker_id, listeners.sasl) if listeners.tls else None,
        )

        async def locate(key: str) -> tuple[int, str, int] | None:
            # a coordinator among this listener's own protocol's listeners
            return await self._coordinator_at(addresses, key)

        serve(server, Listener(self._state, broker_id, addresses, locate), self._shared)
        missing = unruled(server.registered())
        if missing:  # with an authorizer, every request of theirs would be refused
            raise RuntimeError(f"APIs served without an authorization rule: {missing}")
        server.interceptor = self.faults if self.faults.active else None
        server.throttler = self.throttler if self.quotas.active else None
        server.features = self.features
        if self.authorizer is not None:
            server.guard = self._authorized
        return server

    def _authorized(
        self, principal: str, host: str, request: Any, run: Callable[[Any], Any]
    ) -> Any:
        """A request run with what ``principal`` may not do refused."""
        assert self.authorizer is not None
        cluster = self.cluster
        caller = Caller(
            principal,
            host,
            self.authorizer,
            cluster.topic_name,
            lambda name: name in cluster.topics,
            self._topics.defaults.auto_create,
        )
        return authorized(caller, request, run)

    async def stop_listener(self, broker_id: int) -> None:
        """Close broker ``broker_id``'s listeners and every connection to them: a client's
        next connect is refused at once, as from a crashed broker. Metadata still names
        it (with its port), as Kafka's does until the broker's session expires."""
        for listeners in self.listeners.values():
            server = listeners.servers.pop(broker_id, None)
            if server is not None:
                await server.close()

    def _all_servers(self) -> list[KafkaProtocolServer]:
        return [s for listeners in self.listeners.values() for s in listeners.servers.values()]

    def advertised(self) -> dict[ApiKey, tuple[int, int]]:
        """The APIs and versions every listener answers (what ApiVersions says)."""
        server = next(iter(self._all_servers()), None)
        return {} if server is None else server.supported()

    def listening(self, broker_id: int) -> bool:
        return any(broker_id in listeners.servers for listeners in self.listeners.values())

    def _faults_active(self, active: bool) -> None:
        # maybe called from another thread
        for server in self._all_servers():
            server.interceptor = self.faults if active else None

    async def _coordinator_at(
        self, addresses: dict[int, tuple[str, int]], key: str
    ) -> tuple[int, str, int] | None:
        """A group's coordinator among ``addresses``, as Kafka's: the leader of the group's
        partition of __consumer_offsets (created now if need be); None while there is none.
        Any broker answers group requests (one coordinator holds every group), but the
        answer must not depend on the broker asked, or a client that asks several keeps
        moving."""
        if await self.offsets_topic.ensure() is not ErrorCode.NONE:
            return None
        broker = self.offsets_topic.coordinator(key)
        if broker is None or broker not in addresses:
            return None
        host, port = addresses[broker]
        return broker, host, port

    async def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry
            self._expiry = None
        await self.coordinator.close()  # answers parked JoinGroup/SyncGroup requests first
        await self.shares.close()
        await self.share_coordinators.close()
        await self.transactions.close()
        for server in self._all_servers():
            await server.close()
        await self.throttles.shutdown()
        for listeners in self.listeners.values():
            listeners.servers.clear()
        if self.tls is not None:
            self.tls.close()
            self.tls = None
            self._tls_contexts.clear()

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` for a client's bootstrap.servers (the plaintext listeners',
        or the SASL ones' when there are none)."""
        return ",".join(f"{host}:{port}" for host, port in self.addresses.values())

    @property
    def sasl_bootstrap(self) -> str:
        """``host:port,...`` of the SASL_PLAINTEXT listeners ("" without them)."""
        return _joined(self.sasl_addresses)

    @property
    def ssl_bootstrap(self) -> str:
        """``host:port,...`` of the SSL listeners ("" without them)."""
        return _joined(self.ssl_addresses)

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """``host:port,...`` of the SASL_SSL listeners ("" without them)."""
        return _joined(self.sasl_ssl_addresses)

    def client_ssl_context(self, certificate: bool = True) -> ssl.SSLContext:
        """An :class:`ssl.SSLContext` for a client of the TLS listeners: it trusts the
        cluster's CA and, with ``certificate``, presents the client certificate (mutual
        TLS). RuntimeError before :meth:`start` or without TLS listeners."""
        if self.tls is None:
            raise RuntimeError("no TLS listeners running: give ssl_port or sasl_ssl_port")
        return self.tls.client_context(certificate)


def _joined(addresses: Addresses) -> str:
    return ",".join(f"{host}:{port}" for host, port in addresses.values())


def _share_config(base: ShareConfig, group: GroupConfig) -> ShareConfig:
    """A share group's settings: its own ``share.*`` group configs, else the broker's."""
    return dataclasses.replace(
        base,
        delivery_count_limit=group.number("share.delivery.count.limit"),
        lock_duration_ms=group.number("share.record.lock.duration.ms"),
        max_record_locks=group.number("share.partition.max.record.locks"),
        # these two have no broker config in Kafka; here the broker's are the defaults
        auto_offset_reset=str(group.own.get("share.auto.offset.reset", base.auto_offset_reset)),
        read_committed=group.own.get(
            "share.isolation.level", "read_committed" if base.read_committed else ""
        )
        == "read_committed",
    )


def _listeners(
    base_port: int | None,
    sasl_port: int | None,
    ssl_port: int | None,
    sasl_ssl_port: int | None,
) -> dict[str, _Listeners]:
    """The listeners by security protocol, those given a port only; ValueError if none."""
    ports = {
        PLAINTEXT: base_port,
        SASL_PLAINTEXT: sasl_port,
        SSL: ssl_port,
        SASL_SSL: sasl_ssl_port,
    }
    listeners = {
        protocol: _Listeners(protocol, port) for protocol, port in ports.items() if port is not None
    }
    if not listeners:
        raise ValueError("no listener: give base_port, sasl_port, ssl_port or sasl_ssl_port")
    return listeners


def _addresses(listeners: Mapping[str, _Listeners], protocol: str) -> Addresses:
    """The addresses of ``protocol``'s listeners ({} if there are none)."""
    of_protocol = listeners.get(protocol)
    return {} if of_protocol is None else of_protocol.addresses


def _tls_settings(configs: BrokerConfigs) -> TlsSettings:
    """The TLS listeners' settings, as the broker configs say."""
    return tls_settings(
        configs.text("ssl.client.auth"),
        configs.text("ssl.enabled.protocols"),
        configs.text("ssl.principal.mapping.rules"),
    )


def _client_quotas(configs: BrokerConfigs) -> ClientQuotas:
    """No client quota yet, measured over the window the broker configs say
    (``quota.window.num`` samples of ``quota.window.size.seconds``)."""
    return ClientQuotas(
        QuotaWindow(
            configs.number("quota.window.num"),
            configs.number("quota.window.size.seconds") * 1000,
        )
    )


def _throttler(
    cluster: Cluster,
    configs: BrokerConfigs,
    quotas: ClientQuotas,
    throttles: DelayedOperationPurgatory[Throttle],
) -> Throttler:
    """What throttles a connection over ``quotas``, parking it in ``throttles``: a topic's
    partition count as the cluster has it now, else as ``num.partitions`` would create it."""
    return Throttler(
        quotas,
        throttles,
        lambda topic: len(parts) if (parts := cluster.topics.get(topic)) else None,
        lambda: configs.number("num.partitions"),
    )


def _offsets_topic(cluster: Cluster, configs: BrokerConfigs) -> OffsetsTopic:
    """``__consumer_offsets``, as large as the broker configs say."""
    return OffsetsTopic(
        cluster,
        configs.number("offsets.topic.num.partitions"),
        configs.number("offsets.topic.replication.factor")
        if configs.is_set("offsets.topic.replication.factor")
        else None,
    )


def _transaction_coordinators(
    cluster: Cluster, producer_ids: ProducerIds, offsets: OffsetStore, configs: BrokerConfigs
) -> TransactionCoordinators:
    """Each broker's transaction coordinator, serving the ``__transaction_state``
    partitions it leads, set as the broker configs say; their purgatories (TxnTimeout,
    TxnSettle, TxnIdExpiration) are labelled as the group coordinator's."""
    return TransactionCoordinators(
        cluster,
        producer_ids,
        offsets,
        TxnSettings(
            configs.number("transaction.state.log.num.partitions"),
            configs.number("transaction.state.log.replication.factor"),
            configs.number("transaction.max.timeout.ms"),
            bool(configs.value("transaction.partition.verification.enable")),
            configs.number("transactional.id.expiration.ms"),
        ),
        labels={"broker": "all"},
        batch=_state_batch,
    )


def _sasl_listener(credentials: Credentials, configs: BrokerConfigs) -> SaslListener:
    """What the SASL listeners accept, as the broker configs say."""
    return SaslListener(
        credentials,
        configs.number("connections.max.reauth.ms"),
        configs.number("connection.failed.authentication.delay.ms"),
        enabled_mechanisms(configs.text("sasl.enabled.mechanisms")),
        parse_jaas(configs.text(JAAS_CONFIG)),
    )


def _authorizer(acls: Acls, configs: BrokerConfigs) -> Authorizer | None:
    """The authorizer of ``acls`` if ``authorizer.class.name`` is set, else None."""
    if not configs.text("authorizer.class.name"):
        return None
    return Authorizer(
        acls,
        parse_super_users(configs.text("super.users")),
        bool(configs.value("allow.everyone.if.no.acl.found")),
    )


def _share_coordinators(cluster: Cluster, configs: BrokerConfigs) -> ShareCoordinators:
    """Each broker's share coordinator, keeping the share-partitions' state in
    ``__share_group_state`` as large as the broker configs say."""
    return ShareCoordinators(
        cluster,
        ShareStateSettings(
            configs.number("share.coordinator.state.topic.num.partitions"),
            configs.number("share.coordinator.state.topic.replication.factor"),
            configs.number("share.coordinator.snapshot.update.records.per.snapshot"),
        ),
        batch=_state_batch,
    )


def _share_partitions(
    cluster: Cluster, configs: BrokerConfigs, persister: ShareCoordinators
) -> SharePartitions:
    """The share-partitions, set as the broker configs say; the ShareFetch purgatory
    carries the label the brokers' purgatories do."""
    return SharePartitions(
        cluster,
        ShareConfig(
            delivery_count_limit=configs.number("group.share.delivery.count.limit"),
            lock_duration_ms=configs.number("group.share.record.lock.duration.ms"),
            max_record_locks=configs.number("group.share.partition.max.record.locks"),
            max_sessions=configs.number("group.share.max.share.sessions"),
            auto_offset_reset=configs.text("share.auto.offset.reset"),
            read_committed=configs.text("share.isolation.level") == "read_committed",
        ),
        labels={"broker": "all"},
        persister=persister,
    )


def _group_coordinator(
    cluster: Cluster, configs: BrokerConfigs, shares: SharePartitions
) -> GroupCoordinator:
    """The one group coordinator, set as the broker configs say. Its purgatories carry the
    label the brokers' do, so that they share the metric families."""
    return GroupCoordinator(
        configs.number("group.min.session.timeout.ms"),
        configs.number("group.max.session.timeout.ms"),
        labels={"broker": "all"},
        initial_rebalance_delay_ms=configs.number("group.initial.rebalance.delay.ms"),
        topics=topics_of(cluster),
        heartbeat_interval_ms=configs.number("group.consumer.heartbeat.interval.ms"),
        consumer_session_timeout_ms=configs.number("group.consumer.session.timeout.ms"),
        group_broker_configs={
            name: configs.number(name) for name in KAFKA_BROKER_DEFAULTS if name in BROKER_CONFIGS
        },
        share=ShareSettings(
            heartbeat_interval_ms=configs.number("group.share.heartbeat.interval.ms"),
            session_timeout_ms=configs.number("group.share.session.timeout.ms"),
            max_size=configs.number("group.share.max.size"),
            removed=shares.member_removed,
            deleted=shares.group_deleted,
        ),
    )
