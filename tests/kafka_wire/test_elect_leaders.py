"""ElectLeaders over the Kafka protocol: kafka-python's admin client asks for a preferred
election, which waits in the ElectLeader purgatory until the preferred replica leads; every
version through kafka-python's encoding, the highest over a socket with kio."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse
from kio.schema.elect_leaders.v2 import request as v2
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.errors import ErrorCode
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.elections import ElectionHandlers
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import encode_response, read_request, versions
from purgatory.kafka.wire_errors import DecodeError

LOW, HIGH = versions(ApiKey.ELECT_LEADERS)


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


def _typed(request: Any) -> tuple[Any, Any]:
    """kafka-python's ``request`` as the server hands it to a handler: kio's."""
    request.with_header(correlation_id=1, client_id="c")
    frame = bytes(request.encode(header=True))
    return read_request(frame, ApiKey.ELECT_LEADERS, request.API_VERSION)


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
async def test_every_version_answers_each_partition_and_a_null_list_means_all(
    door: KafkaFrontDoor, version: int
) -> None:
    fields: dict[str, Any] = {"topic_partitions": None, "timeout_ms": 1000}  # every partition
    if version >= 1:
        fields["election_type"] = 0  # preferred (v0 has no type: always preferred)
    low, high, handler = ElectionHandlers(door.cluster).apis()[ApiKey.ELECT_LEADERS]
    assert low <= version <= high
    frame = encode_response(7, await handler(*_typed(ElectLeadersRequest[version](**fields))))
    answer = ElectLeadersResponse[version].decode(frame, header=True, framed=True)
    if version >= 1:
        assert answer.error_code == ErrorCode.NONE.number
    [topic] = answer.replica_election_results
    assert topic.topic == "t"
    results = [(p.partition_id, p.error_code, p.error_message) for p in topic.partition_result]
    assert results == [
        (0, ErrorCode.ELECTION_NOT_NEEDED.number, "ELECTION_NOT_NEEDED"),
        (1, ErrorCode.ELECTION_NOT_NEEDED.number, "ELECTION_NOT_NEEDED"),
    ]


@pytest.mark.asyncio
async def test_an_unknown_election_type_is_malformed(door: KafkaFrontDoor) -> None:
    request = ElectLeadersRequest[HIGH](election_type=2, topic_partitions=None, timeout_ms=1000)
    with pytest.raises(DecodeError, match="election type"):
        ElectionHandlers(door.cluster).elect_leaders(*_typed(request))


@pytest.mark.asyncio
async def test_flexible_elect_leaders_round_trips_over_a_socket(door: KafkaFrontDoor) -> None:
    """ElectLeaders at its highest version, built and read with kio: an unclean election
    where the leader is alive is not needed, and a partition nobody has is unknown."""
    request = v2.ElectLeadersRequest(
        election_type=1,
        topic_partitions=(v2.TopicPartitions(topic="t", partitions=(1, 5)),),
        timeout=datetime.timedelta(seconds=5),
    )
    assert request.__version__ == HIGH
    assert request.__flexible__
    frame = await round_trip(door.addresses[2], request, correlation_id=3)
    answer_header, used, response, size = read_response(frame, ApiKey.ELECT_LEADERS, HIGH)
    assert (answer_header.correlation_id, used + size) == (3, len(frame))
    assert response.error_code == KioError.none
    [topic] = response.replica_election_results
    assert topic.topic == "t"
    codes = {p.partition_id: p.error_code for p in topic.partition_result}
    assert codes == {1: KioError.election_not_needed, 5: KioError.unknown_topic_or_partition}
    assert door.stats.requests["ELECT_LEADERS", HIGH] == 1
    assert not door.stats.bad_input
