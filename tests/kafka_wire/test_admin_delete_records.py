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

from purgatory.kafka.embedded import EmbeddedKafka
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.delete_records import DeleteRecordsHandlers
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import encode_response, read_request, versions
from purgatory.kafka.wire_errors import DecodeError
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


# -- producers across DeleteRecords and retention (librdkafka) ----------------------------

_LIBRDKAFKA_S = 45.0


def _leader_log(kafka: EmbeddedKafka, topic: str) -> Any:
    p = kafka.cluster.partition(topic, 0)
    assert p is not None
    return p.leader_log


def _wait_for(condition: Any, producer: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, what
        producer.poll(0.02)


def _idempotent_retry_across_deletion(kafka: EmbeddedKafka, topic: str, delete: bool) -> None:
    """librdkafka's idempotent producer: its batch is appended and its acknowledgement
    lost; the log start passes the batch (``delete``: DeleteRecords, else the topic's
    retention.bytes=0 on the HW's advance) before the retry comes, which must be known as
    the batch already written; then the producer goes on with its next sequences."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    failed: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(error)

    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 0,
            "request.timeout.ms": 2000,  # the lost acknowledgement's retry
            "socket.timeout.ms": 2000,
            "message.timeout.ms": 30_000,
        }
    )
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    log = _leader_log(kafka, topic)
    for i in range(3):
        producer.produce(topic, b"%d" % i, partition=0, on_delivery=delivered)
    assert producer.flush(20) == 0
    if delete:
        [deleted] = admin.delete_records(
            [TopicPartition(topic, 0, -1)], request_timeout=10
        ).values()
        assert deleted.result().low_watermark == 3
    lost = kafka.faults.add("Produce", drop=True, after=True, topic=topic)
    producer.produce(topic, b"3", partition=0, on_delivery=delivered)
    _wait_for(lambda: log.leo == 4, producer, "the batch whose ack is lost was not appended")
    if delete:
        [deleted] = admin.delete_records([TopicPartition(topic, 0, 4)], request_timeout=10).values()
        assert deleted.result().low_watermark == 4
    else:
        _wait_for(lambda: log.log_start_offset == 4, producer, "retention did not delete it")
    assert log.batches == 0
    assert producer.flush(20) == 0  # the retry, after the request timeout
    assert lost.hits == 1
    for i in range(4, 7):
        producer.produce(topic, b"%d" % i, partition=0, on_delivery=delivered)
    assert producer.flush(20) == 0
    assert failed == []
    assert log.leo == 7  # the retry was not appended again: 4, 5, 6 follow the deleted 3
    if delete:
        assert [(r.offset, r.value) for r in kafka.records(topic, 0)] == [
            (i, b"%d" % i) for i in range(4, 7)
        ]


def test_librdkafka_idempotent_producer_goes_on_after_delete_records_of_everything() -> None:
    with EmbeddedKafka(brokers=3, seed=1, topics={"t": (1, 3)}) as kafka:
        _idempotent_retry_across_deletion(kafka, "t", delete=True)


def test_librdkafka_idempotent_producer_goes_on_after_retention_deleted_everything() -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    with EmbeddedKafka(brokers=3, seed=1) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        new = NewTopic("r", 1, 3, config={"retention.bytes": "0"})  # gone once committed
        admin.create_topics([new], request_timeout=10)["r"].result()
        _idempotent_retry_across_deletion(kafka, "r", delete=False)


def test_librdkafka_transactional_producer_goes_on_after_delete_records() -> None:
    """A transaction committed, its records deleted (its marker, after them, left), then
    another transaction of the same producer: Kafka keeps the producer's sequence, so the
    next batch continues it (before: OUT_OF_ORDER_SEQUENCE_NUMBER, the state restarted
    from the marker alone)."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    with EmbeddedKafka(brokers=3, seed=1, topics={"t": (1, 3)}) as kafka:
        bootstrap = kafka.bootstrap_servers
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "del-1"})
        admin = AdminClient({"bootstrap.servers": bootstrap})
        producer.init_transactions(30)
        log = _leader_log(kafka, "t")
        for round_ in range(3):
            producer.begin_transaction()
            for i in range(3):
                producer.produce("t", b"%d-%d" % (round_, i), partition=0)
            producer.commit_transaction(30)
            end = 4 * round_ + 3  # the records, not the marker after them
            # EndTxn answers before the marker is written
            _wait_for(lambda end=end: log.leo == end + 1, producer, "no marker")
            [deleted] = admin.delete_records(
                [TopicPartition("t", 0, end)], request_timeout=10
            ).values()
            assert deleted.result().low_watermark == end
        # three transactions of three records and a marker; the last marker is left
        assert (log.log_start_offset, log.leo) == (11, 12)
