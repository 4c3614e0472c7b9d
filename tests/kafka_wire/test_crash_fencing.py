"""A crashed broker is fenced at once (it leaves every ISR), as Kafka's controller fences a
broker whose session ended: aiokafka's next acks=all send to a partition the crashed
leader followed completes in milliseconds, not after replica.lag.time.max.ms. The crash
the controller does not hear of (``crash_broker_unfenced``) keeps the broker until
``broker.session.timeout.ms``."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaProducer

from purgatory.kafka.embedded import AsyncEmbeddedKafka

# broker 0 leads t-0 and follows t-1 (round-robin assignment of a 3-broker cluster)
TOPICS = {"t": (2, 3)}


async def _producer(kafka: AsyncEmbeddedKafka) -> AIOKafkaProducer:
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers,
        acks="all",
        request_timeout_ms=30_000,
        retry_backoff_ms=20,
    )
    await producer.start()
    return producer


@pytest.mark.asyncio
async def test_acks_all_to_a_partition_the_crashed_leader_followed_is_fast() -> None:
    async with AsyncEmbeddedKafka(brokers=3, topics=TOPICS) as kafka, asyncio.timeout(30):
        producer = await _producer(kafka)
        try:
            for partition in (0, 1):  # every replica caught up
                await producer.send_and_wait("t", b"warm", partition=partition)
            crashed = kafka.leader("t", 0)
            assert crashed is not None
            assert crashed != kafka.leader("t", 1)
            assert crashed in kafka.describe("t", 1).isr
            await kafka.crash_broker(crashed)
            assert crashed not in kafka.describe("t", 1).isr
            start = time.monotonic()
            await producer.send_and_wait("t", b"after", partition=1)
            took = time.monotonic() - start
            await producer.send_and_wait("t", b"moved", partition=0)  # to the new leader
        finally:
            await producer.stop()
        assert took < 2.0, took  # was ~15 s: the lag check's period plus its timeout
        assert [r.value for r in kafka.records("t", 1)] == [b"warm", b"after"]
        assert [r.value for r in kafka.records("t", 0)] == [b"warm", b"moved"]


@pytest.mark.asyncio
async def test_an_unfenced_crash_holds_acks_all_until_the_session_times_out() -> None:
    configs = {"broker.session.timeout.ms": 1_500}
    async with (
        AsyncEmbeddedKafka(brokers=3, topics=TOPICS, configs=configs) as kafka,
        asyncio.timeout(30),
    ):
        producer = await _producer(kafka)
        try:
            for partition in (0, 1):
                await producer.send_and_wait("t", b"warm", partition=partition)
            crashed = kafka.leader("t", 0)
            assert crashed is not None
            await kafka.crash_broker_unfenced(crashed)
            assert kafka.leader("t", 0) == crashed  # the controller has not heard
            start = time.monotonic()
            await producer.send_and_wait("t", b"after", partition=1)
            took = time.monotonic() - start
            assert kafka.leader("t", 0) != crashed
            await producer.send_and_wait("t", b"moved", partition=0)
        finally:
            await producer.stop()
        assert 1.0 <= took < 5.0, took  # waited for the fencing, 1.5 s after the crash
        assert crashed not in kafka.describe("t", 1).isr
