"""Metadata, Produce and Fetch against the simulated cluster, as seen by one broker: typed
requests in, typed answers out, through the :class:`Cluster` facade.

Every version Kafka 4.x serves: Metadata 0-13, Produce 3-13 and Fetch 4-18 (from v7
without fetch sessions: each answer says session 0, so clients send full fetches; from v13
topics named by id). A partition this broker does not lead is answered
NOT_LEADER_OR_FOLLOWER, with the current leader where the version can say it (KIP-951),
which sends clients back to Metadata after a failover.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias, TypeVar, final

from purgatory.errors import ErrorCode
from purgatory.kafka.compression import ZSTD, UnsupportedCompression
from purgatory.kafka.handlers.leadership import leads
from purgatory.kafka.handlers.units import AutoCreate, Listener, ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.record_batches import (
    TruncatedBatch,
    WireBatch,
    max_timestamp_of,
    recompressed,
    records_section,
    split_batches,
    stamp,
)
from purgatory.kafka.schemas import millis, respond, versions
from purgatory.kafka.server import Api, ApiTable, Handler
from purgatory.kafka.wire_errors import DecodeError
from purgatory.sim import Cluster, SimulationError
from purgatory.sim.messages import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    FetchRequest,
    FetchResult,
    PartitionMetadata,
    ProduceRequest,
)

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        FetchableTopicResponse,
        FetchPartitionData,
        FetchResponse,
        FetchTopic,
        MetadataRequestTopic,
        MetadataResponse,
        MetadataResponseBroker,
        MetadataResponsePartition,
        MetadataResponseTopic,
        ProduceBatchIndexAndErrorMessage,
        ProduceLeaderIdAndEpoch,
        ProducePartitionProduceResponse,
        ProduceResponse,
        ProduceTopicProduceData,
        ProduceTopicProduceResponse,
    )
    from purgatory.kafka.messages import FetchRequest as FetchWire
    from purgatory.kafka.messages import MetadataRequest as MetadataWire
    from purgatory.kafka.messages import ProduceRequest as ProduceWire

    #: the record errors of a Produce refused INVALID_RECORD (each record's index in its
    #: batch and why), and the partition's error message
    _RecordErrors: TypeAlias = tuple[list[ProduceBatchIndexAndErrorMessage], str]
    #: one partition of a Produce request: its topic's name (None: an id no topic has),
    #: the request's entry of the topic, its index and records
    _Produced: TypeAlias = tuple[str | None, ProduceTopicProduceData, int, bytes | None]

T = TypeVar("T")

_NOTHING: Final = FetchResult(ErrorCode.NONE)

#: KIP-890's produce-time check of a transactional batch: ``(producer id, producer epoch,
#: topic, partition)`` -> NONE to accept it, or the error to answer (the transaction
#: coordinator's verdict on whether the partition is in the producer's transaction)
TxnVerifier = Callable[[int, int, str, int], ErrorCode | Awaitable[ErrorCode]]
#: Transactions V2's produce-time addition: ``(transactional id, producer id, producer
#: epoch, topic, partition)`` -> NONE once the partition is in the transaction, or the
#: error to answer
TxnAdder = Callable[[str, int, int, str, int], Awaitable[ErrorCode]]
#: the first Produce version of Transactions V2 (Kafka's TransactionVersion.TV_2 produce)
PRODUCE_V2: Final = 12
#: the first Produce version told TRANSACTION_ABORTABLE where a transactional batch fails
#: verification (KIP-890 part 1's generic error), INVALID_TXN_STATE before it
PRODUCE_ABORTABLE: Final = 11


class Wanted(NamedTuple):
    """One partition of a Fetch request; ``leader_epoch`` -1 when not given (before v9);
    ``topic_id`` the id it was asked by (v13+), else None."""

    topic: str
    partition: int
    offset: int
    max_bytes: int
    leader_epoch: int
    topic_id: uuid.UUID | None = None


async def _ready(answer: T) -> T:
    return answer


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
    auto_create: AutoCreate | None = None
    #: the largest record batch a Produce to a topic may carry (its max.message.bytes,
    #: else the broker's message.max.bytes): a larger one is answered MESSAGE_TOO_LARGE
    max_batch_bytes: Callable[[str], int] = lambda topic: 1_048_588
    #: the codec a topic's compression.type has batches stored with (0: uncompressed),
    #: None for "producer": as the producer compressed them
    topic_codec: Callable[[str], int | None] = lambda topic: None
    #: whether a topic's batches are stamped with their append time (its
    #: message.timestamp.type is LogAppendTime)
    log_append_time: Callable[[str], bool] = lambda topic: False
    #: how far a record's CreateTime may lie before and after the broker's clock (the
    #: topic's message.timestamp.before.max.ms and .after.max.ms), else INVALID_TIMESTAMP;
    #: None: not checked (a LogAppendTime topic)
    timestamp_bounds: Callable[[str], tuple[int, int] | None] = lambda topic: None
    #: asked about each transactional batch that would begin its producer's transaction
    #: on a partition (KIP-890 verification; Kafka verifies only a transaction's first
    #: write to a partition); None: every one is accepted
    txn_verifier: TxnVerifier | None = None
    #: adds the partition of a Transactions V2 Produce (v12+, ``transaction.version`` 2
    #: finalized) to its transaction; None: never (such a batch is verified as others)
    txn_adder: TxnAdder | None = None
    #: whether the cluster's ``transaction.version`` is finalized at 2
    transactions_v2: Callable[[], bool] = lambda: False
    #: whether a topic is compacted (its cleanup.policy has compact): a record without a
    #: key is refused, INVALID_RECORD with the record's index, as by Kafka's LogValidator
    compacted: Callable[[str], bool] = lambda topic: False

    def apis(self) -> ApiTable:
        handlers: list[tuple[ApiKey, Handler]] = [
            (ApiKey.METADATA, self.metadata),
            (ApiKey.PRODUCE, self.produce),
            (ApiKey.FETCH, self.fetch),
        ]
        return {key: Api(*versions(key), handler) for key, handler in handlers}

    def _leads(self, topic: str, index: int) -> tuple[ErrorCode, PartitionMetadata | None]:
        return leads(self.cluster, self.broker_id, topic, index)

    def _name_of(self, entry: ProduceTopicProduceData | FetchTopic) -> str | None:
        """The topic a request entry names: by id (``topic_id``, newer versions) or by
        name; None for an id no topic has. (Produce's and Fetch's entries, of every
        version: read by getattr, each field where it is.)"""
        topic_id = getattr(entry, "topic_id", None)
        if topic_id is not None and topic_id.int:
            return self.cluster.topic_name(topic_id)
        name = getattr(entry, "name", None)
        if name is None:
            name = getattr(entry, "topic", None)
        return name if isinstance(name, str) else None

    def _leader_hint(
        self, errors: list[tuple[ErrorCode, PartitionMetadata | None]]
    ) -> list[MetadataResponseBroker]:
        """The node endpoints of the leaders a NOT_LEADER_OR_FOLLOWER answer names
        (KIP-951: Produce v10+ and Fetch v16+ carry them; the endpoints of Produce, Fetch
        and Metadata's brokers have the same fields)."""
        leaders = {
            p.leader
            for error, p in errors
            if error is ErrorCode.NOT_LEADER_OR_FOLLOWER and p is not None and p.leader is not None
        }
        return [self._endpoint(b) for b in sorted(leaders) if b in self.addresses]

    def _endpoint(self, broker: int) -> MetadataResponseBroker:
        host, port = self.addresses[broker]
        rack = self.cluster.racks.get(broker)
        return {"node_id": broker, "host": host, "port": port, "rack": rack}

    @staticmethod
    def _current_leader(
        error: ErrorCode, p: PartitionMetadata | None
    ) -> ProduceLeaderIdAndEpoch:  # Fetch's has the same fields
        if error is not ErrorCode.NOT_LEADER_OR_FOLLOWER or p is None or p.leader is None:
            return {"leader_id": -1, "leader_epoch": -1}
        return {"leader_id": p.leader, "leader_epoch": p.leader_epoch}

    # -- Metadata ------------------------------------------------------------------------

    def metadata(
        self, header: RequestHeader, request: MetadataWire
    ) -> MetadataResponse | Awaitable[MetadataResponse]:
        wanted: list[str | uuid.UUID] | None = None
        if request.topics is not None and not (header.api_version == 0 and not request.topics):
            # v0 has no null: an empty list asks for every topic
            wanted = [self._wanted_topic(entry) for entry in request.topics]
        # before v4 there is no flag: Kafka creates whenever its broker setting allows
        allowed = (
            request.allow_auto_topic_creation
            if hasattr(request, "allow_auto_topic_creation")
            else True
        )
        if allowed and wanted and self.auto_create is not None:
            missing = [n for n in wanted if isinstance(n, str) and n not in self.cluster.topics]
            if missing:
                return self._metadata_after(request, wanted, self.auto_create(missing))
        return self._metadata(request, wanted, {})

    @staticmethod
    def _wanted_topic(entry: MetadataRequestTopic) -> str | uuid.UUID:
        topic_id = entry.topic_id if hasattr(entry, "topic_id") else None  # v10+
        if entry.name is None and topic_id is not None:
            return topic_id  # Metadata v10+ may ask by id alone
        return str(entry.name)

    async def _metadata_after(
        self,
        request: MetadataWire,
        wanted: list[str | uuid.UUID],
        created: Awaitable[Mapping[str, ErrorCode]],
    ) -> MetadataResponse:
        return self._metadata(request, wanted, await created)

    def _metadata(
        self,
        request: MetadataWire,
        wanted: list[str | uuid.UUID] | None,
        errors: Mapping[str, ErrorCode],
    ) -> MetadataResponse:
        """The answer; ``errors`` says why an unknown topic could not be created."""
        meta = self.cluster.metadata()
        live = [b.broker_id for b in meta.brokers if b.alive]
        topics = {t.name: t for t in meta.topics}
        answers: list[MetadataResponseTopic] = []
        for asked in list(topics) if wanted is None else wanted:
            name = self.cluster.topic_name(asked) if isinstance(asked, uuid.UUID) else asked
            topic = None if name is None else topics.get(name)
            if topic is None:
                if isinstance(asked, uuid.UUID):
                    answers.append(
                        {"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": asked}
                    )
                    continue
                error = errors.get(asked, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                answers.append({"error_code": error, "name": asked, "topic_id": None})
                continue
            partitions: list[MetadataResponsePartition] = []
            for part in topic.partitions:
                leader = part.leader if part.leader is not None else -1
                partitions.append(
                    {
                        "error_code": (
                            ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
                        ),
                        "partition_index": part.partition,
                        "leader_id": leader,
                        "leader_epoch": part.leader_epoch,
                        "replica_nodes": part.replicas,
                        "isr_nodes": part.isr,
                        "offline_replicas": (),
                    }
                )
            answers.append(
                {
                    "error_code": ErrorCode.NONE,
                    "name": topic.name,
                    "topic_id": self.cluster.topic_id(topic.name),
                    "is_internal": self.cluster.is_internal(topic.name),
                    "partitions": partitions,
                }
            )
        return respond(
            request,
            brokers=[self._endpoint(b) for b in live],
            cluster_id="purgatory",
            controller_id=live[0] if live else -1,
            topics=answers,
        )

    # -- Produce -------------------------------------------------------------------------

    def produce(
        self, header: RequestHeader, request: ProduceWire
    ) -> Awaitable[ProduceResponse | None]:
        requests: list[_Produced] = []
        for topic in request.topic_data:
            name = self._name_of(topic)
            for part in topic.partition_data:
                requests.append((name, topic, part.index, part.records))
        return self._produce(request, requests)

    async def _produce(
        self, request: ProduceWire, requests: list[_Produced]
    ) -> ProduceResponse | None:
        version = int(request.__version__)
        acks = int(request.acks)
        timeout_ms = max(millis(request.timeout), 0)
        append_ms = int(time.time() * 1000)  # a LogAppendTime topic's timestamp, wall clock
        txn_id = request.transactional_id
        answers = await asyncio.gather(
            *(
                self._append_one(version, n, i, r, acks, timeout_ms, append_ms, txn_id)
                for n, _, i, r in requests
            )
        )
        if acks == 0:
            return None
        by_topic: dict[
            int, tuple[ProduceTopicProduceData, str | None, list[ProducePartitionProduceResponse]]
        ] = {}
        hints: list[tuple[ErrorCode, PartitionMetadata | None]] = []
        for (name, topic, index, _), (outcome, base) in zip(requests, answers, strict=True):
            # refused records: INVALID_RECORD, with the record errors Kafka lists
            refused, error = (
                (outcome, ErrorCode.INVALID_RECORD)
                if isinstance(outcome, tuple)
                else (None, outcome)
            )
            p = None if name is None else self.cluster.describe_partition(name, index)
            hints.append((error, p))
            entry = by_topic.setdefault(id(topic), (topic, name, []))
            entry[2].append(
                {
                    "index": index,
                    "error_code": error,
                    "base_offset": base,
                    "log_append_time": _stamped_at(append_ms)
                    if error is ErrorCode.NONE and name is not None and self.log_append_time(name)
                    else None,
                    "log_start_offset": -1 if p is None else p.log_start_offset,
                    "current_leader": self._current_leader(error, p),
                    "record_errors": [] if refused is None else refused[0],
                    "error_message": None if refused is None else refused[1],
                }
            )
        responses: list[ProduceTopicProduceResponse] = [
            {
                "name": name or "",  # an id no topic has (v13+, whose answer has no name)
                "topic_id": topic.topic_id if hasattr(topic, "topic_id") else None,  # v13+
                "partition_responses": parts,
            }
            for topic, name, parts in by_topic.values()
        ]
        return respond(request, responses=responses, node_endpoints=self._leader_hint(hints))

    async def _append_one(
        self,
        version: int,
        topic: str | None,
        index: int,
        records: bytes | None,
        acks: int,
        timeout_ms: int,
        append_ms: int,
        txn_id: str | None,
    ) -> tuple[ErrorCode | _RecordErrors, int]:
        """The answer to one partition's produce: an error code (NONE) and base offset, or
        the records refused (INVALID_RECORD with its record errors)."""
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, -1
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
            batches = split_batches(memoryview(records))
            limit = self.max_batch_bytes(topic)
            bounds = self.timestamp_bounds(topic)
            for batch in batches:
                if len(batch.buf) > limit:
                    return ErrorCode.MESSAGE_TOO_LARGE, -1
                if batch.compression == ZSTD and version < 7:
                    raise UnsupportedCompression("zstd needs Produce v7 (KIP-110)")
                if batch.control:
                    # Kafka's LogValidator: only brokers write control batches (markers)
                    return ErrorCode.INVALID_RECORD, -1
                if len(batches) == 1:
                    batch.check_framing()
                elif batch.producer_id >= 0:
                    # Kafka takes one batch per partition from Produce v3 on, and a
                    # sequence check needs it.
                    return ErrorCode.INVALID_RECORD, -1
                else:
                    entries.extend(batch.key_values())
                if bounds is not None and not _in_time(batch, bounds, append_ms):
                    return ErrorCode.INVALID_TIMESTAMP, -1
                if self.compacted(topic):
                    keyless = _keyless(batch, f"{topic}-{index}")
                    if keyless is not None:
                        return keyless, -1
        except UnsupportedCompression:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1
        except DecodeError as exc:
            kind = "truncated batch" if isinstance(exc, TruncatedBatch) else "corrupt batch"
            self.stats.bad(kind, f"Produce to {topic}-{index}: {exc}")
            return ErrorCode.CORRUPT_MESSAGE, -1
        wire = batches[0] if len(batches) == 1 else None
        if wire is not None and wire.transactional and wire.producer_id >= 0:
            refused = await self._verify_txn(wire, topic, index, txn_id, version)
            if refused is not ErrorCode.NONE:
                return refused, -1
        codec = self.topic_codec(topic)
        if wire is not None and codec is not None:
            try:  # Kafka's broker recompresses a batch for its topic's compression.type
                wire = recompressed(wire, codec)
            except UnsupportedCompression:
                return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1
        if wire is not None and self.log_append_time(topic):
            stamp(wire, append_ms)
        try:
            result = await self.cluster.produce(
                ProduceRequest(topic, index, entries, acks, timeout_ms, wire)
            )
        except SimulationError as exc:
            return exc.code, -1
        return result.error, result.base_offset

    async def _verify_txn(
        self, wire: WireBatch, topic: str, index: int, txn_id: str | None, version: int
    ) -> ErrorCode:
        """The verdict on a transactional batch that begins its producer's transaction
        on the partition (none ongoing there at its epoch): a V2 Produce adds the
        partition (:attr:`txn_adder`), any other is verified (:attr:`txn_verifier`);
        NONE within a transaction, or with neither."""
        producer_id, epoch = wire.producer_id, wire.producer_epoch
        if self.cluster.in_transaction(topic, index, producer_id, epoch):
            return ErrorCode.NONE
        add = self.txn_adder
        if add is not None and txn_id and version >= PRODUCE_V2 and self.transactions_v2():
            return await add(txn_id, producer_id, epoch, topic, index)
        verify = self.txn_verifier
        if verify is None:
            return ErrorCode.NONE
        verdict = verify(producer_id, epoch, topic, index)
        if not isinstance(verdict, ErrorCode):
            verdict = await verdict
        if verdict is ErrorCode.INVALID_TXN_STATE and version >= PRODUCE_ABORTABLE:
            # Kafka's AddPartitionsToTxnManager: a client from Produce v11 is told the
            # transaction is abortable (KIP-890's generic error), an older one its state
            return ErrorCode.TRANSACTION_ABORTABLE
        return verdict

    # -- Fetch ---------------------------------------------------------------------------

    def fetch(self, header: RequestHeader, request: FetchWire) -> Awaitable[FetchResponse]:
        max_wait_ms = max(millis(request.max_wait), 0)
        min_bytes = max(int(request.min_bytes), 0)
        max_bytes = int(request.max_bytes)
        wanted: list[Wanted] = []
        for topic in request.topics:
            topic_id = topic.topic_id if hasattr(topic, "topic_id") else None  # v13+
            name = self._name_of(topic)
            for part in topic.partitions:
                wanted.append(
                    Wanted(
                        "" if name is None else name,
                        int(part.partition),
                        int(part.fetch_offset),
                        int(part.partition_max_bytes),
                        int(  # v9+
                            part.current_leader_epoch
                            if hasattr(part, "current_leader_epoch")
                            else -1
                        ),
                        topic_id,
                    )
                )
        if max_bytes < 1:
            raise DecodeError(f"fetch max_bytes {max_bytes}")
        # Fetch v4+ (all served versions): 1 is read_committed
        isolation = int(request.isolation_level)
        if isolation not in (READ_UNCOMMITTED, READ_COMMITTED):
            raise DecodeError(f"fetch isolation_level {isolation}")
        # Kafka's ClientMetadata: Fetch v11+ carries the consumer's rack ("": none), and
        # only such a fetch may be served by a follower or told a preferred replica
        rack: str | None = None
        if hasattr(request, "rack_id"):  # v11+
            rack = str(request.rack_id or "")
        session_id = int(request.session_id) if hasattr(request, "session_id") else 0  # v7+
        session_epoch = int(request.session_epoch) if hasattr(request, "session_epoch") else -1
        if session_id or session_epoch > 0:
            # No fetch session is ever created (each answer says session 0), so a
            # client can only name one by mistake: answer as Kafka does for a lost one.
            return _ready(
                respond(request, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, responses=())
            )
        return self._fetch(request, wanted, min_bytes, max_bytes, max_wait_ms, isolation, rack)

    async def _fetch(
        self,
        request: FetchWire,
        wanted: list[Wanted],
        min_bytes: int,
        max_bytes: int,
        max_wait_ms: int,
        isolation: int,
        rack: str | None,
    ) -> FetchResponse:
        results = await self._read_all(wanted, max_bytes, isolation, rack)
        ok = [error is ErrorCode.NONE for error, _ in results]
        readable = any(r.batches for error, r in results if error is ErrorCode.NONE)
        # Kafka answers at once when it names a preferred read replica (KIP-392)
        redirected = any(r.preferred_read_replica >= 0 for _, r in results)
        if not readable and not redirected and min_bytes > 0 and max_wait_ms > 0 and any(ok):
            # Park every partition in DelayedFetch; the first one woken (a produce moved
            # its HW) or the timeout ends the wait, then all are read again.
            waits = [
                asyncio.ensure_future(
                    self.cluster.fetch(
                        FetchRequest(
                            w.topic,
                            w.partition,
                            w.offset,
                            1,
                            1,
                            max_wait_ms,
                            as_batches=True,
                            isolation_level=isolation,
                            client_rack=rack,
                        ),
                        self.broker_id,
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
            results = await self._read_all(wanted, max_bytes, isolation, rack)
        return self._fetch_answer(request, wanted, results, isolation)

    def _fetch_error_for(
        self, w: Wanted, rack: str | None = None
    ) -> tuple[ErrorCode, PartitionMetadata | None]:
        """What keeps a partition from being read: an unknown topic id, not led here (nor
        followed here, for a fetch with client metadata: ``rack`` not None, KIP-392), a
        negative offset, or a leader epoch the client knows that is not the current one
        (Fetch v9+); and the partition, if there is one."""
        if w.topic_id is not None and not w.topic:
            return ErrorCode.UNKNOWN_TOPIC_ID, None
        error, p = self._leads(w.topic, w.partition)
        if (
            error is ErrorCode.NOT_LEADER_OR_FOLLOWER
            and rack is not None
            and p is not None
            and p.leader is not None
            and self.broker_id in p.replicas
            and self.cluster.is_alive(self.broker_id)
        ):
            error = ErrorCode.NONE  # a follower serves it
        if error is not ErrorCode.NONE:
            return error, p
        if w.offset < 0:
            return ErrorCode.OFFSET_OUT_OF_RANGE, p
        if w.leader_epoch >= 0 and p is not None and w.leader_epoch != p.leader_epoch:
            if w.leader_epoch < p.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH, p
            return ErrorCode.UNKNOWN_LEADER_EPOCH, p
        return ErrorCode.NONE, p

    async def _read_all(
        self, wanted: list[Wanted], max_bytes: int, isolation: int, rack: str | None = None
    ) -> list[tuple[ErrorCode, FetchResult]]:
        out: list[tuple[ErrorCode, FetchResult]] = []
        budget = max_bytes  # the whole response's limit, shared by the partitions in order
        returned = False
        for w in wanted:
            error, _ = self._fetch_error_for(w, rack)
            if error is not ErrorCode.NONE:
                out.append((error, _NOTHING))
                continue
            limit = max(1, min(w.max_bytes, budget))
            result = await self.cluster.fetch(
                FetchRequest(
                    w.topic,
                    w.partition,
                    w.offset,
                    0,
                    limit,
                    0,
                    as_batches=True,
                    isolation_level=isolation,
                    client_rack=rack,
                ),
                self.broker_id,
            )
            end = _readable_end(result, isolation)
            size = sum(b.bytes_in(w.offset, end) for b in result.batches)
            if size > budget and returned:
                # Only the response's first batch may exceed the limit (KIP-74); a later
                # partition whose next batch does not fit is answered with no records.
                result = replace(result, batches=[])
                size = 0
            budget -= size
            returned = returned or bool(result.batches)
            out.append((result.error, result))
        return out

    def _fetch_answer(
        self,
        request: FetchWire,
        wanted: list[Wanted],
        results: list[tuple[ErrorCode, FetchResult]],
        isolation: int,
    ) -> FetchResponse:
        version = int(request.__version__)
        by_topic: dict[tuple[str, uuid.UUID | None], list[FetchPartitionData]] = {}
        hints: list[tuple[ErrorCode, PartitionMetadata | None]] = []
        now_ms = int(time.time() * 1000)
        for w, (error, result) in zip(wanted, results, strict=True):
            section: bytes | None = None
            codecs: set[int] = set()
            if result.batches:
                end = _readable_end(result, isolation)
                section, codecs = records_section(result.batches, w.offset, end, now_ms)
            if ZSTD in codecs and version < 10:
                # Kafka serves zstd batches to Fetch v10 and later only (KIP-110).
                error, section = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, None
            p = None
            if error is ErrorCode.NOT_LEADER_OR_FOLLOWER:
                p = self._fetch_error_for(w)[1]
                hints.append((error, p))
            by_topic.setdefault((w.topic, w.topic_id), []).append(
                {
                    "partition_index": w.partition,
                    "error_code": error,
                    "high_watermark": result.high_watermark,
                    "last_stable_offset": result.last_stable_offset,
                    "log_start_offset": result.log_start_offset,
                    "current_leader": self._current_leader(error, p),
                    # read_committed: a list (Kafka's collectAbortedTransactions); else null
                    "aborted_transactions": (
                        [
                            {"producer_id": t.producer_id, "first_offset": t.first_offset}
                            for t in result.aborted_transactions
                        ]
                        if isolation == READ_COMMITTED and error is ErrorCode.NONE
                        else None
                    ),
                    "preferred_read_replica": result.preferred_read_replica,  # v11+
                    "records": b"" if section is None else section,
                }
            )
        responses: list[FetchableTopicResponse] = [
            {"topic": name, "topic_id": topic_id, "partitions": parts}
            for (name, topic_id), parts in by_topic.items()
        ]
        # session 0: no session created
        return respond(
            request,
            error_code=ErrorCode.NONE,
            session_id=0,
            responses=responses,
            node_endpoints=self._leader_hint(hints),
        )


def _readable_end(result: FetchResult, isolation: int) -> int:
    """Where a consumer's read stops: the HW, or read_committed the LSO."""
    return result.last_stable_offset if isolation == READ_COMMITTED else result.high_watermark


def _stamped_at(append_ms: int) -> datetime.datetime:
    """A Produce answer's log_append_time: when a LogAppendTime topic stamped the batch."""
    return datetime.datetime.fromtimestamp(append_ms / 1000, tz=datetime.UTC)


def _keyless(batch: WireBatch, partition: str) -> _RecordErrors | None:
    """The records of ``batch`` without a key, as Kafka's LogValidator refuses them for a
    compacted topic (each by its index in the batch; the batch is not appended); None if
    every record has a key."""
    errors: list[ProduceBatchIndexAndErrorMessage] = [
        {
            "batch_index": i,
            "batch_index_error_message": "Compacted topic cannot accept message without key "
            f"in topic partition {partition}",
        }
        for i, record in enumerate(batch.records())
        if record.key is None
    ]
    if not errors:
        return None
    shown = ", ".join(
        f"RecordError(batchIndex={e['batch_index']}, message='{e['batch_index_error_message']}')"
        for e in errors[:3]
    )
    message = (
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]"
    )
    return errors, message


#: Java's Long.MAX_VALUE: a timestamp bound that bounds nothing
_UNBOUNDED: Final = (1 << 63) - 1


def _in_time(batch: WireBatch, bounds: tuple[int, int], now_ms: int) -> bool:
    """Whether every record's CreateTime of ``batch`` lies within ``bounds`` (before,
    after) of ``now_ms``, as Kafka's LogValidator checks them (records without a timestamp
    pass). The batch's max timestamp answers for "after"; "before", when bounded, reads
    the records' own timestamps."""
    before, after = bounds
    if after < _UNBOUNDED and max_timestamp_of(batch.buf) > now_ms + after:
        return False
    if before < _UNBOUNDED:
        return all(r.timestamp < 0 or r.timestamp >= now_ms - before for r in batch.records())
    return True


def _of(listener: Listener) -> PartitionHandlers:
    """A listener's partition handlers: each topic's configs read in force at each
    request, on the listener's broker."""
    shared, broker = listener.shared, listener.broker_id
    configs, transactions = shared.configs, shared.transactions
    return PartitionHandlers(
        shared.cluster,
        broker,
        listener.addresses,
        shared.stats,
        shared.auto_create,
        lambda topic: configs.max_message_bytes(topic, broker),
        lambda topic: configs.codec(topic, broker),
        lambda topic: configs.log_append_time(topic, broker),
        lambda topic: configs.timestamp_bounds(topic, broker),
        # KIP-890: the transaction coordinators say whether a partition was added
        transactions.verify_produce if transactions.settings.verification else None,
        compacted=lambda topic: configs.compacted(topic, broker),
        txn_adder=transactions.add_for_produce,
        transactions_v2=lambda: shared.features.transactions_v2,
    )


UNIT: Final = ListenerUnit(_of)
