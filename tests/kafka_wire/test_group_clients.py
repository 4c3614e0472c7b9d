"""``subscribe()`` consumers of the three real clients against the group coordinator
(loopback only): produce, consume back through group membership, commit, close; a new
consumer of the same group starts at the committed offsets."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from purgatory.kafka.coordinator.groups import GroupState
from purgatory.kafka.front_door import KafkaFrontDoor

TIMEOUT = 60.0


async def _produce(door: KafkaFrontDoor, prefix: str, count: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=door.bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(count):
            await producer.send_and_wait("t", f"{prefix}{i}".encode(), partition=i % 2)
    finally:
        await producer.stop()


def _expected(prefix: str, count: int) -> list[bytes]:
    return sorted(f"{prefix}{i}".encode() for i in range(count))


async def _aiokafka_session(bootstrap: str, group: str, count: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        "t",
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        while len(got) < count:
            batches = await consumer.getmany(timeout_ms=500)
            got += [m.value for messages in batches.values() for m in messages]
        await consumer.commit()
    finally:
        await consumer.stop()
    return got


def _kafka_python_session(bootstrap: str, group: str, count: int) -> list[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        "t",
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + TIMEOUT / 3
        while len(got) < count and time.monotonic() < deadline:
            for messages in consumer.poll(timeout_ms=500).values():
                got += [m.value for m in messages]
        consumer.commit()
    finally:
        consumer.close()
    return got


def _confluent_session(bootstrap: str, group: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    got: list[bytes] = []
    try:
        consumer.subscribe(["t"])
        deadline = time.monotonic() + TIMEOUT / 3
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


async def _session(client: str, bootstrap: str, group: str, count: int) -> list[bytes]:
    if client == "aiokafka":
        return await _aiokafka_session(bootstrap, group, count)
    session = _kafka_python_session if client == "kafka-python" else _confluent_session
    return await asyncio.to_thread(session, bootstrap, group, count)


@pytest.mark.asyncio
@pytest.mark.parametrize("client", ["aiokafka", "kafka-python", "confluent-kafka"])
async def test_subscribe_consumes_commits_and_a_new_consumer_resumes_there(
    door: KafkaFrontDoor, client: str
) -> None:
    group = f"g-{client}"
    async with asyncio.timeout(TIMEOUT):
        await _produce(door, "a", 10)
        first = await _session(client, door.bootstrap, group, 10)
        await _produce(door, "b", 6)
        second = await _session(client, door.bootstrap, group, 6)
    assert sorted(first) == _expected("a", 10)
    assert sorted(second) == _expected("b", 6)  # not a record of the first session again
    committed = {key[1:]: value[0] for key, value in door.offsets.committed.items()}
    assert committed == {("t", 0): 8, ("t", 1): 8}
    coordinator = door.coordinator.groups[group]
    # Each session joined (a generation) and left on close (another): Empty again.
    assert coordinator.state is GroupState.EMPTY
    assert coordinator.generation >= 4
    assert not coordinator.members
    assert door.stats.requests_of("JOIN_GROUP") >= 2
    assert door.stats.requests_of("LEAVE_GROUP") == 2


@pytest.mark.asyncio
async def test_two_aiokafka_members_split_the_partitions_and_one_takes_over_on_leave(
    door: KafkaFrontDoor,
) -> None:
    def consumer() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            "t",
            bootstrap_servers=door.bootstrap,
            group_id="pair",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=100,  # hear of a rebalance soon
        )

    async def take(member: AIOKafkaConsumer, count: int) -> list[bytes]:
        got: list[bytes] = []
        while len(got) < count:
            batches = await member.getmany(timeout_ms=200)
            got += [m.value for messages in batches.values() for m in messages]
        return got

    one, two = consumer(), consumer()
    async with asyncio.timeout(TIMEOUT):
        await one.start()
        try:
            await two.start()
            try:
                while len(one.assignment()) != 1 or len(two.assignment()) != 1:
                    await asyncio.gather(one.getmany(timeout_ms=100), two.getmany(timeout_ms=100))
                assert one.assignment() | two.assignment() == {
                    TopicPartition("t", 0),
                    TopicPartition("t", 1),
                }
                await _produce(door, "a", 10)
                split = await asyncio.gather(take(one, 5), take(two, 5))
                await one.commit()
                await two.commit()
            finally:
                await two.stop()  # leaves the group: the other one takes both partitions
            await _produce(door, "b", 4)
            rest = await take(one, 4)
            assert len(one.assignment()) == 2
        finally:
            await one.stop()
    assert sorted(split[0] + split[1]) == _expected("a", 10)
    assert sorted(rest) == _expected("b", 4)  # from the committed offsets, nothing twice


@pytest.mark.asyncio
async def test_an_aiokafka_and_a_librdkafka_member_share_one_group(door: KafkaFrontDoor) -> None:
    """Different clients, one group: they agree on the protocol both support
    (roundrobin) and split the partitions, whichever of them leads."""
    import threading

    from confluent_kafka import Consumer

    stop = threading.Event()
    confluent_got: list[bytes] = []
    confluent_assignment: list[int] = []

    def confluent_member() -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": door.bootstrap,
                "group.id": "mixed",
                "auto.offset.reset": "earliest",
                "heartbeat.interval.ms": 100,
            }
        )
        try:
            consumer.subscribe(["t"])
            while not stop.is_set():
                message = consumer.poll(0.1)
                confluent_assignment[:] = [tp.partition for tp in consumer.assignment()]
                if message is not None and message.error() is None:
                    confluent_got.append(message.value())
        finally:
            consumer.close()

    aio = AIOKafkaConsumer(
        "t",
        bootstrap_servers=door.bootstrap,
        group_id="mixed",
        auto_offset_reset="earliest",
        heartbeat_interval_ms=100,
    )
    async with asyncio.timeout(TIMEOUT):
        await aio.start()
        thread = threading.Thread(target=confluent_member)
        thread.start()
        try:
            aio_got: list[bytes] = []
            while len(aio.assignment()) != 1 or len(confluent_assignment) != 1:
                await aio.getmany(timeout_ms=100)
            assert {tp.partition for tp in aio.assignment()} | set(confluent_assignment) == {0, 1}
            protocol = door.coordinator.groups["mixed"].protocol
            await _produce(door, "m", 10)
            while len(aio_got) + len(confluent_got) < 10:
                batches = await aio.getmany(timeout_ms=100)
                aio_got += [m.value for messages in batches.values() for m in messages]
        finally:
            stop.set()
            await asyncio.to_thread(thread.join, 10)
            await aio.stop()
    assert sorted(aio_got + confluent_got) == _expected("m", 10)
    assert len(aio_got) == len(confluent_got) == 5
    assert protocol == "roundrobin"
