"""Request and response bodies as msgspec types: one definition decodes, encodes and
renders ``/openapi.json``, so the document cannot drift from what the server enforces.

Decoding is strict: no coercion (a bool or ``"1"`` is not an integer), no clamping (a value
out of range is an error), unknown fields are errors, and every error names its path
(``$.records[0].value``). The limits of a :class:`ServiceConfig` (and the broker count)
appear in the types as bounds, so each app builds its own request types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta, Struct

from purgatory.service.config import ServiceConfig
from purgatory.sim.validate import TOPIC_NAME_PATTERN

INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1
#: Kafka's legal topic names (the simulation's rule, anchored for JSON Schema).
TOPIC_PATTERN: Final = f"^{TOPIC_NAME_PATTERN}$"
Fault = Literal["slow_follower", "crash_follower", "restart_follower", "failover"]
#: what happens to a broker named alone (``/v1/admin/broker-faults``)
BrokerFault = Literal["crash_broker", "crash_broker_unfenced", "restart_broker"]

Topic = Annotated[
    str, Meta(min_length=1, max_length=249, pattern=TOPIC_PATTERN, description="topic name")
]
PartitionIndex = Annotated[int, Meta(ge=0, le=INT32_MAX)]


class Record(Struct, forbid_unknown_fields=True, frozen=True):
    value: Annotated[str, Meta(description="UTF-8 text")]
    key: Annotated[str | None, Meta(description="UTF-8 text, or null")] = None


# -- responses (the server encodes them; their bounds come from the broker) ---------------


class ErrorBody(Struct, frozen=True):
    error: str
    message: str


ErrorName = Annotated[str | None, Meta(description="Kafka error name; null on success")]


class ProduceResponse(Struct, frozen=True):
    error: ErrorName
    base_offset: int


class RecordOut(Struct, frozen=True):
    offset: int
    key: str | None
    value: str


class FetchResponse(Struct, frozen=True):
    error: ErrorName
    high_watermark: int
    records: list[RecordOut]
    #: where the log starts (retention moves it): fetch from here after OFFSET_OUT_OF_RANGE
    log_start_offset: int


class PartitionFaultOut(Struct, frozen=True):
    """A partition fault rule (``/v1/faults``)."""

    id: int
    #: the Kafka APIs it fails partitions of, by name
    api_keys: list[str]
    broker: int | None
    topic: str | None
    partition: int | None
    #: Kafka's name of the error answered, and its number
    error: str
    error_code: int
    #: requests it fails before it removes itself (null: until removed)
    count: int | None
    #: requests it failed partitions of so far
    hits: int
    active: bool


class PartitionFaultsOut(Struct, frozen=True):
    faults: list[PartitionFaultOut]


class TopicPartition(Struct, forbid_unknown_fields=True, frozen=True):
    topic: Topic
    partition: PartitionIndex


class PartitionElectionOut(Struct, frozen=True):
    topic: str
    partition: int
    error: ErrorName
    leader: int | None


class ElectLeadersResponse(Struct, frozen=True):
    error: ErrorName
    partitions: list[PartitionElectionOut]


def _or_null(kind: Any, description: str) -> Any:
    """``kind`` or null, described."""
    return Annotated[kind | None, Meta(description=description)]


def _retention(what: str) -> Any:
    """A topic's optional retention setting (Kafka's ``retention.*``)."""
    return _or_null(
        Annotated[int, Meta(ge=-1, le=INT64_MAX)],
        f"{what}, at least; -1: no limit; null: the server's default",
    )


def _ms(
    name: str, config: ServiceConfig, default: int, description: str | None = None
) -> tuple[str, Any, int]:
    """A field of milliseconds, from 0 to the ``max_timeout_ms`` ceiling, which also caps
    its default."""
    ceiling = config.max_timeout_ms
    kind = Annotated[int, Meta(ge=0, le=ceiling, description=description)]
    return (name, kind, min(default, ceiling))


@dataclass(frozen=True, slots=True)
class RequestTypes:
    """The request body types of one app (their bounds come from its config)."""

    create_topic: type[Struct]
    produce: type[Struct]
    fetch: type[Struct]
    fault: type[Struct]
    broker_fault: type[Struct]
    elect_leaders: type[Struct]
    partition_fault: type[Struct]

    @classmethod
    def build(cls, config: ServiceConfig, brokers: int = INT32_MAX) -> RequestTypes:
        """Types for ``config``; ``brokers`` bounds the replication factor."""
        return cls(
            create_topic=_create_topic_body(config, brokers),
            produce=_produce_body(config),
            fetch=_fetch_body(config),
            fault=_fault_body(config),
            broker_fault=_broker_fault_body(),
            elect_leaders=_elect_leaders_body(config),
            partition_fault=_partition_fault_body(brokers),
        )


def _struct(name: str, fields: list[tuple[Any, ...]]) -> type[Struct]:
    return msgspec.defstruct(name, fields, forbid_unknown_fields=True, frozen=True)


def _create_topic_body(config: ServiceConfig, brokers: int) -> type[Struct]:
    return _struct(
        "CreateTopicRequest",
        [
            ("name", Topic),
            ("partitions", Annotated[int, Meta(ge=1, le=config.max_partitions)]),
            ("replication_factor", Annotated[int, Meta(ge=1, le=brokers)]),
            ("retention_bytes", _retention("bytes a partition keeps"), None),
            ("retention_ms", _retention("ms a record is kept"), None),
        ],
    )


def _produce_body(config: ServiceConfig) -> type[Struct]:
    return _struct(
        "ProduceBody",
        [
            ("topic", Topic),
            ("partition", PartitionIndex),
            (
                "records",
                Annotated[list[Record], Meta(min_length=1, max_length=config.max_records)],
            ),
            (
                "acks",
                Annotated[
                    Literal[-1, 0, 1],
                    Meta(description="-1 waits for the whole ISR (acks=all)"),
                ],
                -1,
            ),
            _ms(
                "timeout_ms", config, 30_000, "how long an acks=-1 produce may wait for replication"
            ),
        ],
    )


def _fetch_body(config: ServiceConfig) -> type[Struct]:
    return _struct(
        "FetchBody",
        [
            ("topic", Topic),
            ("partition", PartitionIndex),
            ("offset", Annotated[int, Meta(ge=0, le=INT64_MAX)]),
            ("min_bytes", Annotated[int, Meta(ge=0, le=INT32_MAX)], 1),
            (
                "max_bytes",
                Annotated[int, Meta(ge=1, le=config.max_fetch_bytes)],
                min(1 << 20, config.max_fetch_bytes),
            ),
            _ms("max_wait_ms", config, 500),
        ],
    )


def _fault_body(config: ServiceConfig) -> type[Struct]:
    return _struct(
        "FaultRequest",
        [
            ("fault", Fault),
            ("topic", Topic),
            ("partition", PartitionIndex),
            (
                "broker",
                _or_null(
                    Annotated[int, Meta(ge=0, le=INT32_MAX)],
                    "slow/crash/restart: the broker (default: the partition's first "
                    "follower); failover: the new leader (default: next in ISR)",
                ),
                None,
            ),
            _ms("latency_ms", config, 100, "slow_follower: added latency"),
        ],
    )


def _broker_fault_body() -> type[Struct]:
    return _struct(
        "BrokerFaultRequest",
        [
            (
                "fault",
                Annotated[
                    BrokerFault,
                    Meta(
                        description="crash_broker: the broker dies and is fenced at once "
                        "(it leaves every ISR); crash_broker_unfenced: it dies unheard of, "
                        "fenced after broker.session.timeout.ms; restart_broker: back "
                        "(its Kafka listener too)"
                    ),
                ],
            ),
            (
                "broker",
                Annotated[
                    int,
                    Meta(
                        ge=0,
                        le=INT32_MAX,
                        description="any broker: a leader, a group or transaction "
                        "coordinator included",
                    ),
                ],
            ),
        ],
    )


def _partition_fault_body(brokers: int) -> type[Struct]:
    return _struct(
        "PartitionFaultRequest",
        [
            (
                "error",
                Annotated[
                    str | int,
                    Meta(description="Kafka's name (NOT_LEADER_OR_FOLLOWER) or number (6)"),
                ],
            ),
            (
                "api_keys",
                _or_null(
                    Annotated[list[str | int], Meta(min_length=1, max_length=100)],
                    "Kafka APIs by name (Produce) or key (0); null: every API whose answer "
                    "has an error code per partition",
                ),
                None,
            ),
            (
                "broker",
                _or_null(
                    Annotated[int, Meta(ge=0, le=max(0, brokers - 1))],
                    "only requests to this broker (null: any)",
                ),
                None,
            ),
            ("topic", _or_null(Topic, "null: any topic"), None),
            ("partition", _or_null(PartitionIndex, "null: any partition"), None),
            (
                "count",
                _or_null(
                    Annotated[int, Meta(ge=1, le=INT32_MAX)],
                    "requests it fails partitions of before it removes itself; null: until removed",
                ),
                1,
            ),
        ],
    )


def _elect_leaders_body(config: ServiceConfig) -> type[Struct]:
    return _struct(
        "ElectLeadersBody",
        [
            (
                "partitions",
                Annotated[
                    list[TopicPartition],
                    Meta(min_length=1, max_length=config.max_partitions * config.max_topics),
                ],
            ),
            (
                "election_type",
                Annotated[
                    Literal["preferred", "unclean"],
                    Meta(
                        description="preferred: the first assigned replica, if in "
                        "the ISR; unclean: an offline partition may take a leader "
                        "from outside the ISR, losing what only the ISR had"
                    ),
                ],
                "preferred",
            ),
            _ms("timeout_ms", config, 30_000),
        ],
    )
