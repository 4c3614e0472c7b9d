"""Client quotas that throttle (purgatory.kafka.quotas, .throttling): Kafka's rate over
sampled windows and its throttle time, the precedence of the user/client-id levels, the
controller mutation token bucket and the per-IP connection rate, computed with a clock the
test holds; then over the wire: a Produce over its quota answered with its throttle time
and its connection muted that long, an old Produce's answer held back instead, a Fetch
over quota answered empty, CreateTopics refused per topic, a connection over its IP's
rate closed unserved, librdkafka held to its byte rate, and the metrics."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest
from kio_wire import read_frame, read_response, request_frame

from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.metrics import ProtocolCollector
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.quotas import (
    DEFAULT,
    ClientQuotaManager,
    ClientQuotas,
    MutationQuotaManager,
    QuotaWindow,
    Rate,
    throttle_ms,
)
from purgatory.kafka.record_batches import encode_batch
from purgatory.kafka.schemas import build, request_type

WINDOW = QuotaWindow()  # Kafka's: 11 samples of 1 s


# -- the computation, on a clock the test holds --------------------------------------------


def test_a_rate_is_measured_over_at_least_samples_minus_one_windows() -> None:
    rate = Rate(WINDOW)
    rate.record(1000.0, 0)
    # one event at t=0: measured over 10 whole windows, not over 1 ms
    assert rate.window_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)
    rate.record(1000.0, 500)
    assert rate.window_ms(500) == 10_500
    assert rate.measure(500) == pytest.approx(2000 / 10.5)
    # past the whole window, the rate is measured since the oldest live sample
    for t in range(1000, 15_001, 1000):
        rate.record(100.0, t)
    # 12 samples kept, but the one of t=4000 went silent a whole window (11 s) ago
    assert rate.window_ms(15_000) == 10_000
    assert rate.total(15_000) == pytest.approx(1100.0)
    assert rate.window_ms(15_500) == 10_500


def test_samples_silent_for_the_whole_window_are_forgotten() -> None:
    rate = Rate(WINDOW)
    rate.record(5000.0, 0)
    assert rate.total(10_999) == 5000.0
    assert rate.total(11_000) == 0.0


def test_the_throttle_time_is_kafkas_and_bounded_for_the_request_quota_only() -> None:
    produce = ClientQuotaManager("produce", WINDOW)
    produce.update({(None, "c"): 1000.0})
    tags, bound = produce.resolve("ANONYMOUS", "c")
    assert (tags, bound) == (("", "c"), 1000.0)
    assert produce.record(tags, 1000.0, 10_000.0, 0) == 0  # 1000/s over 10 s: at the quota
    # 30000 over 10 s = 3000/s: (3000 - 1000) / 1000 * 10 s
    assert produce.record(tags, 1000.0, 20_000.0, 0) == 20_000
    assert throttle_ms(1500.0, 1000.0, 10_001) == 5001  # Java's Math.round: half up
    request = ClientQuotaManager("request", WINDOW, bounded=True)
    request.update({(DEFAULT, None): 1.0})
    tags, bound = request.resolve("alice", "c")
    assert tags == ("alice", "")
    assert bound is not None
    assert request.record(tags, bound, 500.0, 0) == 1000  # at most one window


EIGHT_LEVELS = [
    ("alice", "c"),
    ("alice", DEFAULT),
    ("alice", None),
    (DEFAULT, "c"),
    (DEFAULT, DEFAULT),
    (DEFAULT, None),
    (None, "c"),
    (None, DEFAULT),
]


def test_the_eight_levels_hold_in_kafkas_order_and_name_the_rate_kafkas_way() -> None:
    manager = ClientQuotaManager("produce", WINDOW)
    tags_by_level = [
        ("alice", "c"),
        ("alice", "c"),
        ("alice", ""),
        ("alice", "c"),
        ("alice", "c"),
        ("alice", ""),
        ("", "c"),
        ("", "c"),
    ]
    for first, level in enumerate(EIGHT_LEVELS):
        # the levels from this one down are set, each with its own value
        manager.update({entity: 100.0 + i for i, entity in enumerate(EIGHT_LEVELS) if i >= first})
        assert manager.resolve("alice", "c") == (tags_by_level[first], 100.0 + first), level
    # another client of alice's shares her user quota's rate; bob has the default's
    manager.update({("alice", None): 5.0, (DEFAULT, None): 7.0})
    assert manager.resolve("alice", "other") == (("alice", ""), 5.0)
    assert manager.resolve("bob", "c") == (("bob", ""), 7.0)
    manager.update({})
    assert manager.resolve("bob", "c") == (("", "c"), None)


def test_the_store_of_alter_client_quotas_becomes_each_types_quotas() -> None:
    quotas = ClientQuotas()
    quotas.update(
        {
            frozenset({("user", "alice"), ("client-id", None)}): {"producer_byte_rate": 10.0},
            frozenset({("client-id", "c")}): {
                "consumer_byte_rate": 20.0,
                "controller_mutation_rate": 2.0,
            },
            frozenset({("ip", None)}): {"connection_creation_rate": 3.0},
        }
    )
    assert quotas.active
    assert quotas.produce.overrides == {("alice", DEFAULT): 10.0}
    assert quotas.fetch.overrides == {(None, "c"): 20.0}
    assert quotas.mutation.quotas.overrides == {(None, "c"): 2.0}
    assert quotas.request.overrides == {}
    assert quotas.connections.overrides == {DEFAULT: 3.0}
    quotas.update({})
    assert not quotas.active


def test_the_mutation_bucket_holds_a_burst_and_refills_at_the_rate() -> None:
    manager = MutationQuotaManager(WINDOW)
    tags = ("", "c")
    # rate 1 partition/s: a burst of 11; a topic is taken while the bucket is >= 0
    taken, throttle = manager.strict(tags, 1.0, [10, 3, 1], 0)
    assert (taken, throttle) == ([True, True, False], 2000)  # 11 - 13 = -2: 2 s to 0
    taken, throttle = manager.strict(tags, 1.0, [1], 2000)
    assert (taken, throttle) == ([True], 0)
    # older versions: taken, and throttled until the bucket is back at 0
    assert manager.permissive(tags, 1.0, 4, 2000) == 5000


def test_a_connection_over_its_ips_rate_is_not_counted() -> None:
    quotas = ClientQuotas(QuotaWindow(samples=2))
    quotas.update({frozenset({("ip", "10.0.0.1")}): {"connection_creation_rate": 2.0}})
    connections = quotas.connections
    assert [connections.throttle("10.0.0.1", 0) for _ in range(3)] == [0, 0, 500]
    assert connections.throttle("10.0.0.2", 0) == 0  # no quota of its own, no default
    # the refused one was not counted: 2 and 1 more over 1 s, then the first second gone
    assert connections.throttle("10.0.0.1", 1000) == 500
    assert connections.throttle("10.0.0.1", 2000) == 0


# -- over the wire ----------------------------------------------------------------------


def _alter(entries: list[tuple[list[tuple[str, str | None]], dict[str, float]]]) -> Any:
    return build(
        request_type(ApiKey.ALTER_CLIENT_QUOTAS, 1),
        {
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "ops": [{"key": k, "value": v, "remove": False} for k, v in ops.items()],
                }
                for entity, ops in entries
            ],
            "validate_only": False,
        },
    )


def _produce(version: int, size: int) -> Any:
    batch = encode_batch(0, 0, [(None, b"x" * size)], 1_700_000_000_000)
    return build(
        request_type(ApiKey.PRODUCE, version),
        {
            "acks": 1,
            "timeout": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}],
        },
    )


class _Client:
    """One connection, requests sent one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str):
        self.reader, self.writer, self.client_id = reader, writer, client_id
        self.correlation = 0

    @classmethod
    async def to(cls, address: tuple[str, int], client_id: str) -> _Client:
        return cls(*await asyncio.open_connection(*address), client_id)

    async def ask(self, request: Any) -> tuple[Any, float]:
        """The answer and the seconds it took."""
        self.correlation += 1
        started = time.monotonic()
        self.writer.write(
            request_frame(request, correlation_id=self.correlation, client_id=self.client_id)
        )
        frame = await asyncio.wait_for(read_frame(self.reader), 30)
        answer = read_response(frame, request.__api_key__, request.__version__).body
        return answer, time.monotonic() - started

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def _metadata() -> Any:
    return build(request_type(ApiKey.METADATA, 12), {"topics": None})


async def _set(address: tuple[str, int], entries: Any) -> None:
    admin = await _Client.to(address, "admin")
    answer, _ = await admin.ask(_alter(entries))
    assert [e.error_code for e in answer.entries] == [0] * len(entries)
    await admin.close()


@pytest.mark.asyncio
async def test_a_produce_over_quota_is_answered_at_once_and_its_connection_muted() -> None:
    configs = {"quota.window.num": 2}  # the rate over 1-2 s: the test stays short
    async with AsyncEmbeddedKafka(brokers=1, seed=1, topics={"t": (1, 1)}, configs=configs) as k:
        address = k.front_door.addresses[0]
        await _set(address, [([("client-id", "slow")], {"producer_byte_rate": 100_000.0})])
        client = await _Client.to(address, "slow")
        first, _ = await client.ask(_produce(9, 50_000))
        assert first.throttle_time.total_seconds() == 0
        second, took = await client.ask(_produce(9, 150_000))  # 200 KB over 1 s: 1 s over
        throttle = second.throttle_time.total_seconds()
        assert 0.5 <= throttle <= 1.1  # 1 s less the time since the first
        assert took < throttle / 2  # v9 (KIP-219): answered at once
        _, waited = await client.ask(_metadata())  # muted: read once the throttle passed
        assert throttle - 0.05 <= waited + took <= throttle + 1.0
        # other clients are not held
        other = await _Client.to(address, "fast")
        answer, took = await other.ask(_produce(9, 150_000))
        assert answer.throttle_time.total_seconds() == 0
        assert took < 0.5
        # a client that does not throttle itself (Produce v5): its answer is held back
        old, took = await client.ask(_produce(5, 150_000))
        throttle = old.throttle_time.total_seconds()
        assert throttle > 0.3
        assert throttle - 0.05 <= took <= throttle + 1.0
        metrics = {
            (s.name, s.labels.get("quota_type"), s.labels.get("client_id")): s.value
            for m in ProtocolCollector(k.front_door.stats, k.front_door.quotas).collect()
            for s in m.samples
        }
        assert metrics["purgatory_kafka_throttled_total", "produce", "slow"] == 2
        throttled_ms = metrics["purgatory_kafka_throttle_time_ms_total", "produce", "slow"]
        assert throttled_ms >= 1000
        await client.close()
        await other.close()


@pytest.mark.asyncio
async def test_a_fetch_over_quota_is_answered_empty_and_throttled() -> None:
    configs = {"quota.window.num": 2}
    async with AsyncEmbeddedKafka(brokers=1, seed=1, topics={"t": (1, 1)}, configs=configs) as k:
        address = k.front_door.addresses[0]
        producer = await _Client.to(address, "p")
        await producer.ask(_produce(9, 300_000))
        await _set(address, [([("user", DEFAULT)], {"consumer_byte_rate": 100_000.0})])
        consumer = await _Client.to(address, "c")
        topic_id = k.front_door.cluster.topic_id("t")
        fetch = build(
            request_type(ApiKey.FETCH, 13),
            {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic_id": topic_id,
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
            },
        )
        answer, _ = await consumer.ask(fetch)  # 300 KB over 1 s at 100 KB/s: 2 s over
        assert answer.throttle_time.total_seconds() > 1.5
        assert answer.responses == ()
        quotas = k.front_door.quotas
        assert quotas.throttled["fetch", "ANONYMOUS", ""] == 1
        await producer.close()
        await consumer.close()


def _create_topics(version: int, topics: dict[str, int]) -> Any:
    return build(
        request_type(ApiKey.CREATE_TOPICS, version),
        {
            "topics": [
                {"name": name, "num_partitions": n, "replication_factor": 1}
                for name, n in topics.items()
            ],
            "timeout": 5000,
        },
    )


@pytest.mark.asyncio
async def test_create_topics_over_the_mutation_rate_is_refused_per_topic() -> None:
    async with AsyncEmbeddedKafka(brokers=1, seed=1, topics={"t": (1, 1)}) as k:
        address = k.front_door.addresses[0]
        await _set(address, [([("client-id", "ops")], {"controller_mutation_rate": 2.0})])
        client = await _Client.to(address, "ops")
        # a burst of 22 partitions: the first topic takes 20, the second 5 (to -3), the
        # third is refused while the bucket is below 0
        answer, _ = await client.ask(_create_topics(7, {"a": 20, "b": 5, "c": 1}))
        errors = {t.name: (t.error_code, t.error_message) for t in answer.topics}
        assert errors["a"][0] == 0
        assert errors["b"][0] == 0
        assert errors["c"] == (89, "The throttling quota has been exceeded.")
        assert answer.throttle_time.total_seconds() == pytest.approx(1.5)
        assert "c" not in k.front_door.cluster.topics
        # a failed topic gives its partitions back: "a" exists already
        await asyncio.sleep(1.6)
        answer, _ = await client.ask(_create_topics(7, {"a": 3}))
        assert [t.error_code for t in answer.topics] == [36]  # TOPIC_ALREADY_EXISTS
        answer, _ = await client.ask(_create_topics(7, {"d": 1}))
        assert [t.error_code for t in answer.topics] == [0]
        # CreateTopics v5 is not refused: the client is throttled instead
        answer, _took = await client.ask(_create_topics(5, {"e": 30}))
        assert [t.error_code for t in answer.topics] == [0]
        assert answer.throttle_time.total_seconds() > 10
        await client.close()


@pytest.mark.asyncio
async def test_a_connection_over_its_ips_rate_is_closed_unserved() -> None:
    configs = {"quota.window.num": 2}
    async with AsyncEmbeddedKafka(brokers=1, seed=1, topics={"t": (1, 1)}, configs=configs) as k:
        address = k.front_door.addresses[0]
        await _set(address, [([("ip", "127.0.0.1")], {"connection_creation_rate": 1.0})])
        await asyncio.sleep(1.1)  # the admin's connection out of the window
        served = await _Client.to(address, "a")
        await served.ask(_metadata())
        refused = await _Client.to(address, "b")
        started = time.monotonic()
        refused.writer.write(request_frame(_metadata(), correlation_id=1, client_id="b"))
        assert await asyncio.wait_for(refused.reader.read(), 5) == b""  # closed, no answer
        assert 0.3 <= time.monotonic() - started <= 2.0
        assert k.front_door.stats.closed["connection_rate"] == 1
        assert k.front_door.quotas.connections_throttled["127.0.0.1"] == 1
        await served.close()
        await refused.close()


def _alter_over_a_socket(address: tuple[str, int], entries: Any) -> None:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(request_frame(_alter(entries), correlation_id=1, client_id="admin"))
        size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
        frame = sock.recv(size, socket.MSG_WAITALL)
    answer = read_response(frame, ApiKey.ALTER_CLIENT_QUOTAS, 1).body
    assert [e.error_code for e in answer.entries] == [0]


def test_librdkafka_is_held_to_its_byte_rate_and_told_its_throttle() -> None:
    from confluent_kafka import Producer

    rate = 100_000.0
    total = 500_000
    configs = {"quota.window.num": 2}
    with EmbeddedKafka(brokers=1, seed=1, topics={"t": (1, 1)}, configs=configs) as kafka:
        host, port = kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
        address = (host, int(port))
        _alter_over_a_socket(address, [([("client-id", "held")], {"producer_byte_rate": rate})])
        throttles: list[int] = []
        producer = Producer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "client.id": "held",
                "linger.ms": 5,
                "batch.size": 20_000,
                "throttle_cb": lambda event: throttles.append(event.throttle_time),
            }
        )
        started = time.monotonic()
        for _ in range(total // 10_000):
            producer.produce("t", b"x" * 10_000, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        took = time.monotonic() - started
        producer.poll(0.5)  # the throttle callbacks of the last answers
        expected = total / rate  # 5 s, less the one window the rate starts with
        assert 0.5 * expected <= took <= 2 * expected, took
        assert throttles
        assert max(throttles) > 0
