"""Mutated real-client requests against the whole front door, over sockets (loopback).

The corpus is every request frame real clients sent in one session (a producer, a group
consumer that commits); each case is one of them with bytes flipped, cut, extended or with
a length field replaced. Whatever a case does, no handler may fail with anything but a
decode error, and the server keeps serving: never a crash, never a hang.
"""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.server import KafkaProtocolServer
from purgatory.sim import Cluster

CASES = 600
CONCURRENCY = 25
SEED = 12


async def _record_corpus(door: KafkaFrontDoor) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=door.bootstrap, acks="all", enable_idempotence=True
    )
    await producer.start()
    try:
        for i in range(4):
            await producer.send_and_wait("t", b"v%d" % i, key=b"k", partition=i % 2)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        "t",
        bootstrap_servers=door.bootstrap,
        group_id="g",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        heartbeat_interval_ms=50,
    )
    await consumer.start()
    try:
        got = 0
        while got < 4:
            got += sum(len(m) for m in (await consumer.getmany(timeout_ms=500)).values())
        await consumer.commit()
        await asyncio.sleep(0.2)  # a few heartbeats
    finally:
        await consumer.stop()


def _mutate(frame: bytes, rng: random.Random) -> bytes:
    body = bytearray(frame)
    how = rng.randrange(5)
    if how == 0:  # flip a few bytes past the api key and version
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(4, len(body)) if len(body) > 4 else 0
            body[at] ^= 1 << rng.randrange(8)
    elif how == 1:  # cut short
        del body[rng.randrange(len(body)) :]
    elif how == 2:  # trailing garbage
        body += rng.randbytes(rng.randint(1, 40))
    elif how == 3 and len(body) >= 12:  # a length or count field replaced
        at = rng.randrange(8, len(body) - 3)
        value = rng.choice([-2, -1, 0, 1, 0x7FFF, 0x7FFFFFFF, -0x80000000])
        if rng.random() < 0.5:
            body[at : at + 2] = struct.pack(">h", max(-0x8000, min(0x7FFF, value)))
        else:
            body[at : at + 4] = struct.pack(">i", value)
    else:  # a version out of range, or garbage from the start
        if rng.random() < 0.5 and len(body) >= 4:
            body[2:4] = struct.pack(">h", rng.choice([-1, 8, 12, 99]))
        else:
            body = bytearray(rng.randbytes(rng.randint(0, 60)))
    return len(body).to_bytes(4, "big") + bytes(body)


async def _exchange(host: str, port: int, data: bytes) -> None:
    """Send a case and read until the server closes or a second passes (a mutated request
    may legitimately park, say a Fetch whose max wait grew)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(data)
        writer.write_eof()
        try:
            async with asyncio.timeout(1.0):
                while await reader.read(1 << 16):
                    pass
        except TimeoutError:
            pass
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest.mark.asyncio
async def test_mutated_client_requests_never_break_a_handler(monkeypatch) -> None:
    corpus: list[bytes] = []
    original: Callable[..., object] = KafkaProtocolServer._dispatch

    def recording(self: KafkaProtocolServer, frame: bytes, *rest: object) -> object:
        corpus.append(frame)
        return original(self, frame, *rest)

    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=3)
        door = KafkaFrontDoor(cluster, "127.0.0.1", 0)
        await door.start()
        try:
            async with asyncio.timeout(60):
                monkeypatch.setattr(KafkaProtocolServer, "_dispatch", recording)
                await _record_corpus(door)
                monkeypatch.setattr(KafkaProtocolServer, "_dispatch", original)
                apis = {int.from_bytes(frame[:2], "big") for frame in corpus}
                assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 22} <= apis
                rng = random.Random(SEED)
                brokers = list(door.addresses.values())
                cases = [
                    (rng.choice(brokers), _mutate(rng.choice(corpus), rng)) for _ in range(CASES)
                ]
                gate = asyncio.Semaphore(CONCURRENCY)

                async def one(address: tuple[str, int], data: bytes) -> None:
                    async with gate:
                        await _exchange(*address, data)

                await asyncio.gather(*(one(address, data) for address, data in cases))
                # Still serving: a fresh produce and fetch round trip.
                producer = AIOKafkaProducer(bootstrap_servers=door.bootstrap, acks="all")
                await producer.start()
                try:
                    sent = await producer.send_and_wait("t", b"after", partition=0)
                finally:
                    await producer.stop()
        finally:
            await door.close()
    assert sent.offset >= 2
    assert "internal error" not in door.stats.bad_input, door.stats.bad_input
    assert sum(door.stats.bad_input.values()) > CASES / 4  # the cases did reach the checks
