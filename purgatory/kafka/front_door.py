"""One Kafka listener per simulated broker: broker ``i`` on ``host:base_port + i``."""

from __future__ import annotations

from typing import final

from purgatory.kafka import coordination
from purgatory.kafka.apis import VERSIONS, BrokerApis
from purgatory.kafka.codec import Reader
from purgatory.kafka.coordination import GroupOffsets
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import KafkaProtocolServer, ProtocolStats
from purgatory.sim import Cluster


@final
class KafkaFrontDoor:
    """Serves the Kafka protocol for every broker of ``cluster``; ``base_port`` 0 lets each
    listener pick a free port (tests), and Metadata advertises the ports actually bound."""

    def __init__(self, cluster: Cluster, host: str, base_port: int) -> None:
        self.cluster = cluster
        self.host = host
        self.base_port = base_port
        self.stats = ProtocolStats()
        self.addresses: dict[int, tuple[str, int]] = {}
        self.groups = GroupOffsets()
        self._servers: list[KafkaProtocolServer] = []

    async def start(self) -> None:
        for broker_id in sorted(self.cluster.brokers):
            apis = BrokerApis(self.cluster, broker_id, self.addresses, self.stats)
            server = KafkaProtocolServer(self.stats)
            server.register(ApiKey.METADATA, VERSIONS[ApiKey.METADATA], apis.metadata)
            server.register(ApiKey.PRODUCE, VERSIONS[ApiKey.PRODUCE], apis.produce)
            server.register(ApiKey.FETCH, VERSIONS[ApiKey.FETCH], apis.fetch)
            server.register(ApiKey.LIST_OFFSETS, VERSIONS[ApiKey.LIST_OFFSETS], apis.list_offsets)
            self._register_coordination(server, broker_id)
            port = self.base_port + broker_id if self.base_port else 0
            bound = await server.start(self.host, port)
            self.addresses[broker_id] = (self.host, bound)
            self._servers.append(server)

    def _register_coordination(self, server: KafkaProtocolServer, broker_id: int) -> None:
        groups = self.groups
        versions = coordination.VERSIONS

        def find_coordinator(header: RequestHeader, body: Reader) -> bytearray:
            host, port = self.addresses[broker_id]
            return groups.find_coordinator(header, body, (broker_id, host, port))

        server.register(
            ApiKey.FIND_COORDINATOR, versions[ApiKey.FIND_COORDINATOR], find_coordinator
        )
        server.register(ApiKey.OFFSET_COMMIT, versions[ApiKey.OFFSET_COMMIT], groups.offset_commit)
        server.register(ApiKey.OFFSET_FETCH, versions[ApiKey.OFFSET_FETCH], groups.offset_fetch)
        server.register(
            ApiKey.INIT_PRODUCER_ID, versions[ApiKey.INIT_PRODUCER_ID], groups.init_producer_id
        )

    async def close(self) -> None:
        for server in self._servers:
            await server.close()
        self._servers.clear()

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` for a client's bootstrap.servers."""
        return ",".join(f"{host}:{port}" for host, port in self.addresses.values())
