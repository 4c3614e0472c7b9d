"""The cluster's requests, their results, and metadata: plain frozen dataclasses.

A request is checked when it is built, so every part of the broker can trust one: wrong
types raise TypeError, values out of range ValueError or a :class:`SimulationError` with
the Kafka error code a broker would answer (INVALID_REQUIRED_ACKS). Results are JSON-ready.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Final, Literal

from purgatory.errors import ErrorCode
from purgatory.json_types import JsonObject
from purgatory.sim.batches import EncodedBatch, Record, RecordBatch
from purgatory.sim.errors import SimulationError
from purgatory.sim.producers import CompletedTxn
from purgatory.sim.validate import check_int, check_records

#: ``(key, value)`` pairs: a key is bytes or None, a value bytes
Entries = Sequence[tuple[bytes | None, bytes]]

#: Kafka's isolation levels (Fetch, ListOffsets): up to the HW, or up to the LSO
READ_UNCOMMITTED: Final = 0
READ_COMMITTED: Final = 1


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """Append ``records`` to ``topic``-``partition`` on its leader. ``acks``: -1 (all) waits
    in DelayedProduce until the HW covers them, 1 answers after the leader's append, 0
    likewise but with base_offset -1 (Kafka sends no response). ``wire``: instead of
    ``records`` (then empty), one Kafka record batch v2 as a client sent it, stored as it
    came; an idempotent producer's batch that repeats one in the log is answered with the
    stored batch's offsets and not appended again."""

    topic: str
    partition: int
    records: Entries
    acks: int = -1
    timeout_ms: int = 30_000
    wire: EncodedBatch | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        acks = self.acks
        if acks.__class__ is not int or acks not in (-1, 0, 1):
            raise SimulationError(
                ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, got {acks!r}"
            )
        if self.timeout_ms.__class__ is not int or self.timeout_ms < 0:
            check_int("timeout_ms", self.timeout_ms, 0)
        if self.wire is not None:
            if self.records:
                raise ValueError("records come as entries or as one wire batch, not both")
            return
        records = check_records(self.records)
        if records is not self.records:
            object.__setattr__(self, "records", records)


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A consumer fetch of ``topic``-``partition`` from ``offset``: records up to the HW,
    waiting in DelayedFetch until ``min_bytes`` are readable or ``max_wait_ms`` passes;
    ``max_bytes`` bounds the answer (its first record always comes whole). ``as_batches``:
    answer with the stored batches (:attr:`FetchResult.batches`), decoding nothing.
    ``isolation_level`` 1 (Kafka's read_committed) reads up to the last stable offset
    instead of the HW, and the answer lists the aborted transactions in what it read;
    0 (read_uncommitted) reads up to the HW."""

    topic: str
    partition: int
    offset: int
    min_bytes: int = 1
    max_bytes: int = 1 << 20
    max_wait_ms: int = 500
    as_batches: bool = False
    isolation_level: int = READ_UNCOMMITTED
    #: the consumer's rack (Kafka's ClientMetadata, Fetch v11+ ``rack_id``; "" for none
    #: given); None: a fetch without client metadata (before v11), which only the
    #: leader serves and which is never told a preferred read replica
    client_rack: str | None = None

    def __post_init__(self) -> None:
        if not (  # the common case without four calls; check_int names the culprit
            self.offset.__class__ is int
            and self.min_bytes.__class__ is int
            and self.max_bytes.__class__ is int
            and self.max_wait_ms.__class__ is int
            and self.offset >= 0
            and self.min_bytes >= 0
            and self.max_bytes >= 1
            and self.max_wait_ms >= 0
        ):
            check_int("offset", self.offset, 0)
            check_int("min_bytes", self.min_bytes, 0)
            check_int("max_bytes", self.max_bytes, 1)
            check_int("max_wait_ms", self.max_wait_ms, 0)
        if self.as_batches.__class__ is not bool:
            raise TypeError(f"as_batches must be a bool, got {self.as_batches!r}")
        level = self.isolation_level
        if level.__class__ is not int or level not in (READ_UNCOMMITTED, READ_COMMITTED):
            check_int("isolation_level", level, READ_UNCOMMITTED, READ_COMMITTED)
        if self.client_rack is not None and self.client_rack.__class__ is not str:
            raise TypeError(f"client_rack must be a str or None, got {self.client_rack!r}")


@dataclass(frozen=True, slots=True)
class DeleteRecordsRequest:
    """Move ``topic``-``partition``'s log start to ``offset`` (-1: the HW) on the leader,
    then wait in DelayedDeleteRecords until every live replica's log start reached it."""

    topic: str
    partition: int
    offset: int
    timeout_ms: int = 30_000

    def __post_init__(self) -> None:
        check_int("offset", self.offset, -1)
        check_int("timeout_ms", self.timeout_ms, 0)


ElectionType = Literal["preferred", "unclean"]


@dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    """Elect leaders for ``partitions`` (``(topic, partition)`` pairs), Kafka's
    ElectLeaders (KIP-183, KIP-460). ``preferred``: make each partition's first assigned
    replica the leader if it is alive and in the ISR. ``unclean``: give an offline
    partition a leader even from outside the ISR, accepting the loss of what only the ISR
    had. The request waits in the ElectLeader purgatory until every elected leader is in
    place, at most ``timeout_ms``. A partition named twice is elected (and answered) once,
    as by Kafka, which reads the request as a set."""

    partitions: Sequence[tuple[str, int]]
    election_type: ElectionType = "preferred"
    timeout_ms: int = 30_000

    def __post_init__(self) -> None:
        if self.election_type not in ("preferred", "unclean"):
            raise SimulationError(
                ErrorCode.INVALID_REQUEST,
                f"election_type must be 'preferred' or 'unclean', got {self.election_type!r}",
            )
        check_int("timeout_ms", self.timeout_ms, 0)
        if isinstance(self.partitions, str | bytes) or not isinstance(self.partitions, Sequence):
            raise TypeError("partitions must be a sequence of (topic, partition) pairs")
        pairs = []
        for item in self.partitions:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise TypeError(f"each partition must be a (topic, partition) pair, got {item!r}")
            pairs.append((item[0], check_int("partition", item[1], 0)))
        # a set of partitions, as Kafka takes it: one named twice is elected once
        object.__setattr__(self, "partitions", list(dict.fromkeys(pairs)))


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction marker to write (Kafka's WriteTxnMarkers entry): the coordinator
    ended producer ``producer_id``'s transaction at ``producer_epoch``, committing it
    (``commit``) or aborting it, on each of ``partitions`` (``(topic, partition)``
    pairs). ``coordinator_epoch`` is the epoch of the coordinator that wrote it: a
    marker from an older coordinator than the last one seen for the producer is fenced
    (TRANSACTION_COORDINATOR_FENCED). See :meth:`Cluster.write_txn_markers`."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        check_int("producer_id", self.producer_id, 0)
        check_int("producer_epoch", self.producer_epoch, 0, 0x7FFF)  # an int16
        check_int("coordinator_epoch", self.coordinator_epoch, 0, 0x7FFFFFFF)  # an int32
        if self.commit.__class__ is not bool:
            raise TypeError(f"commit must be a bool, got {self.commit!r}")
        if not isinstance(self.partitions, tuple):
            raise TypeError("partitions must be a tuple of (topic, partition) pairs")
        for item in self.partitions:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise TypeError(f"each partition must be a (topic, partition) pair, got {item!r}")
            check_int("partition", item[1], 0)


@dataclass(frozen=True, slots=True)
class PartitionElection:
    """One partition's answer to an ElectLeaders request (``leader`` once known)."""

    topic: str
    partition: int
    error: ErrorCode
    leader: int | None = None


@dataclass(frozen=True, slots=True)
class ElectLeadersResult:
    """Per partition, in the request's order: NONE (elected), ELECTION_NOT_NEEDED,
    PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
    UNKNOWN_TOPIC_OR_PARTITION or REQUEST_TIMED_OUT. ``error`` is the request's own error
    (BROKER_NOT_AVAILABLE when the cluster shut down under it)."""

    error: ErrorCode
    partitions: list[PartitionElection] = field(default_factory=list)

    @classmethod
    def in_order(
        cls, answers: Iterable[PartitionElection], order: Iterable[tuple[str, int]]
    ) -> ElectLeadersResult:
        """The answers, one per ``(topic, partition)`` of ``order`` (the request's)."""
        by_partition = {(a.topic, a.partition): a for a in answers}
        return cls(ErrorCode.NONE, [by_partition[key] for key in order])


@dataclass(frozen=True, slots=True)
class ProduceResult:
    """``base_offset`` is the first record's offset, or -1 when there is none to report
    (an error, or acks=0 where Kafka sends no response)."""

    error: ErrorCode
    base_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchResult:
    """Records from the requested offset, up to the HW (read_committed: the last stable
    offset); for a request ``as_batches``, ``records`` is empty and ``batches`` holds the
    stored batches with those records (whole: the first may start below the offset, the
    last may end past the HW). A read_committed answer lists the aborted transactions
    that overlap what it read in ``aborted_transactions`` (Kafka's), for the consumer to
    drop their records."""

    error: ErrorCode
    high_watermark: int = -1
    records: list[Record] = field(default_factory=list)
    log_start_offset: int = -1
    batches: list[RecordBatch] = field(default_factory=list)
    last_stable_offset: int = -1
    aborted_transactions: list[CompletedTxn] = field(default_factory=list)
    #: the replica the consumer should fetch from instead (KIP-392; -1: none): the
    #: leader's replica selector picked a follower, and this answer holds no records
    preferred_read_replica: int = -1


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult:
    """``low_watermark``: the lowest log start offset over the live replicas."""

    error: ErrorCode
    low_watermark: int = -1


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition as the cluster sees it now: its leader (None when offline) and
    leader epoch, the replicas (the first is the preferred leader) and the in-sync ones,
    and the leader's log offsets (high watermark, log start and end)."""

    partition: int
    leader: int | None
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """One topic and its partitions, in partition order."""

    name: str
    partitions: list[PartitionMetadata]


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """One broker: whether it is up, the median of the follower latency injected into
    it (None: none injected), and its rack (Kafka's broker.rack; None: not set)."""

    broker_id: int
    alive: bool
    replication_latency_ms: float | None  # median of the injected follower latency
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """The whole cluster at one moment (:meth:`Cluster.metadata`): its brokers and topics;
    ``to_dict()`` gives it as plain JSON-ready data."""

    brokers: list[BrokerMetadata]
    topics: list[TopicMetadata]

    def to_dict(self) -> JsonObject:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A partition reassignment in progress (Kafka's ListPartitionReassignments entry):
    ``replicas`` the target's brokers followed by those leaving, ``adding`` the brokers
    still catching up to join, ``removing`` those that leave once they have."""

    topic: str
    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]
