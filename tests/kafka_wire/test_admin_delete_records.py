"""DeleteRecords over the wire: Kafka's answers for bad offsets and partitions, and the
wait in the leader's DeleteRecords purgatory until every live follower's log start has
passed the offset."""

from __future__ import annotations

import asyncio
import datetime
import inspect
import time
from typing import Any

import pytest
from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse
from kio.schema.delete_records.v2 import request as v2
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.kafka.codec import DecodeError
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.delete_records import DeleteRecordsHandlers
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import encode_response, read_request, versions
from purgatory.sim import Cluster, Latency, ProduceRequest

TIMEOUT = 30.0
LOW, HIGH = versions(ApiKey.DELETE_RECORDS)


def _typed(request: Any) -> tuple[Any, Any]:
    """kafka-python's ``request`` as the server hands it to a handler: kio's."""
    request.with_header(correlation_id=1, client_id="c")
    frame = bytes(request.encode(header=True))
    return read_request(frame, ApiKey.DELETE_RECORDS, request.API_VERSION)


async def _delete(
    handlers: DeleteRecordsHandlers, version: int, partitions: list[tuple[str, int, int]]
) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (error code, low watermark)."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for topic, index, offset in partitions:
        by_topic.setdefault(topic, []).append((index, offset))
    request = DeleteRecordsRequest[version](topics=list(by_topic.items()), timeout_ms=5000)
    low, high, handler = handlers.apis()[ApiKey.DELETE_RECORDS]
    assert low <= version <= high
    answer = handler(*_typed(request))
    assert inspect.isawaitable(answer)
    frame = encode_response(1, await answer)
    response = DeleteRecordsResponse[version].decode(frame, header=True, framed=True)
    return {
        (t.name, p.partition_index): (p.error_code, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    }


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
async def test_delete_records_answers_as_kafka_for_each_offset_and_partition(version: int) -> None:
    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("t", 3, 3, assignment=[[0, 1, 2], [0, 2, 1], [1, 0, 2]])
        for index in (0, 1):
            for _ in range(10):
                await cluster.produce(ProduceRequest("t", index, [(None, b"v")]))
        leader = DeleteRecordsHandlers(cluster, 0)
        first = await _delete(
            leader,
            version,
            [
                ("t", 0, 4),
                ("t", 1, -1),  # up to the high watermark
                ("t", 2, 0),  # led by broker 1
                ("t", 7, 0),
                ("nope", 0, 0),
            ],
        )
        assert first == {
            ("t", 0): (0, 4),
            ("t", 1): (0, 10),
            ("t", 2): (6, -1),  # NOT_LEADER_OR_FOLLOWER
            ("t", 7): (3, -1),  # UNKNOWN_TOPIC_OR_PARTITION
            ("nope", 0): (3, -1),
        }
        # Every replica's log start passed the offset before the answer came.
        for index, offset in ((0, 4), (1, 10)):
            p = cluster.partition("t", index)
            assert [p.logs[b].log_start_offset for b in p.replicas] == [offset] * 3
        again = await _delete(leader, version, [("t", 0, 2), ("t", 0, 11), ("t", 1, -2)])
        # Below the log start: nothing to do (NONE, the low watermark as it is); above
        # the HW or negative other than -1: OFFSET_OUT_OF_RANGE. A partition named twice
        # is taken once, with its last offset.
        assert again == {("t", 0): (1, -1), ("t", 1): (1, -1)}
        below = await _delete(leader, version, [("t", 0, 2)])
        assert below == {("t", 0): (0, 4)}


@pytest.mark.asyncio
async def test_a_negative_timeout_is_malformed() -> None:
    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", 1, 1)
        request = DeleteRecordsRequest[HIGH](topics=[("t", [(0, 0)])], timeout_ms=-1)
        handlers = DeleteRecordsHandlers(cluster, 0)
        with pytest.raises(DecodeError, match="timeout"):
            handlers.delete_records(*_typed(request))


@pytest.mark.asyncio
async def test_flexible_delete_records_round_trips_over_a_socket(door: KafkaFrontDoor) -> None:
    """DeleteRecords at its highest version, built and read with kio, sent to the leader."""
    cluster = door.cluster
    for _ in range(5):
        await cluster.produce(ProduceRequest("t", 1, [(None, b"v")]))
    leader = cluster.partition("t", 1).leader
    request = v2.DeleteRecordsRequest(
        topics=(
            v2.DeleteRecordsTopic(
                name="t",
                partitions=(
                    v2.DeleteRecordsPartition(partition_index=1, offset=3),
                    v2.DeleteRecordsPartition(partition_index=9, offset=0),
                ),
            ),
        ),
        timeout=datetime.timedelta(seconds=5),
    )
    assert request.__version__ == HIGH
    assert request.__flexible__
    frame = await round_trip(door.addresses[leader], request, correlation_id=5, within_s=TIMEOUT)
    answer_header, used, response, size = read_response(frame, ApiKey.DELETE_RECORDS, HIGH)
    assert (answer_header.correlation_id, used + size) == (5, len(frame))
    [topic] = response.topics
    assert topic.name == "t"
    assert [(p.partition_index, p.low_watermark, p.error_code) for p in topic.partitions] == [
        (1, 3, KioError.none),
        (9, -1, KioError.unknown_topic_or_partition),
    ]
    p = cluster.partition("t", 1)
    assert [p.logs[b].log_start_offset for b in p.replicas] == [3] * 3
    assert door.stats.requests["DELETE_RECORDS", HIGH] == 1


def _confluent_delete(bootstrap: str, offset: int) -> tuple[int, float]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.monotonic()
    [future] = admin.delete_records(
        [TopicPartition("t", 0, offset)], request_timeout=20, operation_timeout=20
    ).values()
    deleted = future.result()
    return deleted.low_watermark, time.monotonic() - started


@pytest.mark.asyncio
async def test_delete_records_parks_until_a_slow_follower_has_followed(
    door: KafkaFrontDoor,
) -> None:
    cluster = door.cluster
    for _ in range(10):
        await cluster.produce(ProduceRequest("t", 0, [(None, b"v")]))
    leader = cluster.partition("t", 0).leader
    slow = next(b for b in cluster.partition("t", 0).replicas if b != leader)
    cluster.set_replication_latency(slow, Latency(700.0))
    purgatory = cluster.brokers[leader].replica_manager.purgatories["DeleteRecords"]
    async with asyncio.timeout(TIMEOUT):
        deleting = asyncio.ensure_future(asyncio.to_thread(_confluent_delete, door.bootstrap, 6))
        while purgatory.num_delayed == 0:  # the request arrives and parks
            assert not deleting.done()
            await asyncio.sleep(0.01)
        [op] = purgatory.pending_operations()
        assert op.kind == "delete-records"
        assert cluster.partition("t", 0).logs[slow].log_start_offset < 6  # not there yet
        low_watermark, took = await deleting
    assert low_watermark == 6
    assert took >= 0.3  # it waited for the slow follower's next round trip
    assert purgatory.num_delayed == 0
    p = cluster.partition("t", 0)
    assert all(p.logs[b].log_start_offset == 6 for b in p.replicas)
