"""The cluster's requests, their results, and metadata: plain frozen dataclasses.

A request is checked when it is built, so every part of the broker can trust one: wrong
types raise TypeError, values out of range ValueError or a :class:`SimulationError` with
the Kafka error code a broker would answer (INVALID_REQUIRED_ACKS). Results are JSON-ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from purgatory.sim.errors import ErrorCode, SimulationError
from purgatory.sim.log import Record
from purgatory.sim.validate import check_int, check_records

#: ``(key, value)`` pairs: a key is bytes or None, a value bytes
Entries = Sequence[tuple[bytes | None, bytes]]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """Append ``records`` to ``topic``-``partition`` on its leader. ``acks``: -1 (all) waits
    in DelayedProduce until the HW covers them, 1 answers after the leader's append, 0
    likewise but with base_offset -1 (Kafka sends no response). ``wire``: the same records
    as one Kafka record batch v2, as a client sent it; stored with them, never read here."""

    topic: str
    partition: int
    records: Entries
    acks: int = -1
    timeout_ms: int = 30_000
    wire: bytearray | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        acks = self.acks
        if acks.__class__ is not int or acks not in (-1, 0, 1):
            raise SimulationError(
                ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, got {acks!r}"
            )
        if self.timeout_ms.__class__ is not int or self.timeout_ms < 0:
            check_int("timeout_ms", self.timeout_ms, 0)
        records = check_records(self.records)
        if records is not self.records:
            object.__setattr__(self, "records", records)


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A consumer fetch of ``topic``-``partition`` from ``offset``: records up to the HW,
    waiting in DelayedFetch until ``min_bytes`` are readable or ``max_wait_ms`` passes;
    ``max_bytes`` bounds the answer (its first record always comes whole)."""

    topic: str
    partition: int
    offset: int
    min_bytes: int = 1
    max_bytes: int = 1 << 20
    max_wait_ms: int = 500

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


@dataclass(frozen=True, slots=True)
class ProduceResult:
    """``base_offset`` is the first record's offset, or -1 when there is none to report
    (an error, or acks=0 where Kafka sends no response)."""

    error: ErrorCode
    base_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchResult:
    """Records from the requested offset, up to the HW (consumers)."""

    error: ErrorCode
    high_watermark: int = -1
    records: list[Record] = field(default_factory=list)
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult:
    """``low_watermark``: the lowest log start offset over the live replicas."""

    error: ErrorCode
    low_watermark: int = -1


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
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
    name: str
    partitions: list[PartitionMetadata]


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    broker_id: int
    alive: bool
    replication_latency_ms: float | None  # median of the injected follower latency


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    brokers: list[BrokerMetadata]
    topics: list[TopicMetadata]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
