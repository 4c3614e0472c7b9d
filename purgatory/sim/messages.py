"""The cluster's request results and metadata: plain frozen dataclasses, JSON-ready."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from purgatory.sim.errors import ErrorCode
from purgatory.sim.log import Record


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
