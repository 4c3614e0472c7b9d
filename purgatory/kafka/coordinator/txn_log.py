"""The records of ``__transaction_state`` in Kafka's binary format (its ``TransactionLog``),
so that Kafka's own tools read them: the key a ``TransactionLogKey``, the value a
``TransactionLogValue``, each prefixed with its int16 version; a tombstone (null value)
removes the id.

TransactionLogKey v0: the transactional id (int16 length, UTF-8).

TransactionLogValue v0: producer id (int64), producer epoch (int16), transaction timeout
(int32), status (int8, Kafka's ``TransactionState.id``), the partitions (a nullable array
of topic name and int32 partition ids; null when Empty, as Kafka writes it), the last
update and the start timestamps (int64). v1, the flexible version, writes the same with
compact lengths (unsigned varints of length + 1, 0 for null) and tagged fields at the end of
each structure: tag 0 the previous producer id, 1 the next producer id (int64, -1 unless
set), 2 the client's transaction version (int16, 0 unless set). Each is written only when it
is not its default, as Kafka's generated code writes tagged fields.

What this coordinator keeps beyond Kafka's schema goes in two tagged fields of its own,
which Kafka's readers skip as unknown: ``GROUPS_TAG`` the consumer groups AddOffsetsToTxn
added (a compact array of compact strings) and ``LAST_EPOCH_TAG`` the producer's epoch
before its last bump (int16, KIP-360's retry). A value is written as v0, as Kafka writes it
under Transactions V1, unless one of its tagged fields is not its default; then v1.
"""

from __future__ import annotations

import struct
from typing import Final

from purgatory.kafka.coordinator.txn_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    STATES_BY_ID,
    TxnMetadata,
    TxnState,
)

KEY_VERSION: Final = 0
#: the tags Kafka's TransactionLogValue v1 defines
PREVIOUS_PRODUCER_ID_TAG: Final = 0
NEXT_PRODUCER_ID_TAG: Final = 1
CLIENT_TXN_VERSION_TAG: Final = 2
#: this coordinator's own tags, far past Kafka's
GROUPS_TAG: Final = 10_000
LAST_EPOCH_TAG: Final = 10_001

_HEAD: Final = struct.Struct(">qhib")  # producer id, epoch, timeout, status
_TIMES: Final = struct.Struct(">qq")  # last update, start
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")


class _Out:
    """The bytes of one record, written in order."""

    __slots__ = ("buf", "flexible")

    def __init__(self, flexible: bool) -> None:
        self.buf = bytearray()
        self.flexible = flexible

    def uvarint(self, n: int) -> None:
        while n >= 0x80:
            self.buf.append((n & 0x7F) | 0x80)
            n >>= 7
        self.buf.append(n)

    def length(self, n: int | None) -> None:
        """An array's count or a string's length: int32 (-1 null) or a compact one."""
        if self.flexible:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.buf += _INT32.pack(-1 if n is None else n)

    def string(self, text: str) -> None:
        data = text.encode()
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            self.buf += _INT16.pack(len(data))
        self.buf += data

    def no_tags(self) -> None:
        if self.flexible:
            self.uvarint(0)


class _In:
    """Reads one record's bytes in order; ValueError past their end."""

    __slots__ = ("data", "flexible", "pos")

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ValueError(f"record ends at {len(self.data)}, wanted {end}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        return fmt.unpack(self.take(fmt.size))

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            byte = self.take(1)[0]
            n |= (byte & 0x7F) << shift
            if byte < 0x80:
                return n
            shift += 7
            if shift > 28:
                raise ValueError("varint longer than 5 bytes")

    def length(self) -> int | None:
        n = self.uvarint() - 1 if self.flexible else self.unpack(_INT32)[0]
        if n < -1:
            raise ValueError(f"negative length {n}")
        return None if n == -1 else n

    def string(self) -> str:
        n = self.length() if self.flexible else self.unpack(_INT16)[0]
        if n is None or n < 0:
            raise ValueError("null string")
        return self.take(n).decode()

    def tags(self) -> dict[int, bytes]:
        """A flexible structure's tagged fields, by tag (none in a non-flexible one)."""
        if not self.flexible:
            return {}
        found: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = self.take(self.uvarint())
        return found

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ValueError(f"{len(self.data) - self.pos} bytes past the record's end")


def key_bytes(transactional_id: str) -> bytes:
    """The TransactionLogKey (v0) of ``transactional_id``."""
    out = _Out(flexible=False)
    out.buf += _INT16.pack(KEY_VERSION)
    out.string(transactional_id)
    return bytes(out.buf)


def read_key(data: bytes) -> str | None:
    """The transactional id of a TransactionLogKey; None for a key version this does not
    know (Kafka's UnknownKey: skipped). ValueError if it does not decode."""
    reader = _In(data)
    if reader.unpack(_INT16)[0] != KEY_VERSION:
        return None
    transactional_id = reader.string()
    reader.end()
    return transactional_id


def _tagged(txn: TxnMetadata) -> list[tuple[int, bytes]]:
    """The value's tagged fields that are not their default, in tag order."""
    fields: list[tuple[int, bytes]] = []
    if txn.previous_producer_id != NO_PRODUCER_ID:
        fields.append((PREVIOUS_PRODUCER_ID_TAG, _INT64.pack(txn.previous_producer_id)))
    if txn.next_producer_id != NO_PRODUCER_ID:
        fields.append((NEXT_PRODUCER_ID_TAG, _INT64.pack(txn.next_producer_id)))
    if txn.client_txn_version != 0:
        fields.append((CLIENT_TXN_VERSION_TAG, _INT16.pack(txn.client_txn_version)))
    if txn.groups:
        groups = _Out(flexible=True)
        groups.length(len(txn.groups))
        for group in sorted(txn.groups):
            groups.string(group)
        fields.append((GROUPS_TAG, bytes(groups.buf)))
    if txn.last_producer_epoch != NO_PRODUCER_EPOCH:
        fields.append((LAST_EPOCH_TAG, _INT16.pack(txn.last_producer_epoch)))
    return fields


def value_bytes(txn: TxnMetadata) -> bytes:
    """The TransactionLogValue of ``txn``: v0 unless a tagged field has something to
    carry. ValueError for an Empty transaction with partitions or groups (Kafka's
    IllegalStateException)."""
    empty = txn.state is TxnState.EMPTY
    if empty and (txn.partitions or txn.groups):
        raise ValueError(f"an Empty transaction has no partitions: {txn}")
    tagged = _tagged(txn)
    out = _Out(flexible=bool(tagged))
    out.buf += _INT16.pack(1 if tagged else 0)
    out.buf += _HEAD.pack(txn.producer_id, txn.producer_epoch, txn.timeout_ms, txn.state.id)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out.length(None if empty else len(by_topic))
    for topic, ids in by_topic.items():
        out.string(topic)
        out.length(len(ids))
        for partition in ids:
            out.buf += _INT32.pack(partition)
        out.no_tags()
    out.buf += _TIMES.pack(txn.last_update_ms, txn.start_ms)
    if tagged:
        out.uvarint(len(tagged))
        for tag, data in tagged:
            out.uvarint(tag)
            out.uvarint(len(data))
            out.buf += data
    return bytes(out.buf)


def _partitions(reader: _In) -> set[tuple[str, int]]:
    partitions: set[tuple[str, int]] = set()
    for _ in range(reader.length() or 0):
        topic = reader.string()
        for _ in range(reader.length() or 0):
            partitions.add((topic, reader.unpack(_INT32)[0]))
        reader.tags()  # the element's: none defined
    return partitions


def _groups(data: bytes) -> set[str]:
    reader = _In(data, flexible=True)
    groups = {reader.string() for _ in range(reader.length() or 0)}
    reader.end()
    return groups


def _tag_int(tags: dict[int, bytes], tag: int, fmt: struct.Struct, default: int) -> int:
    data = tags.get(tag)
    if data is None:
        return default
    if len(data) != fmt.size:
        raise ValueError(f"tagged field {tag}: {len(data)} bytes, wanted {fmt.size}")
    value: int = fmt.unpack(data)[0]
    return value


def read_value(transactional_id: str, data: bytes) -> TxnMetadata:
    """The transaction a TransactionLogValue (v0 or v1) holds; the partitions of an Empty
    one are ignored, as Kafka ignores them. ValueError for another version, an unknown
    status or bytes that do not decode."""
    version = _In(data).unpack(_INT16)[0]
    if version not in (0, 1):
        raise ValueError(f"unknown TransactionLogValue version {version}")
    reader = _In(data, flexible=version == 1)
    reader.take(_INT16.size)
    producer_id, epoch, timeout_ms, status = reader.unpack(_HEAD)
    state = STATES_BY_ID.get(status)
    if state is None:
        raise ValueError(f"transaction status {status} is not one this coordinator keeps")
    partitions = _partitions(reader)
    last_update_ms, start_ms = reader.unpack(_TIMES)
    tags = reader.tags()
    reader.end()
    groups = tags.get(GROUPS_TAG)
    return TxnMetadata(
        transactional_id,
        producer_id,
        epoch,
        timeout_ms,
        state,
        last_producer_epoch=_tag_int(tags, LAST_EPOCH_TAG, _INT16, NO_PRODUCER_EPOCH),
        previous_producer_id=_tag_int(tags, PREVIOUS_PRODUCER_ID_TAG, _INT64, NO_PRODUCER_ID),
        partitions=set() if state is TxnState.EMPTY else partitions,
        groups=set() if groups is None or state is TxnState.EMPTY else _groups(groups),
        start_ms=start_ms,
        last_update_ms=last_update_ms,
        next_producer_id=_tag_int(tags, NEXT_PRODUCER_ID_TAG, _INT64, NO_PRODUCER_ID),
        client_txn_version=_tag_int(tags, CLIENT_TXN_VERSION_TAG, _INT16, 0),
    )
