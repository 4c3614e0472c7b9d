"""One Kafka listener per simulated broker: broker ``i`` on ``host:base_port + i``."""

from __future__ import annotations

import zlib
from typing import final

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.kafka import coordination, elections, membership
from purgatory.kafka.apis import VERSIONS, BrokerApis
from purgatory.kafka.codec import Reader
from purgatory.kafka.coordination import GroupOffsets
from purgatory.kafka.group_coordinator import GroupCoordinator
from purgatory.kafka.membership import MembershipApis
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import KafkaProtocolServer, ListenerLimits, ProtocolStats
from purgatory.sim import Cluster


@final
class KafkaFrontDoor:
    """Serves the Kafka protocol for every broker of ``cluster``; ``base_port`` 0 lets each
    listener pick a free port (tests), and Metadata advertises the ports actually bound.
    ``limits`` bound the connections of all the listeners together."""

    def __init__(
        self,
        cluster: Cluster,
        host: str,
        base_port: int,
        limits: ListenerLimits | None = None,
    ) -> None:
        self.cluster = cluster
        self.host = host
        self.base_port = base_port
        self.limits = ListenerLimits() if limits is None else limits
        self.stats = ProtocolStats()
        self.addresses: dict[int, tuple[str, int]] = {}
        # One coordinator serves every broker; its purgatories carry the label the
        # brokers' do, so that they share the metric families.
        self.members = GroupCoordinator(labels={"broker": "all"})
        self.groups = GroupOffsets(self.members)
        self._membership = MembershipApis(self.members)
        self._elections = elections.ElectionApis(cluster)
        self._servers: list[KafkaProtocolServer] = []

    @property
    def purgatories(self) -> dict[str, DelayedOperationPurgatory[DelayedOperation]]:
        """The group coordinator's (Rebalance, Heartbeat); the cluster has its own."""
        return self.members.purgatories

    async def start(self) -> None:
        for broker_id in sorted(self.cluster.brokers):
            apis = BrokerApis(self.cluster, broker_id, self.addresses, self.stats)
            server = KafkaProtocolServer(self.stats, self.limits)
            server.register(ApiKey.METADATA, VERSIONS[ApiKey.METADATA], apis.metadata)
            server.register(ApiKey.PRODUCE, VERSIONS[ApiKey.PRODUCE], apis.produce)
            server.register(ApiKey.FETCH, VERSIONS[ApiKey.FETCH], apis.fetch)
            server.register(ApiKey.LIST_OFFSETS, VERSIONS[ApiKey.LIST_OFFSETS], apis.list_offsets)
            server.register(
                ApiKey.ELECT_LEADERS,
                elections.VERSIONS[ApiKey.ELECT_LEADERS],
                self._elections.elect_leaders,
            )
            self._register_coordination(server)
            port = self.base_port + broker_id if self.base_port else 0
            bound = await server.start(self.host, port)
            self.addresses[broker_id] = (self.host, bound)
            self._servers.append(server)

    def _register_coordination(self, server: KafkaProtocolServer) -> None:
        groups = self.groups
        versions = coordination.VERSIONS

        def find_coordinator(header: RequestHeader, body: Reader) -> bytearray:
            return groups.find_coordinator(header, body, self._coordinator_for)

        server.register(
            ApiKey.FIND_COORDINATOR, versions[ApiKey.FIND_COORDINATOR], find_coordinator
        )
        server.register(ApiKey.OFFSET_COMMIT, versions[ApiKey.OFFSET_COMMIT], groups.offset_commit)
        server.register(ApiKey.OFFSET_FETCH, versions[ApiKey.OFFSET_FETCH], groups.offset_fetch)
        server.register(
            ApiKey.INIT_PRODUCER_ID, versions[ApiKey.INIT_PRODUCER_ID], groups.init_producer_id
        )
        apis = self._membership
        for key, handler in (
            (ApiKey.JOIN_GROUP, apis.join_group),
            (ApiKey.SYNC_GROUP, apis.sync_group),
            (ApiKey.HEARTBEAT, apis.heartbeat),
            (ApiKey.LEAVE_GROUP, apis.leave_group),
        ):
            server.register(key, membership.VERSIONS[key], handler)

    def _coordinator_for(self, key: str) -> tuple[int, str, int]:
        """A group's coordinator: a live broker picked by a hash of the group id, as Kafka
        picks the partition of __consumer_offsets whose leader coordinates it. Any broker
        answers group requests (one coordinator holds every group), but the answer must
        not depend on the broker asked, or a client that asks several keeps moving."""
        live = [b for b in sorted(self.addresses) if self.cluster.is_alive(b)]
        broker = live[zlib.crc32(key.encode()) % len(live)] if live else min(self.addresses)
        host, port = self.addresses[broker]
        return broker, host, port

    async def close(self) -> None:
        await self.members.close()  # answers parked JoinGroup/SyncGroup requests first
        for server in self._servers:
            await server.close()
        self._servers.clear()

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` for a client's bootstrap.servers."""
        return ",".join(f"{host}:{port}" for host, port in self.addresses.values())
