"""Client telemetry (KIP-714) over the wire: client-metrics subscriptions as config
resources (IncrementalAlterConfigs, DescribeConfigs, ListConfigResources), with kio over
a socket (the manager's own rules: test_client_metrics.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio_wire import Wire

from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.sim.errors import ErrorCode

CLIENT_METRICS = 16
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
E = ErrorCode
ZERO = uuid.UUID(int=0)


# -- over the wire ---------------------------------------------------------------------------


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(brokers=1, seed=1) as cluster:
        yield cluster


async def _wire(kafka: AsyncEmbeddedKafka, software: str | None = "kio-test") -> Wire:
    reader, writer = await asyncio.open_connection(*kafka.addresses[0])
    wire = Wire(reader, writer)
    if software is not None:
        await wire.kio(
            ApiKey.API_VERSIONS, 3, client_software_name=software, client_software_version="1.0"
        )
    return wire


async def _close(wire: Wire) -> None:
    wire.writer.close()
    await wire.writer.wait_closed()


async def _alter(
    wire: Wire, name: str, *configs: tuple[str, int, str | None], validate_only: bool = False
) -> tuple[int, str | None]:
    answer = await wire.kio(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[
            {
                "resource_type": CLIENT_METRICS,
                "resource_name": name,
                "configs": [
                    {"name": n, "config_operation": op, "value": v} for n, op, v in configs
                ],
            }
        ],
        validate_only=validate_only,
    )
    [result] = answer.responses
    return result.error_code.value, result.error_message


async def _described(wire: Wire, name: str) -> tuple[int, dict[str, tuple[Any, ...]]]:
    answer = await wire.kio(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        resources=[
            {"resource_type": CLIENT_METRICS, "resource_name": name, "configuration_keys": None}
        ],
        include_synonyms=True,
        include_documentation=False,
    )
    [result] = answer.results
    return result.error_code.value, {
        c.name: (c.value, c.config_source, c.read_only, c.synonyms) for c in result.configs
    }


async def _listed(wire: Wire, version: int) -> list[str]:
    values: dict[str, Any] = {"resource_types": [CLIENT_METRICS]} if version else {}
    answer = await wire.kio(ApiKey.LIST_CONFIG_RESOURCES, version, **values)
    assert answer.error_code.value == 0
    return [r.resource_name for r in answer.config_resources]


@pytest.mark.asyncio
async def test_subscriptions_are_client_metrics_resources_altered_described_and_listed(
    kafka: AsyncEmbeddedKafka,
) -> None:
    wire = await _wire(kafka)
    try:
        assert await _listed(wire, 0) == []
        # validate_only checks and changes nothing
        assert await _alter(wire, "s", ("interval.ms", SET, "1000"), validate_only=True) == (
            0,
            None,
        )
        assert await _listed(wire, 1) == []
        assert await _alter(
            wire, "s", ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000")
        ) == (0, None)
        assert await _alter(wire, "s", ("metrics", APPEND, "org.apache.kafka.consumer.,x")) == (
            0,
            None,
        )
        assert await _alter(wire, "s", ("metrics", SUBTRACT, "x")) == (0, None)
        assert await _alter(wire, "t", ("match", APPEND, "client_id=app")) == (0, None)
        error, configs = await _described(wire, "s")
        assert error == 0
        assert configs == {
            "metrics": ("org.apache.kafka.producer.,org.apache.kafka.consumer.", 7, False, ()),
            "interval.ms": ("1000", 7, False, ()),
        }
        assert await _listed(wire, 0) == ["s", "t"]
        assert await _listed(wire, 1) == ["s", "t"]
        # what Kafka refuses, as it refuses it; nothing changes
        assert await _alter(wire, "s", ("interval.ms", SET, "50")) == (
            E.INVALID_REQUEST.number,
            "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        )
        assert await _alter(wire, "s", ("colour", SET, "red")) == (
            E.INVALID_REQUEST.number,
            "Unknown client metrics configuration: colour",
        )
        assert await _alter(wire, "s", ("interval.ms", APPEND, "5")) == (
            E.INVALID_CONFIG.number,
            "Can't APPEND to key interval.ms because its type is not LIST.",
        )
        assert await _alter(wire, "s", ("match", SET, "client_id")) == (
            E.INVALID_CONFIG.number,
            "Illegal client matching pattern: client_id",
        )
        assert await _alter(wire, "", ("metrics", SET, "a")) == (
            E.INVALID_REQUEST.number,
            "Subscription name can't be empty",
        )
        assert (await _described(wire, "s"))[1]["interval.ms"][0] == "1000"
        assert (await _described(wire, ""))[0] == E.INVALID_REQUEST.number
        assert await _described(wire, "none") == (0, {})
        # every config deleted: the subscription goes
        assert await _alter(wire, "t", ("match", DELETE, None)) == (0, None)
        assert await _listed(wire, 1) == ["s"]
    finally:
        await _close(wire)


@pytest.mark.asyncio
async def test_client_metrics_resources_need_the_clusters_configs_acls() -> None:
    from purgatory.kafka.acls import Acl, Operation, PatternType, Permission, ResourceType

    async with AsyncEmbeddedKafka(
        brokers=1,
        configs={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        },
    ) as cluster:
        wire = await _wire(cluster)
        try:
            refused = E.CLUSTER_AUTHORIZATION_FAILED.number
            assert (await _alter(wire, "s", ("metrics", SET, "*")))[0] == refused
            assert (await _described(wire, "s"))[0] == refused
            assert cluster.front_door.client_metrics.subscriptions() == []
            for operation in (Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS):
                cluster.front_door.acls.add(
                    Acl(
                        ResourceType.CLUSTER,
                        "kafka-cluster",
                        PatternType.LITERAL,
                        "User:ANONYMOUS",
                        "*",
                        operation,
                        Permission.ALLOW,
                    )
                )
            assert await _alter(wire, "s", ("metrics", SET, "*")) == (0, None)
            assert (await _described(wire, "s"))[1]["metrics"][0] == "*"
        finally:
            await _close(wire)
