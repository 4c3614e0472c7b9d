"""Client telemetry (KIP-714) over the wire: client-metrics subscriptions as config
resources (IncrementalAlterConfigs, DescribeConfigs, ListConfigResources), and
GetTelemetrySubscriptions and PushTelemetry, what was pushed read through
``EmbeddedKafka.telemetry()``; with kio over a socket, and with librdkafka's producer,
which pushes its metrics once a subscription matches it (the manager's own rules:
test_client_metrics.py)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from confluent_kafka import Producer
from kio_wire import Wire
from test_otlp import gauges

from purgatory.errors import ErrorCode
from purgatory.kafka.client_metrics import subscription_id
from purgatory.kafka.compression import GZIP, LZ4, SNAPPY, ZSTD, deflate
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.protocol import ApiKey

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
        # AlterConfigs replaces them all
        replaced = await wire.kio(
            ApiKey.ALTER_CONFIGS,
            2,
            resources=[
                {
                    "resource_type": CLIENT_METRICS,
                    "resource_name": "s",
                    "configs": [{"name": "interval.ms", "value": "200"}],
                }
            ],
            validate_only=False,
        )
        assert replaced.responses[0].error_code.value == 0
        assert (await _described(wire, "s"))[1] == {"interval.ms": ("200", 7, False, ())}
    finally:
        await _close(wire)


@pytest.mark.asyncio
async def test_a_client_gets_its_subscription_and_its_push_arrives(
    kafka: AsyncEmbeddedKafka,
) -> None:
    admin = await _wire(kafka)
    try:
        # another client's subscription: telemetry is served, this client has none
        assert await _alter(
            admin,
            "theirs",
            ("metrics", SET, "other."),
            ("match", SET, "client_software_name=kio-test"),
        ) == (0, None)
        client = await _wire(kafka, software="kio-client")
    except BaseException:
        await _close(admin)
        raise
    try:
        # no subscription of its own: nothing to push, at the default interval
        none = await client.kio(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, client_instance_id=ZERO)
        assert none.error_code.value == 0
        assert none.client_instance_id != ZERO
        assert none.requested_metrics == ()
        assert none.push_interval.total_seconds() == 300
        assert list(none.accepted_compression_types) == [ZSTD, LZ4, GZIP, SNAPPY]
        assert (none.telemetry_max_bytes, none.delta_temporality) == (1 << 20, True)
        again = await client.kio(
            ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, client_instance_id=none.client_instance_id
        )
        assert again.error_code.value == E.THROTTLING_QUOTA_EXCEEDED.number
        # a subscription for this client's software only
        assert await _alter(
            admin,
            "mine",
            ("metrics", SET, "org.apache.kafka.producer."),
            ("interval.ms", SET, "100"),
            ("match", SET, "client_software_name=kio-client,client_id=t"),
        ) == (0, None)
        got = await client.kio(
            ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, client_instance_id=none.client_instance_id
        )
        assert got.error_code.value == 0
        assert got.client_instance_id == none.client_instance_id
        assert got.requested_metrics == ("org.apache.kafka.producer.",)
        assert got.push_interval.total_seconds() == 0.1
        assert got.subscription_id == subscription_id(
            ["org.apache.kafka.producer."], 100, got.client_instance_id
        )
        metrics = gauges({"org.apache.kafka.producer.record.send.total": 3})
        pushed = await client.kio(
            ApiKey.PUSH_TELEMETRY,
            0,
            client_instance_id=got.client_instance_id,
            subscription_id=got.subscription_id,
            terminating=False,
            compression_type=GZIP,
            metrics=deflate(GZIP, metrics),
        )
        assert pushed.error_code.value == 0
        wrong = await client.kio(
            ApiKey.PUSH_TELEMETRY,
            0,
            client_instance_id=got.client_instance_id,
            subscription_id=got.subscription_id,
            terminating=True,
            compression_type=9,
            metrics=metrics,
        )
        assert wrong.error_code.value == E.UNSUPPORTED_COMPRESSION_TYPE.number
        telemetry = kafka.telemetry()[got.client_instance_id]
        assert (telemetry.client_id, telemetry.software_name, telemetry.software_version) == (
            "t",
            "kio-client",
            "1.0",
        )
        assert telemetry.latest() == {"org.apache.kafka.producer.record.send.total": 3}
    finally:
        await _close(admin)
        await _close(client)


@pytest.mark.asyncio
async def test_client_metrics_resources_need_cluster_configs_acls_and_telemetry_none() -> None:
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
            # Kafka asks no ACL for telemetry itself (served once a subscription exists)
            cluster.subscribe_telemetry("other", match=["client_id=someone-else"])
            got = await wire.kio(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, client_instance_id=ZERO)
            assert got.error_code.value == 0
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


# -- a real client ---------------------------------------------------------------------------


def _wait_for(
    kafka: EmbeddedKafka, producer: Producer, within_s: float = 15.0
) -> dict[uuid.UUID, Any]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        pushed = {i: t for i, t in kafka.telemetry().items() if t.pushes}
        if pushed:
            return pushed
        producer.poll(0.05)
    raise AssertionError("no telemetry pushed")


def test_librdkafka_pushes_its_producer_metrics_when_a_subscription_matches() -> None:
    with EmbeddedKafka(brokers=1, topics={"t": 1}) as kafka:
        kafka.subscribe_telemetry(
            "producers",
            metrics=["org.apache.kafka.producer."],
            interval_ms=100,
            match=["client_id=telemetry-test"],
        )
        producer = Producer(
            {"bootstrap.servers": kafka.bootstrap_servers, "client.id": "telemetry-test"}
        )
        try:
            producer.produce("t", b"v")
            assert producer.flush(10) == 0
            [telemetry] = _wait_for(kafka, producer).values()
        finally:
            producer.flush(5)
        assert telemetry.client_id == "telemetry-test"
        assert (telemetry.software_name or "").startswith("confluent-kafka-python")
        names = telemetry.names()
        assert names
        assert all(n.startswith("org.apache.kafka.producer.") for n in names), names
        assert "org.apache.kafka.producer.request.latency.avg" in names
        assert all(p.description for p in telemetry.points)


def test_librdkafka_pushes_nothing_without_a_subscription_and_works_as_before() -> None:
    with EmbeddedKafka(brokers=1, topics={"t": 1}) as kafka:
        kafka.subscribe_telemetry("others", match=["client_id=someone-else"])
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "client.id": "plain"})
        producer.produce("t", b"v")
        assert producer.flush(10) == 0
        producer.poll(0.3)  # three intervals of the other client's subscription
        assert kafka.telemetry() == {}
        assert [r.value for r in kafka.records("t", 0)] == [b"v"]


TELEMETRY = {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY}


@pytest.mark.asyncio
async def test_telemetry_is_served_only_while_a_subscription_asks_for_metrics(
    kafka: AsyncEmbeddedKafka,
) -> None:
    """As Kafka serves client telemetry only with a receiver of the metrics: without a
    subscription ApiVersions does not name it (so librdkafka neither asks nor logs that it
    did), and a request of it is an unknown API."""
    assert not TELEMETRY & set(kafka.front_door.advertised())
    wire = await _wire(kafka)
    try:
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await wire.kio(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, client_instance_id=ZERO)
    finally:
        await _close(wire)
    kafka.subscribe_telemetry("any")
    assert TELEMETRY <= set(kafka.front_door.advertised())
    kafka.unsubscribe_telemetry("any")
    assert not TELEMETRY & set(kafka.front_door.advertised())


def test_librdkafka_says_nothing_of_telemetry_to_a_broker_without_subscriptions() -> None:
    logger = logging.getLogger("test_telemetry.librdkafka")
    logger.setLevel(logging.DEBUG)  # librdkafka says it at its level 6, INFO
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        with EmbeddedKafka(brokers=1, topics={"t": 1}) as kafka:
            producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "logger": logger})
            producer.produce("t", b"v")
            assert producer.flush(10) == 0
            producer.poll(0.1)
    finally:
        logger.removeHandler(handler)
    said = [r.getMessage() for r in records]
    assert not [line for line in said if "elemetry" in line or "SUBSCRIPTIONS" in line], said
