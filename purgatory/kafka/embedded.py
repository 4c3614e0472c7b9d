"""An embedded Kafka cluster for tests: N simulated brokers speaking the Kafka protocol on
free loopback ports, in this process, with the simulation's faults as methods.

    with EmbeddedKafka(brokers=3, topics={"orders": 2}) as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
        ...
        kafka.crash_broker(kafka.leader("orders", 0))   # the leader dies now

:class:`EmbeddedKafka` runs the cluster on an event loop of its own, in a background
thread, so the broker keeps serving while the test thread blocks in a synchronous client
(kafka-python, confluent-kafka); every method is marshalled onto that loop and waits for
the result. :class:`AsyncEmbeddedKafka` runs on the caller's event loop (aiokafka; a
synchronous client there must run in a thread, e.g. ``asyncio.to_thread``).

Faults, as Kafka sees them: :meth:`~AsyncEmbeddedKafka.crash_broker` fences the broker
(its partitions fail over to in-sync followers, it leaves every ISR) and closes its
listener and connections (a client's next connect is refused at once);
:meth:`~AsyncEmbeddedKafka.crash_broker_unfenced` is the crash the controller only learns
of when the broker's session times out; :meth:`~AsyncEmbeddedKafka.restart_broker` brings it
back on the same port, truncated to the leaders' logs; a slow follower, leader moves and
elections (preferred or unclean) are methods too. Per-request faults (an error code, a
lost response, a dropped connection, a delay) are rules on :attr:`~AsyncEmbeddedKafka.faults`
(see :mod:`purgatory.kafka.faults`).
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Self, TypedDict, TypeVar, Unpack, final

from purgatory._lifecycle import StartClose
from purgatory.kafka.broker_configs import BrokerConfigs, broker_configs
from purgatory.kafka.client_metrics import ClientTelemetry
from purgatory.kafka.cluster_configs import DERIVED
from purgatory.kafka.config_rules import Value
from purgatory.kafka.faults import Faults
from purgatory.kafka.features import checked_levels
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.tls import TlsMaterial
from purgatory.sim import (
    Cluster,
    ClusterOptions,
    ElectLeadersRequest,
    ElectLeadersResult,
    Latency,
    Record,
)
from purgatory.sim.batches import records_in
from purgatory.sim.cluster import check_racks
from purgatory.sim.messages import PartitionMetadata

T = TypeVar("T")

#: How long a call of the synchronous cluster waits for its loop before giving up.
CALL_TIMEOUT_S: Final = 60.0

#: A topic to create at start: its partition count, or (partitions, replication factor).
TopicSpec = int | tuple[int, int]


class EmbeddedKafkaOptions(TypedDict, total=False):
    """The keyword arguments of :class:`AsyncEmbeddedKafka` and :class:`EmbeddedKafka`
    (and of the ``kafka_cluster`` marker), each optional; what each does is
    :class:`AsyncEmbeddedKafka`'s to say."""

    #: created at start: name -> partitions, or (partitions, replication factor)
    topics: Mapping[str, TopicSpec] | None
    #: ``min.insync.replicas`` (default 1)
    min_insync_replicas: int
    #: the listeners' address (default ``127.0.0.1``)
    host: str
    #: the simulation's random seed (default 0)
    seed: int
    #: other :class:`~purgatory.sim.Cluster` options (replica lag, round trips)
    cluster_options: ClusterOptions | None
    #: broker configs by Kafka's names, as Kafka's text or typed
    configs: Mapping[str, Value] | None
    #: SASL users: name -> password
    users: Mapping[str, str] | None
    #: the first port of the SASL_PLAINTEXT listeners (0: free ports)
    sasl_port: int | None
    #: SSL listeners on free ports (``ssl_port=0``)
    ssl: bool
    #: the first port of the SSL listeners (0: free ports)
    ssl_port: int | None
    #: the first port of the SASL_SSL listeners (0: free ports)
    sasl_ssl_port: int | None
    #: each broker's rack (``broker.rack``), one per broker
    racks: Sequence[str | None] | None
    #: feature levels finalized at start, as ``kafka-storage format --feature``
    #: (default: ``transaction.version`` 2, as Kafka 4 formats a cluster)
    features: Mapping[str, int] | None


@dataclass(frozen=True, slots=True)
class _Setup:
    """:class:`EmbeddedKafkaOptions` checked, with their defaults: what the cluster and its
    front door are built from."""

    topics: Mapping[str, TopicSpec]
    host: str
    seed: int
    configs: BrokerConfigs
    cluster_options: ClusterOptions
    users: Mapping[str, str] | None
    sasl_port: int | None
    ssl_port: int | None
    sasl_ssl_port: int | None
    features: Mapping[str, int]

    @classmethod
    def of(cls, brokers: int, options: EmbeddedKafkaOptions) -> _Setup:
        """``options`` checked: TypeError for a name that is not an option, ValueError
        (or TypeError) for a bad value."""
        unknown = options.keys() - EmbeddedKafkaOptions.__optional_keys__
        if unknown:
            raise TypeError(f"got an unexpected keyword argument {sorted(unknown)[0]!r}")
        cluster_options = options.get("cluster_options")
        racks = options.get("racks")
        users = options.get("users")
        sasl_port = options.get("sasl_port")
        sasl_ssl_port = options.get("sasl_ssl_port")
        checked = _checked_configs(
            brokers, options.get("configs"), options.get("min_insync_replicas", 1), cluster_options
        )
        _check_racks(brokers, racks, cluster_options)
        ssl_port = _check_ports(
            users, sasl_port, options.get("ssl", False), options.get("ssl_port"), sasl_ssl_port
        )
        cluster = ClusterOptions() if cluster_options is None else cluster_options.copy()
        cluster["min_insync_replicas"] = checked.number("min.insync.replicas")
        for name, option in _CLUSTER_CONFIGS.items():
            if checked.is_set(name):
                cluster[option] = checked.number(name)
        if checked.is_set(_SELECTOR):
            cluster["replica_selector_class"] = checked.text(_SELECTOR)
        # Kafka's log.retention.ms (seven days) unless set, as DescribeConfigs reports it
        retention_ms = DERIVED["log.retention.ms"][0]
        assert isinstance(retention_ms, int)
        cluster.setdefault("log_retention_ms", retention_ms)
        if racks is not None:
            cluster["racks"] = list(racks)
        return cls(
            topics=options.get("topics") or {},
            host=options.get("host", "127.0.0.1"),
            seed=options.get("seed", 0),
            configs=checked,
            cluster_options=cluster,
            users=users,
            sasl_port=sasl_port,
            ssl_port=ssl_port,
            sasl_ssl_port=sasl_ssl_port,
            features=checked_levels(options.get("features") or {}),
        )


@final
class AsyncEmbeddedKafka(StartClose):
    """``brokers`` simulated brokers serving the Kafka protocol on free ports of ``host``,
    on the running event loop; an async context manager.

    ``topics`` are created at start (name -> partitions, or (partitions, replication
    factor)); the replication factor defaults to ``min(3, brokers)``, as in Kafka's
    tests, or to ``default.replication.factor`` if ``configs`` sets it.

    ``configs`` are broker configs by Kafka's names, as a test Kafka's server.properties
    sets them (:data:`~purgatory.kafka.broker_config_table.BROKER_CONFIGS`: ``num.partitions``,
    ``auto.create.topics.enable``, ``group.min.session.timeout.ms``,
    ``message.max.bytes``, ``log.retention.ms``, ...), values as Kafka's text or typed;
    an unknown name or a bad value raises ValueError naming it. ``min_insync_replicas`` is
    ``min.insync.replicas`` too; other :class:`~purgatory.sim.Cluster` options (replica
    lag, round trips) go in ``cluster_options``.

    ``sasl_port`` (0: free ports) adds a SASL_PLAINTEXT listener to every broker (at
    :attr:`sasl_bootstrap_servers`), beside the plaintext one; its clients log in as one
    of ``users`` (name -> password) with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.

    ``ssl_port`` (0: free ports; ``ssl=True`` is ``ssl_port=0``) adds an SSL listener to
    every broker (at :attr:`ssl_bootstrap_servers`), ``sasl_ssl_port`` a SASL_SSL one (at
    :attr:`sasl_ssl_bootstrap_servers`). The cluster makes its CA, broker certificates
    and a client certificate at start (:attr:`ca_file`, :attr:`client_cert_file`,
    :attr:`client_key_file`, removed at close); :meth:`client_ssl_context` is a client's
    context. ``ssl.client.auth``, ``ssl.principal.mapping.rules`` and
    ``ssl.enabled.protocols`` are broker ``configs`` (:mod:`purgatory.kafka.tls`).

    ``racks`` gives each broker its rack (Kafka's ``broker.rack``, one per broker):
    Metadata and DescribeCluster show them, replicas are placed across them, and with
    the broker config ``replica.selector.class`` =
    ``org.apache.kafka.common.replica.RackAwareReplicaSelector`` consumers that set
    ``client.rack`` fetch from an in-sync follower in their rack (KIP-392).

    ``features`` finalizes feature levels at start, as ``kafka-storage format --feature``
    does: ``{"transaction.version": 1}`` serves a cluster of Transactions V1 (Kafka 4
    formats a new one at 2, the default). UpdateFeatures changes them later; an unknown
    feature or a level it does not support raises ValueError.
    """

    def __init__(self, brokers: int = 3, **options: Unpack[EmbeddedKafkaOptions]) -> None:
        setup = _Setup.of(brokers, options)
        self.cluster = Cluster(brokers, seed=setup.seed, **setup.cluster_options)
        self.configs = setup.configs
        self.front_door = KafkaFrontDoor(
            self.cluster,
            setup.host,
            0,
            configs=setup.configs,
            users=setup.users,
            sasl_port=setup.sasl_port,
            ssl_port=setup.ssl_port,
            sasl_ssl_port=setup.sasl_ssl_port,
            features=setup.features,
        )
        self._topics = dict(setup.topics)
        self._started = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            raise RuntimeError("the embedded cluster is started already")
        self._started = True
        await self.cluster.start()
        try:
            for name, spec in self._topics.items():
                partitions, replication = spec if isinstance(spec, tuple) else (spec, None)
                await self.create_topic(name, partitions, replication)
            await self.front_door.start()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close every listener and connection, then the cluster. Idempotent."""
        await self.front_door.close()
        await self.cluster.close()

    # -- where clients connect ---------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every broker, for a client's ``bootstrap_servers``."""
        return self.front_door.bootstrap

    @property
    def sasl_bootstrap_servers(self) -> str:
        """``host:port,...`` of every broker's SASL_PLAINTEXT listener ("" without
        ``sasl_port``)."""
        return self.front_door.sasl_bootstrap

    @property
    def ssl_bootstrap_servers(self) -> str:
        """``host:port,...`` of every broker's SSL listener ("" without ``ssl_port``)."""
        return self.front_door.ssl_bootstrap

    @property
    def sasl_ssl_bootstrap_servers(self) -> str:
        """``host:port,...`` of every broker's SASL_SSL listener ("" without
        ``sasl_ssl_port``)."""
        return self.front_door.sasl_ssl_bootstrap

    def client_ssl_context(self, certificate: bool = True) -> _ssl.SSLContext:
        """A client's :class:`ssl.SSLContext` for the SSL and SASL_SSL listeners: it
        trusts the cluster's CA (and checks the broker's host name) and, with
        ``certificate``, presents the client certificate for mutual TLS."""
        return self.front_door.client_ssl_context(certificate)

    @property
    def ca_file(self) -> str:
        """The CA's certificate (PEM), for a client's ``ssl.ca.location`` / ``ssl_cafile``."""
        return self._tls.ca_file

    @property
    def client_cert_file(self) -> str:
        """The client certificate (PEM), signed by the CA; its principal is
        ``User:CN=purgatory-client,OU=clients,O=purgatory``."""
        return self._tls.client_cert_file

    @property
    def client_key_file(self) -> str:
        """The client certificate's private key (PEM, unencrypted)."""
        return self._tls.client_key_file

    @property
    def _tls(self) -> TlsMaterial:
        tls = self.front_door.tls
        if tls is None:
            raise RuntimeError("no TLS listeners running: give ssl_port or sasl_ssl_port")
        return tls

    @property
    def addresses(self) -> dict[int, tuple[str, int]]:
        """Broker id -> (host, port) it listens on (kept across a crash and restart)."""
        return dict(self.front_door.addresses)

    @property
    def faults(self) -> Faults:
        """The per-request fault rules (see :mod:`purgatory.kafka.faults`)."""
        return self.front_door.faults

    # -- topics ------------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, Value] | None = None,
    ) -> None:
        """Create a topic (replication factor default: ``default.replication.factor`` if
        set, else ``min(3, brokers)``) with topic ``configs`` by Kafka's names
        (``cleanup.policy``, ``retention.ms``, ...), as CreateTopics takes them. Raises
        :class:`~purgatory.sim.SimulationError` (its ``code`` is Kafka's) if it exists,
        the sizes are impossible or a config is unknown or bad (INVALID_CONFIG)."""
        own = self.front_door.cluster_configs.check_topic((configs or {}).items())
        if replication_factor is None:
            replication_factor = (
                self.configs.number("default.replication.factor")
                if self.configs.is_set("default.replication.factor")
                else min(3, len(self.cluster.brokers))
            )
        await self.cluster.create_topic(name, partitions, replication_factor)
        self.front_door.cluster_configs.created(name, own)

    async def compact(self, topic: str | None = None) -> int:
        """Compact ``topic`` (every compacted topic by default) now, as kfake's
        ``Compact``: each replica's log cleaner runs over its log, its active segment
        rolled, whatever ``min.cleanable.dirty.ratio`` and the compaction lags say (up to
        the last stable offset). Returns how many replica logs were cleaned."""
        return await self.cluster.compact(topic)

    async def delete_topic(self, name: str) -> None:
        """Delete a topic and its records, as DeleteTopics does: requests parked on it are
        answered NOT_LEADER_OR_FOLLOWER, later ones UNKNOWN_TOPIC_OR_PARTITION; the name
        may be created again; the offsets groups committed for it are kept. Raises
        :class:`~purgatory.sim.SimulationError` (UNKNOWN_TOPIC_OR_PARTITION) for no such
        topic."""
        await self.cluster.delete_topic(name)

    def expire_share_locks(self) -> int:
        """Expire every share group's acquisition locks now, as if
        ``group.share.record.lock.duration.ms`` had passed: the records held are
        Available again (Archived past ``group.share.delivery.count.limit``) and parked
        ShareFetch requests may take them. Returns how many locks expired."""
        return self.front_door.shares.expire_locks()

    # -- client telemetry (KIP-714) -----------------------------------------------------------

    def subscribe_telemetry(
        self,
        name: str,
        metrics: Sequence[str] = ("*",),
        interval_ms: int = 100,
        match: Sequence[str] = (),
    ) -> None:
        """Make (or replace) client-metrics subscription ``name``, as an admin client's
        IncrementalAlterConfigs on the CLIENT_METRICS resource would: the clients matching
        every ``match`` selector (``client_id=REGEX``, ``client_software_name=REGEX``, ...;
        none: every client) push the metrics named by the prefixes ``metrics`` (``*``:
        all) every ``interval_ms`` (100 .. 3600000). A client learns of it at its next
        GetTelemetrySubscriptions. Raises :class:`~purgatory.sim.SimulationError` with
        Kafka's error for what Kafka refuses."""
        configs = {"metrics": ",".join(metrics), "interval.ms": str(interval_ms)}
        if match:
            configs["match"] = ",".join(match)
        self.front_door.client_metrics.subscribe(name, configs)

    def unsubscribe_telemetry(self, name: str) -> None:
        """Remove client-metrics subscription ``name`` (nothing if there is none)."""
        self.front_door.client_metrics.subscribe(name, {})

    def telemetry(self) -> dict[uuid.UUID, ClientTelemetry]:
        """What clients pushed (PushTelemetry), by client instance id: each instance's
        client id and software, and its pushes with their data points
        (:class:`~purgatory.kafka.client_metrics.ClientTelemetry`: ``names()``,
        ``latest()``, ``points``). A copy: later pushes do not change it."""
        return self.front_door.client_metrics.telemetry()

    def topics(self) -> dict[str, int]:
        """Topic name -> partition count; internal topics (``__consumer_offsets``) left
        out, as Kafka's admin ``listTopics`` leaves them out."""
        return {
            name: len(parts)
            for name, parts in self.cluster.topics.items()
            if not self.cluster.is_internal(name)
        }

    def describe(self, topic: str, partition: int) -> PartitionMetadata:
        """A partition's leader, epoch, replicas, ISR, high watermark and log offsets.
        Raises KeyError for an unknown partition."""
        described = self.cluster.describe_partition(topic, partition)
        if described is None:
            raise KeyError(f"no partition {topic}-{partition}")
        return described

    def leader(self, topic: str, partition: int) -> int | None:
        """The broker leading the partition (None while it is offline)."""
        return self.describe(topic, partition).leader

    def records(self, topic: str, partition: int) -> list[Record]:
        """The records a consumer can read from the partition (from the log start up to
        the high watermark; transaction markers, which consumers skip, left out), as the
        leader holds them: ``(offset, key, value)``."""
        p = self.cluster.partition(topic, partition)
        if p is None:
            raise KeyError(f"no partition {topic}-{partition}")
        if p.leader is None:
            return []
        log = p.logs[p.leader]
        start = log.log_start_offset
        batches = log.read_batches(start, p.hw, 1 << 62)
        return records_in([b for b in batches if not b.control], start, p.hw)

    # -- faults ------------------------------------------------------------------------------

    async def crash_broker(self, broker: int) -> None:
        """Kill ``broker``, and the controller fences it at once: the partitions it led
        fail over to an in-sync follower (or go offline), it leaves the ISR of those it
        followed (so acks=all produces there stop waiting for it), its parked requests
        are answered NOT_LEADER_OR_FOLLOWER, and its listener and connections close, so
        a client's next connect is refused at once."""
        await self.cluster.crash_broker(broker)
        await self.front_door.stop_listener(broker)

    async def crash_broker_unfenced(self, broker: int) -> None:
        """Kill ``broker`` without the controller hearing of it: its listener and
        connections close as in :meth:`crash_broker`, but it keeps leading what it led
        and stays in every ISR until the controller fences it,
        ``broker.session.timeout.ms`` later (9 s by default; a broker config), or a
        leader's lag check drops it (``replica_lag_time_max_ms``). Until then clients
        cannot reach the partitions it led, and acks=all produces on those it followed
        wait for it."""
        await self.cluster.crash_broker_unfenced(broker)
        await self.front_door.stop_listener(broker)

    async def restart_broker(self, broker: int) -> None:
        """Bring ``broker`` back on its port: it truncates to the leaders' logs, catches up,
        and leads the partitions that were offline waiting for it."""
        await self.cluster.restart_broker(broker)
        if not self.front_door.listening(broker):
            await self.front_door.start_listener(broker)

    def slow_follower(self, broker: int, latency: Latency | float | None) -> None:
        """Add ``latency`` (a :class:`~purgatory.sim.Latency`, or a fixed number of ms) to
        every replication round trip of ``broker``; None: back to normal. acks=all
        produces then wait for it, until it drops out of the ISR."""
        if latency is not None and not isinstance(latency, Latency):
            latency = Latency(float(latency))
        self.cluster.set_replication_latency(broker, latency)

    async def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        """Move the partition's leadership to broker ``to`` (default: the next live
        in-sync replica), as a controlled shutdown does; returns the new leader."""
        return await self.cluster.fail_over(topic, partition, to)

    async def elect_leaders(
        self,
        partitions: Sequence[tuple[str, int]] | None = None,
        *,
        unclean: bool = False,
    ) -> ElectLeadersResult:
        """Kafka's ElectLeaders for ``partitions`` (default: all): the preferred replica,
        or with ``unclean`` any live replica of an offline partition (losing what only
        the ISR had). Waits until every elected leader is in place."""
        if partitions is None:
            partitions = [(p.topic, p.index) for p in self.cluster.partitions()]
        request = ElectLeadersRequest(list(partitions), "unclean" if unclean else "preferred")
        return await self.cluster.elect_leaders(request)

    def __repr__(self) -> str:
        return f"<AsyncEmbeddedKafka {self.bootstrap_servers or 'not started'} {self.cluster!r}>"


@final
class EmbeddedKafka:
    """:class:`AsyncEmbeddedKafka` on an event loop of its own, in a background thread: a
    context manager for synchronous tests and clients. Takes the same arguments, plus
    ``loop_factory`` (default: a new asyncio loop). Every method runs on the cluster's loop
    and returns its result (waiting at most ``CALL_TIMEOUT_S``); :attr:`faults` may be used
    from any thread."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
        **options: Unpack[EmbeddedKafkaOptions],
    ) -> None:
        # checked here, so that a bad option raises before any thread starts
        _Setup.of(brokers, options)

        def build() -> AsyncEmbeddedKafka:
            return AsyncEmbeddedKafka(brokers, **options)

        self._build = build
        self._loop_factory = loop_factory
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._kafka: AsyncEmbeddedKafka | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the embedded cluster is started already")
        loop = self._loop_factory()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="embedded-kafka", daemon=True)
        self._thread.start()

        async def start() -> AsyncEmbeddedKafka:
            kafka = self._build()  # built on its loop: the cluster's parts bind to it
            await kafka.start()
            return kafka

        try:
            self._kafka = self._run(start())
        except BaseException:
            self._stop_loop()
            raise

    def close(self) -> None:
        """Close the cluster, stop its loop and thread. Idempotent."""
        if self._thread is None:
            return
        try:
            if self._kafka is not None:
                self._run(self._kafka.close())
            self._run(_finish_tasks())
        finally:
            self._kafka = None
            self._stop_loop()

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        assert loop is not None
        assert thread is not None
        loop.call_soon_threadsafe(loop.stop)
        thread.join(CALL_TIMEOUT_S)
        if not thread.is_alive():
            loop.close()
        self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        if loop is None or self._thread is None:
            coroutine.close()
            raise RuntimeError("the embedded cluster is not running")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(CALL_TIMEOUT_S)

    def _await(self, method: Callable[[AsyncEmbeddedKafka], Awaitable[T]]) -> T:
        """``await method(cluster)`` on the cluster's loop."""

        async def call() -> T:
            return await method(self._async)

        return self._run(call())

    def _get(self, method: Callable[[AsyncEmbeddedKafka], T]) -> T:
        """``method(cluster)`` on the cluster's loop."""

        async def call() -> T:
            return method(self._async)

        return self._run(call())

    @property
    def _async(self) -> AsyncEmbeddedKafka:
        if self._kafka is None:
            raise RuntimeError("the embedded cluster is not running")
        return self._kafka

    # -- the same surface, marshalled --------------------------------------------------------

    @property
    def cluster(self) -> Cluster:
        """The simulated cluster: read it, or call it, only on its loop (:attr:`loop`)."""
        return self._async.cluster

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The cluster's event loop (running in the background thread)."""
        if self._loop is None:
            raise RuntimeError("the embedded cluster is not running")
        return self._loop

    @property
    def bootstrap_servers(self) -> str:
        return self._async.bootstrap_servers

    @property
    def sasl_bootstrap_servers(self) -> str:
        return self._async.sasl_bootstrap_servers

    @property
    def ssl_bootstrap_servers(self) -> str:
        return self._async.ssl_bootstrap_servers

    @property
    def sasl_ssl_bootstrap_servers(self) -> str:
        return self._async.sasl_ssl_bootstrap_servers

    def client_ssl_context(self, certificate: bool = True) -> _ssl.SSLContext:
        return self._async.client_ssl_context(certificate)

    @property
    def ca_file(self) -> str:
        return self._async.ca_file

    @property
    def client_cert_file(self) -> str:
        return self._async.client_cert_file

    @property
    def client_key_file(self) -> str:
        return self._async.client_key_file

    @property
    def addresses(self) -> dict[int, tuple[str, int]]:
        return self._get(lambda k: k.addresses)

    @property
    def faults(self) -> Faults:
        return self._async.faults

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, Value] | None = None,
    ) -> None:
        self._await(lambda k: k.create_topic(name, partitions, replication_factor, configs))

    def compact(self, topic: str | None = None) -> int:
        return self._await(lambda k: k.compact(topic))

    def delete_topic(self, name: str) -> None:
        self._await(lambda k: k.delete_topic(name))

    def expire_share_locks(self) -> int:
        return self._get(lambda k: k.expire_share_locks())

    def subscribe_telemetry(
        self,
        name: str,
        metrics: Sequence[str] = ("*",),
        interval_ms: int = 100,
        match: Sequence[str] = (),
    ) -> None:
        self._get(lambda k: k.subscribe_telemetry(name, metrics, interval_ms, match))

    def unsubscribe_telemetry(self, name: str) -> None:
        self._get(lambda k: k.unsubscribe_telemetry(name))

    def telemetry(self) -> dict[uuid.UUID, ClientTelemetry]:
        return self._get(lambda k: k.telemetry())

    def topics(self) -> dict[str, int]:
        return self._get(lambda k: k.topics())

    def describe(self, topic: str, partition: int) -> PartitionMetadata:
        return self._get(lambda k: k.describe(topic, partition))

    def leader(self, topic: str, partition: int) -> int | None:
        return self._get(lambda k: k.leader(topic, partition))

    def records(self, topic: str, partition: int) -> list[Record]:
        return self._get(lambda k: k.records(topic, partition))

    def crash_broker(self, broker: int) -> None:
        self._await(lambda k: k.crash_broker(broker))

    def crash_broker_unfenced(self, broker: int) -> None:
        self._await(lambda k: k.crash_broker_unfenced(broker))

    def restart_broker(self, broker: int) -> None:
        self._await(lambda k: k.restart_broker(broker))

    def slow_follower(self, broker: int, latency: Latency | float | None) -> None:
        self._get(lambda k: k.slow_follower(broker, latency))

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        return self._await(lambda k: k.move_leader(topic, partition, to))

    def elect_leaders(
        self, partitions: Sequence[tuple[str, int]] | None = None, *, unclean: bool = False
    ) -> ElectLeadersResult:
        return self._await(lambda k: k.elect_leaders(partitions, unclean=unclean))

    def __repr__(self) -> str:
        state = "running" if self._kafka is not None else "stopped"
        return f"<EmbeddedKafka {state} {self._kafka.bootstrap_servers if self._kafka else ''}>"


_NumberOption = Literal[
    "log_retention_ms",
    "log_retention_bytes",
    "broker_session_timeout_ms",
    "producer_id_expiration_ms",
    "log_cleaner_backoff_ms",
]
#: the number broker configs the cluster keeps: config name -> :class:`Cluster` option
_CLUSTER_CONFIGS: Final[Mapping[str, _NumberOption]] = {
    "log.retention.ms": "log_retention_ms",
    "log.retention.bytes": "log_retention_bytes",
    "broker.session.timeout.ms": "broker_session_timeout_ms",
    "producer.id.expiration.ms": "producer_id_expiration_ms",
    "log.cleaner.backoff.ms": "log_cleaner_backoff_ms",
}
#: the one text broker config the cluster keeps (its ``replica_selector_class``)
_SELECTOR: Final = "replica.selector.class"


def _checked_configs(
    brokers: int,
    configs: Mapping[str, Value] | None,
    min_insync_replicas: int,
    cluster_options: ClusterOptions | None,
) -> BrokerConfigs:
    """``configs`` checked (:func:`broker_configs`), with ``min_insync_replicas`` as
    ``min.insync.replicas`` unless it sets that; ValueError for a bad config, one set twice
    (also as an argument or a cluster option, differently), or a replication factor the
    brokers cannot hold."""
    checked = broker_configs(configs)
    options = cluster_options or {}
    explicit = dict(checked.explicit)
    if "min_insync_replicas" in options:
        raise ValueError("min_insync_replicas is an argument, not a cluster option")
    if checked.is_set("min.insync.replicas"):
        if min_insync_replicas not in (1, explicit["min.insync.replicas"]):
            raise ValueError(
                f"min.insync.replicas={explicit['min.insync.replicas']} contradicts "
                f"min_insync_replicas={min_insync_replicas}"
            )
    elif min_insync_replicas != 1:
        explicit["min.insync.replicas"] = min_insync_replicas
    for name, option in [*_CLUSTER_CONFIGS.items(), (_SELECTOR, "replica_selector_class")]:
        if name in explicit and option in options:
            raise ValueError(f"{name} is set twice: in configs and as cluster option {option}")
    factor = explicit.get("default.replication.factor")
    if isinstance(factor, int) and isinstance(brokers, int) and factor > brokers:
        raise ValueError(f"default.replication.factor={factor} exceeds the {brokers} brokers")
    return BrokerConfigs(explicit)


def _check_racks(
    brokers: int, racks: Sequence[str | None] | None, cluster_options: ClusterOptions | None
) -> None:
    """ValueError/TypeError unless ``racks`` lists one rack (or None) per broker; a
    ValueError if the cluster options set them too."""
    if racks is None:
        return
    if "racks" in (cluster_options or {}):
        raise ValueError("racks is an argument, not a cluster option")
    if isinstance(brokers, int):
        check_racks(brokers, racks)


def _check_ports(
    users: Mapping[str, str] | None,
    sasl_port: int | None,
    ssl: bool,
    ssl_port: int | None,
    sasl_ssl_port: int | None,
) -> int | None:
    """The SSL listeners' first port (``ssl=True``: 0 unless ``ssl_port`` says);
    ValueError for a user without a name or password, or a port out of range."""
    for name, password in (users or {}).items():
        if not isinstance(name, str) or not isinstance(password, str) or not name or not password:
            raise ValueError(f"users: a user needs a name and a password, got {name!r}")
    if ssl and ssl_port is None:
        ssl_port = 0
    for flag, port in (
        ("sasl_port", sasl_port),
        ("ssl_port", ssl_port),
        ("sasl_ssl_port", sasl_ssl_port),
    ):
        if port is not None and not 0 <= port <= 65535:
            raise ValueError(f"{flag} must be in 0..65535, got {port}")
    return ssl_port


async def _finish_tasks() -> None:
    """Cancel what is still running on the loop (as :func:`asyncio.run` does before it
    closes one), so that no task is destroyed pending with the loop."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # A transport closed by a cancelled task closes its socket in a callback: run it.
    await asyncio.sleep(0)
    await asyncio.sleep(0)
