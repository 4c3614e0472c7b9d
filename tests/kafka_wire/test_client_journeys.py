"""One journey per real client, as an application's test suite would drive the embedded
cluster: the client's admin API creates the topic; an idempotent producer writes while
the first Produce acknowledgement is lost (the retry must not duplicate it); a consumer of
a group reads and commits as it goes while the partition's leader crashes under it, and
must read every record exactly once, in order; then the admin API deletes records on the
new leader and describes the group, the consumer still in it.

The other client tests check each step on a healthy cluster; here they run in a row,
through the faults, on one topic (one partition, replication factor 3,
``min.insync.replicas`` 2, so an acknowledged record is on two brokers)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

import pytest

from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka

TOPIC = "journey"
GROUP = "journey-g"
CONSUMER_ID = "journey-consumer"
RECORDS = 600
CHUNK = 50  # records produced at a time, once the consumer has read the last chunk
CRASH_AT = RECORDS // 3  # records consumed when the leader dies (a multiple of CHUNK)
DELETE_TO = RECORDS // 2
JOURNEY_S = 20.0  # each took 2-4 s on a loaded 2-core machine
#: how long a client waits for an answer: the lost acknowledgement costs this much
REQUEST_TIMEOUT_MS = 1000
#: small fetches, so the consumer reads in many of them, across the crash
FETCH_BYTES = 2048

Read = list[tuple[int, bytes]]
#: what DescribeGroups said: state, and each member's client id and assigned partitions
Described = tuple[str, list[tuple[str, list[tuple[str, int]]]]]


# kafka-python's and aiokafka's consumers take the same names for these.
PYTHON_CONSUMER_OPTIONS: dict[str, Any] = {
    "group_id": GROUP,
    "client_id": CONSUMER_ID,
    "auto_offset_reset": "earliest",
    "enable_auto_commit": False,
    "fetch_max_wait_ms": 100,
    "max_partition_fetch_bytes": FETCH_BYTES,
}


class Seen(dict[str, Any]):
    """What one client saw, by step."""


class Client(Protocol):
    """One real client's admin, producer and group consumer, as the journey uses them."""

    def create_topic(self) -> None: ...
    def send(self, values: list[bytes]) -> None: ...
    def flush(self) -> None: ...
    def poll(self) -> Read: ...
    def commit(self) -> None: ...
    def committed(self) -> int: ...
    def delete_records(self, offset: int) -> int: ...
    def describe_group(self) -> Described: ...
    def close(self) -> None: ...


class KafkaPython:
    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaConsumer, KafkaProducer
        from kafka.admin import KafkaAdminClient

        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            retry_backoff_ms=20,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            **PYTHON_CONSUMER_OPTIONS,
        )

    def create_topic(self) -> None:
        from kafka.admin import NewTopic

        self.admin.create_topics([NewTopic(TOPIC, 1, 3)])
        self.consumer.subscribe([TOPIC])

    def send(self, values: list[bytes]) -> None:
        for value in values:
            self.producer.send(TOPIC, value, partition=0)

    def flush(self) -> None:
        self.producer.flush(JOURNEY_S)

    def poll(self) -> Read:
        batches = self.consumer.poll(timeout_ms=100)
        return [(m.offset, m.value) for messages in batches.values() for m in messages]

    def commit(self) -> None:
        self.consumer.commit()

    def committed(self) -> int:
        from kafka import TopicPartition

        return self.consumer.committed(TopicPartition(TOPIC, 0))

    def delete_records(self, offset: int) -> int:
        from kafka import TopicPartition

        [answer] = self.admin.delete_records({TopicPartition(TOPIC, 0): offset}).values()
        return answer["low_watermark"]

    def describe_group(self) -> Described:
        group = self.admin.describe_groups([GROUP])[GROUP]
        members = []
        for member in group["members"]:
            assigned = member["member_assignment"]["assigned_partitions"]
            partitions = sorted((a["topic"], p) for a in assigned for p in a["partitions"])
            members.append((member["client_id"], partitions))
        return group["group_state"], members

    def close(self) -> None:
        self.consumer.close()
        self.producer.close(5)
        self.admin.close()


class Confluent:
    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import AdminClient

        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.failed: list[Any] = []
        self.pending = False  # read something not committed yet
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,  # acks=all, in order, at most 5 in flight
                "linger.ms": 5,
                "retry.backoff.ms": 20,
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
                "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            }
        )
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "client.id": CONSUMER_ID,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "max.partition.fetch.bytes": FETCH_BYTES,
            }
        )

    def create_topic(self) -> None:
        from confluent_kafka.admin import NewTopic

        self.admin.create_topics([NewTopic(TOPIC, 1, 3)], request_timeout=10)[TOPIC].result()
        self.consumer.subscribe([TOPIC])

    def send(self, values: list[bytes]) -> None:
        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                self.failed.append(error)

        for value in values:
            self.producer.produce(TOPIC, value, partition=0, on_delivery=delivered)
        self.producer.poll(0)

    def flush(self) -> None:
        left = self.producer.flush(JOURNEY_S)
        assert (left, self.failed) == (0, [])

    def poll(self) -> Read:
        messages = self.consumer.consume(100, timeout=0.1)
        for m in messages:
            assert m.error() is None, m.error()
        self.pending = bool(messages)
        return [(m.offset(), m.value()) for m in messages]

    def commit(self) -> None:
        if self.pending:  # librdkafka refuses a commit with nothing new (_NO_OFFSET)
            self.consumer.commit(asynchronous=False)

    def committed(self) -> int:
        from confluent_kafka import TopicPartition

        [partition] = self.consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
        return partition.offset

    def delete_records(self, offset: int) -> int:
        from confluent_kafka import TopicPartition

        [deleted] = self.admin.delete_records(
            [TopicPartition(TOPIC, 0, offset)], request_timeout=10
        ).values()
        return deleted.result().low_watermark

    def describe_group(self) -> Described:
        group = self.admin.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result()
        members = [
            (m.client_id, sorted((p.topic, p.partition) for p in m.assignment.topic_partitions))
            for m in group.members
        ]
        return group.state.name.capitalize(), members

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(5)


class AioKafka:
    """aiokafka's, on the test's loop (the cluster's too)."""

    def __init__(self, bootstrap: str) -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.admin import AIOKafkaAdminClient

        self.admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        self.producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            enable_idempotence=True,  # acks=all
            linger_ms=5,
            retry_backoff_ms=20,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            **PYTHON_CONSUMER_OPTIONS,
        )
        self.sent: list[asyncio.Future[Any]] = []

    async def create_topic(self) -> None:
        from aiokafka.admin import NewTopic

        await self.admin.start()
        await self.admin.create_topics([NewTopic(TOPIC, 1, 3)])
        await self.producer.start()
        self.consumer.subscribe([TOPIC])
        await self.consumer.start()

    async def send(self, values: list[bytes]) -> None:
        self.sent += [await self.producer.send(TOPIC, value, partition=0) for value in values]

    async def flush(self) -> None:
        sent, self.sent = self.sent, []
        await asyncio.gather(*sent)  # raises what a delivery failed with

    async def poll(self) -> Read:
        batches = await self.consumer.getmany(timeout_ms=100)
        return [(m.offset, m.value) for messages in batches.values() for m in messages]

    async def commit(self) -> None:
        await self.consumer.commit()

    async def committed(self) -> int:
        from aiokafka import TopicPartition

        return await self.consumer.committed(TopicPartition(TOPIC, 0))

    async def delete_records(self, offset: int) -> int:
        from aiokafka import TopicPartition
        from aiokafka.admin import RecordsToDelete

        partition = TopicPartition(TOPIC, 0)
        deleted = await self.admin.delete_records({partition: RecordsToDelete(offset)})
        return deleted[partition]

    async def describe_group(self) -> Described:
        from aiokafka.protocol.group import MemberAssignment

        [response] = await self.admin.describe_consumer_groups([GROUP])
        [(_, _, state, _, _, members)] = response.groups
        described = []
        for _, client_id, _, _, assignment in members:
            decoded = MemberAssignment.decode(assignment).assignment
            described.append((client_id, sorted((t, p) for t, ps in decoded for p in ps)))
        return state, described

    async def close(self) -> None:
        await self.consumer.stop()
        await self.producer.stop()
        await self.admin.close()


def _journey(client: Client, kafka: EmbeddedKafka) -> Seen:
    """The journey of a synchronous client against the background-thread cluster: each
    chunk is produced, then consumed and committed; the leader dies once a third is read,
    with the consumer's next fetch on its way to it."""
    seen = Seen()
    client.create_topic()
    lost = kafka.faults.add("Produce", drop=True, after=True, topic=TOPIC)
    got: Read = []
    sent = 0
    deadline = time.monotonic() + JOURNEY_S
    while len(got) < RECORDS:
        assert time.monotonic() < deadline, f"consumed {len(got)} of {RECORDS}"
        if len(got) == sent:
            if sent == CRASH_AT:
                seen["crashed"] = kafka.leader(TOPIC, 0)
                kafka.crash_broker(seen["crashed"])
            client.send([b"%d" % i for i in range(sent, sent + CHUNK)])
            client.flush()
            sent += CHUNK
        got += client.poll()
        client.commit()
    seen["consumed"], seen["lost_acks"] = got, lost.hits
    seen["committed"] = client.committed()
    seen["low_watermark"] = client.delete_records(DELETE_TO)
    seen["group"] = client.describe_group()
    return seen


async def _async_journey(client: AioKafka, kafka: AsyncEmbeddedKafka) -> Seen:
    """The same journey, awaited, against the in-loop cluster."""
    seen = Seen()
    await client.create_topic()
    lost = kafka.faults.add("Produce", drop=True, after=True, topic=TOPIC)
    got: Read = []
    sent = 0
    async with asyncio.timeout(JOURNEY_S):
        while len(got) < RECORDS:
            if len(got) == sent:
                if sent == CRASH_AT:
                    seen["crashed"] = kafka.leader(TOPIC, 0)
                    await kafka.crash_broker(seen["crashed"])
                await client.send([b"%d" % i for i in range(sent, sent + CHUNK)])
                await client.flush()
                sent += CHUNK
            got += await client.poll()
            await client.commit()
        seen["consumed"], seen["lost_acks"] = got, lost.hits
        seen["committed"] = await client.committed()
        seen["low_watermark"] = await client.delete_records(DELETE_TO)
        seen["group"] = await client.describe_group()
    return seen


def _check(seen: Seen, kafka: EmbeddedKafka | AsyncEmbeddedKafka, took_s: float) -> None:
    assert seen["lost_acks"] == 1
    # Every record exactly once, in order: the lost acknowledgement's retry was not
    # appended again, and the consumer neither skipped nor re-read across the crash.
    assert seen["consumed"] == [(i, b"%d" % i) for i in range(RECORDS)]
    partition = kafka.describe(TOPIC, 0)
    assert partition.leader not in (None, seen["crashed"])
    assert seen["committed"] == RECORDS
    # Deleted through the new leader (the admin client found it after the crash).
    assert seen["low_watermark"] == partition.log_start_offset == DELETE_TO
    assert kafka.records(TOPIC, 0)[0].offset == DELETE_TO
    assert seen["group"] == ("Stable", [(CONSUMER_ID, [(TOPIC, 0)])])
    assert took_s < JOURNEY_S


@pytest.mark.kafka_cluster(brokers=3, min_insync_replicas=2)
@pytest.mark.parametrize(
    "client_class",
    [pytest.param(KafkaPython, id="kafka-python"), pytest.param(Confluent, id="confluent-kafka")],
)
def test_journey_of_a_sync_client(
    refused_sockets_collected: None,
    kafka_cluster: EmbeddedKafka,
    client_class: Callable[[str], Client],
) -> None:
    started = time.monotonic()
    client = client_class(kafka_cluster.bootstrap_servers)
    try:
        seen = _journey(client, kafka_cluster)
    finally:
        client.close()
    _check(seen, kafka_cluster, time.monotonic() - started)


@pytest.mark.asyncio
async def test_journey_of_aiokafka() -> None:
    started = time.monotonic()
    async with AsyncEmbeddedKafka(brokers=3, min_insync_replicas=2) as kafka:
        client = AioKafka(kafka.bootstrap_servers)
        try:
            seen = await _async_journey(client, kafka)
        finally:
            await client.close()
        _check(seen, kafka, time.monotonic() - started)
