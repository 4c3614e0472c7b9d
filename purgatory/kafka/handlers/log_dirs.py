"""DescribeLogDirs (API key 35, versions 1-5) and AlterReplicaLogDirs (34, versions 1-2):
the log directories of the broker asked, as Kafka's replica manager answers them.

Each simulated broker has one log directory, :func:`log_dir` (``/var/lib/purgatory/
broker-<id>``: a name, nothing is written there), holding a log for every partition it
is a replica of. DescribeLogDirs reports each of those logs (all of them for a null topic
list, else those asked for that the broker hosts; an unknown partition is left out, as in
Kafka) with its real size, the bytes of the batches the replica stores, and Kafka's offset
lag: the replica's own high watermark minus its log end offset, never below 0 (so 0 for a
follower that has what its high watermark covers, as Kafka reports it). Nothing is ever a
future log. The directory's ``total_bytes`` and ``usable_bytes`` (v4+) are the server's
``--max-stored-bytes`` cap and what is left of it, shared by every broker of the
in-process cluster; -1 (unknown) without a cap.

AlterReplicaLogDirs checks the directory first, as Kafka does: one the broker does not
have is LOG_DIR_NOT_FOUND for every partition named with it; then each partition: the one
directory it is in already, NONE (nothing moves); a partition of a known topic that the
broker does not host, REPLICA_NOT_AVAILABLE; an unknown one, UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.units import ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        AlterReplicaLogDirsAlterReplicaLogDirPartitionResult,
        AlterReplicaLogDirsAlterReplicaLogDirTopicResult,
        AlterReplicaLogDirsRequest,
        AlterReplicaLogDirsResponse,
        DescribeLogDirsPartition,
        DescribeLogDirsRequest,
        DescribeLogDirsResponse,
        DescribeLogDirsResult,
        DescribeLogDirsTopic,
    )


def log_dir(broker_id: int) -> str:
    """The one log directory broker ``broker_id`` reports."""
    return f"/var/lib/purgatory/broker-{broker_id}"


@final
class LogDirHandlers:
    """DescribeLogDirs and AlterReplicaLogDirs of broker ``broker_id``."""

    def __init__(self, cluster: Cluster, broker_id: int) -> None:
        self.cluster = cluster
        self.broker_id = broker_id

    def apis(self) -> ApiTable:
        return {
            ApiKey.DESCRIBE_LOG_DIRS: Api(
                *versions(ApiKey.DESCRIBE_LOG_DIRS), self.describe_log_dirs
            ),
            ApiKey.ALTER_REPLICA_LOG_DIRS: Api(
                *versions(ApiKey.ALTER_REPLICA_LOG_DIRS), self.alter_replica_log_dirs
            ),
        }

    def describe_log_dirs(
        self, header: RequestHeader, request: DescribeLogDirsRequest
    ) -> DescribeLogDirsResponse:
        wanted: set[tuple[str, int]] | None = None
        if request.topics is not None:
            wanted = {(t.topic, i) for t in request.topics for i in t.partitions}
        broker = self.broker_id
        topics: list[DescribeLogDirsTopic] = []
        for name, parts in self.cluster.topics.items():
            partitions: list[DescribeLogDirsPartition] = []
            for p in parts:
                if broker not in p.logs or (wanted is not None and (name, p.index) not in wanted):
                    continue
                log = p.logs[broker]
                partitions.append(
                    {
                        "partition_index": p.index,
                        "partition_size": log.size_bytes,
                        "offset_lag": max(p.hws[broker] - log.leo, 0),
                        "is_future_key": False,
                    }
                )
            if partitions:
                topics.append({"name": name, "partitions": partitions})
        space = self.cluster.log_space
        total = -1 if space.limit is None else space.limit
        usable = -1 if space.limit is None else max(space.limit - space.used, 0)
        result: DescribeLogDirsResult = {
            "error_code": ErrorCode.NONE,
            "log_dir": log_dir(broker),
            "topics": topics,
            "total_bytes": total,
            "usable_bytes": usable,
        }
        return respond(request, error_code=ErrorCode.NONE, results=[result])

    def alter_replica_log_dirs(
        self, header: RequestHeader, request: AlterReplicaLogDirsRequest
    ) -> AlterReplicaLogDirsResponse:
        ours = log_dir(self.broker_id)
        by_topic: dict[str, list[AlterReplicaLogDirsAlterReplicaLogDirPartitionResult]] = {}
        for directory in request.dirs:
            for topic in directory.topics:
                for index in topic.partitions:
                    if directory.path != ours:
                        error = ErrorCode.LOG_DIR_NOT_FOUND
                    else:
                        p = self.cluster.partition(topic.name, index)
                        if p is None:
                            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        elif self.broker_id not in p.logs:
                            error = ErrorCode.REPLICA_NOT_AVAILABLE
                        else:
                            error = ErrorCode.NONE
                    by_topic.setdefault(topic.name, []).append(
                        {"partition_index": index, "error_code": error}
                    )
        results: list[AlterReplicaLogDirsAlterReplicaLogDirTopicResult] = [
            {"topic_name": name, "partitions": ps} for name, ps in by_topic.items()
        ]
        return respond(request, results=results)


UNIT: Final = ListenerUnit(lambda c: LogDirHandlers(c.shared.cluster, c.broker_id))
