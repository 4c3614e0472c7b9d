"""OffsetDelete (API 47) as Kafka answers it: the committed offsets of a topic go unless
the live group consumes it (GROUP_SUBSCRIBED_TO_TOPIC); a group nobody knows is
GROUP_ID_NOT_FOUND, a live group of another protocol type NON_EMPTY_GROUP, an empty id
INVALID_GROUP_ID, a partition no topic has UNKNOWN_TOPIC_OR_PARTITION. kio on both ends,
then kafka-python's admin ``delete_group_offsets`` (confluent-kafka's Python admin has no
call for it)."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import pytest
from kio_wire import read_frame, read_response, request_frame

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.groups import JoinResult
from purgatory.kafka.coordinator.offsets import Committed
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import build, kio_error, request_type


def subscription(*topics: str) -> bytes:
    """A consumer protocol subscription, version 1 (its version-0 prefix and user data)."""
    out = struct.pack(">hi", 1, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1) + struct.pack(">i", 0)  # null user data, no owned


async def _delete(door: KafkaFrontDoor, group: str, topics: dict[str, list[int]]) -> Any:
    reader, writer = await asyncio.open_connection(*door.addresses[0])
    try:
        request = build(
            request_type(ApiKey.OFFSET_DELETE, 0),
            {
                "group_id": group,
                "topics": [
                    {"name": name, "partitions": [{"partition_index": i} for i in indexes]}
                    for name, indexes in topics.items()
                ],
            },
        )
        writer.write(request_frame(request, correlation_id=1, client_id="t"))
        _, _, answer, _ = read_response(await read_frame(reader), 47, 0)
        return answer
    finally:
        writer.close()
        await writer.wait_closed()


def _answered(response: Any) -> dict[tuple[str, int], Any]:
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


async def _stable_member(door: KafkaFrontDoor, group: str, protocol_type: str, data: bytes) -> None:
    coordinator = door.coordinator
    answer = coordinator.join(group, "", "c", 10_000, 10_000, protocol_type, [("range", data)])
    joined = answer if isinstance(answer, JoinResult) else await answer
    synced = coordinator.sync(group, joined.generation, joined.member_id, {joined.member_id: b""})
    assert (synced if isinstance(synced, tuple) else await synced)[0] == ErrorCode.NONE


@pytest.mark.asyncio
async def test_offset_delete_as_kafka_answers_it(door: KafkaFrontDoor) -> None:
    await door.cluster.create_topic("u", 2, 1)
    offsets = door.offsets
    none = kio_error(ErrorCode.NONE)
    assert (await _delete(door, "", {"t": [0]})).error_code == kio_error(ErrorCode.INVALID_GROUP_ID)
    unknown = await _delete(door, "nobody", {"t": [0]})
    assert (unknown.error_code, unknown.topics) == (kio_error(ErrorCode.GROUP_ID_NOT_FOUND), ())

    # A group that only committed (assign() consumers): its offsets go, whatever they were.
    for topic, partition in [("t", 0), ("t", 1), ("u", 0)]:
        offsets.commit("loner", topic, partition, Committed(5, -1, ""))
    answer = await _delete(door, "loner", {"t": [0, 7], "gone": [0], "u": [1]})
    assert answer.error_code == none
    assert _answered(answer) == {
        ("t", 0): none,
        ("t", 7): kio_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("gone", 0): kio_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("u", 1): none,  # nothing committed there: NONE all the same, as Kafka
    }
    assert sorted(offsets.committed) == [("loner", "t", 1), ("loner", "u", 0)]

    # A live consumer group subscribed to t: t's offsets stay, u's go.
    await _stable_member(door, "live", "consumer", subscription("t"))
    for topic in ("t", "u"):
        offsets.commit("live", topic, 0, Committed(3, -1, ""))
    answer = await _delete(door, "live", {"t": [0, 1], "u": [0]})
    assert _answered(answer) == {
        ("t", 0): kio_error(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),
        ("t", 1): kio_error(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),
        ("u", 0): none,
    }
    assert offsets.position("live", "t", 0).offset == 3
    assert offsets.position("live", "u", 0).offset == -1

    # A live group of another protocol type: the whole request is NON_EMPTY_GROUP.
    await _stable_member(door, "workers", "connect", b"anything")
    offsets.commit("workers", "u", 0, Committed(1, -1, ""))
    refused = await _delete(door, "workers", {"u": [0]})
    assert (refused.error_code, refused.topics) == (kio_error(ErrorCode.NON_EMPTY_GROUP), ())
    assert offsets.position("workers", "u", 0).offset == 1

    # Consumer metadata that does not parse: Kafka takes every topic for subscribed.
    await _stable_member(door, "odd", "consumer", b"\x00")
    offsets.commit("odd", "u", 0, Committed(1, -1, ""))
    answer = await _delete(door, "odd", {"u": [0]})
    assert _answered(answer) == {("u", 0): kio_error(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)}


def test_kafka_python_deletes_a_group_s_offsets_once_it_stops_consuming(
    kafka_cluster: Any,
) -> None:
    # kafka-python's admin deletes; the group's member is a librdkafka consumer: kafka-python
    # 3.0.12's own consumer, under load, can stay "rebalancing" for good when its metadata
    # refresh lands while its SyncGroup is in flight, every request of it answered (the
    # broker's counts show its JoinGroups and SyncGroups served and the group Stable)
    from confluent_kafka import Consumer
    from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
    from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError

    kafka_cluster.create_topic("d", partitions=2, replication_factor=1)
    kafka_cluster.create_topic("e", partitions=1, replication_factor=1)
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers)
    for i in range(4):
        producer.send("d", b"x", partition=i % 2)
    producer.flush()
    producer.close()
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "group.id": "deleting",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["d"])
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    d0, d1, e0 = TopicPartition("d", 0), TopicPartition("d", 1), TopicPartition("e", 0)
    closed = False
    try:
        got, deadline = 0, time.monotonic() + 60  # joining takes longer on a busy machine
        while got < 4 and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            got += message is not None and message.error() is None
        assert got == 4  # else the commit below would commit nothing
        consumer.commit(asynchronous=False)
        # an offset of a topic the group does not consume (committed before, say)
        kafka_cluster._get(
            lambda k: k.front_door.offsets.commit("deleting", "e", 0, Committed(1, -1, ""))
        )
        assert admin.delete_group_offsets("deleting", [d0, d1, e0]) == {
            d0: GroupSubscribedToTopicError,
            d1: GroupSubscribedToTopicError,
            e0: NoError,
        }
        assert set(admin.list_group_offsets("deleting")["deleting"]) == {d0, d1}
        consumer.close()  # leaves: the group is Empty, its offsets may go
        closed = True
        assert admin.delete_group_offsets("deleting", [d0, d1]) == {d0: NoError, d1: NoError}
        assert admin.list_group_offsets("deleting") == {"deleting": {}}
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets("never", [d0])
    finally:
        if not closed:
            consumer.close()
        admin.close()
