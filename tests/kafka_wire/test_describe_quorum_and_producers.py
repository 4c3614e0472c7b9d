"""DescribeQuorum and DescribeProducers over the Kafka protocol: kafka-python's admin
client describes the metadata quorum (the simulated controller, a single voter, the other
brokers observing) and the idempotent producers of a partition, with what Kafka answers
for a wrong partition or a broker without a replica; kio round trips."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.describe_producers import DescribeProducersHandlers
from purgatory.kafka.handlers.describe_quorum import METADATA_TOPIC, DescribeQuorumHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type, versions
from purgatory.sim import ProduceRequest

Q_LOW, Q_HIGH = versions(ApiKey.DESCRIBE_QUORUM)
P_LOW, P_HIGH = versions(ApiKey.DESCRIBE_PRODUCERS)


def _quorum(bootstrap: str) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return admin.describe_metadata_quorum()
    finally:
        admin.close()


def _quorum_request(
    version: int, topic: str = METADATA_TOPIC, partitions: tuple[int, ...] = (0,)
) -> Any:
    return build(
        request_type(ApiKey.DESCRIBE_QUORUM, version),
        {
            "topics": [
                {"topic_name": topic, "partitions": [{"partition_index": i} for i in partitions]}
            ]
        },
    )


@pytest.mark.asyncio
async def test_kafka_python_describes_the_quorum_of_the_simulated_controller(
    door: KafkaFrontDoor,
) -> None:
    result = await asyncio.to_thread(_quorum, door.bootstrap)
    (topic,) = result["topics"]
    assert topic["topic_name"] == METADATA_TOPIC
    (p,) = topic["partitions"]
    assert p["error"] is None
    assert (p["leader_id"], p["leader_epoch"]) == (0, 1)
    hw = door.cluster.controller.metadata.version
    assert p["high_watermark"] == hw > 0  # the topic's creation and its leaders
    assert [(v["replica_id"], v["log_end_offset"]) for v in p["current_voters"]] == [(0, hw)]
    assert [o["replica_id"] for o in p["observers"]] == [1, 2]
    host, port = door.addresses[0]
    assert result["nodes"] == [
        {"node_id": 0, "listeners": [{"name": "PLAINTEXT", "host": host, "port": port}]}
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(Q_LOW, Q_HIGH + 1))
async def test_every_quorum_version_follows_the_controller_and_its_log(
    door: KafkaFrontDoor, version: int
) -> None:
    handlers = DescribeQuorumHandlers(door.cluster, door.addresses)
    low, high, describe = handlers.apis()[ApiKey.DESCRIBE_QUORUM]
    assert (low, high) == (Q_LOW, Q_HIGH)
    header = RequestHeader(ApiKey.DESCRIBE_QUORUM, version, 1, "c")
    before = describe(header, _quorum_request(version)).topics[0].partitions[0]
    await door.cluster.crash_broker(0)  # the controller moves to broker 1
    after = describe(header, _quorum_request(version)).topics[0].partitions[0]
    assert (before.leader_id, before.leader_epoch) == (0, 1)
    assert (after.leader_id, after.leader_epoch) == (1, 2)
    assert after.high_watermark > before.high_watermark  # the crash was published
    assert [o.replica_id for o in after.observers] == [2]
    wrong = describe(header, _quorum_request(version, "t", (0,))).topics[0].partitions[0]
    assert wrong.error_code == KioError.unknown_topic_or_partition
    two = describe(header, _quorum_request(version, METADATA_TOPIC, (0, 1))).topics[0]
    assert [p.error_code for p in two.partitions] == [KioError.unknown_topic_or_partition] * 2


@pytest.mark.asyncio
async def test_quorum_over_a_socket_with_kio(door: KafkaFrontDoor) -> None:
    frame = await round_trip(door.addresses[2], _quorum_request(Q_HIGH))
    response = read_response(frame, ApiKey.DESCRIBE_QUORUM, Q_HIGH)
    assert response.header_size + response.body_size == len(frame)
    assert response.body.topics[0].partitions[0].leader_id == 0


def _produce_idempotent(bootstrap: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=0)
    try:
        for i in range(count):
            producer.send(
                "t", value=b"v%d" % i, partition=1, timestamp_ms=1_700_000_000_000 + i
            ).get(timeout=20)
    finally:
        producer.close()


def _producers(bootstrap: str, tps: list[TopicPartition], broker_id: int | None = None) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return admin.describe_producers(tps, broker_id=broker_id)
    finally:
        admin.close()


@pytest.mark.asyncio
async def test_kafka_python_describes_the_active_idempotent_producers(
    door: KafkaFrontDoor,
) -> None:
    await asyncio.to_thread(_produce_idempotent, door.bootstrap, 4)
    tp = TopicPartition("t", 1)
    result = await asyncio.to_thread(_producers, door.bootstrap, [tp, TopicPartition("t", 0)])
    (active,) = result[tp].active_producers
    assert active.producer_id >= 0
    assert (active.producer_epoch, active.last_sequence) == (0, 3)
    assert active.last_timestamp == 1_700_000_000_003
    assert (active.coordinator_epoch, active.current_transaction_start_offset) == (-1, -1)
    assert result[TopicPartition("t", 0)].active_producers == []
    # a follower answers from its own replica, which has the same state
    leader = door.cluster.topics["t"][1].leader
    follower = next(b for b in (0, 1, 2) if b != leader)
    again = await asyncio.to_thread(_producers, door.bootstrap, [tp], follower)
    assert again[tp].active_producers == [active]


def _producers_request(topics: list[tuple[str, list[int]]]) -> Any:
    return build(
        request_type(ApiKey.DESCRIBE_PRODUCERS, P_HIGH),
        {"topics": [{"name": name, "partition_indexes": ps} for name, ps in topics]},
    )


@pytest.mark.asyncio
async def test_producers_of_partitions_the_broker_does_not_host_or_nobody_knows(
    door: KafkaFrontDoor,
) -> None:
    cluster = door.cluster
    await cluster.create_topic("one", 1, 1, assignment=[[2]])
    await cluster.produce(ProduceRequest("one", 0, [(None, b"plain")]))  # no producer id
    low, high, describe = DescribeProducersHandlers(cluster, 0).apis()[ApiKey.DESCRIBE_PRODUCERS]
    assert (low, high) == (P_LOW, P_HIGH)
    header = RequestHeader(ApiKey.DESCRIBE_PRODUCERS, P_HIGH, 1, "c")
    answer = describe(
        header, _producers_request([("one", [0]), ("t", [0, 9]), ("nope", [0]), ("a/b", [0])])
    )
    assert [
        (t.name, [(p.partition_index, p.error_code, p.active_producers) for p in t.partitions])
        for t in answer.topics
    ] == [
        ("one", [(0, KioError.not_leader_or_follower, ())]),
        ("t", [(0, KioError.none, ()), (9, KioError.unknown_topic_or_partition, ())]),
        ("nope", [(0, KioError.unknown_topic_or_partition, ())]),
        ("a/b", [(0, KioError.invalid_topic_exception, ())]),
    ]
    on_two = DescribeProducersHandlers(cluster, 2).describe_producers(
        header, _producers_request([("one", [0])])
    )
    assert on_two.topics[0].partitions[0].active_producers == ()  # plain records: none


@pytest.mark.asyncio
async def test_producers_over_a_socket_with_kio(door: KafkaFrontDoor) -> None:
    frame = await round_trip(door.addresses[0], _producers_request([("t", [0])]))
    response = read_response(frame, ApiKey.DESCRIBE_PRODUCERS, P_HIGH)
    assert response.header_size + response.body_size == len(frame)
    assert response.body.topics[0].partitions[0].error_code == KioError.none


def _transactional_producers(bootstrap: str, tp: TopicPartition) -> list[Any]:
    """What DescribeProducers says of a transactional producer: in its transaction, after
    its commit, and after another producer with its id aborted its next one (the epoch
    bumped by the abort marker)."""
    seen = []
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="dp-tx", linger_ms=0)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("t", b"a", partition=1).get(timeout=20)
        producer.send("t", b"b", partition=1).get(timeout=20)
        seen.append(_producers(bootstrap, [tp])[tp].active_producers)
        producer.commit_transaction()
        seen.append(_producers(bootstrap, [tp])[tp].active_producers)
        producer.begin_transaction()
        producer.send("t", b"c", partition=1).get(timeout=20)
        # a new instance with the same id aborts the ongoing transaction at a new epoch
        fencing = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="dp-tx")
        fencing.init_transactions()
        fencing.close()
        seen.append(_producers(bootstrap, [tp])[tp].active_producers)
    finally:
        producer.close(timeout=1)
    return seen


@pytest.mark.asyncio
async def test_a_transactional_producers_coordinator_epoch_and_transaction_start(
    door: KafkaFrontDoor,
) -> None:
    tp = TopicPartition("t", 1)
    ongoing, committed, fenced = await asyncio.to_thread(
        _transactional_producers, door.bootstrap, tp
    )
    (active,) = ongoing
    assert (active.last_sequence, active.coordinator_epoch) == (1, -1)
    assert active.current_transaction_start_offset == 0  # its first batch
    (active,) = committed
    assert active.last_sequence == 1
    assert active.coordinator_epoch >= 0  # the commit marker's
    assert active.current_transaction_start_offset == -1
    (active,) = fenced
    assert active.producer_epoch > committed[0].producer_epoch  # the abort marker's epoch
    assert (active.last_sequence, active.last_timestamp) == (-1, -1)
    assert active.current_transaction_start_offset == -1
