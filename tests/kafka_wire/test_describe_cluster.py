"""DescribeCluster over the Kafka protocol: kafka-python's and confluent-kafka's admin
clients see the live brokers at the addresses Metadata gives, the cluster id and the
controller; every version through the handler, the highest over a socket with kio."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kio.schema.describe_cluster.v2 import request as v2
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.describe_cluster import DescribeClusterHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type, versions

LOW, HIGH = versions(ApiKey.DESCRIBE_CLUSTER)
#: the default of cluster_authorized_operations: not computed (no authorizer here)
NOT_GIVEN = -(2**31)


def _kafka_python(bootstrap: str) -> dict[str, Any]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        described: dict[str, Any] = admin.describe_cluster()
        return described
    finally:
        admin.close()


def _confluent(bootstrap: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_cluster(request_timeout=10).result(timeout=20)


@pytest.mark.asyncio
async def test_kafka_python_admin_sees_the_live_brokers_the_cluster_id_and_the_controller(
    door: KafkaFrontDoor,
) -> None:
    described = await asyncio.to_thread(_kafka_python, door.bootstrap)
    assert described["cluster_id"] == "purgatory"
    assert described["controller_id"] == 0  # as Metadata says: the lowest live broker
    brokers = {(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]}
    assert brokers == {(b, *door.addresses[b]) for b in (0, 1, 2)}
    assert not any(b["is_fenced"] for b in described["brokers"])

    await door.cluster.crash_broker(0)
    described = await asyncio.to_thread(_kafka_python, door.bootstrap)
    assert described["controller_id"] == 1
    # kafka-python asks for fenced brokers too: the crashed one is listed, fenced
    fenced = {b["broker_id"]: b["is_fenced"] for b in described["brokers"]}
    assert fenced == {0: True, 1: False, 2: False}


@pytest.mark.asyncio
async def test_confluent_admin_describes_the_cluster(door: KafkaFrontDoor) -> None:
    described = await asyncio.to_thread(_confluent, door.bootstrap)
    assert described.cluster_id == "purgatory"
    assert described.controller.id == 0
    nodes = {(n.id, n.host, n.port) for n in described.nodes}
    assert nodes == {(b, *door.addresses[b]) for b in (0, 1, 2)}


def _request(version: int, **fields: Any) -> Any:
    values = {"include_cluster_authorized_operations": True, **fields}
    return build(request_type(ApiKey.DESCRIBE_CLUSTER, version), values)


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
async def test_every_version_lists_the_live_brokers(door: KafkaFrontDoor, version: int) -> None:
    await door.cluster.crash_broker(2)
    low, high, handler = DescribeClusterHandlers(door.cluster, door.addresses).apis()[
        ApiKey.DESCRIBE_CLUSTER
    ]
    assert low <= version <= high
    header = RequestHeader(ApiKey.DESCRIBE_CLUSTER, version, 1, "c")
    answer = handler(header, _request(version))
    assert answer.error_code == KioError.none
    assert answer.cluster_id == "purgatory"
    assert answer.controller_id == 0
    assert [(b.broker_id, b.host, b.port) for b in answer.brokers] == [
        (b, *door.addresses[b]) for b in (0, 1)
    ]
    assert answer.cluster_authorized_operations == NOT_GIVEN


@pytest.mark.asyncio
async def test_an_endpoint_type_other_than_brokers_is_refused_as_kafka_refuses_it(
    door: KafkaFrontDoor,
) -> None:
    handler = DescribeClusterHandlers(door.cluster, door.addresses).apis()[ApiKey.DESCRIBE_CLUSTER][
        2
    ]
    header = RequestHeader(ApiKey.DESCRIBE_CLUSTER, HIGH, 1, "c")
    controllers = handler(header, _request(HIGH, endpoint_type=2, include_fenced_brokers=False))
    assert controllers.error_code == KioError.mismatched_endpoint_type
    assert controllers.error_message == (
        "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
        "type CONTROLLER"
    )
    other = handler(header, _request(HIGH, endpoint_type=7, include_fenced_brokers=False))
    assert other.error_code == KioError.unsupported_endpoint_type
    assert other.error_message == "Unsupported endpoint type 7"
    assert other.brokers == ()


@pytest.mark.asyncio
async def test_the_highest_version_over_a_socket_with_kio(door: KafkaFrontDoor) -> None:
    await door.cluster.crash_broker(1)
    request = v2.DescribeClusterRequest(
        include_cluster_authorized_operations=False, include_fenced_brokers=True
    )
    frame = await round_trip(door.addresses[0], request)
    response = read_response(frame, ApiKey.DESCRIBE_CLUSTER, HIGH)
    assert response.header_size + response.body_size == len(frame)
    body = response.body
    assert body.error_code == KioError.none
    assert body.endpoint_type == 1
    assert body.cluster_id == "purgatory"
    assert body.controller_id == 0
    assert [(b.broker_id, b.port, b.is_fenced) for b in body.brokers] == [
        (0, door.addresses[0][1], False),
        (1, door.addresses[1][1], True),
        (2, door.addresses[2][1], False),
    ]
