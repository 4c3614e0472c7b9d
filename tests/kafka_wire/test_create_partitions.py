"""CreatePartitions over the Kafka protocol: kafka-python's, aiokafka's and
confluent-kafka's admin clients grow a topic, and their consumers and Metadata see the new
partitions; Kafka's refusals with its codes; every version through the handler, the
highest over a socket with kio."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from aiokafka.errors import InvalidPartitionsError
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewPartitions as ConfluentNewPartitions
from kafka import KafkaAdminClient, KafkaConsumer
from kio.schema.create_partitions.v3 import request as v3
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.create_partitions import CreatePartitionsHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type, versions

LOW, HIGH = versions(ApiKey.CREATE_PARTITIONS)


def _kafka_python(bootstrap: str, counts: dict[str, Any], validate_only: bool = False) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return admin.create_partitions(counts, validate_only=validate_only, raise_errors=False)
    finally:
        admin.close()


def _partitions_seen(bootstrap: str, topic: str) -> set[int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return set(consumer.partitions_for_topic(topic) or ())
    finally:
        consumer.close()


@pytest.mark.asyncio
async def test_kafka_python_grows_a_topic_and_its_consumer_sees_the_new_partitions(
    door: KafkaFrontDoor,
) -> None:
    response = await asyncio.to_thread(
        _kafka_python,
        door.bootstrap,
        {"t": 4, "nope": 2, "u": {"count": 3, "assignments": [[0, 1, 2]]}},
    )
    results = {r.name: (r.error_code, r.error_message) for r in response.results}
    assert results["t"] == (0, None)
    assert results["nope"][0] == KioError.unknown_topic_or_partition.value
    assert results["u"][0] == KioError.unknown_topic_or_partition.value
    assert await asyncio.to_thread(_partitions_seen, door.bootstrap, "t") == {0, 1, 2, 3}
    assert all(p.leader is not None for p in door.cluster.topics["t"])

    again = await asyncio.to_thread(_kafka_python, door.bootstrap, {"t": 3})
    assert [(r.error_code, r.error_message) for r in again.results] == [
        (37, "The topic t currently has 4 partition(s); 3 would not be an increase.")
    ]
    checked = await asyncio.to_thread(_kafka_python, door.bootstrap, {"t": 9}, True)
    assert [r.error_code for r in checked.results] == [0]
    assert len(door.cluster.topics["t"]) == 4  # validate_only changed nothing


@pytest.mark.asyncio
async def test_aiokafka_grows_a_topic_and_is_refused_an_equal_count(door: KafkaFrontDoor) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=door.bootstrap)
    await admin.start()
    try:
        await admin.create_partitions({"t": AioNewPartitions(3)})
        assert len(door.cluster.topics["t"]) == 3
        with pytest.raises(InvalidPartitionsError, match=r"Topic already has 3 partition\(s\)"):
            await admin.create_partitions({"t": AioNewPartitions(3)})
    finally:
        await admin.close()


def _confluent(bootstrap: str, new: list[ConfluentNewPartitions]) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    outcome: dict[str, str] = {}
    for topic, future in admin.create_partitions(new, request_timeout=10).items():
        try:
            future.result(timeout=20)
        except KafkaException as exc:
            outcome[topic] = exc.args[0].name()
        else:
            outcome[topic] = "OK"
    return outcome


@pytest.mark.asyncio
async def test_confluent_grows_a_topic_with_an_assignment(door: KafkaFrontDoor) -> None:
    new = [
        ConfluentNewPartitions("t", 4, replica_assignment=[[2, 1, 0], [1, 2, 0]]),
    ]
    assert await asyncio.to_thread(_confluent, door.bootstrap, new) == {"t": "OK"}
    assert [p.replicas for p in door.cluster.topics["t"][2:]] == [(2, 1, 0), (1, 2, 0)]
    bad = [ConfluentNewPartitions("t", 5, replica_assignment=[[0, 1]])]  # factor 2, not 3
    assert await asyncio.to_thread(_confluent, door.bootstrap, bad) == {
        "t": "INVALID_REPLICA_ASSIGNMENT"
    }


def _request(version: int, topics: list[dict[str, Any]], validate_only: bool = False) -> Any:
    cls = request_type(ApiKey.CREATE_PARTITIONS, version)
    return build(
        cls,
        {
            "topics": topics,
            "timeout": datetime.timedelta(seconds=5),
            "validate_only": validate_only,
        },
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
async def test_every_version_answers_each_topic_once_in_request_order(
    door: KafkaFrontDoor, version: int
) -> None:
    await door.cluster.create_topic("u", 1, 1)
    low, high, handler = CreatePartitionsHandlers(door.cluster, 10).apis()[ApiKey.CREATE_PARTITIONS]
    assert low <= version <= high
    header = RequestHeader(ApiKey.CREATE_PARTITIONS, version, 1, "c")
    topics = [
        {"name": "u", "count": 3, "assignments": None},
        {"name": "t", "count": 11, "assignments": None},
        {"name": "d", "count": 2, "assignments": None},
        {"name": "d", "count": 3, "assignments": None},
    ]
    answer = await handler(header, _request(version, topics))
    assert [(r.name, r.error_code, r.error_message) for r in answer.results] == [
        ("u", KioError.none, None),
        ("t", KioError.invalid_partitions, "a topic has at most 10 partitions here, asked for 11"),
        ("d", KioError.invalid_request, "Duplicate topic name."),
    ]
    assert len(door.cluster.topics["u"]) == 3


@pytest.mark.asyncio
async def test_the_highest_version_over_a_socket_with_kio(door: KafkaFrontDoor) -> None:
    request = v3.CreatePartitionsRequest(
        topics=(
            v3.CreatePartitionsTopic(
                name="t",
                count=3,
                assignments=(v3.CreatePartitionsAssignment(broker_ids=(1, 2, 0)),),
            ),
            v3.CreatePartitionsTopic(name="gone", count=3, assignments=None),
        ),
        timeout=datetime.timedelta(seconds=5),
        validate_only=False,
    )
    frame = await round_trip(door.addresses[2], request)
    response = read_response(frame, ApiKey.CREATE_PARTITIONS, HIGH)
    assert response.header_size + response.body_size == len(frame)
    assert [(r.name, r.error_code) for r in response.body.results] == [
        ("t", KioError.none),
        ("gone", KioError.unknown_topic_or_partition),
    ]
    assert door.cluster.topics["t"][2].replicas == (1, 2, 0)
