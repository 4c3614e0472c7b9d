"""``__consumer_offsets``, the internal topic whose partition leaders are the group
coordinators, as Kafka places groups on it: a group belongs to partition
``abs(groupId.hashCode()) % offsets.topic.num.partitions`` (Java's String hash), and the
leader of that partition coordinates it. Kafka creates the topic on the first
FindCoordinator for a group; so does :meth:`OffsetsTopic.ensure`.

The simulation keeps committed offsets in memory (:mod:`.offsets`), not in this topic's
log: the topic exists for what clients see (Metadata lists it, ``is_internal``) and to
decide which broker coordinates a group, which moves when that partition's leader does.
"""

from __future__ import annotations

from typing import Final, final

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster
from purgatory.sim.errors import SimulationError

#: Kafka's name for it (``Topic.GROUP_METADATA_TOPIC_NAME``)
GROUP_METADATA_TOPIC: Final = "__consumer_offsets"
#: Kafka's ``offsets.topic.replication.factor`` default
KAFKA_REPLICATION_FACTOR: Final = 3


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code
    units, in 32-bit two's complement."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group: str, partitions: int) -> int:
    """The partition of ``__consumer_offsets`` a group lives in: Kafka's
    ``Utils.abs(groupId.hashCode()) % partitions`` (whose abs maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def default_replication_factor(cluster: Cluster) -> int:
    """``offsets.topic.replication.factor`` unless set: Kafka's 3, at most the cluster's
    brokers (a one-broker cluster gets 1, as Kafka's test images set it)."""
    return min(KAFKA_REPLICATION_FACTOR, len(cluster.brokers))


@final
class OffsetsTopic:
    """The cluster's ``__consumer_offsets``, with ``partitions`` partitions
    (``offsets.topic.num.partitions``) and ``replication_factor`` replicas
    (``offsets.topic.replication.factor``; None: Kafka's 3, at most the cluster's
    brokers, as a test Kafka is configured for its size)."""

    def __init__(self, cluster: Cluster, partitions: int, replication_factor: int | None) -> None:
        self.cluster = cluster
        self.partitions = partitions
        self.replication_factor = (
            default_replication_factor(cluster)
            if replication_factor is None
            else replication_factor
        )

    def partition_for(self, group: str) -> int:
        return partition_for(group, self.partitions)

    async def ensure(self) -> ErrorCode:
        """Create the topic unless it exists (Kafka does on the first FindCoordinator for
        a group). NONE once it exists; COORDINATOR_NOT_AVAILABLE while it cannot be
        created, as Kafka answers FindCoordinator then: fewer live brokers than
        ``offsets.topic.replication.factor``."""
        if GROUP_METADATA_TOPIC in self.cluster.topics:
            return ErrorCode.NONE
        try:
            await self.cluster.create_topic(
                GROUP_METADATA_TOPIC, self.partitions, self.replication_factor, internal=True
            )
        except SimulationError as refused:
            if refused.code is ErrorCode.INVALID_REPLICATION_FACTOR:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            raise
        return ErrorCode.NONE

    def coordinator(self, group: str) -> int | None:
        """The broker that coordinates ``group``: its partition's leader, if the topic
        exists and the leader is alive; else None (COORDINATOR_NOT_AVAILABLE)."""
        partition = self.cluster.partition(GROUP_METADATA_TOPIC, self.partition_for(group))
        leader = None if partition is None else partition.leader
        return leader if leader is not None and self.cluster.is_alive(leader) else None
