"""Whether a broker leads a partition: the first question of every request about one."""

from __future__ import annotations

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster
from purgatory.sim.messages import PartitionMetadata


def leads(
    cluster: Cluster, broker_id: int, topic: str, index: int
) -> tuple[ErrorCode, PartitionMetadata | None]:
    """NONE if broker ``broker_id`` leads the partition (and is alive), else why not
    (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER); and the partition, if any."""
    p = cluster.describe_partition(topic, index)
    if p is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    if p.leader != broker_id or not cluster.is_alive(broker_id):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, p
    return ErrorCode.NONE, p
