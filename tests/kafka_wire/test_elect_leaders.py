"""ElectLeaders over the Kafka protocol: kafka-python's admin client asks for a preferred
election, which waits in the ElectLeader purgatory until the preferred replica leads."""

from __future__ import annotations

import asyncio

import pytest
from kafka import KafkaAdminClient

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.elections import ElectionHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.sim.errors import ErrorCode


def _elect(bootstrap: str, partitions: dict[str, list[int]]) -> object:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return admin.elect_leaders(0, partitions, timeout_ms=5_000, raise_errors=False)
    finally:
        admin.close()


@pytest.mark.asyncio
async def test_kafka_python_admin_moves_leadership_back_to_the_preferred_replica(
    door: KafkaFrontDoor,
) -> None:
    cluster = door.cluster
    await cluster.fail_over("t", 0, 1)  # t-0 prefers broker 0
    response = await asyncio.to_thread(_elect, door.bootstrap, {"t": [0, 1]})
    p = cluster.partition("t", 0)
    assert p is not None
    assert p.leader == 0
    codes = {
        (result.topic, part.partition_id): part.error_code
        for result in response.replica_election_results  # type: ignore[attr-defined]
        for part in result.partition_result
    }
    assert codes == {
        ("t", 0): ErrorCode.NONE.number,
        ("t", 1): ErrorCode.ELECTION_NOT_NEEDED.number,
    }
    elect = sum(
        b.replica_manager.purgatories["ElectLeader"].statistics().completed
        for b in cluster.brokers.values()
    )
    assert elect == 1  # it parked until broker 0 led


@pytest.mark.asyncio
async def test_v1_wire_answer_names_each_partition_and_a_null_list_means_all(
    door: KafkaFrontDoor,
) -> None:
    body = Writer().int8(0).int32(-1).int32(1000).buf  # preferred, every partition
    header = RequestHeader(ApiKey.ELECT_LEADERS, 1, 7, "c")
    answer = Reader(await ElectionHandlers(door.cluster).elect_leaders(header, Reader(body)))
    assert answer.int32() == 0  # throttle
    assert answer.int16() == ErrorCode.NONE.number
    assert answer.int32() == 1
    assert answer.string() == "t"
    assert answer.int32() == 2
    results = [(answer.int32(), answer.int16(), answer.nullable_string()) for _ in range(2)]
    assert results == [
        (0, ErrorCode.ELECTION_NOT_NEEDED.number, "ELECTION_NOT_NEEDED"),
        (1, ErrorCode.ELECTION_NOT_NEEDED.number, "ELECTION_NOT_NEEDED"),
    ]
    assert answer.remaining == 0
