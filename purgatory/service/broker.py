"""What the service needs from a broker, and the glue to the simulated cluster.

:class:`ServiceCluster` is the structural interface the HTTP layer is written against;
:class:`purgatory.sim.cluster.Cluster` satisfies it. The helpers here turn what the
cluster refuses (a :class:`~purgatory.sim.errors.SimulationError` carrying an ``ErrorCode``)
into HTTP answers through one table, and map the admin fault requests onto the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from purgatory import DelayedOperationPurgatory
from purgatory.service.config import StorageLimits
from purgatory.sim import messages
from purgatory.sim.errors import ErrorCode, SimulationError

if TYPE_CHECKING:
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
) -> Cluster:
    """A started simulated cluster (imported lazily: the sim is the default broker).
    ``replica_rtt_ms``: the replication network's median round trip (None: the cluster's
    default; 0: instant); ``storage``: its stored-bytes cap and default retention;
    ``min_insync_replicas``: Kafka's ``min.insync.replicas``;
    ``broker_session_timeout_ms``: Kafka's ``broker.session.timeout.ms``."""
    from purgatory.sim.cluster import DEFAULT_REPLICA_RTT, Cluster
    from purgatory.sim.faults import Latency

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
    )
    await cluster.start()
    return cluster


async def apply_fault(broker: ServiceCluster, request: Mapping[str, Any]) -> dict[str, Any]:
    """Carry out a validated fault request on a simulated cluster; returns what was done.

    ``slow_follower`` / ``crash_follower`` / ``restart_follower`` act on ``broker``, by
    default the first follower of ``topic``/``partition``; ``failover`` moves the
    partition's leadership (to ``broker`` if given). Raises :class:`BrokerError`.
    """
    from purgatory.sim.cluster import Cluster
    from purgatory.sim.faults import Latency

    if not isinstance(broker, Cluster):
        raise BrokerError(
            409, ErrorCode.INVALID_REQUEST, "fault injection needs a simulated cluster"
        )
    fault, topic, index = request["fault"], request["topic"], request["partition"]
    partition = broker.partition(topic, index)
    if partition is None:
        raise BrokerError(
            404, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{index}"
        )
    try:
        if fault == "failover":
            leader = await broker.fail_over(topic, index, request.get("broker"))
            return {"topic": topic, "partition": index, "leader": leader}
        target = request.get("broker")
        if target is None:
            followers = [b for b in partition.replicas if b != partition.leader]
            if not followers:
                raise BrokerError(
                    409, ErrorCode.INVALID_REQUEST, f"{partition.key} has no follower"
                )
            target = followers[0]
        if target not in broker.brokers:
            raise BrokerError(404, ErrorCode.BROKER_NOT_AVAILABLE, f"no broker {target}")
        if fault == "slow_follower":
            latency_ms = request.get("latency_ms", 100)
            broker.set_replication_latency(target, Latency(latency_ms) if latency_ms else None)
            return {"broker": target, "latency_ms": latency_ms}
        if fault == "crash_follower":
            await broker.crash_broker(target)
        else:
            await broker.restart_broker(target)
        return {"broker": target}
    except SimulationError as exc:
        raise refused(exc) from exc
