"""Every served handler fed requests generated from Kafka's schemas at every served
version, then mutated: it raises DecodeError or answers what encode_response writes, and
so does the fault-rule path (an error rule on the same request); nothing else. Then the
partition handlers' answers to particular requests, kafka-python's classes as the oracle.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records
from kio_wire import request_frame, uvarint

from purgatory.errors import ErrorCode
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.faults import Faults
from purgatory.kafka.handlers.partitions import PartitionHandlers
from purgatory.kafka.handlers.topics import TopicHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.record_batches import encode_batch, split_batches
from purgatory.kafka.schemas import encode_response, read_request, request_type
from purgatory.kafka.wire_errors import DecodeError
from purgatory.sim import Cluster, ProduceRequest
from purgatory.sim import FetchRequest as FetchRequest_

#: generated requests per served (API, version); each is fed whole and mutated
EXAMPLES = 3
#: mutations of each generated request
MUTATIONS = 4
#: how long a case may stay parked (a Fetch waiting, a JoinGroup rebalancing) before it
#: is let go: decoding is done by then, which is the point
PARK_S = 0.3

_BATCH = encode_batch(0, 0, [(b"k", b"v")], 0)
# kio's phantom types register hypothesis strategies; its record sets do not
st.register_type_strategy(
    Records, st.one_of(st.just(Records(_BATCH)), st.binary(max_size=80).map(Records))
)


#: what replaces a few bytes at a random place: a huge or negative count or length
_HUGE = [
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff\xff\xfe",
    b"\x7f\xff",
    b"\xff\xfe",
    uvarint(2**35 - 1),
    uvarint(2**31),
    uvarint(1 << 20),
]


def _mutate(frame: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One mutation of a request frame past its api key and version (bytes 0-3, which
    choose the schema): cut, bytes flipped, a huge count or length, trailing garbage."""
    body = bytearray(frame)
    start = 4
    how = rng.randrange(4)
    if how == 0:
        return "cut", bytes(body[: rng.randrange(start, len(body))])
    if how == 1:
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(start, len(body))] ^= 1 << rng.randrange(8)
        return "flipped", bytes(body)
    if how == 2:
        at = rng.randrange(start, len(body))
        huge = rng.choice(_HUGE)
        body[at : at + len(huge)] = huge
        return "huge count", bytes(body)
    return "trailing garbage", bytes(body) + rng.randbytes(rng.randint(1, 16))


class Case(NamedTuple):
    key: ApiKey
    version: int
    how: str
    frame: bytes


def _drawer(key: ApiKey, version: int, cases: list[Case]) -> Callable[[], None]:
    """A hypothesis run adding requests of ``key`` v``version`` to ``cases``."""

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.from_type(request_type(key, version)), st.randoms(use_true_random=False))
    def draw(request: Any, rng: random.Random) -> None:
        frame = request_frame(request, correlation_id=1, client_id="fuzz")[4:]  # no size
        cases.append(Case(key, version, "whole", frame))
        cases.extend(Case(key, version, *_mutate(frame, rng)) for _ in range(MUTATIONS))

    return draw


def _cases(served: dict[ApiKey, tuple[int, int]]) -> list[Case]:
    """Requests generated from the schemas of every served version, whole and mutated."""
    cases: list[Case] = []
    for key, (low, high) in sorted(served.items()):
        for version in range(low, high + 1):
            _drawer(key, version, cases)()
    return cases


async def _answer(result: Any) -> Any:
    """The handler's answer, awaited if parked (let go after PARK_S: None then)."""
    if not inspect.isawaitable(result):
        return result
    future = asyncio.ensure_future(result)
    done, _ = await asyncio.wait([future], timeout=PARK_S)
    if not done:
        future.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await future
        return None
    return future.result()


async def _feed(case: Case, handler: Callable[..., Any], faults: Faults | None) -> str | None:
    """What went wrong feeding ``case`` to ``handler`` (through ``faults`` if given), or
    None: only DecodeError, or an answer encode_response writes, may come out."""
    try:
        header, body = read_request(case.frame, case.key, case.version)
    except DecodeError:
        return None
    try:
        if faults is None:
            result = handler(header, body)
        else:
            result = faults.intercept(0, header, body, handler)
        answer = await _answer(result)
    except DecodeError:
        return None
    except Exception as exc:
        return f"handler raised {exc!r}"
    if answer is None:
        return None
    try:
        encode_response(header.correlation_id, answer)
    except Exception as exc:
        return f"answer {type(answer).__name__} does not encode: {exc!r}"
    return None


@pytest.mark.asyncio
async def test_generated_and_mutated_requests_only_decode_error_or_an_encodable_answer() -> None:
    async with AsyncEmbeddedKafka(brokers=3, seed=1, topics={"t": (2, 3)}) as kafka:
        # the handlers one listener of the front door serves, as it registered them
        handlers = kafka.front_door.listeners["PLAINTEXT"].servers[0]._handlers
        served = {ApiKey(key): (low, high) for key, (low, high, _) in handlers.items()}
        assert set(served) == set(ApiKey) - {ApiKey.API_VERSIONS}
        cases = _cases(served)
        problems: list[str] = []
        tried: set[tuple[ApiKey, int]] = set()
        for case in cases:
            handler = handlers[case.key][2]
            faults = Faults()
            faults.add(case.key, error=ErrorCode.REQUEST_TIMED_OUT, times=None)
            for through in (None, faults):
                problem = await _feed(case, handler, through)
                if problem is not None:
                    path = "fault rule" if through else "handler"
                    problems.append(
                        f"{case.key.name} v{case.version} {case.how} ({path}): {problem}"
                    )
            tried.add((case.key, case.version))
    every = {(k, v) for k, (low, high) in served.items() for v in range(low, high + 1)}
    assert tried == every
    assert not problems, "\n".join(problems[:20])


def _typed(request: Any) -> tuple[RequestHeader, Any]:
    """kafka-python's request read as a listener reads it: through kio (header, body)."""
    request.with_header(correlation_id=1, client_id="c")
    return read_request(bytes(request.encode(header=True)), request.API_KEY, request.API_VERSION)


def _decoded(response_class: Any, version: int, answer: Any) -> Any:
    """A handler's answer as a client reads it: written by kio, read by kafka-python."""
    return response_class[version].decode(encode_response(1, answer)[4:], header=True)


@pytest.mark.asyncio
async def test_a_negative_fetch_offset_is_out_of_range_not_clamped() -> None:
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        await cluster.produce(ProduceRequest("t", 0, [(None, b"x")]))
        broker = PartitionHandlers(cluster, 0, {0: ("h", 1)}, ProtocolStats())
        request = FetchRequest[4](
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1000,
            isolation_level=0,
            topics=[("t", [(0, -1, 1000)])],
        )
        answer = await broker.fetch(*_typed(request))
    [topic] = _decoded(FetchResponse, 4, answer).responses
    [partition] = topic.partitions
    assert partition.error_code == 1  # OFFSET_OUT_OF_RANGE


@pytest.mark.asyncio
async def test_fetch_max_bytes_limits_the_whole_response() -> None:
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    from purgatory.kafka.record_batches import split_batches

    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=1)
        for index in (0, 1):
            for _ in range(10):  # one batch each: reads are limited batch by batch
                await cluster.produce(ProduceRequest("t", index, [(None, b"v" * 100)]))
        broker = PartitionHandlers(cluster, 0, {0: ("h", 1)}, ProtocolStats())
        request = FetchRequest[4](
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=500,
            isolation_level=0,
            topics=[("t", [(0, 0, 100_000), (1, 0, 100_000)])],
        )
        answer = await broker.fetch(*_typed(request))
    [topic] = _decoded(FetchResponse, 4, answer).responses
    counts = [
        sum(b.record_count for b in split_batches(p.records)) if p.records else 0
        for p in topic.partitions
    ]
    assert [p.error_code for p in topic.partitions] == [0, 0]
    assert [p.high_watermark for p in topic.partitions] == [10, 10]
    assert counts == [4, 0]  # 4 x 108 bytes fit in 500; nothing is left for partition 1


def _recrc(batch: bytes) -> bytes:
    """The batch with its CRC-32C recomputed, so only the damage inside it is wrong."""
    from purgatory.kafka.crc32c import crc32c

    return batch[:17] + crc32c(batch[21:]).to_bytes(4, "big") + batch[21:]


def _bad_batches() -> list[tuple[bytes | None, str]]:
    from purgatory.kafka.record_batches import encode_batch

    good = encode_batch(0, 0, [(b"k", b"value")], 0)
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    magic_1 = bytearray(good)
    magic_1[16] = 1
    # A record length that runs past the batch, behind a valid CRC.
    long_record = bytearray(good)
    long_record[61] = 0x7E
    return [
        (good[:40], "truncated batch"),  # cut inside the header
        (good[:-3], "truncated batch"),  # cut inside the records
        (bytes(flipped), "corrupt batch"),  # CRC-32C mismatch
        (bytes(magic_1), "corrupt batch"),
        (_recrc(bytes(long_record)), "corrupt batch"),
        (None, "corrupt batch"),
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize(("records", "kind"), _bad_batches())
async def test_a_bad_batch_is_answered_corrupt_message_counted_and_logged_once(
    records: bytes | None, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from kafka.protocol.producer import ProduceRequest, ProduceResponse

    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        stats = ProtocolStats()
        broker = PartitionHandlers(cluster, 0, {0: ("h", 1)}, stats)
        request = ProduceRequest[3](
            transactional_id=None, acks=1, timeout_ms=1000, topic_data=[("t", [(0, records)])]
        )
        answers = []
        with caplog.at_level(logging.WARNING, logger="purgatory.kafka"):
            for _ in range(2):
                answer = await broker.produce(*_typed(request))
                assert answer is not None
                answers.append(_decoded(ProduceResponse, 3, answer))
        assert cluster.partition("t", 0).hw == 0  # nothing appended
    for response in answers:
        [(_, [partition])] = [(t.name, t.partition_responses) for t in response.responses]
        assert partition.error_code == 2  # CORRUPT_MESSAGE
    assert stats.bad_input == {kind: 2}
    [line] = caplog.records
    assert line.getMessage().startswith(f"kafka protocol: {kind} (Produce to t-0: ")
    assert not line.exc_info


@pytest.mark.asyncio
async def test_a_forged_batch_with_sound_framing_reads_corrupt_message_as_records() -> None:
    """A batch whose CRC and record lengths hold but whose fields do not decode (only a
    forged one) is stored undecoded; read as key/value pairs, even by a fetch parked
    before it came, it answers CORRUPT_MESSAGE rather than raising."""
    import asyncio

    from kafka.protocol.producer import ProduceRequest as KafkaProduceRequest

    from purgatory.kafka.record_batches import encode_batch

    forged = bytearray(encode_batch(0, 0, [(b"k", b"value")], 0))
    forged[65] = 0x64  # the key's length (50) runs past its 10-byte record
    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        broker = PartitionHandlers(cluster, 0, {0: ("h", 1)}, ProtocolStats())
        parked = asyncio.ensure_future(cluster.fetch(FetchRequest_("t", 0, 0, 1, 1 << 20, 5000)))
        await asyncio.sleep(0)
        produce = KafkaProduceRequest[3](
            transactional_id=None,
            acks=1,
            timeout_ms=1000,
            topic_data=[("t", [(0, _recrc(bytes(forged)))])],
        )
        answer = await broker.produce(*_typed(produce))
        assert answer is not None
        assert (await parked).error.name == "CORRUPT_MESSAGE"
        read = await cluster.fetch(FetchRequest_("t", 0, 0, 0, 1 << 20, 0))
        assert (read.error.name, read.records) == ("CORRUPT_MESSAGE", [])
        [stored] = cluster.stored_batches("t", 0, 0, 1)
        assert stored.wire == _recrc(bytes(forged))  # served over Kafka as it came


@pytest.mark.asyncio
async def test_a_produced_batch_is_fetched_back_byte_exact_and_http_records_encoded() -> None:
    from kafka.protocol.consumer import FetchRequest, FetchResponse
    from kafka.protocol.producer import ProduceRequest as KafkaProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=1,  # gzip: stored compressed, as sent
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(3):
        builder.append(
            i, 1_700_000_000_000 + i, b"k", None if i == 2 else b"v" * 300, [("h", b"x")]
        )
    sent = bytes(builder.build())
    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        await cluster.produce(ProduceRequest("t", 0, [(None, b"first")]))  # over "HTTP"
        broker = PartitionHandlers(cluster, 0, {0: ("h", 1)}, ProtocolStats())
        produce = KafkaProduceRequest[3](
            transactional_id=None, acks=1, timeout_ms=1000, topic_data=[("t", [(0, sent)])]
        )
        await broker.produce(*_typed(produce))
        await cluster.produce(ProduceRequest("t", 0, [(b"k", b"last")]))
        fetch = FetchRequest[4](
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            topics=[("t", [(0, 0, 1 << 20)])],
        )
        answer = await broker.fetch(*_typed(fetch))
        http_view = await cluster.fetch(FetchRequest_("t", 0, 0, 0, 1 << 20, 0))
    [topic] = _decoded(FetchResponse, 4, answer).responses
    [partition] = topic.partitions
    first, middle, last = split_batches(partition.records)
    # The client's batch as it came: only its base offset (1) and epoch were stamped.
    assert bytes(middle.buf[8:12]) == sent[8:12]
    assert bytes(middle.buf[16:]) == sent[16:]
    assert (middle.base_offset, middle.compression) == (1, 1)
    assert [(r.offset, r.value, r.headers) for r in middle.records()] == [
        (1, b"v" * 300, (("h", b"x"),)),
        (2, b"v" * 300, (("h", b"x"),)),
        (3, None, (("h", b"x"),)),  # a tombstone stays null over Kafka
    ]
    assert [(r.offset, r.key, r.value) for b in (first, last) for r in b.records()] == [
        (0, None, b"first"),
        (4, b"k", b"last"),
    ]
    # The simulation (and so HTTP) holds the same records as key/value pairs.
    assert [r.value for r in http_view.records] == [b"first", b"v" * 300, b"v" * 300, b"", b"last"]


def _zstd_batch() -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 4, 0, -1, -1, -1, 1 << 20)  # magic 2, zstd
    for i in range(3):
        builder.append(i, 1_700_000_000_000, None, b"z" * 300, [])
    return bytes(builder.build())


async def _fetch(broker: PartitionHandlers, version: int, **fields: object) -> object:
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    request = FetchRequest[version](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        **fields,
    )
    answer = await broker.fetch(*_typed(request))
    return _decoded(FetchResponse, version, answer)


@pytest.mark.asyncio
async def test_fetch_v7_to_v10_sessionless_leader_epochs_and_zstd() -> None:
    from kafka.protocol.producer import ProduceRequest as KafkaProduceRequest

    def partitions(epoch: int) -> list[object]:
        return [("t", [(0, epoch, 0, 0, 1 << 20)])]

    session = {"session_id": 0, "session_epoch": 0, "forgotten_topics_data": []}
    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        addresses = {0: ("h", 1), 1: ("h", 2), 2: ("h", 3)}
        await cluster.fail_over("t", 0)  # a new leader, a new epoch
        broker = PartitionHandlers(
            cluster, cluster.partition("t", 0).leader, addresses, ProtocolStats()
        )
        zstd = _zstd_batch()
        answers = []
        for version in (6, 7):  # zstd needs Produce v7
            produce = KafkaProduceRequest[version](
                transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[("t", [(0, zstd)])]
            )
            answers.append(await broker.produce(*_typed(produce)))
        epoch = cluster.partition("t", 0).leader_epoch
        assert epoch >= 1
        fresh = await _fetch(broker, 10, topics=partitions(epoch), **session)
        old = await _fetch(broker, 6, topics=[("t", [(0, 0, 0, 1 << 20)])])
        fenced = await _fetch(broker, 9, topics=partitions(epoch - 1), **session)
        ahead = await _fetch(broker, 9, topics=partitions(epoch + 1), **session)
        lost = await _fetch(broker, 7, topics=partitions(-1), **{**session, "session_id": 5})
    from kafka.protocol.producer import ProduceResponse

    codes = [
        _decoded(ProduceResponse, v, a).responses[0].partition_responses[0].error_code
        for v, a in zip((6, 7), answers, strict=True)
    ]
    assert codes == [76, 0]  # UNSUPPORTED_COMPRESSION_TYPE before v7
    assert (fresh.error_code, fresh.session_id) == (0, 0)  # no session: full fetches
    [part] = fresh.responses[0].partitions
    assert part.error_code == 0
    assert bytes(part.records)[16:] == zstd[16:]  # the zstd batch, byte-exact
    assert old.responses[0].partitions[0].error_code == 76  # zstd only to Fetch v10+
    assert fenced.responses[0].partitions[0].error_code == 74  # FENCED_LEADER_EPOCH
    assert ahead.responses[0].partitions[0].error_code == 75  # UNKNOWN_LEADER_EPOCH
    assert (lost.error_code, lost.responses) == (70, [])  # FETCH_SESSION_ID_NOT_FOUND


_NAMES = st.sampled_from(["t", "u", "", ".", "a" * 250, "bad name", "x.y_z-1"])
_SIZES = st.integers(-3, 5)


@pytest.mark.asyncio
async def test_create_topics_answers_any_request_with_a_kafka_code() -> None:
    """Well-formed CreateTopics requests of arbitrary content (names, sizes, assignments,
    configs) are answered, entry by entry, with one of Kafka's codes: nothing raises."""
    from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

    from purgatory.errors import ErrorCode

    topic = st.tuples(
        _NAMES,
        _SIZES,
        _SIZES,
        st.lists(st.tuples(st.integers(-1, 3), st.lists(st.integers(-1, 4), max_size=4))),
        st.lists(
            st.tuples(
                st.sampled_from(["retention.ms", "retention.bytes", "cleanup.policy", "x"]),
                st.one_of(st.none(), st.sampled_from(["-1", "0", "1000", "delete", "1e3", ""])),
            ),
            max_size=3,
        ),
    )
    codes = {code.number for code in ErrorCode}

    async with Cluster(brokers=3, seed=1) as cluster:
        handlers = TopicHandlers(cluster)
        requests = st.lists(topic, max_size=4).map(
            lambda topics: CreateTopicsRequest[4](
                topics=topics, timeout_ms=1000, validate_only=False
            )
        )

        @settings(max_examples=200, deadline=None)
        @given(requests)
        def draw(request: object) -> None:
            drawn.append(request)

        drawn: list[object] = []
        draw()
        for request in drawn:
            answer = await handlers.create_topics(*_typed(request))  # type: ignore[attr-defined]
            response = _decoded(CreateTopicsResponse, 4, answer)
            assert {t.error_code for t in response.topics} <= codes
            for name in list(cluster.topics):
                await cluster.delete_topic(name)
