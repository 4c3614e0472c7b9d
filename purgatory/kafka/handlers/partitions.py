"""Metadata, Produce, Fetch and ListOffsets against the simulated cluster, as seen by one
broker: requests decoded from the wire, answered through the :class:`Cluster` facade.

Versions served are the non-flexible ones: Metadata 1-7, Produce 3-7, Fetch 4-10 (from v7
without fetch sessions: each answer says session 0, so clients send full fetches) and
ListOffsets 1-5 (by timestamp too). A partition this broker does not lead is answered
NOT_LEADER_OR_FOLLOWER, which sends clients back to Metadata after a failover.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Final, NamedTuple, final

from purgatory.kafka.codec import DecodeError, Reader, Writer
from purgatory.kafka.compression import ZSTD, UnsupportedCompression
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.record_batches import (
    TruncatedBatch,
    WireBatch,
    compression_of,
    encode_batch,
    max_timestamp_of,
    split_batches,
)
from purgatory.kafka.server import Api, ApiTable, ProtocolStats
from purgatory.sim import Cluster, SimulationError
from purgatory.sim.errors import ErrorCode
from purgatory.sim.log import RecordBatch
from purgatory.sim.messages import FetchRequest, FetchResult, PartitionMetadata, ProduceRequest

EARLIEST: Final = -2
LATEST: Final = -1
_NOTHING: Final = FetchResult(ErrorCode.NONE)


class Wanted(NamedTuple):
    """One partition of a Fetch request; ``leader_epoch`` -1 when not given (before v9)."""

    topic: str
    partition: int
    offset: int
    max_bytes: int
    leader_epoch: int


async def _ready(answer: bytearray) -> bytearray:
    return answer


def _fetch_error(error: ErrorCode) -> bytearray:
    """A Fetch v7+ answer with a top-level error and no partitions."""
    return Writer().int32(0).int16(error.wire).int32(0).int32(0).buf


@final
@dataclass(frozen=True, eq=False)
class PartitionHandlers:
    """The topic-partition requests of simulated broker ``broker_id``; ``addresses`` maps
    each broker id to the (host, port) it is advertised at; ``stats`` counts the bad
    batches that are answered with an error rather than by closing the connection."""

    cluster: Cluster
    broker_id: int
    addresses: dict[int, tuple[str, int]]
    stats: ProtocolStats
    #: creates the unknown topics a Metadata request names (auto.create.topics.enable),
    #: saying why any could not be; None: never
    auto_create: Callable[[list[str]], Awaitable[Mapping[str, ErrorCode]]] | None = None

    def apis(self) -> ApiTable:
        return {
            ApiKey.METADATA: Api(1, 7, self.metadata),
            ApiKey.PRODUCE: Api(3, 7, self.produce),
            ApiKey.FETCH: Api(4, 10, self.fetch),
            ApiKey.LIST_OFFSETS: Api(1, 5, self.list_offsets),
        }

    def _leads(self, topic: str, index: int) -> tuple[ErrorCode, PartitionMetadata | None]:
        """Whether this broker leads the partition (NONE) or why not, and the partition."""
        p = self.cluster.describe_partition(topic, index)
        if p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if p.leader != self.broker_id or not self.cluster.is_alive(self.broker_id):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, p
        return ErrorCode.NONE, p

    # -- Metadata ------------------------------------------------------------------------

    def metadata(self, header: RequestHeader, body: Reader) -> bytearray | Awaitable[bytearray]:
        version = header.api_version
        count = body.nullable_array_length()
        wanted = None if count is None else [body.string() for _ in range(count)]
        # before v4 there is no flag: Kafka creates whenever its broker setting allows
        allowed = body.int8() != 0 if version >= 4 else True
        if allowed and wanted and self.auto_create is not None:
            missing = [name for name in wanted if name not in self.cluster.topics]
            if missing:
                return self._metadata_after(version, wanted, self.auto_create(missing))
        return self._encode_metadata(version, wanted, {})

    async def _metadata_after(
        self, version: int, wanted: list[str], created: Awaitable[Mapping[str, ErrorCode]]
    ) -> bytearray:
        return self._encode_metadata(version, wanted, await created)

    def _encode_metadata(
        self, version: int, wanted: list[str] | None, errors: Mapping[str, ErrorCode]
    ) -> bytearray:
        """The answer; ``errors`` says why an unknown topic could not be created."""
        meta = self.cluster.metadata()
        out = Writer()
        if version >= 3:
            out.int32(0)  # throttle_time_ms
        live = [b for b in meta.brokers if b.alive]
        out.int32(len(live))
        for broker in live:
            host, port = self.addresses[broker.broker_id]
            out.int32(broker.broker_id).string(host).int32(port).string(None)
        if version >= 2:
            out.string("purgatory")
        out.int32(live[0].broker_id if live else -1)  # controller_id
        topics = {t.name: t for t in meta.topics}
        names = list(topics) if wanted is None else wanted
        out.int32(len(names))
        for name in names:
            topic = topics.get(name)
            if topic is None:
                error = errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                out.int16(error.wire).string(name).int8(0).int32(0)
                continue
            out.int16(ErrorCode.NONE.wire).string(name).int8(0).int32(len(topic.partitions))
            for part in topic.partitions:
                leader = part.leader if part.leader is not None else -1
                error = ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
                out.int16(error.wire).int32(part.partition).int32(leader)
                if version >= 7:
                    out.int32(part.leader_epoch)
                for nodes in [part.replicas, part.isr] + ([[]] if version >= 5 else []):
                    out.int32(len(nodes))
                    for node in nodes:
                        out.int32(node)
        return out.buf

    # -- Produce -------------------------------------------------------------------------

    def produce(self, header: RequestHeader, body: Reader) -> Awaitable[bytearray | None]:
        body.nullable_string()  # transactional_id
        acks = body.int16()
        timeout_ms = body.int32()
        requests: list[tuple[str, int, memoryview | None]] = []
        for _ in range(body.array_length()):
            topic = body.string()
            for _ in range(body.array_length()):
                requests.append((topic, body.int32(), body.nullable_bytes()))
        return self._produce(header.api_version, acks, timeout_ms, requests)

    async def _produce(
        self,
        version: int,
        acks: int,
        timeout_ms: int,
        requests: list[tuple[str, int, memoryview | None]],
    ) -> bytearray | None:
        answers = await asyncio.gather(
            *(self._produce_one(version, t, i, r, acks, max(timeout_ms, 0)) for t, i, r in requests)
        )
        if acks == 0:
            return None
        out = Writer()
        by_topic: dict[str, list[tuple[int, ErrorCode, int]]] = {}
        for (topic, index, _), (error, base) in zip(requests, answers, strict=True):
            by_topic.setdefault(topic, []).append((index, error, base))
        out.int32(len(by_topic))
        for topic, parts in by_topic.items():
            out.string(topic).int32(len(parts))
            for index, error, base in parts:
                out.int32(index).int16(error.wire).int64(base).int64(-1)  # log_append_time
                if version >= 5:
                    p = self.cluster.describe_partition(topic, index)
                    out.int64(-1 if p is None else p.log_start_offset)
        out.int32(0)  # throttle_time_ms
        return out.buf

    async def _produce_one(
        self,
        version: int,
        topic: str,
        index: int,
        records: memoryview | None,
        acks: int,
        timeout_ms: int,
    ) -> tuple[ErrorCode, int]:
        error, _ = self._leads(topic, index)
        if error is not ErrorCode.NONE:
            return error, -1
        # A batch is checked (CRC, framing) but not decoded: the log keeps the client's
        # bytes (headers, timestamps, compression) and reads its header only. Several
        # batches in one request are rare and stored as records, one log batch holding them.
        entries: list[tuple[bytes | None, bytes]] = []
        try:
            if records is None:
                raise DecodeError("null records")
            batches = split_batches(records)
            for batch in batches:
                if batch.compression == ZSTD and version < 7:
                    raise UnsupportedCompression("zstd needs Produce v7 (KIP-110)")
                if batch.transactional:
                    return ErrorCode.INVALID_TXN_STATE, -1  # transactions are not served
                if len(batches) == 1:
                    batch.check_framing()
                elif batch.producer_id >= 0:
                    # Kafka takes one batch per partition from Produce v3 on, and a
                    # sequence check needs it.
                    return ErrorCode.INVALID_RECORD, -1
                else:
                    entries.extend(batch.key_values())
        except UnsupportedCompression:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1
        except DecodeError as exc:
            kind = "truncated batch" if isinstance(exc, TruncatedBatch) else "corrupt batch"
            self.stats.bad(kind, f"Produce to {topic}-{index}: {exc}")
            return ErrorCode.CORRUPT_MESSAGE, -1
        wire = batches[0] if len(batches) == 1 else None
        try:
            result = await self.cluster.produce(
                ProduceRequest(topic, index, entries, acks, timeout_ms, wire)
            )
        except SimulationError as exc:
            return exc.code, -1
        return result.error, result.base_offset

    # -- Fetch ---------------------------------------------------------------------------

    def fetch(self, header: RequestHeader, body: Reader) -> Awaitable[bytearray]:
        version = header.api_version
        body.int32()  # replica_id: consumers only
        max_wait_ms = max(body.int32(), 0)
        min_bytes = max(body.int32(), 0)
        max_bytes = body.int32()
        body.int8()  # isolation_level: no transactions, LSO = HW
        session_id = session_epoch = 0
        if version >= 7:
            session_id, session_epoch = body.int32(), body.int32()
        wanted: list[Wanted] = []
        for _ in range(body.array_length()):
            topic = body.string()
            for _ in range(body.array_length()):
                index = body.int32()
                leader_epoch = body.int32() if version >= 9 else -1
                offset = body.int64()
                if version >= 5:
                    body.int64()  # log_start_offset: followers only
                wanted.append(Wanted(topic, index, offset, body.int32(), leader_epoch))
        if version >= 7:
            for _ in range(body.array_length()):  # forgotten topics: sessions only
                body.string()
                for _ in range(body.array_length()):
                    body.int32()
        if max_bytes < 1:
            raise DecodeError(f"fetch max_bytes {max_bytes}")
        if session_id or session_epoch > 0:
            # No fetch session is ever created (each answer says session 0), so a
            # client can only name one by mistake: answer as Kafka does for a lost one.
            return _ready(_fetch_error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
        return self._fetch(version, wanted, min_bytes, max_bytes, max_wait_ms)

    async def _fetch(
        self,
        version: int,
        wanted: list[Wanted],
        min_bytes: int,
        max_bytes: int,
        max_wait_ms: int,
    ) -> bytearray:
        results = await self._read_all(wanted, max_bytes)
        ok = [error is ErrorCode.NONE for error, _ in results]
        readable = any(r.batches for error, r in results if error is ErrorCode.NONE)
        if not readable and min_bytes > 0 and max_wait_ms > 0 and any(ok):
            # Park every partition in DelayedFetch; the first one woken (a produce moved
            # its HW) or the timeout ends the wait, then all are read again.
            waits = [
                asyncio.ensure_future(
                    self.cluster.fetch(
                        FetchRequest(
                            w.topic, w.partition, w.offset, 1, 1, max_wait_ms, as_batches=True
                        )
                    )
                )
                for w, good in zip(wanted, ok, strict=True)
                if good
            ]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
            results = await self._read_all(wanted, max_bytes)
        return self._encode_fetch(version, wanted, results)

    def _fetch_error_for(self, w: Wanted) -> ErrorCode:
        """What keeps a partition from being read: not led here, a negative offset, or
        a leader epoch the client knows that is not the current one (Fetch v9+)."""
        error, p = self._leads(w.topic, w.partition)
        if error is not ErrorCode.NONE:
            return error
        if w.offset < 0:
            return ErrorCode.OFFSET_OUT_OF_RANGE
        if w.leader_epoch >= 0 and p is not None and w.leader_epoch != p.leader_epoch:
            if w.leader_epoch < p.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    async def _read_all(
        self, wanted: list[Wanted], max_bytes: int
    ) -> list[tuple[ErrorCode, FetchResult]]:
        out: list[tuple[ErrorCode, FetchResult]] = []
        budget = max_bytes  # the whole response's limit, shared by the partitions in order
        returned = False
        for w in wanted:
            error = self._fetch_error_for(w)
            if error is not ErrorCode.NONE:
                out.append((error, _NOTHING))
                continue
            limit = max(1, min(w.max_bytes, budget))
            result = await self.cluster.fetch(
                FetchRequest(w.topic, w.partition, w.offset, 0, limit, 0, as_batches=True)
            )
            hw = result.high_watermark
            size = sum(b.bytes_in(w.offset, hw) for b in result.batches)
            if size > budget and returned:
                # Only the response's first batch may exceed the limit (KIP-74); a later
                # partition whose next batch does not fit is answered with no records.
                result = replace(result, batches=[])
                size = 0
            budget -= size
            returned = returned or bool(result.batches)
            out.append((result.error, result))
        return out

    def _encode_fetch(
        self, version: int, wanted: list[Wanted], results: list[tuple[ErrorCode, FetchResult]]
    ) -> bytearray:
        out = Writer().int32(0)  # throttle_time_ms
        if version >= 7:
            out.int16(ErrorCode.NONE.wire).int32(0)  # error, session_id 0: no session created
        by_topic: dict[str, list[tuple[Wanted, ErrorCode, FetchResult]]] = {}
        for w, (error, result) in zip(wanted, results, strict=True):
            by_topic.setdefault(w.topic, []).append((w, error, result))
        now_ms = int(time.time() * 1000)
        out.int32(len(by_topic))
        for topic, parts in by_topic.items():
            out.string(topic).int32(len(parts))
            for w, error, result in parts:
                hw = result.high_watermark
                section: bytes | bytearray = b""
                codecs: set[int] = set()
                if result.batches:
                    section, codecs = _records_section(result.batches, w.offset, hw, now_ms)
                if ZSTD in codecs and version < 10:
                    # Kafka serves zstd batches to Fetch v10 and later only (KIP-110).
                    error, section = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, b""
                out.int32(w.partition).int16(error.wire).int64(hw).int64(hw)
                if version >= 5:
                    out.int64(result.log_start_offset)
                out.int32(-1)  # aborted_transactions: null
                out.nullable_bytes(section)
        return out.buf

    # -- ListOffsets ---------------------------------------------------------------------

    def list_offsets(self, header: RequestHeader, body: Reader) -> bytearray:
        version = header.api_version
        body.int32()  # replica_id
        if version >= 2:
            body.int8()  # isolation_level
        out = Writer()
        if version >= 2:
            out.int32(0)  # throttle_time_ms
        topics = body.array_length()
        out.int32(topics)
        for _ in range(topics):
            topic = body.string()
            count = body.array_length()
            out.string(topic).int32(count)
            for _ in range(count):
                index = body.int32()
                if version >= 4:
                    body.int32()  # current_leader_epoch
                error, found_at, offset, epoch = self._offset_for(topic, index, body.int64())
                out.int32(index).int16(error.wire).int64(found_at).int64(offset)
                if version >= 4:
                    out.int32(epoch)
        return out.buf

    def _offset_for(
        self, topic: str, index: int, timestamp: int
    ) -> tuple[ErrorCode, int, int, int]:
        """(error, timestamp found, offset, leader epoch) for one partition."""
        error, p = self._leads(topic, index)
        if error is not ErrorCode.NONE:
            return error, -1, -1, -1
        if p is None or p.leader is None:
            return ErrorCode.LEADER_NOT_AVAILABLE, -1, -1, -1
        if timestamp == EARLIEST:
            return ErrorCode.NONE, -1, p.log_start_offset, p.leader_epoch
        if timestamp == LATEST:
            return ErrorCode.NONE, -1, p.high_watermark, p.leader_epoch
        if timestamp < 0:  # -3 (max timestamp) and later ones need flexible versions
            return ErrorCode.INVALID_REQUEST, -1, -1, -1
        batches = self.cluster.stored_batches(topic, index, p.log_start_offset, p.high_watermark)
        found = _first_at_or_after(batches, timestamp, p.log_start_offset, p.high_watermark)
        if found is None:  # nothing that late: Kafka answers no offset, not an error
            return ErrorCode.NONE, -1, -1, p.leader_epoch
        return ErrorCode.NONE, *found


def _first_at_or_after(
    batches: list[RecordBatch], timestamp: int, start: int, end: int
) -> tuple[int, int, int] | None:
    """(timestamp, offset, epoch) of the first record in ``[start, end)`` stamped at or
    after ``timestamp``, as Kafka finds it: the first batch whose max timestamp (read
    from its header, no record decoded) reaches it, then that batch's records. Batches
    written over HTTP carry no producer timestamp and are never found."""
    for batch in batches:
        if batch.wire is None or max_timestamp_of(batch.wire) < timestamp:
            continue
        for record in WireBatch(batch.wire).records():
            if start <= record.offset < end and record.timestamp >= timestamp:
                return record.timestamp, record.offset, batch.epoch
    return None


def _records_section(
    batches: list[RecordBatch], offset: int, hw: int, now_ms: int
) -> tuple[bytearray, set[int]]:
    """A fetch answer's records from ``offset`` up to the HW ``hw``: a batch a Kafka
    client produced goes back as it came (whole, as Kafka sends it, with the offset and
    epoch the log gave it); records written over HTTP, or in a batch a truncation cut,
    are encoded afresh. Also says which compression codecs the section holds."""
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
        records = batch.records[start - base : hw - base]
        if records:
            out += encode_batch(start, batch.epoch, [(r.key, r.value) for r in records], now_ms)
    return out, codecs
