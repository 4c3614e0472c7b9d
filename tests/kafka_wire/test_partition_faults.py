"""Partition faults (``Faults.add_partition_fault``, as franz-go's kfake ``AddFault``):
only the named partition's entry carries the error, the rest of the same request is served
(and the failed partition is not applied), for every API whose answer has a code per
partition, in every served version; kio round trips and a real producer retrying."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio_wire import read_response, round_trip

from purgatory.errors import ErrorCode
from purgatory.kafka import schemas
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.fault_partitions import PARTITION_APIS, PARTITIONED_APIS, partitioned_apis
from purgatory.kafka.faults import Faults
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.record_batches import encode_batch
from purgatory.kafka.schemas import build, error_response, request_type, versions

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
TOPIC_ID = uuid.UUID(int=7, version=4)
#: the names a partition entry gives its index
_INDEX = ("partition_index", "partition", "index")


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    # one broker leads both partitions, so one request names both
    async with AsyncEmbeddedKafka(brokers=1, topics={"t": 2}) as cluster:
        yield cluster


async def _ask(kafka: AsyncEmbeddedKafka, key: ApiKey, version: int, values: dict[str, Any]) -> Any:
    request = build(request_type(key, version), values)
    frame = await round_trip(kafka.addresses[0], request, within_s=10)
    return read_response(frame, key, version).body


def _produce(kafka: AsyncEmbeddedKafka, values: dict[int, bytes]) -> dict[str, Any]:
    return {
        "acks": -1,
        "timeout": 5000,
        "topic_data": [
            {
                "name": "t",
                "topic_id": kafka.cluster.topic_id("t"),
                "partition_data": [
                    {"index": i, "records": encode_batch(0, 0, [(None, v)], 0)}
                    for i, v in values.items()
                ],
            }
        ],
    }


def _produced(response: Any) -> dict[int, tuple[int, int]]:
    [topic] = response.responses
    return {p.index: (int(p.error_code), p.base_offset) for p in topic.partition_responses}


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [3, 9, 13])  # v13 names the topic by id
async def test_produce_fails_one_partition_and_appends_the_other(kafka, version: int) -> None:
    rule = kafka.faults.add_partition_fault(NOT_LEADER, apis=["Produce"], topic="t", partition=1)
    response = await _ask(kafka, ApiKey.PRODUCE, version, _produce(kafka, {0: b"a", 1: b"b"}))
    assert _codes(response) == [(0, 0), (1, NOT_LEADER.number)]
    assert _produced(response)[0] == (0, 0)
    assert [r.value for r in kafka.records("t", 0)] == [b"a"]
    assert kafka.records("t", 1) == []  # the failed partition was not applied
    assert (rule.hits, rule.active) == (1, False)  # once by default
    response = await _ask(kafka, ApiKey.PRODUCE, version, _produce(kafka, {0: b"c", 1: b"b"}))
    assert _produced(response) == {0: (0, 1), 1: (0, 0)}


def _fetch(kafka: AsyncEmbeddedKafka) -> dict[str, Any]:
    partitions = [
        {"partition": i, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "log_start_offset": -1}
        for i in (0, 1)
    ]
    return {
        "replica_id": -1,
        "max_wait": 0,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "topics": [
            {"topic": "t", "topic_id": kafka.cluster.topic_id("t"), "partitions": partitions}
        ],
    }


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [4, 12, 13, 18])  # v13+ names the topic by id
async def test_fetch_fails_one_partition_and_reads_the_other(kafka, version: int) -> None:
    await _ask(kafka, ApiKey.PRODUCE, 9, _produce(kafka, {0: b"a", 1: b"b"}))
    kept = kafka.faults.add_partition_fault(
        ErrorCode.FENCED_LEADER_EPOCH, apis=[ApiKey.FETCH], topic="t", partition=0, times=None
    )
    for _ in range(2):
        response = await _ask(kafka, ApiKey.FETCH, version, _fetch(kafka))
        assert int(getattr(response, "error_code", 0)) == 0  # the request as a whole: fine
        [topic] = response.responses
        got = {p.partition_index: p for p in topic.partitions}
        assert sorted(got) == [0, 1]
        assert int(got[0].error_code) == ErrorCode.FENCED_LEADER_EPOCH.number
        assert not got[0].records
        assert (int(got[1].error_code), got[1].high_watermark) == (0, 1)
        assert got[1].records  # the other partition's batch, served
    assert (kept.hits, kept.active) == (2, True)
    kept.remove()
    response = await _ask(kafka, ApiKey.FETCH, version, _fetch(kafka))
    [topic] = response.responses
    assert [int(p.error_code) for p in topic.partitions] == [0, 0]


@pytest.mark.asyncio
async def test_offset_fetch_fails_one_partition_in_each_group(kafka) -> None:
    """OffsetFetch v8+ nests topics in groups: the answers line up group by group."""
    topics = [{"name": "t", "topic_id": kafka.cluster.topic_id("t"), "partition_indexes": [0, 1]}]
    values = {"groups": [{"group_id": g, "topics": topics} for g in ("g", "h")]}
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.number
    for version in range(8, versions(ApiKey.OFFSET_FETCH)[1] + 1):
        kafka.faults.add_partition_fault(code, partition=1)
        response = await _ask(kafka, ApiKey.OFFSET_FETCH, version, values)
        answers = [
            (g.group_id, p.partition_index, int(p.error_code))
            for g in response.groups
            for t in g.topics
            for p in t.partitions
        ]
        assert sorted(answers) == [("g", 0, 0), ("g", 1, code), ("h", 0, 0), ("h", 1, code)]


@pytest.mark.asyncio
async def test_rules_on_every_partition_and_two_errors_in_one_request(kafka) -> None:
    faults = kafka.faults
    faults.add_partition_fault(NOT_LEADER, topic="t", partition=0)
    faults.add_partition_fault(ErrorCode.KAFKA_STORAGE_ERROR, topic="t")  # t-1 left for it
    response = await _ask(kafka, ApiKey.PRODUCE, 9, _produce(kafka, {0: b"a", 1: b"b"}))
    storage = ErrorCode.KAFKA_STORAGE_ERROR.number
    assert _codes(response) == [(0, NOT_LEADER.number), (1, storage)]
    assert kafka.records("t", 0) == kafka.records("t", 1) == []
    assert faults.partition_rules == ()
    # a rule scoped to another broker, topic or API leaves requests alone
    others = [
        faults.add_partition_fault(NOT_LEADER, broker=1),
        faults.add_partition_fault(NOT_LEADER, topic="u"),
        faults.add_partition_fault(NOT_LEADER, apis=["Fetch"]),
    ]
    response = await _ask(kafka, ApiKey.PRODUCE, 9, _produce(kafka, {0: b"a", 1: b"b"}))
    assert _produced(response) == {0: (0, 0), 1: (0, 0)}
    assert [r.hits for r in others] == [0, 0, 0]
    # per-request rules come first: a request one takes is not looked at
    faults.clear()
    whole = faults.add("Produce", error=ErrorCode.REQUEST_TIMED_OUT)
    part = faults.add_partition_fault(NOT_LEADER, partition=0)
    response = await _ask(kafka, ApiKey.PRODUCE, 9, _produce(kafka, {0: b"a", 1: b"b"}))
    timed_out = ErrorCode.REQUEST_TIMED_OUT.number
    assert _codes(response) == [(0, timed_out), (1, timed_out)]
    assert (whole.hits, part.hits) == (1, 0)
    assert [h.rule for h in faults.history][-1] is whole


# -- every API with a code per partition, every served version, without sockets ----------


@pytest.fixture
def synonyms_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The requests below name each entity by every name the APIs use for it (one set of
    values for all): build's check of names (tests/conftest.py) is off for them."""
    monkeypatch.setattr(schemas, "_checking_names", lambda: False)


_PARTS = [{"partition_index": i, "partition": i, "index": i} for i in (0, 1)]
_TOPIC = {
    "name": "t",
    "topic": "t",
    "topic_id": TOPIC_ID,
    "partitions": _PARTS,
    "partition_data": _PARTS,
    "partition_indexes": [0, 1],
}
_VALUES: dict[ApiKey, dict[str, Any]] = {
    ApiKey.PRODUCE: {"acks": -1, "topic_data": [_TOPIC]},
    ApiKey.FETCH: {"topics": [_TOPIC]},
    ApiKey.LIST_OFFSETS: {"topics": [_TOPIC]},
    ApiKey.OFFSET_COMMIT: {"topics": [_TOPIC]},
    ApiKey.OFFSET_FETCH: {"topics": [_TOPIC], "groups": [{"group_id": "g", "topics": [_TOPIC]}]},
    ApiKey.DELETE_RECORDS: {"topics": [_TOPIC]},
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {"topics": [_TOPIC]},
    ApiKey.ALTER_REPLICA_LOG_DIRS: {
        "dirs": [{"path": "/d", "topics": [{"name": "t", "partitions": [0, 1]}]}]
    },
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: {"topics": [_TOPIC]},
    ApiKey.DESCRIBE_PRODUCERS: {"topics": [_TOPIC]},
    ApiKey.OFFSET_DELETE: {"group_id": "g", "topics": [_TOPIC]},
    ApiKey.ADD_PARTITIONS_TO_TXN: {  # partitions by index alone
        "v3_and_below_transactional_id": "x",
        "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}],
        "transactions": [
            {"transactional_id": "x", "topics": [{"name": "t", "partitions": [0, 1]}]}
        ],
    },
    ApiKey.TXN_OFFSET_COMMIT: {"topics": [_TOPIC]},
    ApiKey.SHARE_FETCH: {"group_id": "g", "member_id": "m", "topics": [_TOPIC]},
    ApiKey.SHARE_ACKNOWLEDGE: {"group_id": "g", "member_id": "m", "topics": [_TOPIC]},
}


def _codes(entity: Any) -> list[tuple[int, int]]:
    """(partition, error code) of every partition entry of a response, in order."""
    out: list[tuple[int, int]] = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if not isinstance(value, tuple):
            continue
        for item in value:
            index = next((getattr(item, n) for n in _INDEX if hasattr(item, n)), None)
            # AddPartitionsToTxn names it partition_error_code
            code = getattr(item, "error_code", getattr(item, "partition_error_code", None))
            if index is not None and code is not None:
                out.append((index, int(code)))
            elif dataclasses.is_dataclass(item):
                out += _codes(item)
    return out


def test_the_served_apis_with_a_code_per_partition_are_those_covered() -> None:
    assert set(_VALUES) == PARTITION_APIS


def test_the_written_out_partition_apis_are_those_the_schemas_name() -> None:
    # the tables are written out so that importing faults loads no schema module
    assert partitioned_apis() == (PARTITIONED_APIS, PARTITION_APIS)


@pytest.mark.usefixtures("synonyms_allowed")
@pytest.mark.parametrize("key", sorted(_VALUES, key=int))
def test_every_version_of_every_api_fails_only_the_named_partition(key: ApiKey) -> None:
    low, high = versions(key)
    handed: list[Any] = []

    def handler(header: RequestHeader, request: Any) -> Any:
        handed.append(request)
        return error_response(request, 0)  # every partition it is handed: served

    for version in range(low, high + 1):
        handed.clear()
        faults = Faults(topic_name=lambda topic_id: "t" if topic_id == TOPIC_ID else None)
        rule = faults.add_partition_fault(NOT_LEADER, apis=[key], topic="t", partition=1)
        request = build(request_type(key, version), _VALUES[key])
        answer = faults.intercept(0, RequestHeader(key, version, 1, "c"), request, handler)
        assert sorted(_codes(answer)) == [(0, 0), (1, NOT_LEADER.number)], f"v{version}"
        assert sorted(_codes(error_response(handed[0], 0))) == [(0, 0)], f"v{version}"
        assert rule.hits == 1


def test_bad_partition_rules_are_refused() -> None:
    faults = Faults()
    with pytest.raises(ValueError, match="no error code per partition"):
        faults.add_partition_fault(NOT_LEADER, apis=["Metadata"])
    with pytest.raises(ValueError, match="no error code per partition"):
        faults.add_partition_fault(NOT_LEADER, apis=[ApiKey.ELECT_LEADERS])
    with pytest.raises(ValueError, match="unknown Kafka API"):
        faults.add_partition_fault(NOT_LEADER, apis=[9999])
    with pytest.raises(ValueError, match="not a Kafka error code"):
        faults.add_partition_fault(12345)
    with pytest.raises(ValueError, match="partition must be"):
        faults.add_partition_fault(NOT_LEADER, partition=-1)
    with pytest.raises(ValueError, match="times must be"):
        faults.add_partition_fault(NOT_LEADER, times=0)
    with pytest.raises(ValueError, match="at least one API"):
        faults.add_partition_fault(NOT_LEADER, apis=[])
    assert faults.partition_rules == ()
    assert faults.add_partition_fault(6, apis=[0, "fetch"]).apis == {ApiKey.PRODUCE, ApiKey.FETCH}


def test_kafka_python_retries_a_partition_fault_and_delivers_both_partitions_once() -> None:
    from kafka import KafkaProducer

    with EmbeddedKafka(brokers=1, topics={"t": 2}) as kafka:
        rule = kafka.faults.add_partition_fault(NOT_LEADER, topic="t", partition=1, times=2)
        producer = KafkaProducer(
            bootstrap_servers=kafka.bootstrap_servers,
            acks="all",
            retry_backoff_ms=20,
            linger_ms=50,  # both partitions in one Produce
        )
        try:
            first = producer.send("t", b"x", partition=0)
            second = producer.send("t", b"y", partition=1)
            assert first.get(timeout=20).offset == 0
            assert second.get(timeout=20).offset == 0
        finally:
            producer.close(timeout=5)
        assert rule.hits == 2
        assert [h.api for h in kafka.faults.history] == [ApiKey.PRODUCE] * 2
        assert [r.value for r in kafka.records("t", 0)] == [b"x"]
        assert [r.value for r in kafka.records("t", 1)] == [b"y"]


@pytest.mark.usefixtures("synonyms_allowed")
def test_acks_0_answers_nothing_and_a_wholly_failed_request_is_not_handed_on() -> None:
    faults = Faults(topic_name=lambda topic_id: None)
    handed: list[Any] = []

    def handler(header: RequestHeader, request: Any) -> Any:
        handed.append(request)
        return None if request.acks == 0 else error_response(request, 0)

    header = RequestHeader(ApiKey.PRODUCE, 9, 1, "c")
    faults.add_partition_fault(NOT_LEADER, partition=1)
    acks_0 = build(request_type(ApiKey.PRODUCE, 9), {**_VALUES[ApiKey.PRODUCE], "acks": 0})
    assert faults.intercept(0, header, acks_0, handler) is None
    [kept] = handed
    assert [p.index for t in kept.topic_data for p in t.partition_data] == [0]
    handed.clear()
    faults.add_partition_fault(NOT_LEADER, times=None)  # every partition
    request = build(request_type(ApiKey.PRODUCE, 9), _VALUES[ApiKey.PRODUCE])
    answer = faults.intercept(0, header, request, handler)
    assert sorted(_codes(answer)) == [(0, NOT_LEADER.number), (1, NOT_LEADER.number)]
    assert handed == []
