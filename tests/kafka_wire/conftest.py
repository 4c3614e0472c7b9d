"""The Kafka front door over a fresh three-broker cluster with topic ``t`` (2 partitions,
replication factor 3), listening on free loopback ports."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.sim import Cluster


@pytest_asyncio.fixture
async def door() -> AsyncIterator[KafkaFrontDoor]:
    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=3)
        front = KafkaFrontDoor(cluster, "127.0.0.1", 0)
        await front.start()
        try:
            yield front
        finally:
            await front.close()
