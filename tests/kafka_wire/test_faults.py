"""Per-request fault rules: each action on the wire (error, drop, disconnect, delay, before
and after the request is applied), matching, one-shot and kept rules, and real clients
riding them out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import pytest
import pytest_asyncio
from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.record_batches import encode_batch
from purgatory.sim.errors import ErrorCode

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(brokers=3, topics={"t": 2}) as cluster:
        yield cluster


def _produce(correlation_id: int, value: bytes, acks: int = -1, topic: str = "t") -> bytes:
    request = ProduceRequest[3](
        transactional_id=None,
        acks=acks,
        timeout_ms=1000,
        topic_data=[(topic, [(0, encode_batch(0, 0, [(None, value)], 0))])],
    )
    request.with_header(correlation_id=correlation_id, client_id="raw")
    return bytes(request.encode(header=True, framed=True))


class Connection:
    """A raw connection to the leader of t-0 (broker 0)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def to(cls, kafka: AsyncEmbeddedKafka, broker: int = 0) -> Connection:
        return cls(*await asyncio.open_connection(*kafka.addresses[broker]))

    async def produce(self, correlation_id: int, value: bytes) -> tuple[int, int, int]:
        self.writer.write(_produce(correlation_id, value))
        return await self.answer()

    async def answer(self, within_s: float = 5.0) -> tuple[int, int, int]:
        """(correlation id, error code, base offset) of the next Produce answer."""
        async with asyncio.timeout(within_s):
            size = int.from_bytes(await self.reader.readexactly(4), "big")
            frame = await self.reader.readexactly(size)
        [topic] = ProduceResponse[3].decode(frame[4:]).responses
        [partition] = topic.partition_responses
        return int.from_bytes(frame[:4], "big"), partition.error_code, partition.base_offset

    def close(self) -> None:
        self.writer.close()


def _values(kafka: AsyncEmbeddedKafka) -> list[bytes]:
    return [r.value for r in kafka.records("t", 0)]


@pytest.mark.asyncio
async def test_error_before_answers_the_code_and_applies_nothing(kafka) -> None:
    rule = kafka.faults.add("Produce", error=NOT_LEADER)
    conn = await Connection.to(kafka)
    try:
        assert await conn.produce(1, b"a") == (1, NOT_LEADER.number, -1)
        assert await conn.produce(2, b"b") == (2, 0, 0)  # one-shot: gone after one hit
    finally:
        conn.close()
    assert _values(kafka) == [b"b"]
    assert rule.hits == 1
    assert not rule.active
    assert [(h.api, h.broker, h.correlation_id) for h in kafka.faults.history] == [
        (ApiKey.PRODUCE, 0, 1)
    ]


@pytest.mark.asyncio
async def test_error_after_applies_the_request_and_answers_the_code(kafka) -> None:
    kafka.faults.add(ApiKey.PRODUCE, error=ErrorCode.REQUEST_TIMED_OUT, after=True)
    conn = await Connection.to(kafka)
    try:
        assert (await conn.produce(1, b"a"))[1] == ErrorCode.REQUEST_TIMED_OUT.number
    finally:
        conn.close()
    assert _values(kafka) == [b"a"]  # appended and replicated; the client was told otherwise


@pytest.mark.asyncio
@pytest.mark.parametrize(("after", "stored"), [(False, [b"b"]), (True, [b"a", b"b"])])
async def test_drop_answers_nothing_more_on_that_connection(kafka, after, stored) -> None:
    rule = kafka.faults.add("Produce", drop=True, after=after)
    conn = await Connection.to(kafka)
    try:
        conn.writer.write(_produce(1, b"a"))
        conn.writer.write(_produce(2, b"b"))  # applied, its answer queued behind the lost one
        with pytest.raises(TimeoutError):
            await conn.answer(within_s=0.5)
    finally:
        conn.close()
    assert _values(kafka) == stored
    assert rule.hits == 1
    other = await Connection.to(kafka)  # a new connection is served
    try:
        assert (await other.produce(3, b"c"))[1] == 0
    finally:
        other.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(("after", "stored"), [(False, []), (True, [b"a"])])
async def test_disconnect_closes_the_connection_unanswered(kafka, after, stored) -> None:
    kafka.faults.add("Produce", disconnect=True, after=after)
    conn = await Connection.to(kafka)
    try:
        conn.writer.write(_produce(1, b"a"))
        async with asyncio.timeout(5):
            assert await conn.reader.read() == b""  # closed by the broker
    finally:
        conn.close()
    assert _values(kafka) == stored


@pytest.mark.asyncio
async def test_delay_holds_one_connection_while_others_are_served(kafka) -> None:
    kafka.faults.add("Produce", delay_ms=400, client_id="raw", broker=0)
    slow, fast = await Connection.to(kafka), await Connection.to(kafka)
    try:
        started = time.monotonic()
        slow.writer.write(_produce(1, b"slow"))
        await asyncio.sleep(0.05)
        assert (await fast.produce(2, b"fast"))[1] == 0
        fast_took = time.monotonic() - started
        assert (await slow.answer())[1] == 0
        slow_took = time.monotonic() - started
    finally:
        slow.close()
        fast.close()
    assert fast_took < 0.35 <= 0.4 <= slow_took
    assert _values(kafka) == [b"fast", b"slow"]  # the delayed request was applied late


@pytest.mark.asyncio
async def test_rules_match_broker_topic_version_and_client_and_can_be_kept(kafka) -> None:
    faults = kafka.faults
    elsewhere = [
        faults.add("Produce", error=NOT_LEADER, broker=1),
        faults.add("Produce", error=NOT_LEADER, topic="other"),
        faults.add("Produce", error=NOT_LEADER, partition=1),
        faults.add("Produce", error=NOT_LEADER, versions=(5, 7)),
        faults.add("Produce", error=NOT_LEADER, client_id="someone-else"),
    ]
    kept = faults.add("Produce", error=NOT_LEADER, topic="t", partition=0, times=None)
    conn = await Connection.to(kafka)
    try:
        for i in range(3):
            assert (await conn.produce(i, b"x"))[1] == NOT_LEADER.number
        kept.remove()
        assert (await conn.produce(9, b"y"))[1] == 0
    finally:
        conn.close()
    assert kept.hits == 3
    assert [r.hits for r in elsewhere] == [0] * 5
    assert set(faults.rules) == set(elsewhere)
    faults.clear()
    assert faults.rules == ()
    assert kafka.front_door._servers[0].interceptor is None  # no rules: nothing looked at


async def _ask(kafka: AsyncEmbeddedKafka, request: Any, response_class: Any) -> Any:
    """``request`` (kafka-python's) on a raw connection to broker 0, its answer decoded."""
    request.with_header(correlation_id=7, client_id="raw")
    reader, writer = await asyncio.open_connection(*kafka.addresses[0])
    try:
        writer.write(bytes(request.encode(header=True, framed=True)))
        async with asyncio.timeout(5):
            size = int.from_bytes(await reader.readexactly(4), "big")
            frame = await reader.readexactly(size)
    finally:
        writer.close()
    assert int.from_bytes(frame[:4], "big") == 7
    return response_class[request.API_VERSION].decode(frame[4:])


def _describe_configs(version: int) -> Any:
    fields: dict[str, Any] = {"resources": [(2, "t", None), (4, "0", ["num.partitions"])]}
    if version >= 1:
        fields["include_synonyms"] = True
    if version >= 3:
        fields["include_documentation"] = False
    return DescribeConfigsRequest[version](**fields)


class AdminCase(NamedTuple):
    """An admin API's fault case: its served versions, the error injected, its request at
    a version, the response schema, and what of the answer carries the code."""

    versions: range
    error: ErrorCode
    request: Callable[[int], Any]
    response: Any
    answers: Callable[[Any], Any]
    expected: Any


_ADMIN = {
    "CreateTopics": AdminCase(
        range(5),
        ErrorCode.REQUEST_TIMED_OUT,
        lambda v: CreateTopicsRequest[v](
            topics=[("new", 1, 1, [], []), ("other", 2, 1, [(0, [1])], [("retention.ms", "1")])],
            timeout_ms=1000,
            **({"validate_only": False} if v >= 1 else {}),
        ),
        CreateTopicsResponse,
        lambda r: [
            (t.name, t.error_code, t.error_message if r.API_VERSION >= 1 else None)
            for t in r.topics
        ],
        lambda v: [(name, 7, "REQUEST_TIMED_OUT" if v >= 1 else None) for name in ("new", "other")],
    ),
    "DeleteTopics": AdminCase(
        range(4),
        ErrorCode.REQUEST_TIMED_OUT,
        lambda v: DeleteTopicsRequest[v](topic_names=["t"], timeout_ms=1000),
        DeleteTopicsResponse,
        lambda r: [(t.name, t.error_code) for t in r.responses],
        lambda v: [("t", 7)],
    ),
    "DeleteRecords": AdminCase(
        range(2),
        NOT_LEADER,
        lambda v: DeleteRecordsRequest[v](topics=[("t", [(0, 1), (1, 0)])], timeout_ms=1000),
        DeleteRecordsResponse,
        lambda r: [(p.partition_index, p.error_code, p.low_watermark) for p in r.topics[0][1]],
        lambda v: [(0, 6, -1), (1, 6, -1)],
    ),
    "DescribeGroups": AdminCase(
        range(5),
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        lambda v: DescribeGroupsRequest[v](groups=["g", "h"], include_authorized_operations=False),
        DescribeGroupsResponse,
        lambda r: [(g.group_id, g.error_code, g.members) for g in r.groups],
        lambda v: [("g", 15, []), ("h", 15, [])],
    ),
    "ListGroups": AdminCase(
        range(3),
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        lambda v: ListGroupsRequest[v](),
        ListGroupsResponse,
        lambda r: (r.error_code, r.groups),
        lambda v: (15, []),
    ),
    "DescribeConfigs": AdminCase(
        range(4),
        ErrorCode.INVALID_REQUEST,
        _describe_configs,
        DescribeConfigsResponse,
        lambda r: [(c.resource_name, c.error_code, c.error_message, c.configs) for c in r.results],
        lambda v: [(name, 42, "INVALID_REQUEST", []) for name in ("t", "0")],
    ),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("api", list(_ADMIN))
async def test_admin_apis_answer_an_injected_error_in_every_served_version(kafka, api) -> None:
    """Kafka's response of each served version, decoded by kafka-python's schemas, with
    the code in every topic, partition, group or resource the request names; the request
    itself is not applied."""
    case = _ADMIN[api]
    conn = await Connection.to(kafka)
    try:
        assert (await conn.produce(1, b"r"))[1] == 0  # one record that DeleteRecords could drop
    finally:
        conn.close()
    for version in case.versions:
        rule = kafka.faults.add(api, error=case.error, versions=(version, version))
        response = await _ask(kafka, case.request(version), case.response)
        assert case.answers(response) == case.expected(version), f"v{version}"
        assert rule.hits == 1
    assert kafka.topics() == {"t": 2}  # nothing created or deleted
    assert kafka.describe("t", 0).log_start_offset == 0  # nothing deleted
    assert [h.version for h in kafka.faults.history] == list(case.versions)


def test_a_real_admin_client_sees_injected_admin_errors() -> None:
    """librdkafka's AdminClient gets the injected codes as Kafka's errors, and a retry
    (the rule fired once) goes through."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    with EmbeddedKafka(brokers=3, topics={"t": 1}) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        kafka.faults.add("CreateTopics", error=ErrorCode.REQUEST_TIMED_OUT)
        with pytest.raises(KafkaException) as timed_out:
            admin.create_topics([NewTopic("new", 1, 3)], request_timeout=10)["new"].result()
        assert timed_out.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT
        assert "new" not in kafka.topics()
        admin.create_topics([NewTopic("new", 1, 3)], request_timeout=10)["new"].result()
        assert kafka.topics() == {"t": 1, "new": 1}

        kafka.faults.add("DeleteRecords", error=NOT_LEADER, topic="t")
        [deleted] = admin.delete_records([TopicPartition("t", 0, -1)], request_timeout=10).values()
        with pytest.raises(KafkaException) as not_leader:
            deleted.result()
        assert not_leader.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION


def test_bad_rules_are_refused() -> None:
    with EmbeddedKafka(brokers=1) as kafka:
        faults = kafka.faults
        with pytest.raises(ValueError, match="must do something"):
            faults.add("Produce")
        with pytest.raises(ValueError, match="pick one"):
            faults.add("Produce", error=NOT_LEADER, drop=True)
        with pytest.raises(ValueError, match="unknown Kafka API"):
            faults.add("Produse", drop=True)
        with pytest.raises(ValueError, match="no error answer for METADATA"):
            faults.add("Metadata", error=NOT_LEADER)
        with pytest.raises(ValueError, match="name no partitions"):
            faults.add("Heartbeat", drop=True, topic="t")
        with pytest.raises(ValueError, match="times must be"):
            faults.add("Produce", drop=True, times=0)
        with pytest.raises(ValueError, match="HTTP service's own"):
            faults.add("Produce", error=ErrorCode.NOT_FOUND)
        with pytest.raises(ValueError, match="delay_ms"):
            faults.add("Produce", delay_ms=-1)
        assert faults.rules == ()


def test_kafka_python_retries_an_injected_not_leader_and_delivers_once() -> None:
    from kafka import KafkaProducer

    with EmbeddedKafka(brokers=3, topics={"t": 1}) as kafka:
        rule = kafka.faults.add("Produce", error=NOT_LEADER, times=2)
        producer = KafkaProducer(
            bootstrap_servers=kafka.bootstrap_servers, acks="all", retry_backoff_ms=20
        )
        try:
            producer.send("t", b"once").get(timeout=20)
        finally:
            producer.close(timeout=5)
        assert rule.hits == 2
        assert [r.value for r in kafka.records("t", 0)] == [b"once"]


@pytest.mark.parametrize(("idempotent", "stored"), [(False, 2), (True, 1)])
def test_a_lost_acknowledgement_is_written_twice_unless_the_producer_is_idempotent(
    idempotent: bool, stored: int
) -> None:
    """What ``after`` is for: the broker appended, the answer was lost, the producer
    retried. A plain producer's record is in the log twice; an idempotent producer's
    retry is recognised by its sequence number and acknowledged, not appended."""
    from kafka import KafkaProducer

    with EmbeddedKafka(brokers=3, topics={"t": 1}) as kafka:
        rule = kafka.faults.add("Produce", drop=True, after=True)
        producer = KafkaProducer(
            bootstrap_servers=kafka.bootstrap_servers,
            acks="all",
            request_timeout_ms=1000,
            retry_backoff_ms=20,
            max_in_flight_requests_per_connection=1,
            enable_idempotence=idempotent,
        )
        try:
            producer.send("t", b"once?").get(timeout=20)
        finally:
            producer.close(timeout=5)
        assert rule.hits == 1
        assert [r.value for r in kafka.records("t", 0)] == [b"once?"] * stored


def test_group_errors_reach_a_confluent_consumer_which_rejoins() -> None:
    from confluent_kafka import Consumer, Producer

    with EmbeddedKafka(brokers=3, topics={"t": 1}) as kafka:
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
        producer.produce("t", b"m", partition=0)
        assert producer.flush(10) == 0
        heartbeat = kafka.faults.add("Heartbeat", error=ErrorCode.REBALANCE_IN_PROGRESS)
        coordinator = kafka.faults.add("FindCoordinator", error=15)  # not available, once
        consumer = Consumer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "group.id": "g",
                "auto.offset.reset": "earliest",
                "heartbeat.interval.ms": 100,
            }
        )
        try:
            consumer.subscribe(["t"])
            got = None
            deadline = time.monotonic() + 20
            while got is None and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    got = message.value()
            while heartbeat.hits == 0 and time.monotonic() < deadline:
                consumer.poll(0.1)
        finally:
            consumer.close()
    assert got == b"m"
    assert coordinator.hits == 1
    assert heartbeat.hits == 1
