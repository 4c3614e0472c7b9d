"""DescribeLogDirs and AlterReplicaLogDirs over the Kafka protocol: kafka-python's admin
client describes every broker's one log directory with the real sizes of the replicas it
holds, and moves a replica to the directory it is in (a no-op) but not to one the broker
does not have; every version through the handler, the highest over a socket with kio."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartitionReplica
from kafka.errors import KafkaStorageError, LogDirNotFoundError, NoError
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.errors import ErrorCode
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.log_dirs import LogDirHandlers, log_dir
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, error_response, request_type, versions
from purgatory.sim import ProduceRequest

LOW, HIGH = versions(ApiKey.DESCRIBE_LOG_DIRS)
ALTER_LOW, ALTER_HIGH = versions(ApiKey.ALTER_REPLICA_LOG_DIRS)


def _produce(bootstrap: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for i in range(count):
            producer.send("t", value=b"x" * (100 + i), partition=0).get(timeout=20)
    finally:
        producer.close()


def _describe(bootstrap: str) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return admin.describe_log_dirs()
    finally:
        admin.close()


def _alter(bootstrap: str, moves: dict[TopicPartitionReplica, str]) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return admin.alter_replica_log_dirs(moves)
    finally:
        admin.close()


@pytest.mark.asyncio
async def test_kafka_python_describes_each_brokers_log_dir_with_the_bytes_it_stores(
    door: KafkaFrontDoor,
) -> None:
    await asyncio.to_thread(_produce, door.bootstrap, 5)
    # acks=all: the HW covers every record, so each in-sync replica holds them all
    p = door.cluster.topics["t"][0]
    assert p.hw == p.leo == 5
    assert {log.leo for log in p.logs.values()} == {5}
    # the bytes of the batches kafka-python sent, as each replica stores them
    stored = door.cluster.stored_batches("t", 0, 0, 5)
    expected = sum(len(batch.wire) for batch in stored if batch.wire is not None)
    assert expected > 5 * 100

    result = await asyncio.to_thread(_describe, door.bootstrap)
    by_broker = {entry["broker"]: entry["log_dirs"] for entry in result}
    assert sorted(by_broker) == [0, 1, 2]
    for broker, dirs in by_broker.items():
        assert len(dirs) == 1
        (only,) = dirs
        assert only["log_dir"] == log_dir(broker)
        assert only["error_code"] == 0
        sizes = {
            (topic["name"], p["partition_index"]): (
                p["partition_size"],
                p["offset_lag"],
                p["is_future_key"],
            )
            for topic in only["topics"]
            for p in topic["partitions"]
        }
        assert sizes == {("t", 0): (expected, 0, False), ("t", 1): (0, 0, False)}


@pytest.mark.asyncio
async def test_kafka_python_moves_a_replica_to_its_own_dir_but_not_to_an_unknown_one(
    door: KafkaFrontDoor,
) -> None:
    await door.cluster.create_topic("one", 1, 1, assignment=[[1]])
    moves = {
        TopicPartitionReplica("t", 0, 0): log_dir(0),
        TopicPartitionReplica("one", 0, 1): log_dir(1),
        TopicPartitionReplica("t", 1, 2): "/data/elsewhere",
        TopicPartitionReplica("one", 0, 2): log_dir(2),  # broker 2 holds no replica
        TopicPartitionReplica("nope", 0, 2): log_dir(2),
    }
    result = await asyncio.to_thread(_alter, door.bootstrap, moves)
    assert result[TopicPartitionReplica("t", 0, 0)] is NoError
    assert result[TopicPartitionReplica("one", 0, 1)] is NoError
    assert result[TopicPartitionReplica("t", 1, 2)] is LogDirNotFoundError
    assert result[TopicPartitionReplica("one", 0, 2)].errno == KioError.replica_not_available.value
    assert result[TopicPartitionReplica("nope", 0, 2)].errno == (
        KioError.unknown_topic_or_partition.value
    )
    assert KafkaStorageError not in result.values()


def _describe_request(version: int, topics: list[dict[str, Any]] | None) -> Any:
    return build(request_type(ApiKey.DESCRIBE_LOG_DIRS, version), {"topics": topics})


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
async def test_every_version_reports_the_asked_partitions_the_broker_hosts(
    door: KafkaFrontDoor, version: int
) -> None:
    cluster = door.cluster
    await cluster.create_topic("elsewhere", 1, 1, assignment=[[0]])
    await cluster.produce(ProduceRequest("elsewhere", 0, [(b"k", b"value")]))
    low, high, handler = LogDirHandlers(cluster, 0).apis()[ApiKey.DESCRIBE_LOG_DIRS]
    assert low <= version <= high
    header = RequestHeader(ApiKey.DESCRIBE_LOG_DIRS, version, 1, "c")
    asked = [
        {"topic": "elsewhere", "partitions": [0, 7]},
        {"topic": "t", "partitions": [1]},
        {"topic": "nope", "partitions": [0]},
    ]
    answer = handler(header, _describe_request(version, asked))
    (result,) = answer.results
    assert result.log_dir == log_dir(0)
    described = [
        (topic.name, [(p.partition_index, p.partition_size) for p in topic.partitions])
        for topic in result.topics
    ]
    size = cluster.topics["elsewhere"][0].logs[0].size_bytes
    assert size == len(b"k") + len(b"value") + 8  # the sim's record_size, one record
    assert described == [("t", [(1, 0)]), ("elsewhere", [(0, size)])]
    if version >= 4:
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)  # no cap: unknown
    # broker 1 holds no replica of "elsewhere"
    other = LogDirHandlers(cluster, 1).describe_log_dirs(header, _describe_request(version, asked))
    assert [t.name for t in other.results[0].topics] == ["t"]


def _alter_request(version: int, dirs: list[dict[str, Any]]) -> Any:
    return build(request_type(ApiKey.ALTER_REPLICA_LOG_DIRS, version), {"dirs": dirs})


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(ALTER_LOW, ALTER_HIGH + 1))
async def test_every_alter_version_checks_the_dir_then_the_replica(
    door: KafkaFrontDoor, version: int
) -> None:
    low, high, handler = LogDirHandlers(door.cluster, 2).apis()[ApiKey.ALTER_REPLICA_LOG_DIRS]
    assert low <= version <= high
    header = RequestHeader(ApiKey.ALTER_REPLICA_LOG_DIRS, version, 1, "c")
    dirs = [
        {"path": log_dir(2), "topics": [{"name": "t", "partitions": [0, 5]}]},
        {"path": log_dir(0), "topics": [{"name": "nope", "partitions": [0]}]},
    ]
    answer = handler(header, _alter_request(version, dirs))
    assert [
        (r.topic_name, [(p.partition_index, p.error_code) for p in r.partitions])
        for r in answer.results
    ] == [
        ("t", [(0, KioError.none), (5, KioError.unknown_topic_or_partition)]),
        ("nope", [(0, KioError.log_dir_not_found)]),
    ]


@pytest.mark.asyncio
async def test_the_highest_versions_over_a_socket_with_kio(door: KafkaFrontDoor) -> None:
    frame = await round_trip(door.addresses[1], _describe_request(HIGH, None))
    response = read_response(frame, ApiKey.DESCRIBE_LOG_DIRS, HIGH)
    assert response.header_size + response.body_size == len(frame)
    (result,) = response.body.results
    assert result.log_dir == log_dir(1)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [
        ("t", [0, 1])
    ]
    moves = [{"path": log_dir(1), "topics": [{"name": "t", "partitions": [1]}]}]
    frame = await round_trip(door.addresses[1], _alter_request(ALTER_HIGH, moves))
    altered = read_response(frame, ApiKey.ALTER_REPLICA_LOG_DIRS, ALTER_HIGH)
    assert altered.header_size + altered.body_size == len(frame)
    assert altered.body.results[0].partitions[0].error_code == KioError.none


def test_the_error_answer_lists_every_partition_of_every_dir_flat() -> None:
    """Kafka's AlterReplicaLogDirsRequest.getErrorResponse: each topic of each directory,
    with its partitions, under one list (a fault rule's answer, a refused request's)."""
    dirs = [
        {"path": log_dir(0), "topics": [{"name": "t", "partitions": [0, 1]}]},
        {"path": "/elsewhere", "topics": [{"name": "u", "partitions": [3]}]},
    ]
    answer = error_response(_alter_request(ALTER_HIGH, dirs), ErrorCode.KAFKA_STORAGE_ERROR)
    assert [
        (r.topic_name, [(p.partition_index, p.error_code) for p in r.partitions])
        for r in answer.results
    ] == [
        ("t", [(0, KioError.kafka_storage_error), (1, KioError.kafka_storage_error)]),
        ("u", [(3, KioError.kafka_storage_error)]),
    ]
