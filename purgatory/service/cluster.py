"""What the service needs from the cluster, and the glue to the simulated one.

:class:`ServiceCluster` is the structural interface the HTTP layer is written against;
:class:`purgatory.sim.cluster.Cluster` satisfies it. The helpers here turn what the
cluster refuses (a :class:`~purgatory.sim.errors.SimulationError` carrying an ``ErrorCode``)
into HTTP answers through one table, and map the admin fault requests onto the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Required, TypedDict

from purgatory import DelayedOperationPurgatory
from purgatory.errors import ErrorCode
from purgatory.json_types import JsonObject
from purgatory.service.config import StorageLimits
from purgatory.sim import messages
from purgatory.sim.errors import SimulationError

if TYPE_CHECKING:
    from purgatory.kafka.faults import Faults
    from purgatory.sim.cluster import Cluster


class ServiceCluster(Protocol):
    """The whole cluster as the service sees it (see :class:`purgatory.sim.cluster.Cluster`)."""

    def all_purgatories(self) -> list[DelayedOperationPurgatory[Any]]: ...

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        *,
        retention_bytes: int | None = None,
        retention_ms: int | None = None,
    ) -> None: ...

    async def produce(self, request: messages.ProduceRequest) -> messages.ProduceResult: ...

    async def fetch(self, request: messages.FetchRequest) -> messages.FetchResult: ...

    async def elect_leaders(
        self, request: messages.ElectLeadersRequest
    ) -> messages.ElectLeadersResult: ...

    def metadata(self) -> object: ...

    async def close(self) -> None: ...


class KafkaListeners(Protocol):
    """The Kafka front door as the fault routes see it (see
    :class:`purgatory.kafka.front_door.KafkaFrontDoor`): its fault rules, and each
    broker's listener, which a crash closes and a restart opens again."""

    @property
    def faults(self) -> Faults: ...

    async def stop_listener(self, broker_id: int) -> None: ...

    async def start_listener(self, broker_id: int, port: int | None = None) -> None: ...

    def listening(self, broker_id: int) -> bool: ...


class BrokerError(Exception):
    """A request the broker refused outright, with its HTTP status and error code."""

    def __init__(self, status: int, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


# The one table from what the cluster refuses to an HTTP status (anything else: 400).
HTTP_STATUS: Mapping[ErrorCode, int] = {
    ErrorCode.TOPIC_ALREADY_EXISTS: 409,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 404,
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: 409,
    ErrorCode.BROKER_NOT_AVAILABLE: 503,
    ErrorCode.KAFKA_STORAGE_ERROR: 507,  # Insufficient Storage: the stored-bytes cap
}


def refused(exc: SimulationError) -> BrokerError:
    """The HTTP form of a request the cluster refused."""
    return BrokerError(HTTP_STATUS.get(exc.code, 400), exc.code, exc.message)


def error_name(error: ErrorCode | None) -> str | None:
    """JSON form of an error code: None for success, else Kafka's name."""
    return None if error is None or error is ErrorCode.NONE else error.value


def broker_count(broker: ServiceCluster) -> int:
    """How many brokers (bounds the replication factor); unbounded if unknown."""
    brokers = getattr(broker, "brokers", None)
    return len(brokers) if brokers else 2**31 - 1


def topic_count(broker: ServiceCluster) -> int:
    topics = getattr(broker, "topics", None)
    return len(topics) if topics is not None else 0


async def new_cluster(
    brokers: int,
    replica_rtt_ms: float | None = None,
    storage: StorageLimits | None = None,
    *,
    min_insync_replicas: int = 1,
    broker_session_timeout_ms: int = 9_000,
    producer_id_expiration_ms: int = 86_400_000,
    log_cleaner_backoff_ms: int = 15_000,
    racks: Sequence[str | None] | None = None,
    replica_selector_class: str | None = None,
) -> Cluster:
    """A started simulated cluster (imported lazily: the sim is the default broker).
    ``replica_rtt_ms``: the replication network's median round trip (None: the cluster's
    default; 0: instant); ``storage``: its stored-bytes cap and default retention;
    ``min_insync_replicas``: Kafka's ``min.insync.replicas``;
    ``broker_session_timeout_ms``: Kafka's ``broker.session.timeout.ms``;
    ``producer_id_expiration_ms``: Kafka's ``producer.id.expiration.ms``;
    ``log_cleaner_backoff_ms``: Kafka's ``log.cleaner.backoff.ms``; ``racks``: each
    broker's ``broker.rack``; ``replica_selector_class``: Kafka's
    ``replica.selector.class``."""
    from purgatory.sim.cluster import DEFAULT_REPLICA_RTT, Cluster
    from purgatory.sim.latency import Latency

    rtt: Latency | None = DEFAULT_REPLICA_RTT
    if replica_rtt_ms is not None:
        rtt = Latency(replica_rtt_ms, DEFAULT_REPLICA_RTT.sigma) if replica_rtt_ms else None
    storage = StorageLimits() if storage is None else storage
    cluster = Cluster(
        brokers=brokers,
        replica_rtt=rtt,
        log_retention_bytes=storage.retention_bytes,
        log_retention_ms=storage.retention_ms,
        max_stored_bytes=storage.max_stored_bytes,
        min_insync_replicas=min_insync_replicas,
        broker_session_timeout_ms=broker_session_timeout_ms,
        producer_id_expiration_ms=producer_id_expiration_ms,
        log_cleaner_backoff_ms=log_cleaner_backoff_ms,
        racks=racks,
        replica_selector_class=replica_selector_class,
    )
    await cluster.start()
    return cluster


class FaultRequest(TypedDict, total=False):
    """A fault request's fields, validated: a ``FaultRequest`` body's (a partition's
    fault) or a ``BrokerFaultRequest``'s (a broker's, without topic and partition)."""

    fault: Required[str]
    topic: str
    partition: int
    broker: int | None
    latency_ms: int


async def apply_fault(
    broker: ServiceCluster,
    request: FaultRequest,
    listeners: KafkaListeners | None = None,
) -> JsonObject:
    """Carry out a validated fault request on a simulated cluster; returns what was done.

    ``crash_broker`` / ``crash_broker_unfenced`` / ``restart_broker`` act on ``broker``,
    any broker (a leader, a group or transaction coordinator: ``/v1/admin/broker-faults``);
    ``slow_follower`` / ``crash_follower`` / ``restart_follower`` act on ``broker``, by
    default the first
    follower of ``topic``/``partition``; ``failover`` moves the partition's leadership (to
    ``broker`` if given). A crash closes the broker's Kafka listener and its connections,
    if ``listeners`` are given, as :meth:`EmbeddedKafka.crash_broker` does; a restart
    opens it again on its port. Raises :class:`BrokerError`.
    """
    from purgatory.sim.cluster import Cluster
    from purgatory.sim.latency import Latency

    if not isinstance(broker, Cluster):
        raise BrokerError(
            409, ErrorCode.INVALID_REQUEST, "fault injection needs a simulated cluster"
        )
    fault, topic, index = request["fault"], request.get("topic"), request.get("partition")
    target = request.get("broker")
    try:
        if fault in ("crash_broker", "crash_broker_unfenced", "restart_broker"):
            if target is None:
                raise BrokerError(400, ErrorCode.INVALID_REQUEST, f"{fault} needs a broker")
            _check_broker(broker, target)
            await _crash_or_restart(broker, fault, target, listeners)
            return {"broker": target}
        if topic is None or index is None:
            raise BrokerError(
                400, ErrorCode.INVALID_REQUEST, f"{fault} needs a topic and a partition"
            )
        partition = broker.partition(topic, index)
        if partition is None:
            raise BrokerError(
                404, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{index}"
            )
        if fault == "failover":
            leader = await broker.fail_over(topic, index, target)
            return {"topic": topic, "partition": index, "leader": leader}
        if target is None:
            followers = [b for b in partition.replicas if b != partition.leader]
            if not followers:
                raise BrokerError(
                    409, ErrorCode.INVALID_REQUEST, f"{partition.key} has no follower"
                )
            target = followers[0]
        _check_broker(broker, target)
        if fault == "slow_follower":
            latency_ms = request.get("latency_ms", 100)
            broker.set_replication_latency(target, Latency(latency_ms) if latency_ms else None)
            return {"broker": target, "latency_ms": latency_ms}
        named = "crash_broker" if fault == "crash_follower" else "restart_broker"
        await _crash_or_restart(broker, named, target, listeners)
        return {"broker": target}
    except SimulationError as exc:
        raise refused(exc) from exc


def _check_broker(cluster: Cluster, broker: int) -> None:
    if broker not in cluster.brokers:
        raise BrokerError(404, ErrorCode.BROKER_NOT_AVAILABLE, f"no broker {broker}")


async def _crash_or_restart(
    cluster: Cluster, fault: str, broker: int, listeners: KafkaListeners | None
) -> None:
    if fault == "restart_broker":
        await cluster.restart_broker(broker)
        if listeners is not None and not listeners.listening(broker):
            await listeners.start_listener(broker)
        return
    if fault == "crash_broker":
        await cluster.crash_broker(broker)
    else:
        await cluster.crash_broker_unfenced(broker)
    if listeners is not None:
        await listeners.stop_listener(broker)
