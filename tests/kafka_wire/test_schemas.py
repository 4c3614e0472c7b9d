"""Kafka's schemas through kio: the frame guard before kio's reader, unknown tagged fields,
every API's error answer at every version, and the response builder."""

from __future__ import annotations

import dataclasses
import os
import signal
import struct
import subprocess
import sys
import textwrap
import uuid
from typing import Any, Final

import pytest
from kio_wire import read_response, request_frame, uvarint

from purgatory.errors import ErrorCode
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import (
    CHECK_NAMES_ENV,
    build,
    encode_response,
    error_response,
    read_request,
    request_type,
    response_type,
    versions,
)
from purgatory.kafka.shapes import Kind, shape_of
from purgatory.kafka.wire_errors import DecodeError

# -- a frame kio alone cannot survive ----------------------------------------------------

#: Produce v9 (flexible): a v2 header (client id "c", no tags), then a null transactional
#: id, acks -1, a 1000 ms timeout, and a ``topic_data`` compact count of 2^35 - 1 (so
#: 2^35 - 2 topics) in 60 bytes. kio 0.6.5 sizes the array before reading an element.
_HEADER = struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, 1) + b"c\x00"
HUGE_PRODUCE = (_HEADER + b"\x00" + struct.pack(">hi", -1, 1000) + b"\xff\xff\xff\xff\x7f").ljust(
    60, b"\x00"
)

_RUN_KIO_ALONE = f"""
import resource
# a ceiling on the address space, so the allocation fails at once wherever this runs
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from kio.serial import entity_reader
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import request_type
entity_reader(request_type(ApiKey.PRODUCE, 9))({HUGE_PRODUCE!r}, {len(_HEADER)})
print("read")
"""

_RUN_GUARDED = f"""
import resource
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from purgatory.kafka.wire_errors import DecodeError
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import read_request
try:
    read_request({HUGE_PRODUCE!r}, ApiKey.PRODUCE, 9)
except DecodeError as exc:
    print("DecodeError", exc)
"""


def test_a_huge_array_count_is_a_decode_error() -> None:
    assert len(HUGE_PRODUCE) == 60
    with pytest.raises(DecodeError, match="topic_data: 34359738366 elements with"):
        read_request(HUGE_PRODUCE, ApiKey.PRODUCE, 9)


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_kio_alone_aborts_the_process_on_it_and_the_guard_does_not() -> None:
    """Why the guard exists: kio's native reader asks for 256 GiB and the allocator
    aborts the interpreter (no exception to catch). Through read_request the same frame is
    a DecodeError and the process goes on."""
    alone = _python(_RUN_KIO_ALONE)
    assert alone.returncode == -signal.SIGABRT, (alone.returncode, alone.stderr[-2000:])
    assert "read" not in alone.stdout
    assert "memory allocation of" in alone.stderr
    guarded = _python(_RUN_GUARDED)
    assert guarded.returncode == 0, guarded.stderr[-2000:]
    assert guarded.stdout.startswith("DecodeError topic_data: 34359738366 elements")


# -- unknown tagged fields ------------------------------------------------------------------


def _tagged(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section: the count, then each tag, size and value."""
    out = uvarint(len(fields))
    for tag, value in fields:
        out += uvarint(tag) + uvarint(len(value)) + value
    return out


def _header(key: ApiKey, version: int) -> bytes:
    """A v2 request header: client id ``c``, no tagged fields."""
    return struct.pack(">hhih", key, version, 5, 1) + b"c" + _tagged()


def _string(value: str) -> bytes:
    return uvarint(len(value) + 1) + value.encode()


TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _metadata_v12(topic_tags: bytes, top_tags: bytes) -> bytes:
    topic = TOPIC_ID.bytes + _string("t") + topic_tags
    body = uvarint(2) + topic + b"\x01\x00" + top_tags  # auto-create, no authorized ops
    return _header(ApiKey.METADATA, 12) + body


@pytest.mark.parametrize(
    ("topic_tags", "top_tags"),
    [
        (_tagged(), _tagged((99, b"whatever"))),
        (_tagged((99, b"x" * 200)), _tagged()),  # its size takes two bytes
        (_tagged((7, b""), (99, b"\x00\x01")), _tagged((0, b"a"), (99, b"b"), (300, b"c"))),
    ],
    ids=["top level", "nested struct", "several"],
)
def test_an_unknown_tagged_field_is_read_as_if_absent(topic_tags: bytes, top_tags: bytes) -> None:
    """KIP-482: a tagged field the receiver does not know is skipped (kio raises on it;
    the guard cuts it out), at the top of a request and inside a nested struct."""
    plain = read_request(_metadata_v12(_tagged(), _tagged()), ApiKey.METADATA, 12)
    tagged = read_request(_metadata_v12(topic_tags, top_tags), ApiKey.METADATA, 12)
    assert tagged == plain
    # a large frame comes as a read-only view of its buffer (purgatory.kafka.frames)
    view = memoryview(bytearray(_metadata_v12(topic_tags, top_tags))).toreadonly()
    assert read_request(view, ApiKey.METADATA, 12) == plain
    [topic] = tagged.body.topics
    assert (topic.topic_id, topic.name) == (TOPIC_ID, "t")
    assert tagged.body.allow_auto_topic_creation is True
    assert tagged.header.correlation_id == 5


def _fetch_v13(top_tags: bytes) -> bytes:
    partition = struct.pack(">iiqiqi", 1, -1, 42, -1, -1, 1 << 20) + _tagged()
    topic = TOPIC_ID.bytes + uvarint(2) + partition + _tagged()
    body = (
        struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)
        + uvarint(2)
        + topic
        + uvarint(1)  # no forgotten topics
        + _string("rack")
        + top_tags
    )
    return _header(ApiKey.FETCH, 13) + body


def test_unknown_tags_around_a_known_one_leave_it_read() -> None:
    """Fetch's cluster_id is tag 0: kept, with unknown tags before and after it cut."""
    request = read_request(
        _fetch_v13(_tagged((0, _string("cluster")), (5, b"??"), (9, b""))), ApiKey.FETCH, 13
    )
    assert request.body.cluster_id == "cluster"
    [topic] = request.body.topics
    [partition] = topic.partitions
    assert (topic.topic_id, partition.partition, partition.fetch_offset) == (TOPIC_ID, 1, 42)
    assert request.body.rack_id == "rack"
    plain = read_request(_fetch_v13(_tagged()), ApiKey.FETCH, 13)
    assert plain.body.cluster_id is None
    assert plain.body.topics == request.body.topics


@pytest.mark.parametrize(
    "top_tags",
    [
        _tagged((99, b"abc"))[:-1],  # the value cut short
        uvarint(3) + uvarint(99) + uvarint(0),  # three announced, one there
        uvarint(1) + uvarint(99) + uvarint(1 << 30),  # a size far past the end
        _tagged((0, _string("cluster") + b"extra")),  # a known tag of the wrong size
    ],
    ids=["cut value", "missing fields", "huge size", "known tag, wrong size"],
)
def test_a_bad_tagged_section_is_a_decode_error(top_tags: bytes) -> None:
    with pytest.raises(DecodeError):
        read_request(_fetch_v13(top_tags), ApiKey.FETCH, 13)


# -- error answers of every API at every version ------------------------------------------

_PARTITION_KEYS = frozenset({"partition_index", "partition", "index", "partition_id"})
_TOPIC_KEYS = frozenset({"name", "topic", "topic_name"})


def _request_values(cls: type) -> dict[str, Any]:
    """Values naming one of each entity (topic ``t`` of id TOPIC_ID, group ``g``, ...)
    and two partitions (0 and 1) wherever the request lists partitions."""
    values: dict[str, Any] = {}
    for field in shape_of(cls).every:
        item = field.item
        if field.kind is Kind.ARRAY and item is not None:
            keys = {f.name for f in shape_of(item).every} & _PARTITION_KEYS
            entries = 2 if keys else 1
            values[field.name] = [
                {**_request_values(item), **dict.fromkeys(keys, index)} for index in range(entries)
            ]
        elif field.kind is Kind.ARRAY:
            values[field.name] = {"int32": [0, 1], "string": ["t"], "uuid": [TOPIC_ID]}.get(
                field.kafka_type, []
            )
        elif field.kind is Kind.STRUCT and item is not None:
            values[field.name] = _request_values(item)
        elif field.kind is Kind.STRING:
            values[field.name] = "t" if field.name in _TOPIC_KEYS else f"{field.name}-1"
        elif field.kafka_type == "uuid" and "topic" in field.name:
            values[field.name] = TOPIC_ID
    return values


def _every_version() -> list[tuple[ApiKey, int]]:
    return [(key, v) for key in ApiKey for v in range(versions(key)[0], versions(key)[1] + 1)]


def _every_version_params() -> list[Any]:
    return [
        pytest.param(
            key,
            v,
            id=f"{key.name}-v{v}",
        )
        for key, v in _every_version()
    ]


def _decode_response(key: ApiKey, version: int, frame: bytes) -> tuple[int, Any]:
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header, size, body, end = read_response(frame[4:], key, version)
    assert size + end == len(frame) - 4  # (the reader returns the bytes it read)
    return int(header.correlation_id), body


def _errors(entity: Any, path: str = "") -> dict[str, int]:
    """Every error code of a response, by its path (``topics[0].partitions[1].error_code``)."""
    found: dict[str, int] = {}
    for field in shape_of(type(entity)).every:
        value = getattr(entity, field.name)
        if field.kafka_type == "error_code":
            found[path + field.name] = int(value)
        elif field.kind is Kind.ARRAY and field.item is not None:
            for index, item in enumerate(value or ()):
                found |= _errors(item, f"{path}{field.name}[{index}].")
        elif field.kind is Kind.STRUCT and value is not None:
            found |= _errors(value, f"{path}{field.name}.")
    return found


def _entries(entity: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every struct in arrays of ``entity``, by path, depth first."""
    out: list[tuple[str, Any]] = []
    for field in shape_of(type(entity)).every:
        if field.kind is Kind.ARRAY and field.item is not None:
            for index, item in enumerate(getattr(entity, field.name) or ()):
                where = f"{path}{field.name}[{index}]"
                out += [(where, item), *_entries(item, where + ".")]
    return out


@pytest.mark.parametrize(("key", "version"), _every_version_params())
def test_every_api_answers_an_error_at_every_version(key: ApiKey, version: int) -> None:
    """Kafka's ``getErrorResponse``: the code at the top of the response where it has an
    error code there, and in every topic, partition, group or resource the request names
    (with the request's keys, so the client can tell which is which); written by
    encode_response and read back by kio for the response type."""
    request = build(request_type(key, version), _request_values(request_type(key, version)))
    error = ErrorCode.REQUEST_TIMED_OUT
    response = error_response(request, error)
    assert type(response) is response_type(key, version)
    correlation_id, decoded = _decode_response(key, version, encode_response(77, response))
    assert (correlation_id, decoded) == (77, response)
    errors = _errors(decoded)
    if key in _TOP_ONLY:
        # Kafka's getErrorResponse sets the top-level code only, where there is one
        top = {f.name for f in shape_of(type(decoded)).every}
        assert errors == ({"error_code": error.number} if "error_code" in top else {})
        assert _entries(decoded) == []
        return
    assert errors, "no error code anywhere in the answer"
    assert set(errors.values()) == {error.number}, errors
    top = {f.name for f in shape_of(type(decoded)).every}
    entries = _entries(decoded)
    if "error_code" not in top:
        assert entries, "no top-level error code and no entries to carry it"
    if _lists_partitions(type(request)) and _lists_partitions(type(decoded)):
        # both partitions the request names, each with the code and its own index
        partitions = [e for _, e in entries if _PARTITION_KEYS & _names(e)]
        assert sorted(_index(p) for p in partitions) == [0, 1], entries
    for path, entry in entries:
        fields = shape_of(type(entry)).every
        for f in fields:  # named error_code, or partition_error_code (AddPartitionsToTxn)
            if f.kafka_type == "error_code":
                assert errors[f"{path}.{f.name}"] == error.number
        for f in fields:  # the request's keys, copied
            value = getattr(entry, f.name)
            if f.name in _TOPIC_KEYS and value:
                assert value == "t", (path, f.name, value)
            if f.name == "topic_id" and value is not None and value.int:
                assert value == TOPIC_ID, path


#: The fields Kafka's ``getErrorResponse`` sets to null itself (DescribeClientQuotasRequest:
#: ``setEntries(null)``; JoinGroupRequest v7+: ``setProtocolName(null)``); every other
#: field of an error answer Kafka fills: with what the request names, or with the value
#: its generated class starts with, empty unless the schema's default is null.
_NULL_IN_KAFKA: Final = {
    ApiKey.DESCRIBE_CLIENT_QUOTAS: {"entries"},
    ApiKey.JOIN_GROUP: {"protocol_name"},
}


def _nulls(entity: Any, path: str = "") -> set[str]:
    """The fields of ``entity`` that go on the wire as null, by path: None in a string,
    bytes, records, array or struct field (kio's None in a uuid or timestamp field is its
    zero or -1, not a null), tagged fields aside (left out at their default)."""
    found: set[str] = set()
    for field in shape_of(type(entity)).every:
        value = getattr(entity, field.name)
        if value is None:
            if field.kind is not Kind.FIXED and field.tag is None and field.default is not None:
                found.add(path + field.name)
        elif field.kind is Kind.ARRAY and field.item is not None:
            for index, item in enumerate(value):
                found |= _nulls(item, f"{path}{field.name}[{index}].")
        elif field.kind is Kind.STRUCT:
            found |= _nulls(value, f"{path}{field.name}.")
    return found


@pytest.mark.parametrize(("key", "version"), _every_version_params())
def test_error_answers_send_no_null_where_kafka_sends_a_value(key: ApiKey, version: int) -> None:
    """No null where Kafka's error answer has a value (a Fetch partition's records are
    empty, not null: librdkafka cannot parse null records and fetches again at once), the
    nulls Kafka does send kept; written and read back by kio."""
    request = build(request_type(key, version), _request_values(request_type(key, version)))
    response = error_response(request, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    _, decoded = _decode_response(key, version, encode_response(1, response))
    assert decoded == response
    wanted = {
        name
        for name in _NULL_IN_KAFKA.get(key, ())
        if any(f.name == name and f.nullable for f in shape_of(type(decoded)).every)
    }
    assert _nulls(decoded) == wanted
    if key == ApiKey.FETCH:
        partitions = [p for t in decoded.responses for p in t.partitions]
        assert partitions
        assert {p.records for p in partitions} == {b""}


#: APIs whose error answer carries the code at the top only (none at the versions without
#: one): DescribeLogDirs' results are log dirs, not what it asked for (Kafka's answer has
#: none); ListPartitionReassignments' entries have no code of their own (Kafka's answer
#: echoes the partitions asked, without codes; the generic one leaves them out)
_TOP_ONLY: Final = frozenset({ApiKey.DESCRIBE_LOG_DIRS, ApiKey.LIST_PARTITION_REASSIGNMENTS})


def _lists_partitions(cls: type) -> bool:
    """Whether messages of ``cls`` list partitions: entries with an index, or indexes."""
    for field in shape_of(cls).every:
        if field.kind is not Kind.ARRAY:
            continue
        if field.item is None:
            if field.kafka_type == "int32" and "partition" in field.name:
                return True
        elif _PARTITION_KEYS & {f.name for f in shape_of(field.item).every}:
            return True
        elif _lists_partitions(field.item):
            return True
    return False


def _index(entry: Any) -> int:
    for name in _PARTITION_KEYS:
        if name in _names(entry):
            return int(getattr(entry, name))
    raise AssertionError(entry)


def test_error_answers_name_the_request_s_entities() -> None:
    """Spot checks of the generic answer against what Kafka answers."""
    values = {"topic_data": [{"name": "t", "partition_data": [{"index": 2}, {"index": 5}]}]}
    produce = build(request_type(ApiKey.PRODUCE, 9), values)
    answer = error_response(produce, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    [topic] = answer.responses
    assert topic.name == "t"
    assert [(p.index, int(p.error_code)) for p in topic.partition_responses] == [(2, 6), (5, 6)]
    find = build(request_type(ApiKey.FIND_COORDINATOR, 4), {"coordinator_keys": ["g", "h"]})
    answer = error_response(find, 15)
    assert [(c.key, int(c.error_code)) for c in answer.coordinators] == [("g", 15), ("h", 15)]
    describe = build(request_type(ApiKey.DESCRIBE_GROUPS, 5), {"groups": ["g", "h"]})
    answer = error_response(describe, 15)
    assert [(g.group_id, int(g.error_code)) for g in answer.groups] == [("g", 15), ("h", 15)]


def test_error_answers_list_only_entries_that_carry_the_error() -> None:
    """As Kafka's: the configs a DescribeConfigs asked for, or those a CreateTopics set,
    are not made up in the error answer (their entries have no error code to carry)."""
    describe = build(
        request_type(ApiKey.DESCRIBE_CONFIGS, 4),
        {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": ["x"]}]},
    )
    [result] = error_response(describe, ErrorCode.INVALID_REQUEST).results
    assert (result.resource_name, int(result.error_code), result.configs) == ("t", 42, ())
    create = build(
        request_type(ApiKey.CREATE_TOPICS, 7),
        {"topics": [{"name": "t", "configs": [{"name": "retention.ms", "value": "1"}]}]},
    )
    [topic] = error_response(create, ErrorCode.REQUEST_TIMED_OUT).topics
    assert (topic.name, int(topic.error_code)) == ("t", 7)
    assert topic.configs == ()  # (nullable, but Kafka sends it empty)


# -- the builder ----------------------------------------------------------------------------


def _names(entity: Any) -> set[str]:
    return {f.name for f in dataclasses.fields(entity)}


def test_build_drops_the_fields_a_version_lacks_and_defaults_the_rest() -> None:
    values = {
        "cluster_id": "c",  # v2+
        "controller_id": 1,  # v1+
        "throttle_time": 250,  # v3+; milliseconds become a timedelta
        "cluster_authorized_operations": 7,  # v8-v10 only
        "topics": [
            {
                "name": "t",
                "topic_id": TOPIC_ID,  # v10+
                "is_internal": True,  # v1+
                "partitions": [{"partition_index": 0, "leader_epoch": 3, "error_code": 6}],
            }
        ],
    }
    v0 = build(response_type(ApiKey.METADATA, 0), values)
    assert _names(v0) == {"brokers", "topics"}
    [topic] = v0.topics
    assert _names(topic) == {"error_code", "name", "partitions"}
    [partition] = topic.partitions
    assert (partition.partition_index, int(partition.error_code)) == (0, 6)
    assert not hasattr(partition, "leader_epoch")
    assert partition.replica_nodes == ()  # not given: empty
    v12 = build(response_type(ApiKey.METADATA, 12), values)
    assert (v12.cluster_id, v12.controller_id, v12.throttle_time.total_seconds()) == ("c", 1, 0.25)
    assert not hasattr(v12, "cluster_authorized_operations")
    assert v12.topics[0].topic_id == TOPIC_ID
    assert v12.topics[0].partitions[0].leader_epoch == 3
    assert int(v12.topics[0].error_code) == 0  # not given: NONE
    for response in (v0, v12):  # both write, and read back the same
        frame = encode_response(3, response)
        assert _decode_response(ApiKey.METADATA, response.__version__, frame) == (3, response)


def test_build_refuses_a_name_no_version_has_only_where_the_names_are_checked() -> None:
    # the tests check names (tests/conftest.py sets the variable); a misspelt one would
    # otherwise become the field's default without a word
    assert os.environ.get(CHECK_NAMES_ENV) == "1"
    v0 = response_type(ApiKey.METADATA, 0)
    build(v0, {"cluster_id": "c", "topics": [{"topic_id": TOPIC_ID}]})  # names of v2+, v10+
    with pytest.raises(TypeError, match=r"no version has the field\(s\) \['clusterid'\]"):
        build(v0, {"clusterid": "c"})
    with pytest.raises(TypeError, match=r"\['topic_ids'\]"):
        build(v0, {"topics": [{"topic_ids": TOPIC_ID}]})  # nested structs too
    unchecked = """
        import os
        os.environ.pop("PURGATORY_CHECK_KIO_NAMES", None)
        from purgatory.kafka.protocol import ApiKey
        from purgatory.kafka.schemas import build, response_type
        print(build(response_type(ApiKey.METADATA, 0), {"clusterid": "c"}).brokers)
    """
    ran = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(unchecked)], capture_output=True, text=True
    )
    assert (ran.returncode, ran.stdout) == (0, "()\n"), ran.stderr


def test_kio_writes_what_build_makes_for_every_request_and_read_request_reads_it() -> None:
    """The request side of the same schemas, end to end: built, written by kio behind a
    header, read back by read_request as built."""
    for key, version in _every_version():
        cls = request_type(key, version)
        request = build(cls, _request_values(cls))
        frame = request_frame(request, correlation_id=9, client_id="me")
        read = read_request(frame[4:], key, version)  # without its size
        assert read.body == request, (key, version)
        assert tuple(read.header) == (key, version, 9, "me")


def test_a_null_array_where_the_schema_allows_none_is_a_decode_error() -> None:
    """kio reads a null count as None whatever the schema says (a handler then iterates
    None); Kafka refuses null for a non-nullable field, and so does the guard. Where the
    schema allows null (Metadata v1+'s topics: every topic), it is read as None."""
    header = struct.pack(">hhih", ApiKey.SYNC_GROUP, 3, 1, 1) + b"c"
    legacy = (
        header
        + struct.pack(">h", 1)
        + b"g"
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"m"
        + struct.pack(">h", -1)  # no group instance id
        + struct.pack(">i", -1)  # assignments: null
    )
    with pytest.raises(DecodeError, match="assignments"):
        read_request(legacy, ApiKey.SYNC_GROUP, 3)
    flexible = (
        _header(ApiKey.SYNC_GROUP, 4)
        + _string("g")
        + struct.pack(">i", 1)
        + _string("m")
        + b"\x00"  # no group instance id
        + b"\x00"  # assignments: null
        + _tagged()
    )
    with pytest.raises(DecodeError, match="assignments"):
        read_request(flexible, ApiKey.SYNC_GROUP, 4)
    every_topic = struct.pack(">hhih", ApiKey.METADATA, 1, 1, 1) + b"c" + struct.pack(">i", -1)
    assert read_request(every_topic, ApiKey.METADATA, 1).body.topics is None
