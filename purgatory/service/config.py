"""Service limits: every request and connection the server accepts is bounded by one of
these; the connection budget is derived from the open-files limit."""

from __future__ import annotations

import resource
from dataclasses import dataclass, fields
from typing import Any, Final

from purgatory.sim.log import LogConfig, LogSpace


def _all_positive(limits: Any) -> None:
    """Every field of a limits dataclass is a number > 0 (bool is not a number here)."""
    for f in fields(limits):
        value = getattr(limits, f.name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{f.name} must be a number, got {value!r}")
        if not value > 0:
            raise ValueError(f"{f.name} must be > 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """Limits and knobs of one ``purgatory serve`` app.

    A request over a limit is refused with a clear error (400, 413 or 503), never clamped.
    """

    #: ceiling for a produce's ``timeout_ms`` and a fetch's ``max_wait_ms``
    max_timeout_ms: int = 60_000
    #: request bodies larger than this get 413
    max_body_bytes: int = 1 << 20
    #: request bodies being read at once, all connections together (each counts its
    #: Content-Length, or ``max_body_bytes`` when it has none); more get 503
    max_body_bytes_in_flight: int = 64 << 20
    #: requests that may park (acks=-1 produces, elections, fetches with max_wait_ms > 0) at
    #: once; more get 503. Fetches may not take the last :func:`write_reserve` of them.
    max_pending: int = 20_000
    #: seconds a client is told to wait (Retry-After) when the server is overloaded
    retry_after_s: int = 1
    #: records in one produce request
    max_records: int = 10_000
    #: largest ``max_bytes`` a fetch may ask for
    max_fetch_bytes: int = 16 << 20
    #: partitions per topic, and topics per cluster (admin requests are bounded too)
    max_partitions: int = 64
    max_topics: int = 256
    #: seconds the server waits for parked requests to be answered at shutdown
    shutdown_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        _all_positive(self)
        if self.max_pending < 2:
            raise ValueError(
                f"max_pending must be at least 2 (one is kept for produces), got {self.max_pending}"
            )
        if self.max_body_bytes_in_flight < self.max_body_bytes:
            raise ValueError(
                f"max_body_bytes_in_flight ({self.max_body_bytes_in_flight}) must be at least "
                f"max_body_bytes ({self.max_body_bytes}): a largest body could never be read"
            )


#: a default budget never exceeds this, whatever the descriptor limit (memory bounds it too)
DEFAULT_MAX_CONNECTIONS: Final = 30_000
#: a default ``max_pending`` never exceeds this
DEFAULT_MAX_PENDING: Final = 20_000


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Connection limits of one ``purgatory serve`` (:mod:`purgatory.service.connections`)."""

    max_connections: int = 4096
    #: seconds from a request's first byte (a new connection's start) to the end of its head
    header_timeout_s: float = 10.0
    #: seconds from the end of a request's head to the end of its body
    body_timeout_s: float = 30.0
    #: seconds a keep-alive connection may wait for its next request
    #: (longer than clients keep idle connections: aiohttp 15 s, Node 5 s; so the client
    #: closes first, and never reuses a connection the server is closing)
    idle_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        _all_positive(self)


@dataclass(frozen=True, slots=True)
class StorageLimits:
    """What the server's logs may hold in memory (``purgatory serve``'s storage flags).

    Records live in memory, so the cap on stored bytes is what bounds the server's memory
    under a produce flood; past it a produce is refused (KAFKA_STORAGE_ERROR, HTTP 507)
    until retention or deleted records make room. Retention applies to every topic that
    does not set its own (Kafka's ``log.retention.*``; -1: keep everything)."""

    #: memory the stored records may hold, their bookkeeping included (None: no cap)
    max_stored_bytes: int | None = 256 << 20
    #: per partition; Kafka's default, none
    retention_bytes: int = -1
    #: one hour: Kafka keeps 7 days, but on disk
    retention_ms: int = 3_600_000

    def __post_init__(self) -> None:
        LogSpace(self.max_stored_bytes)  # the checks, with their messages
        LogConfig(self.retention_bytes, self.retention_ms)


def descriptor_limit() -> int:
    """The open-files limit after raising the soft limit to the hard one where allowed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and hard != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # not allowed here: keep the soft limit
            pass
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def headroom(descriptor_limit: int) -> int:
    """Descriptors kept free of HTTP connections: listeners, Kafka ports, files, logs."""
    return max(64, descriptor_limit // 10)


def kafka_budget(descriptor_limit: int, requested: int | None) -> int:
    """Kafka-protocol connections allowed at once (all brokers' listeners): they come out of
    the descriptors kept free of HTTP connections, half of them by default. Raises
    ValueError with the figures when ``requested`` does not fit."""
    spare = headroom(descriptor_limit)
    if requested is None:
        return spare // 2
    most = spare - 32  # listeners, trace and log files
    if not 1 <= requested <= most:
        raise ValueError(
            f"--kafka-max-connections must be in 1..{most} (the {spare} descriptors the "
            f"open-files limit {descriptor_limit} keeps free of HTTP, less 32), got {requested}"
        )
    return requested


def write_reserve(max_pending: int) -> int:
    """Parked-request slots long-poll fetches may not take, kept for the acks=-1 produces
    and elections that answer them (:mod:`purgatory.service.pending`): a tenth, at least 1."""
    return max(1, max_pending // 10)


def reserve(max_connections: int) -> int:
    """Connections kept free of parked requests, for ``/healthz``, metrics and produces."""
    return max(8, max_connections // 20)


def budget(
    descriptor_limit: int, max_connections: int | None, max_pending: int | None
) -> tuple[int, int]:
    """``(max_connections, max_pending)``: the given values checked against the limit, or
    defaults derived from it. Raises ValueError with the figures when they do not fit."""
    usable = descriptor_limit - headroom(descriptor_limit)
    if max_connections is None:
        max_connections = min(usable, DEFAULT_MAX_CONNECTIONS)
        if max_connections < 16:
            raise ValueError(
                f"the open-files limit is {descriptor_limit}: too low to serve (ulimit -n)"
            )
    elif not 16 <= max_connections <= usable:
        raise ValueError(
            f"--max-connections must be in 16..{usable} (the open-files limit "
            f"{descriptor_limit} less {headroom(descriptor_limit)} spare), got {max_connections}"
        )
    most_pending = max_connections - reserve(max_connections)
    if max_pending is None:
        max_pending = min(most_pending, DEFAULT_MAX_PENDING)
    elif not 2 <= max_pending <= most_pending:
        raise ValueError(
            f"--max-pending must be in 2..{most_pending} (--max-connections {max_connections} "
            f"less {reserve(max_connections)} kept for health checks and produces), "
            f"got {max_pending}"
        )
    return max_connections, max_pending
