"""Each real client, at its newest release and default settings, negotiates the newest
versions it shares with the broker: the broker's request counter (by API and version, as
``/metrics`` shows it) records what each one actually sent, and the clients that speak
flexible versions (KIP-482) use them."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from purgatory.kafka.front_door import KafkaFrontDoor

TIMEOUT = 30.0
#: the first flexible version of each API (Kafka's schemas' flexibleVersions)
FLEXIBLE = {"METADATA": 9, "PRODUCE": 9, "FETCH": 12, "API_VERSIONS": 3, "LIST_OFFSETS": 6}


def _used(door: KafkaFrontDoor, before: Counter[tuple[str, int]]) -> dict[str, set[int]]:
    """The versions of each API sent since ``before``."""
    used: dict[str, set[int]] = {}
    for (api, version), count in door.stats.requests.items():
        if count > before[api, version]:
            used.setdefault(api, set()).add(version)
    return used


def _confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce("t", b"v", partition=0)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-confluent"})
    consumer.assign([CTopicPartition("t", 0, 0)])
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return
        raise AssertionError("confluent-kafka read nothing back")
    finally:
        consumer.close()


def _kafka_python(bootstrap: str) -> tuple[int, ...]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        producer.send("t", b"v", partition=0).get(timeout=10)
        inferred = producer.config["api_version"]
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5000)
    try:
        consumer.assign([KTopicPartition("t", 0)])
        consumer.seek_to_beginning()
        assert next(iter(consumer)).value == b"v"
    finally:
        consumer.close()
    return tuple(inferred)


async def _aiokafka(bootstrap: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait("t", b"v", partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition("t", 0)])
        await consumer.seek_to_beginning()
        assert (await consumer.getone()).value == b"v"
    finally:
        await consumer.stop()


def _flexible(used: dict[str, set[int]]) -> set[str]:
    return {api for api, first in FLEXIBLE.items() if any(v >= first for v in used.get(api, ()))}


@pytest.mark.asyncio
async def test_librdkafka_sends_flexible_versions_and_says_who_it_is(door) -> None:
    before = Counter(door.stats.requests)
    async with asyncio.timeout(TIMEOUT):
        await asyncio.to_thread(_confluent, door.bootstrap)
    used = _used(door, before)
    assert _flexible(used) >= {"METADATA", "PRODUCE", "FETCH", "API_VERSIONS"}, used
    # Fetch by topic id (v13+) and the newest Produce it knows
    assert max(used["FETCH"]) >= 13, used
    assert any(name == "confluent-kafka-python" for name, _ in door.stats.clients)


@pytest.mark.asyncio
async def test_kafka_python_infers_a_kafka_4_broker_and_sends_flexible_versions(door) -> None:
    before = Counter(door.stats.requests)
    async with asyncio.timeout(TIMEOUT):
        inferred = await asyncio.to_thread(_kafka_python, door.bootstrap)
    assert inferred >= (4, 0)
    used = _used(door, before)
    assert _flexible(used) >= {"METADATA", "PRODUCE", "FETCH", "API_VERSIONS"}, used


@pytest.mark.asyncio
async def test_aiokafka_uses_its_newest_versions(door) -> None:
    """aiokafka 0.14 speaks no flexible version: it stays at its newest non-flexible ones,
    which the broker serves (before the schema-driven wire it was held at the same)."""
    before = Counter(door.stats.requests)
    async with asyncio.timeout(TIMEOUT):
        await _aiokafka(door.bootstrap)
    used = _used(door, before)
    assert max(used["PRODUCE"]) >= 7, used
    assert max(used["FETCH"]) >= 10, used
