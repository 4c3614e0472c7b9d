"""The Kafka front door over a fresh three-broker embedded cluster with topic ``t`` (2
partitions, replication factor 3), listening on free loopback ports, on the test's loop.
Tests of synchronous clients use the ``kafka_cluster`` fixture (its own loop thread)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.front_door import KafkaFrontDoor


@pytest_asyncio.fixture
async def door() -> AsyncIterator[KafkaFrontDoor]:
    async with AsyncEmbeddedKafka(brokers=3, seed=1, topics={"t": (2, 3)}) as kafka:
        yield kafka.front_door
