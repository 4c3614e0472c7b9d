"""One Kafka listener per simulated broker: broker ``i`` on ``host:base_port + i``.

The front door owns what the brokers share (the group coordinator, the offset store, the
producer ids, the counters) and gives every listener the same handler tables: its
broker's :class:`PartitionHandlers`, then the handlers over the shared state.
"""

from __future__ import annotations

from typing import final

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.coordinator.consumer_groups import ConsumerGroupCoordinator
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.offsets_topic import OffsetsTopic
from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.faults import Faults
from purgatory.kafka.handlers.configs import ConfigHandlers
from purgatory.kafka.handlers.consumer_groups import ConsumerGroupHandlers, topics_of
from purgatory.kafka.handlers.coordinators import CoordinatorHandlers
from purgatory.kafka.handlers.create_partitions import CreatePartitionsHandlers
from purgatory.kafka.handlers.delete_groups import DeleteGroupsHandlers
from purgatory.kafka.handlers.delete_records import DeleteRecordsHandlers
from purgatory.kafka.handlers.describe_cluster import DescribeClusterHandlers
from purgatory.kafka.handlers.elections import ElectionHandlers
from purgatory.kafka.handlers.groups import GroupHandlers
from purgatory.kafka.handlers.log_offsets import LogOffsetHandlers
from purgatory.kafka.handlers.membership import MembershipHandlers
from purgatory.kafka.handlers.offsets import OffsetHandlers
from purgatory.kafka.handlers.partitions import PartitionHandlers
from purgatory.kafka.handlers.topics import TopicDefaults, TopicHandlers
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.server import ApiTable, KafkaProtocolServer, ListenerLimits, ProtocolStats
from purgatory.sim import Cluster
from purgatory.sim.errors import ErrorCode


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
    holds the per-request fault rules of every listener."""

    def __init__(
        self,
        cluster: Cluster,
        host: str,
        base_port: int,
        limits: ListenerLimits | None = None,
        *,
        configs: BrokerConfigs | None = None,
    ) -> None:
        self.cluster = cluster
        self.host = host
        self.base_port = base_port
        self.limits = ListenerLimits() if limits is None else limits
        self.stats = ProtocolStats()
        self.addresses: dict[int, tuple[str, int]] = {}
        # One coordinator serves every broker; its purgatories carry the label the
        # brokers' do, so that they share the metric families.
        self.configs = BrokerConfigs() if configs is None else configs
        self.coordinator = GroupCoordinator(
            self.configs.number("group.min.session.timeout.ms"),
            self.configs.number("group.max.session.timeout.ms"),
            labels={"broker": "all"},
            initial_rebalance_delay_ms=self.configs.number("group.initial.rebalance.delay.ms"),
        )
        self.consumer_groups = ConsumerGroupCoordinator(
            topics_of(cluster),
            heartbeat_interval_ms=self.configs.number("group.consumer.heartbeat.interval.ms"),
            session_timeout_ms=self.configs.number("group.consumer.session.timeout.ms"),
        )
        self.coordinator.consumer_groups = self.consumer_groups
        self.consumer_groups.classic = self.coordinator
        self.offsets = OffsetStore()
        #: __consumer_offsets: its partitions' leaders coordinate the groups
        self.offsets_topic = OffsetsTopic(
            cluster,
            self.configs.number("offsets.topic.num.partitions"),
            self.configs.value("offsets.topic.replication.factor"),
        )
        self._topics = TopicHandlers(cluster, TopicDefaults.of(self.configs))
        self._shared: list[ApiTable] = [
            self._topics.apis(),
            MembershipHandlers(self.coordinator).apis(),
            OffsetHandlers(self.offsets, self.coordinator, cluster, self.consumer_groups).apis(),
            ConsumerGroupHandlers(self.consumer_groups, cluster).apis(),
            CoordinatorHandlers(self._coordinator_for, ProducerIds()).apis(),
            ElectionHandlers(cluster).apis(),
            DescribeClusterHandlers(cluster, self.addresses).apis(),
            DeleteGroupsHandlers(self.coordinator, self.offsets).apis(),
            CreatePartitionsHandlers(cluster, self._topics.defaults.max_partitions).apis(),
        ]
        self._servers: dict[int, KafkaProtocolServer] = {}
        #: per-request fault rules, for every listener (none by default)
        self.faults = Faults(self._faults_active, cluster.topic_name)

    @property
    def purgatories(self) -> dict[str, DelayedOperationPurgatory[DelayedOperation]]:
        """The group coordinator's (Rebalance, Heartbeat); the cluster has its own."""
        return self.coordinator.purgatories

    async def start(self) -> None:
        for broker_id in sorted(self.cluster.brokers):
            port = self.base_port + broker_id if self.base_port else 0
            await self.start_listener(broker_id, port)

    async def start_listener(self, broker_id: int, port: int | None = None) -> None:
        """Listen for broker ``broker_id`` again (after :meth:`stop_listener`), on
        ``port`` (default: the port it had, so clients find it where Metadata said)."""
        if broker_id in self._servers:
            raise RuntimeError(f"broker {broker_id} is listening already")
        if port is None:
            port = self.addresses[broker_id][1]
        server = KafkaProtocolServer(self.stats, self.limits, broker_id)
        partitions = PartitionHandlers(
            self.cluster,
            broker_id,
            self.addresses,
            self.stats,
            self._topics.auto_create,
            self.configs.number("message.max.bytes"),
        )
        deletes = DeleteRecordsHandlers(self.cluster, broker_id)
        log_offsets = LogOffsetHandlers(self.cluster, broker_id)
        groups = GroupHandlers(self.coordinator, self.offsets, broker_id, self.offsets_topic)
        configs = ConfigHandlers(self.cluster, broker_id, self.configs)
        for apis in [
            partitions.apis(),
            log_offsets.apis(),
            deletes.apis(),
            groups.apis(),
            configs.apis(),
            *self._shared,
        ]:
            server.register_all(apis)
        server.interceptor = self.faults if self.faults.rules else None
        bound = await server.start(self.host, port)
        self.addresses[broker_id] = (self.host, bound)
        self._servers[broker_id] = server

    async def stop_listener(self, broker_id: int) -> None:
        """Close broker ``broker_id``'s listener and every connection to it: a client's
        next connect is refused at once, as from a crashed broker. Metadata still names
        it (with its port), as Kafka's does until the broker's session expires."""
        server = self._servers.pop(broker_id, None)
        if server is not None:
            await server.close()

    def advertised(self) -> dict[ApiKey, tuple[int, int]]:
        """The APIs and versions every listener answers (what ApiVersions says)."""
        server = next(iter(self._servers.values()), None)
        return {} if server is None else server.supported()

    def listening(self, broker_id: int) -> bool:
        return broker_id in self._servers

    def _faults_active(self, active: bool) -> None:
        for server in list(self._servers.values()):  # maybe called from another thread
            server.interceptor = self.faults if active else None

    async def _coordinator_for(self, key: str) -> tuple[int, str, int] | None:
        """A group's coordinator, as Kafka's: the leader of the group's partition of
        __consumer_offsets (created now if need be); None while there is none. Any broker
        answers group requests (one coordinator holds every group), but the answer must
        not depend on the broker asked, or a client that asks several keeps moving."""
        if await self.offsets_topic.ensure() is not ErrorCode.NONE:
            return None
        broker = self.offsets_topic.coordinator(key)
        if broker is None or broker not in self.addresses:
            return None
        host, port = self.addresses[broker]
        return broker, host, port

    async def close(self) -> None:
        await self.coordinator.close()  # answers parked JoinGroup/SyncGroup requests first
        self.consumer_groups.close()
        for server in self._servers.values():
            await server.close()
        self._servers.clear()

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` for a client's bootstrap.servers."""
        return ",".join(f"{host}:{port}" for host, port in self.addresses.values())
