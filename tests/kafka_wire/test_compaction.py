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
