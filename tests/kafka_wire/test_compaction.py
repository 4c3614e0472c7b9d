"""Compacted topics over the Kafka protocol: a record without a key is refused as Kafka's
LogValidator refuses it (INVALID_RECORD, with the record's index), and a consumer reading
from the start after :meth:`EmbeddedKafka.compact` sees the compacted log (confluent-kafka,
kafka-python)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from confluent_kafka import Producer
from kio_wire import read_response, round_trip

from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.record_batches import encode_batch
from purgatory.kafka.schemas import build, request_type

INVALID_RECORD = 87
MESSAGE = "Compacted topic cannot accept message without key in topic partition c-0"


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(brokers=3, seed=1) as kafka:
        await kafka.create_topic("c", 1, 3, configs={"cleanup.policy": "compact"})
        await kafka.create_topic("d", 1, 3, configs={"cleanup.policy": "delete"})
        yield kafka


async def _produce(kafka: AsyncEmbeddedKafka, topic: str, records: bytes, version: int) -> Any:
    request = build(
        request_type(ApiKey.PRODUCE, version),
        {
            "acks": -1,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    leader = kafka.leader(topic, 0)
    assert leader is not None
    frame = await round_trip(kafka.addresses[leader], request)
    [answer] = read_response(frame, ApiKey.PRODUCE, version).body.responses
    [partition] = answer.partition_responses
    return partition


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [8, 9, 12])
async def test_records_without_a_key_are_refused_each_by_index(
    kafka: AsyncEmbeddedKafka, version: int
) -> None:
    records = [(b"k0", b"v"), (None, b"v"), (b"k2", None), (None, None)]
    batch = encode_batch(0, 0, records, 1_700_000_000_000)
    refused = await _produce(kafka, "c", batch, version)
    assert int(refused.error_code) == INVALID_RECORD
    assert refused.base_offset == -1
    assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [
        (1, MESSAGE),
        (3, MESSAGE),
    ]
    assert refused.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{MESSAGE}'), "
        f"RecordError(batchIndex=3, message='{MESSAGE}')]"
    )
    assert kafka.describe("c", 0).log_end_offset == 0  # the whole batch refused
    # keyed records (a tombstone among them) are taken; a delete topic takes any record
    keyed = await _produce(
        kafka, "c", encode_batch(0, 0, [(b"k0", b"v"), (b"k", None)], 0), version
    )
    assert (int(keyed.error_code), keyed.base_offset, list(keyed.record_errors)) == (0, 0, [])
    assert keyed.error_message is None
    anything = await _produce(kafka, "d", batch, version)
    assert (int(anything.error_code), anything.base_offset) == (0, 0)


def _keyless_round(bootstrap: str) -> dict[str, int | None]:
    producer = Producer({"bootstrap.servers": bootstrap, "retries": 0})
    outcome: dict[str, int | None] = {}

    def send(label: str, topic: str, key: bytes | None) -> None:
        def report(err: Any, msg: Any) -> None:
            outcome[label] = None if err is None else err.code()

        producer.produce(topic, b"v", key=key, on_delivery=report)
        producer.flush(10)

    send("compacted, no key", "c", None)
    send("compacted, a key", "c", b"k")
    send("delete, no key", "d", None)
    return outcome


@pytest.mark.asyncio
async def test_confluent_producer_gets_invalid_record_for_a_keyless_record(
    kafka: AsyncEmbeddedKafka,
) -> None:
    outcome = await asyncio.to_thread(_keyless_round, kafka.bootstrap_servers)
    assert outcome == {
        "compacted, no key": INVALID_RECORD,
        "compacted, a key": None,
        "delete, no key": None,
    }


def _produce_keys(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value in [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", None)]:
        producer.produce("c", value, key=key)
        producer.flush(10)


def _confluent_read(bootstrap: str, count: int) -> list[tuple[int, bytes, bytes | None]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("c", 0, 0)])
    out: list[tuple[int, bytes, bytes | None]] = []
    for _ in range(50):
        for msg in consumer.consume(10, 0.2):
            if msg.error() is None:
                out.append((msg.offset(), msg.key(), msg.value()))
        if len(out) >= count:
            break
    consumer.close()
    return out


def _kafka_python_read(bootstrap: str, count: int) -> list[tuple[int, bytes, bytes | None]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    consumer.assign([TopicPartition("c", 0)])
    consumer.seek(TopicPartition("c", 0), 0)
    out: list[tuple[int, bytes, bytes | None]] = []
    for _ in range(50):
        for records in consumer.poll(200).values():
            out += [(r.offset, r.key, r.value) for r in records]
        if len(out) >= count:
            break
    consumer.close()
    return out


@pytest.mark.asyncio
async def test_consumers_reading_from_the_start_see_the_compacted_log(
    kafka: AsyncEmbeddedKafka,
) -> None:
    await asyncio.to_thread(_produce_keys, kafka.bootstrap_servers)
    p = kafka.cluster.partition("c", 0)
    assert p is not None
    for _ in range(500):  # the followers learn the HW on their next fetch
        if set(p.hws.values()) == {5}:
            break
        await asyncio.sleep(0.01)
    assert await kafka.compact("c") == 3  # each replica cleans its own log
    expected = [(2, b"a", b"2"), (3, b"c", b"1"), (4, b"b", None)]  # the tombstone stays
    assert await asyncio.to_thread(_confluent_read, kafka.bootstrap_servers, 3) == expected
    assert await asyncio.to_thread(_kafka_python_read, kafka.bootstrap_servers, 3) == expected
    offsets = {
        b: [r.offset for r in log.read_records(0, log.leo, 1 << 20)] for b, log in p.logs.items()
    }
    assert set(map(tuple, offsets.values())) == {(2, 3, 4)}  # the same offsets on every replica
