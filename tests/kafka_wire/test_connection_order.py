"""A connection's requests are taken up one at a time, as Kafka takes them (it mutes a
channel from a request until its answer): a request sent right behind one that parks sees
what that one did. Found by confluent-kafka's own test_delete_records, which reads the log
start with ListOffsets right after DeleteRecords on the same connection."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer
from kio_wire import read_frame, read_response, request_frame

from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import build, request_type

EARLIEST = -2


@pytest.mark.asyncio
async def test_list_offsets_behind_a_parked_delete_records_sees_the_new_log_start() -> None:
    async with (
        asyncio.timeout(30),
        AsyncEmbeddedKafka(brokers=3, seed=1, topics={"t": (1, 3)}) as kafka,
    ):
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait("t", b"v%d" % i, partition=0)
        finally:
            await producer.stop()
        leader = kafka.leader("t", 0)
        for follower in (b for b in range(3) if b != leader):
            kafka.slow_follower(follower, 200.0)  # DeleteRecords parks until they follow
        delete = build(
            request_type(ApiKey.DELETE_RECORDS, 2),
            {
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 2}]}],
                "timeout": 10_000,
            },
        )
        earliest = build(
            request_type(ApiKey.LIST_OFFSETS, 9),
            {
                "replica_id": -1,
                "topics": [
                    {"name": "t", "partitions": [{"partition_index": 0, "timestamp": EARLIEST}]}
                ],
            },
        )
        reader, writer = await asyncio.open_connection(*kafka.front_door.addresses[leader])
        try:
            writer.write(request_frame(delete, correlation_id=1, client_id="c"))
            writer.write(request_frame(earliest, correlation_id=2, client_id="c"))
            deleted = read_response(await read_frame(reader), ApiKey.DELETE_RECORDS, 2).body
            listed = read_response(await read_frame(reader), ApiKey.LIST_OFFSETS, 9).body
        finally:
            writer.close()
            await writer.wait_closed()
    [partition] = deleted.topics[0].partitions
    assert (int(partition.error_code), partition.low_watermark) == (0, 2)
    [offsets] = listed.topics[0].partitions
    assert (int(offsets.error_code), offsets.offset) == (0, 2)
