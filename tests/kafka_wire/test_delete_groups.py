"""DeleteGroups over the Kafka protocol, decided by the group coordinator as Kafka's:
a group with members NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND, an empty one
deleted with its committed offsets. kafka-python's and confluent-kafka's admin clients
delete groups an aiokafka consumer made; the highest version over a socket with kio."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kio.schema.delete_groups.v2 import request as v2
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.offsets import Committed, OffsetStore
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.delete_groups import DeleteGroupsHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type, versions

LOW, HIGH = versions(ApiKey.DELETE_GROUPS)


def _delete_kafka_python(bootstrap: str, groups: list[str]) -> dict[str, str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        deleted: dict[str, str] = admin.delete_groups(groups)
        return deleted
    finally:
        admin.close()


def _delete_confluent(bootstrap: str, groups: list[str]) -> dict[str, str]:
    """Each group's outcome: "OK" or the name of librdkafka's error."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    outcome: dict[str, str] = {}
    for group, future in admin.delete_consumer_groups(groups, request_timeout=10).items():
        try:
            future.result(timeout=20)
        except KafkaException as exc:
            outcome[group] = exc.args[0].name()
        else:
            outcome[group] = "OK"
    return outcome


@pytest.mark.asyncio
async def test_kafka_python_deletes_a_group_once_its_consumer_has_left(
    door: KafkaFrontDoor,
) -> None:
    consumer = AIOKafkaConsumer(
        "t", bootstrap_servers=door.bootstrap, group_id="g", enable_auto_commit=False
    )
    await consumer.start()
    try:
        async with asyncio.timeout(20):
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=100)
        await consumer.commit({TopicPartition("t", 0): 3})
        deleted = await asyncio.to_thread(_delete_kafka_python, door.bootstrap, ["g", "nobody"])
        assert deleted == {"g": "NonEmptyGroupError", "nobody": "GroupIdNotFoundError"}
        assert door.offsets.partitions("g") == {"t": [0]}
    finally:
        await consumer.stop()  # leaves the group: it is Empty, its offsets kept
    deleted = await asyncio.to_thread(_delete_kafka_python, door.bootstrap, ["g"])
    assert deleted == {"g": "OK"}
    assert "g" not in door.coordinator.groups
    assert door.offsets.partitions("g") == {}
    deleted = await asyncio.to_thread(_delete_kafka_python, door.bootstrap, ["g"])
    assert deleted == {"g": "GroupIdNotFoundError"}


@pytest.mark.asyncio
async def test_confluent_deletes_a_group_that_only_committed_offsets(door: KafkaFrontDoor) -> None:
    door.offsets.commit("o", "t", 1, Committed(5, -1, ""))  # e.g. a consumer with assign()
    deleted = await asyncio.to_thread(_delete_confluent, door.bootstrap, ["o", "unknown"])
    assert deleted == {"o": "OK", "unknown": "GROUP_ID_NOT_FOUND"}
    assert door.offsets.groups() == []


@pytest.mark.asyncio
async def test_the_coordinator_deletes_an_empty_group_and_its_pending_ids() -> None:
    coordinator = GroupCoordinator()
    offsets = OffsetStore()
    try:
        protocols = [("range", b"")]
        first = coordinator.join(
            "p", "", "c", 6_000, 6_000, "consumer", protocols, require_known_id=True
        )
        assert not isinstance(first, asyncio.Future)
        assert first.error is ErrorCode.MEMBER_ID_REQUIRED
        assert coordinator.groups["p"].pending  # a pending id, no member: the group is Empty
        assert coordinator.delete("p", offsets) is ErrorCode.NONE
        assert "p" not in coordinator.groups
        assert coordinator.delete("p", offsets) is ErrorCode.GROUP_ID_NOT_FOUND
    finally:
        await coordinator.close()


def _request(version: int, groups: list[str]) -> Any:
    return build(request_type(ApiKey.DELETE_GROUPS, version), {"groups_names": groups})


@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
def test_every_version_answers_each_group_once_in_request_order(version: int) -> None:
    offsets = OffsetStore()
    offsets.commit("a", "t", 0, Committed(1, -1, None))
    handler = DeleteGroupsHandlers(GroupCoordinator(), offsets).apis()[ApiKey.DELETE_GROUPS][2]
    header = RequestHeader(ApiKey.DELETE_GROUPS, version, 1, "c")
    answer = handler(header, _request(version, ["b", "a", "b"]))
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        ("b", KioError.group_id_not_found),
        ("a", KioError.none),
    ]


@pytest.mark.asyncio
async def test_the_highest_version_over_a_socket_with_kio(door: KafkaFrontDoor) -> None:
    door.offsets.commit("k", "t", 0, Committed(2, -1, ""))
    frame = await round_trip(door.addresses[1], v2.DeleteGroupsRequest(groups_names=("k", "x")))
    response = read_response(frame, ApiKey.DELETE_GROUPS, HIGH)
    assert response.header_size + response.body_size == len(frame)
    assert [(r.group_id, r.error_code) for r in response.body.results] == [
        ("k", KioError.none),
        ("x", KioError.group_id_not_found),
    ]
    assert door.offsets.groups() == []
