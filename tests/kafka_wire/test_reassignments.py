"""AlterPartitionReassignments and ListPartitionReassignments over the Kafka protocol:
kafka-python's admin client moves a partition's replicas, lists the reassignment while it
runs and sees it finish, with Kafka's per-partition refusals; every version through the
handler, the highest over a socket with kio."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.reassignments import ReassignmentHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type, versions
from purgatory.sim import ProduceRequest

LOW, HIGH = versions(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
LIST_LOW, LIST_HIGH = versions(ApiKey.LIST_PARTITION_REASSIGNMENTS)


def _alter(bootstrap: str, moves: dict[TopicPartition, list[int] | None]) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return admin.alter_partition_reassignments(moves)
    finally:
        admin.close()


def _list(bootstrap: str) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return admin.list_partition_reassignments()
    finally:
        admin.close()


def _consume(bootstrap: str, tp: TopicPartition, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000
    )
    try:
        consumer.assign([tp])
        values: list[bytes] = []
        for message in consumer:
            values.append(message.value)
            if len(values) == count:
                break
        return values
    finally:
        consumer.close()


@pytest.mark.asyncio
async def test_kafka_python_moves_a_partition_and_lists_it_while_it_runs(
    door: KafkaFrontDoor,
) -> None:
    cluster = door.cluster
    await cluster.create_topic("r", 1, 1, assignment=[[0]])
    for i in range(30):
        await cluster.produce(ProduceRequest("r", 0, [(None, b"r%d" % i)]))
    await cluster.crash_broker(2)  # a new replica that cannot catch up yet
    tp = TopicPartition("r", 0)
    assert await asyncio.to_thread(_alter, door.bootstrap, {tp: [2, 1]}) == {tp: None}
    listed = await asyncio.to_thread(_list, door.bootstrap)
    assert listed[tp]["replicas"] == [2, 1, 0]
    assert listed[tp]["removing_replicas"] == [0]
    assert set(listed[tp]["adding_replicas"]) <= {1, 2}
    assert 2 in listed[tp]["adding_replicas"]

    await cluster.restart_broker(2)
    async with asyncio.timeout(20):
        while cluster.partition_reassignments():  # noqa: ASYNC110 (no event)
            await asyncio.sleep(0.01)  # replication runs on this loop: nothing to wait on
    assert await asyncio.to_thread(_list, door.bootstrap) == {}
    p = cluster.topics["r"][0]
    assert (p.replicas, p.isr, sorted(p.logs)) == ((2, 1), {1, 2}, [1, 2])
    assert p.leader in (1, 2)  # broker 0 left: the leader moved to a target broker
    values = await asyncio.to_thread(_consume, door.bootstrap, tp, 30)
    assert values == [b"r%d" % i for i in range(30)]


@pytest.mark.asyncio
async def test_kafka_python_gets_kafkas_per_partition_refusals(door: KafkaFrontDoor) -> None:
    moves: dict[TopicPartition, list[int] | None] = {
        TopicPartition("t", 0): None,  # nothing in progress
        TopicPartition("t", 1): [0, 9],
        TopicPartition("nope", 0): [0],
    }
    result = await asyncio.to_thread(_alter, door.bootstrap, moves)
    assert result == {
        TopicPartition("t", 0): NoReassignmentInProgressError,
        TopicPartition("t", 1): InvalidReplicationAssignmentError,
        TopicPartition("nope", 0): UnknownTopicOrPartitionError,
    }
    assert [p.replicas for p in door.cluster.topics["t"]] == [(0, 1, 2), (1, 2, 0)]


def _alter_request(version: int, topics: list[dict[str, Any]], allow: bool = True) -> Any:
    return build(
        request_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version),
        {
            "timeout": datetime.timedelta(seconds=5),
            "allow_replication_factor_change": allow,
            "topics": topics,
        },
    )


def _list_request(topics: list[dict[str, Any]] | None) -> Any:
    return build(
        request_type(ApiKey.LIST_PARTITION_REASSIGNMENTS, LIST_HIGH),
        {"timeout": datetime.timedelta(seconds=5), "topics": topics},
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
async def test_every_version_answers_each_partition_in_request_order(
    door: KafkaFrontDoor, version: int
) -> None:
    apis = ReassignmentHandlers(door.cluster).apis()
    low, high, alter = apis[ApiKey.ALTER_PARTITION_REASSIGNMENTS]
    assert (low, high) == (LOW, HIGH)
    header = RequestHeader(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version, 1, "c")
    topics = [
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [2, 1, 0]}]},
        {"name": "t", "partitions": [{"partition_index": 1, "replicas": [1, 1]}]},
        {"name": "t", "partitions": [{"partition_index": 5, "replicas": [1]}]},
    ]
    answer = await alter(header, _alter_request(version, topics))
    assert (answer.error_code, answer.error_message) == (KioError.none, None)
    assert [
        (t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
        for t in answer.responses
    ] == [
        ("t", [(0, KioError.none, None)]),
        (
            "t",
            [
                (
                    1,
                    KioError.invalid_replica_assignment,
                    "The manual partition assignment includes the broker 1 more than once.",
                )
            ],
        ),
        ("t", [(5, KioError.unknown_topic_or_partition, "Unable to find partition t:5.")]),
    ]
    assert door.cluster.topics["t"][0].replicas == (2, 1, 0)  # a reorder: done at once


@pytest.mark.asyncio
async def test_v1_refuses_a_replication_factor_change_not_allowed_and_echoes_the_flag(
    door: KafkaFrontDoor,
) -> None:
    _, _, alter = ReassignmentHandlers(door.cluster).apis()[ApiKey.ALTER_PARTITION_REASSIGNMENTS]
    header = RequestHeader(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, 1, "c")
    topics = [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [0, 1]}]}]
    answer = await alter(header, _alter_request(1, topics, allow=False))
    assert answer.allow_replication_factor_change is False
    (partition,) = answer.responses[0].partitions
    assert (partition.error_code, partition.error_message) == (
        KioError.invalid_replication_factor,
        "The replication factor is changed from 3 to 2",
    )


@pytest.mark.asyncio
async def test_list_shows_only_the_partitions_asked_that_are_being_reassigned(
    door: KafkaFrontDoor,
) -> None:
    cluster = door.cluster
    await cluster.crash_broker(2)
    await cluster.create_topic("a", 2, 1, assignment=[[0], [1]])
    await cluster.reassign_partition("a", 0, [2])
    await cluster.reassign_partition("a", 1, [2])
    _, _, list_ = ReassignmentHandlers(cluster).apis()[ApiKey.LIST_PARTITION_REASSIGNMENTS]
    header = RequestHeader(ApiKey.LIST_PARTITION_REASSIGNMENTS, LIST_HIGH, 1, "c")
    asked = [{"name": "a", "partition_indexes": [1, 7]}, {"name": "nope", "partition_indexes": [0]}]
    answer = list_(header, _list_request(asked))
    assert [
        (t.name, [(p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)])
        for t in answer.topics
        for p in t.partitions
    ] == [("a", [(1, (2, 1), (2,), (1,))])]
    every = list_(header, _list_request(None))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in every.topics] == [
        ("a", [0, 1])
    ]


@pytest.mark.asyncio
async def test_the_highest_versions_over_a_socket_with_kio(door: KafkaFrontDoor) -> None:
    await door.cluster.crash_broker(2)
    await door.cluster.create_topic("a", 1, 1, assignment=[[0]])
    topics = [{"name": "a", "partitions": [{"partition_index": 0, "replicas": [2]}]}]
    frame = await round_trip(door.addresses[1], _alter_request(HIGH, topics))
    response = read_response(frame, ApiKey.ALTER_PARTITION_REASSIGNMENTS, HIGH)
    assert response.header_size + response.body_size == len(frame)
    assert response.body.responses[0].partitions[0].error_code == KioError.none
    frame = await round_trip(door.addresses[0], _list_request(None))
    listed = read_response(frame, ApiKey.LIST_PARTITION_REASSIGNMENTS, LIST_HIGH)
    assert listed.header_size + listed.body_size == len(frame)
    (partition,) = listed.body.topics[0].partitions
    assert (partition.replicas, partition.adding_replicas, partition.removing_replicas) == (
        (2, 0),
        (2,),
        (0,),
    )
