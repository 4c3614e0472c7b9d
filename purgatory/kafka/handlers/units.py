"""What a handler class is built from, and how it declares its place: each handler
module's ``UNIT`` says how to build its class from one context object, so that adding an
API means writing its module (and its rule and docs row, which tests and the front door's
start check), not editing the front door.

A :class:`SharedUnit` is built once per front door from the :class:`Shared` state (its
handlers keep state every broker must see alike, or need no broker); a
:class:`ListenerUnit` once per listener, from a :class:`Listener` context (its broker, the
addresses of its protocol's listeners). :mod:`purgatory.kafka.handlers.registry` lists
them all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol

from purgatory.errors import ErrorCode
from purgatory.kafka.acls import Acls
from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.client_metrics import ClientMetrics
from purgatory.kafka.cluster_configs import ClusterConfigs, TopicDefaults
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.offsets_topic import OffsetsTopic
from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.coordinator.share_partitions import SharePartitions
from purgatory.kafka.coordinator.transactions import TransactionCoordinators
from purgatory.kafka.features import Features
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.sasl import Credentials
from purgatory.kafka.server import ApiTable
from purgatory.sim import Cluster

#: broker id -> (host, port) of one security protocol's listeners
Addresses = dict[int, tuple[str, int]]
#: the client quota store AlterClientQuotas keeps: entity (its (type, name) pairs) ->
#: quota key -> value
QuotaStore = Mapping[frozenset[tuple[str, str | None]], dict[str, float]]
#: ``locate(key)``: the (broker id, host, port) of the broker that coordinates group
#: ``key``, None while no broker can (COORDINATOR_NOT_AVAILABLE)
Locate = Callable[[str], Awaitable[tuple[int, str, int] | None]]
#: creates the unknown topics a Metadata request names (``auto.create.topics.enable``),
#: saying why any could not be
AutoCreate = Callable[[list[str]], Awaitable[Mapping[str, ErrorCode]]]


if TYPE_CHECKING:  # annotations only: a Protocol costs start-up to define

    class Handlers(Protocol):
        """A handler class: the APIs it answers, with their versions and handlers."""

        def apis(self) -> ApiTable: ...


# NamedTuples, not dataclasses: as cheap to make, and a dataclass costs a millisecond of
# start-up to define.
class Shared(NamedTuple):
    """What every listener's handlers share, made once by the front door: the cluster,
    its configs, the coordinators and their stores, and the front door's own services."""

    cluster: Cluster
    #: the broker configs the front door was started with
    broker_configs: BrokerConfigs
    #: every config of the cluster: the brokers', AlterConfigs', the topics'
    configs: ClusterConfigs
    topic_defaults: TopicDefaults
    coordinator: GroupCoordinator
    offsets: OffsetStore
    offsets_topic: OffsetsTopic
    producer_ids: ProducerIds
    transactions: TransactionCoordinators
    shares: SharePartitions
    client_metrics: ClientMetrics
    stats: ProtocolStats
    credentials: Credentials
    acls: Acls
    #: the cluster's finalized feature levels (ApiVersions, UpdateFeatures)
    features: Features
    #: whether an authorizer enforces :attr:`acls`
    authorizing: bool
    #: the front door's first listeners' addresses (filled as they bind)
    addresses: Addresses
    auto_create: AutoCreate
    #: AlterClientQuotas changed the store: the front door puts it in force
    quotas_changed: Callable[[QuotaStore], None]


class Listener(NamedTuple):
    """One listener's context: the shared state, its broker, the addresses of its own
    protocol's listeners (what its clients are told) and how it finds a coordinator
    among them."""

    shared: Shared
    broker_id: int
    addresses: Addresses
    locate: Locate


class SharedUnit(NamedTuple):
    """A handler class built once per front door, from the shared state."""

    build: Callable[[Shared], Handlers]


class ListenerUnit(NamedTuple):
    """A handler class built for each listener; with ``when``, its APIs are served only
    while the condition it gives (from the shared state) holds."""

    build: Callable[[Listener], Handlers]
    when: Callable[[Shared], Callable[[], bool]] | None = None


Unit = SharedUnit | ListenerUnit
