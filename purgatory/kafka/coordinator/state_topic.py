"""A coordinator's state topic (``__transaction_state``, ``__share_group_state``), made on
first use as Kafka's coordinators make theirs."""

from __future__ import annotations

import logging

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster
from purgatory.sim.errors import SimulationError

logger = logging.getLogger("purgatory.kafka.coordinator")


async def create_state_topic(
    cluster: Cluster, name: str, partitions: int, replication_factor: int
) -> ErrorCode:
    """Create topic ``name`` unless it exists: ``partitions`` partitions, replication factor
    min(``replication_factor``, brokers), internal, its records kept forever. NONE once it
    exists; COORDINATOR_NOT_AVAILABLE (logged) when the cluster cannot make it now."""
    if name in cluster.topics:
        return ErrorCode.NONE
    try:
        await cluster.create_topic(
            name,
            partitions,
            min(replication_factor, len(cluster.brokers)),
            retention_bytes=-1,
            retention_ms=-1,
            internal=True,
        )
    except SimulationError as exc:
        if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
            logger.warning("cannot create %s: %s", name, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE
