"""Service limits: every request the server accepts is bounded by one of these."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """Limits and knobs of one ``purgatory serve`` app.

    A request over a limit is refused with a clear error (400, 413 or 503), never clamped.
    """

    #: ceiling for a produce's ``timeout_ms`` and a fetch's ``max_wait_ms``
    max_timeout_ms: int = 60_000
    #: request bodies larger than this get 413
    max_body_bytes: int = 1 << 20
    #: requests that may park (acks=-1 produces, fetches with max_wait_ms > 0) at once; more get 503
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
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{f.name} must be a number, got {value!r}")
            if not value > 0:
                raise ValueError(f"{f.name} must be > 0, got {value!r}")
