"""DescribeTopicPartitions over the Kafka protocol: kafka-python's admin client describes
topics page by page with its cursor, as Kafka 3.7+ answers; unknown and invalid names,
a bad cursor, and the kio round trip."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.describe_topic_partitions import DescribeTopicPartitionsHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type, versions

LOW, HIGH = versions(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
HEADER = RequestHeader(ApiKey.DESCRIBE_TOPIC_PARTITIONS, HIGH, 1, "c")


def _kafka_python(bootstrap: str, pages: list[tuple[list[str], int, Any]]) -> list[Any]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return [
            admin.describe_topic_partitions(topics, response_partition_limit=limit, cursor=cursor)
            for topics, limit, cursor in pages
        ]
    finally:
        admin.close()


def _request(topics: list[str], limit: int = 2000, cursor: dict[str, Any] | None = None) -> Any:
    return build(
        request_type(ApiKey.DESCRIBE_TOPIC_PARTITIONS, HIGH),
        {
            "topics": [{"name": name} for name in topics],
            "response_partition_limit": limit,
            "cursor": cursor,
        },
    )


def _pages(answer: Any) -> tuple[list[tuple[str, list[int]]], tuple[str, int] | None]:
    topics = [(t.name, [p.partition_index for p in t.partitions]) for t in answer.topics]
    cursor = answer.next_cursor
    return topics, None if cursor is None else (cursor.topic_name, cursor.partition_index)


@pytest.mark.asyncio
async def test_kafka_python_pages_through_a_topic_with_the_cursor(door: KafkaFrontDoor) -> None:
    await door.cluster.create_topic("u", 3, 2)
    first, second = await asyncio.to_thread(
        _kafka_python,
        door.bootstrap,
        [(["u", "t"], 3, None), (["u", "t"], 10, {"topic_name": "u", "partition_index": 1})],
    )
    assert [
        (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in first["topics"]
    ] == [
        ("t", [0, 1]),
        ("u", [0]),
    ]
    assert first["next_cursor"] == {"topic_name": "u", "partition_index": 1}
    t_meta = first["topics"][0]
    assert t_meta["error_code"] == 0
    assert t_meta["topic_id"] == door.cluster.topic_id("t")
    p0 = t_meta["partitions"][0]
    p = door.cluster.topics["t"][0]
    assert (p0["leader_id"], p0["leader_epoch"], p0["replica_nodes"], p0["isr_nodes"]) == (
        p.leader,
        p.leader_epoch,
        list(p.replicas),
        sorted(p.isr),
    )
    assert [
        (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in second["topics"]
    ] == [("u", [1, 2])]
    assert second["next_cursor"] is None


@pytest.mark.asyncio
async def test_every_topic_in_name_order_and_the_cursor_at_a_topics_end(
    door: KafkaFrontDoor,
) -> None:
    cluster = door.cluster
    await cluster.create_topic("b", 2, 1)
    await cluster.create_topic("a", 1, 1)
    (low, high, handler) = DescribeTopicPartitionsHandlers(cluster).apis()[
        ApiKey.DESCRIBE_TOPIC_PARTITIONS
    ]
    assert (low, high) == (LOW, HIGH)
    assert _pages(handler(HEADER, _request([]))) == (
        [("a", [0]), ("b", [0, 1]), ("t", [0, 1])],
        None,
    )
    # the limit runs out exactly at the end of "b": the cursor names "t" from 0
    assert _pages(handler(HEADER, _request([], limit=3))) == (
        [("a", [0]), ("b", [0, 1])],
        ("t", 0),
    )
    assert _pages(handler(HEADER, _request([], 1, {"topic_name": "b", "partition_index": 1}))) == (
        [("b", [1])],
        ("t", 0),
    )
    # a limit below 1 is taken as 1, as Kafka does
    assert _pages(handler(HEADER, _request(["t"], limit=0))) == ([("t", [0])], ("t", 1))


@pytest.mark.asyncio
async def test_unknown_and_invalid_names_and_dead_replicas(door: KafkaFrontDoor) -> None:
    cluster = door.cluster
    await cluster.crash_broker(2)
    handler = DescribeTopicPartitionsHandlers(cluster).describe_topic_partitions
    answer = handler(HEADER, _request(["t", "nope", "bad/name"]))
    by_name = {t.name: t for t in answer.topics}
    assert [t.name for t in answer.topics] == ["bad/name", "nope", "t"]
    assert by_name["nope"].error_code == KioError.unknown_topic_or_partition
    assert by_name["bad/name"].error_code == KioError.invalid_topic_exception
    assert by_name["nope"].topic_id == uuid.UUID(int=0)
    assert [p.offline_replicas for p in by_name["t"].partitions] == [(2,), (2,)]
    assert all(p.eligible_leader_replicas == () for p in by_name["t"].partitions)


@pytest.mark.asyncio
async def test_a_cursor_outside_the_list_or_negative_fails_the_request(
    door: KafkaFrontDoor,
) -> None:
    handler = DescribeTopicPartitionsHandlers(door.cluster).describe_topic_partitions
    outside = handler(HEADER, _request(["t"], cursor={"topic_name": "a", "partition_index": 0}))
    assert [(t.name, t.error_code, t.partitions) for t in outside.topics] == [
        ("t", KioError.invalid_request, ())
    ]
    negative = handler(HEADER, _request(["t"], cursor={"topic_name": "t", "partition_index": -1}))
    assert [t.error_code for t in negative.topics] == [KioError.invalid_request]


@pytest.mark.asyncio
async def test_the_highest_version_over_a_socket_with_kio(door: KafkaFrontDoor) -> None:
    frame = await round_trip(door.addresses[0], _request(["t"], limit=1))
    response = read_response(frame, ApiKey.DESCRIBE_TOPIC_PARTITIONS, HIGH)
    assert response.header_size + response.body_size == len(frame)
    assert _pages(response.body) == ([("t", [0])], ("t", 1))


@pytest.mark.asyncio
async def test_a_cursor_over_a_socket_with_kio(door: KafkaFrontDoor) -> None:
    """A nullable struct (the cursor) comes behind a presence byte, which the frame guard
    reads as Kafka writes it (it once read the byte as the cursor's topic name)."""
    request = _request(["t"], limit=5, cursor={"topic_name": "t", "partition_index": 1})
    frame = await round_trip(door.addresses[0], request)
    response = read_response(frame, ApiKey.DESCRIBE_TOPIC_PARTITIONS, HIGH)
    assert _pages(response.body) == ([("t", [1])], None)
