"""ListOffsets by timestamp: the first offset whose record is stamped at or after the
time, found through each batch's max timestamp, as each real client asks for it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.sim import ProduceRequest

T0 = 1_700_000_000_000
TIMEOUT = 30.0


def _kafka_python_lookup(bootstrap: str, times: list[int]) -> list[tuple[int, int] | None]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = KTopicPartition("t", 0)
        out: list[tuple[int, int] | None] = []
        for at in times:
            found = consumer.offsets_for_times({tp: at})[tp]
            out.append(None if found is None else (found.offset, found.timestamp))
        return out
    finally:
        consumer.close()


def _confluent_lookup(bootstrap: str, times: list[int]) -> list[tuple[int, int] | None]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lookup"})
    try:
        out: list[tuple[int, int] | None] = []
        for at in times:
            [found] = consumer.offsets_for_times([CTopicPartition("t", 0, at)], timeout=10)
            assert found.error is None
            out.append(None if found.offset < 0 else (found.offset, -1))
        return out
    finally:
        consumer.close()


async def _aiokafka_lookup(bootstrap: str, times: list[int]) -> list[tuple[int, int] | None]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tp = TopicPartition("t", 0)
        out: list[tuple[int, int] | None] = []
        for at in times:
            found = (await consumer.offsets_for_times({tp: at}))[tp]
            out.append(None if found is None else (found.offset, found.timestamp))
        return out
    finally:
        await consumer.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "aiokafka"])
async def test_offsets_for_times_finds_the_first_record_at_or_after(
    door: KafkaFrontDoor, client: str
) -> None:
    async with asyncio.timeout(TIMEOUT):
        # over HTTP first: no producer timestamp, never found by time
        await door.cluster.produce(ProduceRequest("t", 0, [(None, b"http")]))
        producer = AIOKafkaProducer(bootstrap_servers=door.bootstrap, linger_ms=50)
        await producer.start()
        try:
            # offsets 1-3 in one batch (stamped T0, T0+30, T0+20), then 4 alone (T0+40)
            batch = [
                producer.send("t", b"a", partition=0, timestamp_ms=T0 + ms) for ms in (0, 30, 20)
            ]
            await asyncio.gather(*[await f for f in batch])
            await producer.send_and_wait("t", b"b", partition=0, timestamp_ms=T0 + 40)
        finally:
            await producer.stop()
        times = [0, T0 + 10, T0 + 25, T0 + 31, T0 + 99]
        if client == "aiokafka":
            found = await _aiokafka_lookup(door.bootstrap, times)
        else:
            lookup = _kafka_python_lookup if client == "kafka-python" else _confluent_lookup
            found = await asyncio.to_thread(lookup, door.bootstrap, times)
    expected: list[Any] = [(1, T0), (2, T0 + 30), (2, T0 + 30), (4, T0 + 40), None]
    if client == "confluent-kafka":  # it reports offsets only
        expected = [None if e is None else (e[0], -1) for e in expected]
    assert found == expected
    assert not door.stats.bad_input
