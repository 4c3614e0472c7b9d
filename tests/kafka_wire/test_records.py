"""Record batches v2: validation, byte-exact storage, in-place offset/epoch rewrite.

kafka-python's record builder and reader are the oracle: batches it builds must validate
and decode here, and a batch rewritten here must still pass its CRC check there.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from purgatory.kafka.crc32c import crc32c, crc32c_python
from purgatory.kafka.record_batches import (
    BatchRecord,
    _records_end,
    _varint,
    encode_batch,
    split_batches,
)
from purgatory.kafka.wire_errors import DecodeError

GZIP = 1


def build(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
    compression: int = 0,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (key, value, headers) in enumerate(records):
        builder.append(i, 1_700_000_000_000 + i, key, value, headers)
    return bytes(builder.build())


def test_crc32c_known_vector() -> None:
    # RFC 3720 B.4: 32 bytes of zeros
    assert crc32c_python(bytes(32)) == 0x8A9136AA
    assert crc32c(b"123456789") == 0xE3069283
    for data in (bytes(32), b"123456789", bytes(range(256)) * 3):
        assert crc32c_python(data) == crc32c(data)


def test_batch_from_a_real_client_decodes() -> None:
    raw = build([(b"k", b"v", [("h", b"x")]), (None, b"v2", []), (b"k3", None, [])])
    [batch] = split_batches(raw)
    assert bytes(batch.buf) == raw
    assert batch.record_count == 3
    assert batch.records() == [
        BatchRecord(0, 1_700_000_000_000, b"k", b"v", (("h", b"x"),)),
        BatchRecord(1, 1_700_000_000_001, None, b"v2", ()),
        BatchRecord(2, 1_700_000_000_002, b"k3", None, ()),
    ]


def test_assign_rewrites_offset_and_epoch_and_keeps_the_crc_valid() -> None:
    raw = build([(b"a", b"1", []), (b"b", b"2", [])])
    [batch] = split_batches(raw)
    batch.assign(base_offset=1234, leader_epoch=7)
    assert (batch.base_offset, batch.leader_epoch) == (1234, 7)
    assert batch.crc_valid()
    # Only the 8 offset bytes and the 4 epoch bytes changed.
    changed = [i for i, (x, y) in enumerate(zip(raw, batch.buf, strict=True)) if x != y]
    assert set(changed) <= set(range(8)) | set(range(12, 16))
    oracle = DefaultRecordBatch(bytes(batch.buf))
    assert oracle.validate_crc()
    assert (oracle.base_offset, oracle.leader_epoch) == (1234, 7)
    assert [r.offset for r in oracle] == [1234, 1235]
    assert [r.offset for r in batch.records()] == [1234, 1235]


def test_several_batches_in_one_records_field() -> None:
    raw = build([(None, b"x", [])]) + build([(None, b"y", []), (None, b"z", [])])
    batches = split_batches(raw)
    assert [b.record_count for b in batches] == [1, 2]


def test_a_gzip_batch_is_kept_compressed_and_its_records_decode() -> None:
    raw = build([(b"k", b"v" * 100, [("h", b"1")])] * 5, compression=GZIP)
    [batch] = split_batches(raw)
    assert batch.compression == GZIP
    assert bytes(batch.buf) == raw
    decoded = batch.records()
    assert [(r.offset, r.key, r.value, r.headers) for r in decoded] == [
        (i, b"k", b"v" * 100, (("h", b"1"),)) for i in range(5)
    ]


def test_unknown_codecs_are_refused_and_gzip_bombs_are_bounded(monkeypatch) -> None:
    from purgatory.kafka import compression
    from purgatory.kafka.compression import UnsupportedCompression

    plain = bytearray(build([(None, b"x", [])]))
    plain[22] |= 7  # attributes: codec 7, which Kafka does not have
    plain[17:21] = crc32c(bytes(plain[21:])).to_bytes(4, "big")
    [unknown] = split_batches(plain)
    with pytest.raises(UnsupportedCompression, match="codec 7"):
        unknown.records()
    [zipped] = split_batches(build([(None, b"v" * 1000, [])] * 5, compression=GZIP))
    monkeypatch.setattr(compression, "MAX_INFLATED", 1000)
    with pytest.raises(DecodeError, match="inflates beyond 1000 bytes"):
        zipped.records()


def test_corrupted_byte_fails_the_crc() -> None:
    raw = bytearray(build([(b"k", b"value", [])]))
    raw[-1] ^= 0xFF
    with pytest.raises(DecodeError, match="CRC"):
        split_batches(raw)


@pytest.mark.parametrize("cut", [1, 10, 30])
def test_truncated_batch_is_rejected(cut: int) -> None:
    raw = build([(b"k", b"value", [])])
    with pytest.raises(DecodeError):
        split_batches(raw[:-cut])


def test_old_magic_is_rejected() -> None:
    raw = bytearray(build([(b"k", b"v", [])]))
    raw[16] = 1
    with pytest.raises(DecodeError, match="magic"):
        split_batches(raw)


def test_empty_records_field_is_rejected() -> None:
    with pytest.raises(DecodeError):
        split_batches(b"")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_raises_only_decode_error(data: bytes) -> None:
    try:
        for batch in split_batches(data):
            batch.records()
    except DecodeError:
        pass


_VALID = build([(b"key", b"value", [("h", b"1")]), (None, b"second", [])])


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(_VALID) - 1), st.integers(0, 255))
def test_mutated_batch_raises_only_decode_error(at: int, byte: int) -> None:
    data = bytearray(_VALID)
    data[at] = byte
    try:
        for batch in split_batches(data):
            # The CRC is checked in split_batches; decode the records regardless, as a
            # batch with a forged CRC would be.
            batch.records()
    except DecodeError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(_VALID) - 1), st.integers(0, 255))
def test_record_decoder_survives_any_byte_under_the_crc(at: int, byte: int) -> None:
    # Bypass the CRC so the record decoder itself sees every mutation.
    [batch] = split_batches(_VALID)
    if at >= 61:
        batch.buf[at] = byte
        try:
            batch.records()
        except DecodeError:
            pass


def test_encoded_batch_reads_back_here_and_in_kafka_python() -> None:
    raw = encode_batch(40, 3, [(b"k", b"v"), (None, b""), (b"x", None)], 1_700_000_000_000)
    [batch] = split_batches(raw)
    assert [(r.offset, r.key, r.value) for r in batch.records()] == [
        (40, b"k", b"v"),
        (41, None, b""),
        (42, b"x", None),
    ]
    oracle = DefaultRecordBatch(raw)
    assert oracle.validate_crc()
    assert [(r.offset, r.key, r.value) for r in oracle] == [
        (40, b"k", b"v"),
        (41, None, b""),
        (42, b"x", None),
    ]


def _aiokafka_batch(codec: int, values: list[bytes]) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 22)
    for i, value in enumerate(values):
        builder.append(i, 1_700_000_000_000 + i, b"k", value, [])
    return bytes(builder.build())


@pytest.mark.parametrize("codec", [1, 2, 3, 4])  # gzip, snappy (xerial), lz4, zstd
def test_every_codec_inflates_within_the_bound(codec: int, monkeypatch) -> None:
    from purgatory.kafka import compression

    values = [b"%d" % i * 500 for i in range(20)]
    [batch] = split_batches(_aiokafka_batch(codec, values))
    assert batch.compression == codec
    assert [r.value for r in batch.records()] == values
    monkeypatch.setattr(compression, "MAX_INFLATED", 5000)  # the records take ~10 kB
    with pytest.raises(DecodeError, match="5000"):
        batch.records()


@pytest.mark.parametrize("codec", [2, 3, 4])
def test_a_damaged_compressed_batch_is_a_decode_error(codec: int) -> None:
    raw = bytearray(_aiokafka_batch(codec, [b"x" * 2000] * 5))
    raw[80] ^= 0xFF  # inside the compressed records, then a valid CRC over the damage
    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    [batch] = split_batches(raw)
    with pytest.raises(DecodeError):
        batch.records()


@pytest.mark.asyncio
async def test_a_stored_batch_holds_its_offset_and_epoch_once_appended() -> None:
    """The log writes the offset and leader epoch into a client's batch when it stores it,
    so that every later read serves the bytes as they are."""
    from purgatory.sim import Cluster, ProduceRequest

    async with Cluster(brokers=2, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2)
        await cluster.produce(ProduceRequest("t", 0, [(None, b"http")] * 3))
        await cluster.fail_over("t", 0)  # epoch 1
        [batch] = split_batches(build([(None, b"a", []), (None, b"b", [])]))
        result = await cluster.produce(ProduceRequest("t", 0, (), acks=1, wire=batch))
        assert result.base_offset == 3
        [stored] = cluster.stored_batches("t", 0, 3, 5)
        assert stored.wire is not None
        read = DefaultRecordBatch(bytes(stored.wire))
        assert (read.base_offset, read.leader_epoch) == (3, 1)
        assert read.validate_crc()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 20_000), min_size=1, max_size=5), st.booleans())
def test_framing_of_a_well_formed_batch_holds_for_any_record_length(
    lengths: list[int], gzip: bool
) -> None:
    # one-, two- and three-byte record lengths: the inline reads and _varint's
    [batch] = split_batches(build([(None, b"v" * n, []) for n in lengths], GZIP if gzip else 0))
    batch.check_framing()


@settings(max_examples=300, deadline=None)
@given(st.integers(61, len(_VALID) - 1), st.integers(0, 255))
def test_framing_check_raises_only_decode_error_on_damage_under_the_crc(at: int, byte: int) -> None:
    [batch] = split_batches(_VALID)
    batch.buf[at] = byte  # under the CRC, as a forged batch would be
    try:
        batch.check_framing()
    except DecodeError:
        return
    # The framing held: the records may still not decode, but they split the same way.
    try:
        assert len(batch.records()) == batch.record_count
    except DecodeError:
        pass


def _records_end_by_record(data: bytes, count: int) -> int:
    """The framing walk record by record, as it was before runs of one length were
    skipped: the reference the fast walk must reach the same end (or error) as."""
    pos = 0
    for _ in range(count):
        length, pos = _varint(data, pos)
        if length < 1:
            raise DecodeError(f"record length {length}")
        pos += length
    return pos


def _outcome(walk: Callable[[bytes, int], int], data: bytes, count: int) -> object:
    try:
        return walk(data, count)
    except DecodeError as exc:
        return DecodeError, str(exc)
    except IndexError:  # check_framing answers every one with the same DecodeError
        return IndexError


def _length_prefixed(length: int) -> bytes:
    zigzag = (length << 1) ^ (length >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append(zigzag & 0x7F | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out) + b"r" * max(length, 0)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0, -1, 1, 2, 63, 64, 100, 8191, 8192, 9000]), st.integers(1, 70)
        ),
        max_size=6,
    ),
    st.integers(-1, 400),
    st.integers(-3, 3),
    st.binary(max_size=3),
    st.binary(max_size=4),
)
def test_framing_walk_skipping_runs_ends_where_the_walk_by_record_does(
    runs: list[tuple[int, int]], count: int, cut: int, tail: bytes, lead: bytes
) -> None:
    # runs of records of one length (the fast path), cut short or padded, wrong counts;
    # and the same read in place, after ``lead`` bytes of a bytearray (a batch's header)
    data = b"".join(_length_prefixed(length) * times for length, times in runs)
    data = (data[:cut] if cut < 0 else data) + tail
    expected = _outcome(_records_end_by_record, data, count)
    assert _outcome(_records_end, data, count) == expected

    def in_place(data: bytes, count: int) -> int:
        return _records_end(bytearray(lead + data), count, len(lead)) - len(lead)

    assert _outcome(in_place, data, count) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 100))
def test_framing_walk_of_any_bytes_matches_the_walk_by_record(data: bytes, count: int) -> None:
    assert _outcome(_records_end, data, count) == _outcome(_records_end_by_record, data, count)
