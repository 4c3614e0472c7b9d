"""The Kafka front door over a fresh three-broker embedded cluster with topic ``t`` (2
partitions, replication factor 3), listening on free loopback ports, on the test's loop.
Tests of synchronous clients use the ``kafka_cluster`` fixture (its own loop thread)."""

from __future__ import annotations

import gc
import warnings
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.front_door import KafkaFrontDoor

#: the warning for a client socket whose connect was refused: bound to the wildcard
#: address, no peer (``raddr`` would follow ``laddr``), as kafka-python leaves one
REFUSED_CONNECT = r"unclosed <socket\.socket [^>]*laddr=\('0\.0\.0\.0', \d+\)>$"


@pytest_asyncio.fixture
async def door() -> AsyncIterator[KafkaFrontDoor]:
    async with AsyncEmbeddedKafka(brokers=3, seed=1, topics={"t": (2, 3)}) as kafka:
        yield kafka.front_door


@pytest_asyncio.fixture
async def coordinator() -> AsyncIterator[GroupCoordinator]:
    """A group coordinator of its own, closed after the test."""
    groups = GroupCoordinator()
    try:
        yield groups
    finally:
        await groups.close()


@pytest.fixture
def refused_sockets_collected() -> Iterator[None]:
    """kafka-python 3.0 does not close the socket of a connect that was refused (the
    crashed broker's); the socket lives on in the traceback of a logged error, until the
    log capture lets go of the test's records, and warns when collected. Collected here,
    not in whichever test the collector next runs, and only those pass: a socket whose
    connect never completed, bound to the wildcard address with no peer (``laddr`` last
    in its repr). The broker's side of a connection, with the listener's address and a
    peer, is not filtered: the cluster closes every one."""
    yield
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", REFUSED_CONNECT, ResourceWarning)
        gc.collect()
