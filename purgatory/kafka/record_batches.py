"""Record batches v2 (magic 2), kept byte-exact.

A produced batch is validated once (length, magic, CRC-32C, and its records' framing:
count and lengths) and then stored as the client sent it, opaque: the log reads only its
header (record count, producer id, epoch and base sequence). Assigning offsets rewrites
only the base offset and the partition leader epoch in place; the CRC covers the bytes from
``attributes`` on, so it stays valid. Records are decoded only when someone reads them as
key/value pairs (the HTTP API), inflated first if compressed
(:mod:`purgatory.kafka.compression`); the bytes themselves stay as the client sent them,
unless the topic's ``compression.type`` has them recompressed (:func:`recompressed`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, NamedTuple, final

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.compression import deflate, inflate
from purgatory.kafka.crc32c import crc32c
from purgatory.kafka.wire_errors import DecodeError
from purgatory.sim.batches import CONTROL, TRANSACTIONAL, BatchAttributes, RecordBatch

# Attributes bit 4 (TRANSACTIONAL): the batch belongs to a transaction; bit 5 (CONTROL): a
# control batch (a transaction marker), which only a broker writes. Defined by the log,
# which writes markers.

# baseOffset q, batchLength i, partitionLeaderEpoch i, magic b, crc I, attributes h,
# lastOffsetDelta i, baseTimestamp q, maxTimestamp q, producerId q, producerEpoch h,
# baseSequence i, recordCount i
HEADER: Final = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE: Final = HEADER.size  # 61
_LENGTH_END: Final = 12  # batchLength counts the bytes after baseOffset and itself
_EPOCH_AT: Final = 12
_MAGIC_AT: Final = 16
_CRC_FROM: Final = 21  # the CRC covers attributes through the end of the batch
_ATTRIBUTES_AT: Final = 22  # the low byte of the attributes (big-endian int16 at 21)
_BASE_OFFSET: Final = struct.Struct(">q")
_EPOCH: Final = struct.Struct(">i")
_TIMESTAMP: Final = struct.Struct(">q")
_MAX_TIMESTAMP_AT: Final = 35
COMPRESSION_MASK: Final = 0x07
#: attributes bit 3: the batch's timestamps are the broker's append time
LOG_APPEND_TIME: Final = 0x08
#: attributes bit 6: the base timestamp is the cleaner's delete horizon (KIP-534)
DELETE_HORIZON: Final = 0x40


class BatchRecord(NamedTuple):
    """One record of an uncompressed batch, with its absolute offset."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class TruncatedBatch(DecodeError):
    """A batch whose header or stated length runs past the bytes sent."""


@final
class WireBatch(BatchAttributes):
    """One validated v2 batch as raw bytes, with the header fields read here decoded; the
    log that stores it writes its offset and epoch into it (an
    :class:`~purgatory.sim.batches.EncodedBatch`)."""

    __slots__ = (
        "attributes",
        "base_sequence",
        "base_timestamp",
        "buf",
        "last_offset_delta",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    def __init__(self, buf: bytearray) -> None:
        fields = HEADER.unpack_from(buf)
        self.buf = buf
        self.attributes: int = fields[5]
        self.last_offset_delta: int = fields[6]
        self.base_timestamp: int = fields[7]
        #: an idempotent producer's id (-1: none), epoch and the first record's sequence
        self.producer_id: int = fields[9]
        self.producer_epoch: int = fields[10]
        self.base_sequence: int = fields[11]
        self.record_count: int = fields[12]

    @property
    def base_offset(self) -> int:
        return int(_BASE_OFFSET.unpack_from(self.buf, 0)[0])

    @property
    def leader_epoch(self) -> int:
        return int(_EPOCH.unpack_from(self.buf, _EPOCH_AT)[0])

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    def assign(self, base_offset: int, leader_epoch: int) -> None:
        """Write the base offset and partition leader epoch the log gave this batch into
        its bytes, in place; the CRC-32C covers neither, so the batch stays valid."""
        _BASE_OFFSET.pack_into(self.buf, 0, base_offset)
        _EPOCH.pack_into(self.buf, _EPOCH_AT, leader_epoch)

    def crc_valid(self) -> bool:
        stored = struct.unpack_from(">I", self.buf, _MAGIC_AT + 1)[0]
        return bool(stored == crc32c(memoryview(self.buf)[_CRC_FROM:]))

    def check_framing(self) -> None:
        """Check that the records section holds ``record_count`` records whose lengths
        add up to it, reading their length prefixes (inflated first if compressed; a run of
        records of one length is compared in C, :func:`_records_end`): what a produce
        checks without decoding the records. Raises DecodeError, or
        UnsupportedCompression for a codec we cannot inflate."""
        data: bytes | bytearray = self.buf
        start = HEADER_SIZE  # uncompressed records are read in place, not copied out
        if self.compression:
            data, start = self._section(), 0
        try:
            pos = _records_end(data, self.record_count, start) - start
        except IndexError:
            raise DecodeError("record runs past the end of the batch") from None
        if pos != len(data) - start:
            raise DecodeError(
                f"records end at {pos}, the batch's records section at {len(data) - start}"
            )

    def records(self) -> list[BatchRecord]:
        """Decode the records (inflated first if compressed); raises DecodeError for bad
        records, UnsupportedCompression for a codec we cannot inflate."""
        try:
            return _decode_records(
                self._section(), self.record_count, self.base_offset, self.base_timestamp
            )
        except IndexError:
            raise DecodeError("record runs past the end of the batch") from None

    def key_values(self) -> list[tuple[bytes | None, bytes]]:
        """The records as the simulation's log keeps them: (key, value) pairs, a null
        value as empty bytes. Raises DecodeError as :meth:`records` does."""
        return [(r.key, r.value or b"") for r in self.records()]

    def compaction_view(self) -> list[tuple[int, bytes | None, bool]]:
        """Each record's offset, key and whether its value is null (a tombstone), for the
        log cleaner. Raises DecodeError (a ValueError) as :meth:`records` does."""
        return [(r.offset, r.key, r.value is None) for r in self.records()]

    def retained(self, offsets: Sequence[int], delete_horizon_ms: int | None) -> WireBatch:
        """This batch with only the records at ``offsets``, as Kafka's cleaner rewrites it
        (MemoryRecords.filterTo): base offset, leader epoch, producer fields, attributes
        and codec kept, each record's offset and timestamp kept (their deltas rewritten),
        the last offset delta the last record's (none: the batch's own, an empty batch);
        ``delete_horizon_ms`` set: the delete-horizon attribute on and the base timestamp
        the horizon, as Kafka marks it (KIP-534)."""
        wanted = set(offsets)
        kept = [r for r in self.records() if r.offset in wanted]
        base = self.base_offset
        attributes = self.attributes
        base_timestamp = self.base_timestamp
        if delete_horizon_ms is not None:
            attributes |= DELETE_HORIZON
            base_timestamp = delete_horizon_ms
        elif kept:
            base_timestamp = min(r.timestamp for r in kept)
        max_timestamp = max_timestamp_of(self.buf)
        if kept and not attributes & LOG_APPEND_TIME:
            max_timestamp = max(r.timestamp for r in kept)
        body = Writer()
        for r in kept:
            record = Writer().int8(0).varint(r.timestamp - base_timestamp).varint(r.offset - base)
            _put_varbytes(record, r.key)
            _put_varbytes(record, r.value)
            record.varint(len(r.headers))
            for name, value in r.headers:
                _put_varbytes(record, name.encode())
                _put_varbytes(record, value)
            body.varint(len(record.buf)).raw(record.buf)
        section = bytes(body.buf)
        codec = self.compression
        if codec and kept:
            section = deflate(codec, section)
        elif not kept:  # an empty batch, as Kafka writes one: no codec
            attributes &= ~COMPRESSION_MASK
        last_delta = kept[-1].offset - base if kept else self.last_offset_delta
        tail = (
            struct.pack(
                ">hiqqqhii",
                attributes,
                last_delta,
                base_timestamp,
                max_timestamp,
                self.producer_id,
                self.producer_epoch,
                self.base_sequence,
                len(kept),
            )
            + section
        )
        head = struct.pack(
            ">qiib", base, HEADER_SIZE - _LENGTH_END + len(section), self.leader_epoch, 2
        )
        return WireBatch(bytearray(head + struct.pack(">I", crc32c(tail)) + tail))

    def _section(self) -> bytes:
        """The records section, inflated if compressed."""
        data = memoryview(self.buf)[HEADER_SIZE:]
        if self.compression:
            return inflate(self.compression, data)
        return bytes(data)


def recompressed(batch: WireBatch, codec: int) -> WireBatch:
    """``batch`` with its records section compressed with ``codec`` (0: none) instead, as
    Kafka's broker rewrites a batch for a topic whose ``compression.type`` names another
    codec: the header (producer id, sequences, timestamps, count) kept, the codec bits of
    the attributes, the length and the CRC rewritten. The same batch if it already has
    ``codec``. Raises as :meth:`WireBatch.records` does, or UnsupportedCompression."""
    if batch.compression == codec:
        return batch
    section = batch._section()
    body = deflate(codec, section) if codec else section
    buf = bytearray(batch.buf[:HEADER_SIZE])
    struct.pack_into(">i", buf, 8, HEADER_SIZE - _LENGTH_END + len(body))
    struct.pack_into(">h", buf, _CRC_FROM, (batch.attributes & ~COMPRESSION_MASK) | codec)
    buf += body
    struct.pack_into(">I", buf, _MAGIC_AT + 1, crc32c(memoryview(buf)[_CRC_FROM:]))
    return WireBatch(buf)


def stamp(batch: WireBatch, append_ms: int) -> None:
    """Mark ``batch`` in place as stamped with the broker's append time, as Kafka's broker
    does for a topic whose ``message.timestamp.type`` is LogAppendTime: the timestamp type
    bit of the attributes set, the max timestamp (every record's timestamp, to a
    consumer) ``append_ms``, the CRC rewritten."""
    batch.attributes |= LOG_APPEND_TIME
    struct.pack_into(">h", batch.buf, _CRC_FROM, batch.attributes)
    _TIMESTAMP.pack_into(batch.buf, _MAX_TIMESTAMP_AT, append_ms)
    crc = crc32c(memoryview(batch.buf)[_CRC_FROM:])
    struct.pack_into(">I", batch.buf, _MAGIC_AT + 1, crc)


def _records_end(data: bytes | bytearray, count: int, pos: int = 0) -> int:
    """Where ``count`` length-prefixed records from ``pos`` in ``data`` end: the one
    loop a produce runs per record. Raises DecodeError for a length under 1, IndexError
    where a length prefix lies past the end. A producer's records mostly share their
    length (its prefix bytes too), so where the next record starts with this one's
    prefix, :func:`_same_prefix` skips the run of them in C; the positions reached, and
    so the errors, are the ones a walk record by record reaches."""
    left = count
    while left > 0:
        # one- and two-byte lengths (records up to 8 KiB) are read inline, longer ones by
        # _varint
        byte = data[pos]
        if byte < 0x80:
            width = 1
            length = (byte >> 1) ^ -(byte & 1)
        elif data[pos + 1] < 0x80:
            width = 2
            value = (byte & 0x7F) | (data[pos + 1] << 7)
            length = (value >> 1) ^ -(value & 1)
        else:
            length, after = _varint(data, pos)
            width = after - pos
        if length < 1:
            raise DecodeError(f"record length {length}")
        stride = width + length
        run = 1
        following = pos + stride
        if (
            left > 1
            and following + width <= len(data)
            and data[following : following + width] == data[pos : pos + width]
        ):
            run = _same_prefix(data, pos, stride, width, left)
        pos += run * stride
        left -= run
    return pos


def _same_prefix(data: bytes | bytearray, start: int, stride: int, width: int, most: int) -> int:
    """How many records (at most ``most``) every ``stride`` bytes from ``start`` begin
    with the ``width`` bytes at ``start``: each byte of the prefix is compared down a
    strided slice, in windows that grow, so a short run costs little."""
    run = 0
    window = 16
    while run < most:
        take = min(window, most - run)
        first = start + run * stride
        same = take
        for offset in range(width):
            column = data[first + offset : first + offset + take * stride : stride]
            prefix = data[start + offset : start + offset + 1]
            same = min(same, len(column) - len(column.lstrip(prefix)))
        run += same
        if same < take:
            break
        window *= 4
    return run


def _varint(data: bytes | bytearray, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos`` (at most 10 bytes) and the position after it; the hot
    path of produce, so it reads ``bytes`` directly instead of going through a Reader."""
    byte = data[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    value = byte & 0x7F
    shift = 7
    end = pos + 10
    pos += 1
    while pos < end:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
    raise DecodeError("varint longer than 10 bytes")


def _decode_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int
) -> list[BatchRecord]:
    """The ``count`` records of a batch's (uncompressed) records section ``data``."""
    out: list[BatchRecord] = []
    pos = 0
    size = len(data)
    for _ in range(count):
        length, pos = _varint(data, pos)
        end = pos + length
        if length < 0 or end > size:
            raise DecodeError(f"record length {length} runs past the batch")
        pos += 1  # attributes, unused
        timestamp, pos = _varint(data, pos)
        offset_delta, pos = _varint(data, pos)
        key_length, pos = _varint(data, pos)
        key = None
        if key_length >= 0:
            key = data[pos : pos + key_length]
            pos += key_length
        value_length, pos = _varint(data, pos)
        value = None
        if value_length >= 0:
            value = data[pos : pos + value_length]
            pos += value_length
        if key_length < -1 or value_length < -1 or pos > end:
            raise DecodeError("record field runs past its record")
        header_count, pos = _varint(data, pos)
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if header_count:
            headers, pos = _headers(data, pos, header_count, end)
        if pos != end:
            raise DecodeError(f"record ends at {pos}, its length says {end}")
        out.append(
            BatchRecord(base_offset + offset_delta, base_timestamp + timestamp, key, value, headers)
        )
    if pos != size:
        raise DecodeError(f"{size - pos} bytes after the last record")
    return out


def _headers(
    data: bytes, pos: int, count: int, end: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if count < 0 or count > end - pos:
        raise DecodeError(f"header count {count} with {end - pos} bytes left")
    reader = Reader(data[:end], pos)
    headers = []
    for _ in range(count):
        name = _varbytes(reader)
        if name is None:
            raise DecodeError("null header key")
        try:
            headers.append((name.decode(), _varbytes(reader)))
        except UnicodeDecodeError:
            raise DecodeError("header key is not UTF-8") from None
    return tuple(headers), reader.pos


def _varbytes(reader: Reader) -> bytes | None:
    n = reader.varint()
    if n == -1:
        return None
    if n < -1:
        raise DecodeError(f"negative length {n}")
    return bytes(reader.raw(n))


def compression_of(batch: bytes | bytearray) -> int:
    """The compression codec of a v2 batch's bytes (the low bits of its attributes)."""
    return batch[_ATTRIBUTES_AT] & COMPRESSION_MASK


def max_timestamp_of(batch: bytes | bytearray) -> int:
    """The maxTimestamp of a v2 batch's bytes, read from its header."""
    return int(_TIMESTAMP.unpack_from(batch, _MAX_TIMESTAMP_AT)[0])


def split_batches(records: bytes | bytearray | memoryview) -> list[WireBatch]:
    """Validate a Produce request's records field as v2 batches and copy each out.

    Raises TruncatedBatch for a batch cut short, DecodeError for a magic other than 2, a
    record count that disagrees with lastOffsetDelta, or a CRC mismatch (both answered
    CORRUPT_MESSAGE).
    """
    view = memoryview(records)
    batches: list[WireBatch] = []
    pos = 0
    while pos < len(view):
        if len(view) - pos < HEADER_SIZE:
            raise TruncatedBatch(f"truncated batch header: {len(view) - pos} bytes")
        length = int(_EPOCH.unpack_from(view, pos + 8)[0])
        size = length + _LENGTH_END
        if length < HEADER_SIZE - _LENGTH_END:
            raise DecodeError(f"batch length {length} is below the header's size")
        if pos + size > len(view):
            raise TruncatedBatch(f"batch length {length} with {len(view) - pos} bytes left")
        if view[pos + _MAGIC_AT] != 2:
            raise DecodeError(f"magic {view[pos + _MAGIC_AT]}, only record batches v2 served")
        batch = WireBatch(bytearray(view[pos : pos + size]))
        if batch.record_count < 1 or batch.last_offset_delta != batch.record_count - 1:
            raise DecodeError(
                f"{batch.record_count} records with lastOffsetDelta {batch.last_offset_delta}"
            )
        if not batch.crc_valid():
            raise DecodeError("CRC-32C mismatch")
        batches.append(batch)
        pos += size
    if not batches:
        raise DecodeError("no record batch")
    return batches


def encode_batch(
    base_offset: int,
    leader_epoch: int,
    records: Sequence[tuple[bytes | None, bytes | None]],
    timestamp_ms: int,
    producer: tuple[int, int, int] = (-1, -1, -1),
    attributes: int = 0,
    offsets: Sequence[int] | None = None,
) -> bytes:
    """An uncompressed v2 batch of consecutive records (for logs that keep no wire bytes):
    ``producer`` its (producer id, epoch, base sequence), ``attributes`` its
    TRANSACTIONAL and CONTROL bits (a transaction marker is a control batch); ``offsets``:
    the records' offsets when they are not consecutive (a cleaned batch's)."""
    body = Writer()
    deltas = range(len(records)) if offsets is None else [o - base_offset for o in offsets]
    for delta, (key, value) in zip(deltas, records, strict=True):
        record = Writer().int8(0).varint(0).varint(delta)
        _put_varbytes(record, key)
        _put_varbytes(record, value)
        record.varint(0)  # no headers
        body.varint(len(record.buf)).raw(record.buf)
    last = deltas[-1] if len(records) else -1
    tail = (
        struct.pack(
            ">hiqqqhii",
            attributes & (TRANSACTIONAL | CONTROL),
            last,
            timestamp_ms,
            timestamp_ms,
            *producer,
            len(records),
        )
        + body.buf
    )
    length = HEADER_SIZE - _LENGTH_END + len(body.buf)
    head = struct.pack(">qiib", base_offset, length, leader_epoch, 2)
    return head + struct.pack(">I", crc32c(tail)) + tail


def _put_varbytes(out: Writer, data: bytes | None) -> None:
    if data is None:
        out.varint(-1)
    else:
        out.varint(len(data)).raw(data)


def records_section(
    batches: list[RecordBatch], offset: int, hw: int, now_ms: int
) -> tuple[bytes, set[int]]:
    """A fetch answer's records from ``offset`` up to ``hw`` (the HW, or read_committed
    the LSO): a batch a Kafka client produced goes back as it came (whole, as Kafka sends
    it, with the offset and epoch the log gave it); records written over HTTP, a batch a
    truncation cut, and transaction markers are encoded afresh, with their producer and
    attributes. Also says which compression codecs the section holds."""
    codecs: set[int] = set()
    out = bytearray()
    for batch in batches:
        if batch.wire is not None:
            if batch.end_offset > hw:
                break  # followers hold whole batches, so the HW passes this one whole
            out += batch.wire  # its offset and epoch were written when it was stored
            codecs.add(compression_of(batch.wire))
            continue
        base = batch.base_offset
        start = max(offset, base)
        if batch.sparse:  # cleaned: its records' offsets have gaps
            records = tuple(r for r in batch.records if start <= r.offset < hw)
            start = records[0].offset if records else start
        else:
            records = batch.records[start - base : hw - base]
        if records:
            producer = (batch.producer_id, batch.producer_epoch, batch.base_sequence)
            if batch.base_sequence >= 0 and start > base:
                # the first record's sequence, wrapping as sequences do
                producer = (*producer[:2], (batch.base_sequence + start - base) & 0x7FFFFFFF)
            out += encode_batch(
                start,
                batch.epoch,
                [(r.key, r.value) for r in records],
                now_ms,
                producer,
                batch.attributes,
                [r.offset for r in records] if batch.sparse else None,
            )
    return bytes(out), codecs
