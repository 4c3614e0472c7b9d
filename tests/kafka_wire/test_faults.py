"""Per-request fault rules: each action on the wire (error, drop, disconnect, delay, before
and after the request is applied), matching, one-shot and kept rules, and real clients
riding them out."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import pytest
import pytest_asyncio
from kafka.protocol.admin import (
    CreateTopicsResponse,
    DeleteRecordsResponse,
    DeleteTopicsResponse,
    DescribeConfigsResponse,
    DescribeGroupsResponse,
    ElectLeadersResponse,
    ListGroupsResponse,
)
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kio_wire import read_frame, round_trip

from purgatory.errors import ErrorCode
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.faults import Faults
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.record_batches import encode_batch
from purgatory.kafka.schemas import build, request_type, respond, versions
from purgatory.service.refusals import ServiceRefusal

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
            frame = await read_frame(self.reader)
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
        assert (await conn.produce(1, b"a"))[:2] == (1, NOT_LEADER.number)
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
    listener = kafka.front_door.listeners["PLAINTEXT"].servers[0]
    assert listener.interceptor is None  # no rules: nothing looked at


async def _ask(
    kafka: AsyncEmbeddedKafka,
    key: ApiKey,
    version: int,
    values: dict[str, Any],
    response_class: Any,
    broker: int = 0,
) -> Any:
    """A request of ``key`` v``version`` (written by kio) on a raw connection to
    ``broker``, its answer decoded by kafka-python's ``response_class``."""
    request = build(request_type(key, version), values)
    frame = await round_trip(
        kafka.addresses[broker], request, correlation_id=7, client_id="raw", within_s=5
    )
    assert int.from_bytes(frame[:4], "big") == 7
    return response_class[version].decode(frame, header=True)


class AdminCase(NamedTuple):
    """An admin API's fault case: the error injected, its request's values (for every
    version: each version keeps the fields it has), the response schema, and what of the
    answer carries the code."""

    error: ErrorCode | int
    request: dict[str, Any]
    response: Any
    answers: Callable[[Any], Any]
    expected: Any


_ADMIN = {
    "CreateTopics": AdminCase(
        ErrorCode.REQUEST_TIMED_OUT,
        {
            "topics": [
                {"name": "new", "num_partitions": 1, "replication_factor": 1},
                {
                    "name": "other",
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": [1]}],
                    "configs": [{"name": "retention.ms", "value": "1"}],
                },
            ],
            "timeout": 1000,
        },
        CreateTopicsResponse,
        lambda r: [(t.name, t.error_code, t.error_message) for t in r.topics],
        [(name, 7, "REQUEST_TIMED_OUT") for name in ("new", "other")],
    ),
    "DeleteTopics": AdminCase(
        ErrorCode.REQUEST_TIMED_OUT,
        {"topic_names": ["t"], "topics": [{"name": "t"}], "timeout": 1000},  # v6: topics
        DeleteTopicsResponse,
        lambda r: [(t.name, t.error_code) for t in r.responses],
        [("t", 7)],
    ),
    "DeleteRecords": AdminCase(
        NOT_LEADER,
        {
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "offset": 1},
                        {"partition_index": 1, "offset": 0},
                    ],
                }
            ],
            "timeout": 1000,
        },
        DeleteRecordsResponse,
        lambda r: [
            (t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions
        ],
        [("t", 0, 6), ("t", 1, 6)],
    ),
    "DescribeGroups": AdminCase(
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        {"groups": ["g", "h"]},
        DescribeGroupsResponse,
        lambda r: [(g.group_id, g.error_code, g.members) for g in r.groups],
        [("g", 15, []), ("h", 15, [])],
    ),
    "ListGroups": AdminCase(
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        {},
        ListGroupsResponse,
        lambda r: (r.error_code, r.groups),
        (15, []),
    ),
    "DescribeConfigs": AdminCase(
        ErrorCode.INVALID_REQUEST,
        {
            "resources": [
                {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
                {"resource_type": 4, "resource_name": "0", "configuration_keys": ["x"]},
            ],
            "include_synonyms": True,
        },
        DescribeConfigsResponse,
        lambda r: [
            (c.resource_type, c.resource_name, c.error_code, c.error_message, c.configs)
            for c in r.results
        ],
        [(2, "t", 42, "INVALID_REQUEST", []), (4, "0", 42, "INVALID_REQUEST", [])],
    ),
    # APIs whose rules could not answer an error before the schemas derived every answer
    "Metadata": AdminCase(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        {"topics": [{"name": "t"}, {"name": "u"}]},
        MetadataResponse,
        lambda r: [(t.name, t.error_code, t.partitions) for t in r.topics],
        [("t", 3, []), ("u", 3, [])],
    ),
    "ElectLeaders": AdminCase(
        41,  # NOT_CONTROLLER: a number of Kafka's the simulation has no name for
        {"topic_partitions": [{"topic": "t", "partitions": [0, 1]}], "timeout": 1000},
        ElectLeadersResponse,
        lambda r: [
            (t.topic, p.partition_id, p.error_code)
            for t in r.replica_election_results
            for p in t.partition_result
        ],
        [("t", 0, 41), ("t", 1, 41)],
    ),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("api", list(_ADMIN))
async def test_apis_answer_an_injected_error_in_every_served_version(kafka, api) -> None:
    """Kafka's response of each served version, decoded by kafka-python's schemas, with
    the code in every topic, partition, group or resource the request names; the request
    itself is not applied."""
    case = _ADMIN[api]
    key = Faults().add(api, drop=True).api  # the name's key
    conn = await Connection.to(kafka)
    try:
        assert (await conn.produce(1, b"r"))[1] == 0  # one record that DeleteRecords could drop
    finally:
        conn.close()
    low, high = versions(key)
    for version in range(low, high + 1):
        rule = kafka.faults.add(api, error=case.error, versions=(version, version))
        response = await _ask(kafka, key, version, case.request, case.response)
        assert case.answers(response) == case.expected, f"v{version}"
        assert rule.hits == 1
    assert kafka.topics() == {"t": 2}  # nothing created or deleted
    assert kafka.describe("t", 0).log_start_offset == 0  # nothing deleted
    assert [h.version for h in kafka.faults.history] == list(range(low, high + 1))


def _fetch_by_id(topic_id: uuid.UUID) -> dict[str, Any]:
    """Fetch v13+ values naming topic ``topic_id`` partitions 0 and 1, no wait."""
    partitions = [
        {"partition": i, "fetch_offset": 0, "partition_max_bytes": 1 << 20} for i in (0, 1)
    ]
    return {
        "replica_id": -1,
        "max_wait": 0,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "topics": [{"topic_id": topic_id, "partitions": partitions}],
    }


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [13, 18])
async def test_topic_and_partition_filters_match_a_fetch_naming_its_topic_by_id(
    kafka, version: int
) -> None:
    """Fetch v13+ names topics by id alone: the rules' topic filter looks the name up in
    the cluster (the front door hands the faults ``cluster.topic_name``)."""
    topic_id = kafka.front_door.cluster.topic_id("t")
    assert topic_id is not None
    values = _fetch_by_id(topic_id)
    faults = kafka.faults
    elsewhere = [
        faults.add("Fetch", error=NOT_LEADER, topic="other"),
        faults.add("Fetch", error=NOT_LEADER, topic="t", partition=2),
    ]
    response = await _ask(kafka, ApiKey.FETCH, version, values, FetchResponse)
    assert response.error_code == 0  # no rule matched: served
    [topic] = response.responses
    # a replica serves a consumer's Fetch v11+ (KIP-392), a broker that is none refuses it
    served = [0 if 0 in kafka.describe("t", i).replicas else NOT_LEADER.number for i in (0, 1)]
    assert (topic.topic_id, [p.error_code for p in topic.partitions]) == (topic_id, served)
    hit = faults.add("Fetch", error=NOT_LEADER, topic="t", partition=1)
    response = await _ask(kafka, ApiKey.FETCH, version, values, FetchResponse)
    assert response.error_code == NOT_LEADER.number
    [topic] = response.responses
    assert topic.topic_id == topic_id
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, 6), (1, 6)]
    assert hit.hits == 1
    assert [r.hits for r in elsewhere] == [0, 0]
    unknown = _fetch_by_id(uuid.UUID(int=99))  # an id no topic has: no name to match
    kept = faults.add("Fetch", error=NOT_LEADER, topic="t", times=None)
    response = await _ask(kafka, ApiKey.FETCH, version, unknown, FetchResponse)
    assert response.error_code == 0
    assert kept.hits == 0


def test_rules_act_on_typed_requests_and_answer_through_the_schemas() -> None:
    """The fault-rule path without sockets: Faults.intercept with kio's request."""
    faults = Faults()
    rule = faults.add("ListOffsets", error=NOT_LEADER, partition=1)
    values = {"topics": [{"name": "t", "partitions": [{"partition_index": 1}]}]}
    request = build(request_type(ApiKey.LIST_OFFSETS, 9), values)
    header = RequestHeader(ApiKey.LIST_OFFSETS, 9, 3, "c")

    def handler(header: RequestHeader, request: Any) -> Any:
        return respond(request)

    answer = faults.intercept(0, header, request, handler)
    [topic] = answer.topics
    assert [(p.partition_index, int(p.error_code)) for p in topic.partitions] == [(1, 6)]
    assert not rule.active
    assert faults.intercept(0, header, request, handler) == respond(request)
    acks_0 = build(request_type(ApiKey.PRODUCE, 9), {"acks": 0})
    faults.add("Produce", error=NOT_LEADER)
    assert faults.intercept(0, RequestHeader(0, 9, 1, "c"), acks_0, handler) is None


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
        with pytest.raises(ValueError, match="ApiVersions is never intercepted"):
            faults.add("ApiVersions", error=NOT_LEADER)
        with pytest.raises(ValueError, match="12345 is not a Kafka error code"):
            faults.add("Produce", error=12345)
        with pytest.raises(ValueError, match="error must be an ErrorCode"):
            faults.add("Produce", error=True)
        with pytest.raises(ValueError, match="name no partitions"):
            faults.add("Heartbeat", drop=True, topic="t")
        with pytest.raises(ValueError, match="times must be"):
            faults.add("Produce", drop=True, times=0)
        with pytest.raises(ValueError, match="error must be an ErrorCode"):
            faults.add("Produce", error=ServiceRefusal.NOT_FOUND)  # the HTTP service's own
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


@pytest.mark.parametrize("per_partition", [False, True], ids=["request rule", "partition rule"])
def test_a_fetch_error_reaches_a_confluent_consumer_without_a_protocol_error(
    per_partition: bool,
) -> None:
    """A Fetch answered TOPIC_AUTHORIZATION_FAILED (by a rule on the whole request, or on
    the partition) reaches the application as a message whose error is set; librdkafka
    parses the answer (empty records, as Kafka sends them: null records were a PROTOERR,
    "invalid MessageSetSize -1", and a fetch again at once, the application never told)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    class Lines(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())

    lines = Lines()
    librdkafka = logging.getLogger(f"{__name__}.librdkafka.{per_partition}")
    librdkafka.addHandler(lines)
    librdkafka.propagate = False
    errors: list[Any] = []
    with EmbeddedKafka(brokers=1, topics={"t": 1}) as kafka:
        denied = "TOPIC_AUTHORIZATION_FAILED"
        rule = (
            kafka.faults.add_partition_fault(denied, apis=["Fetch"], topic="t", times=None)
            if per_partition
            else kafka.faults.add("Fetch", error=denied, topic="t", times=None)
        )
        consumer = Consumer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "group.id": "g",
                "enable.auto.commit": False,
                "logger": librdkafka,
                "error_cb": errors.append,
                "fetch.error.backoff.ms": 50,
            }
        )
        try:
            consumer.assign([TopicPartition("t", 0, 0)])
            seen = None
            deadline = time.monotonic() + 15
            while seen is None and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is not None and message.error() is not None:
                    seen = message.error()
        finally:
            consumer.close()
            rule.remove()
    assert seen is not None, (rule.hits, lines.lines[-5:])
    assert seen.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert rule.hits >= 1
    protocol_errors = [line for line in lines.lines if "PROTOERR" in line]
    assert protocol_errors == []
    assert [e for e in errors if "MessageSetSize" in str(e)] == []
