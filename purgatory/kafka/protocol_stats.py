"""What the Kafka listeners of a front door count together: requests by API and version
(and by broker), the client software that said its name, bad input by kind, failed
authentications, connections open and closed; bad input and closed connections logged,
rate-limited per kind. :mod:`purgatory.kafka.metrics` exports them."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import final

# the connection server's logger, as before the counts had a module of their own
log = logging.getLogger("purgatory.kafka.server")


@final
class ProtocolStats:
    """Counts of requests by API and version, of the client software that said its name
    (ApiVersions v3+), of bad input by kind, and of connections: open now and
    closed by the server (over the limit, idle), shared by every listener of a front door.

    Bad input and closed connections are logged the first time a kind is seen, then at
    most once per ``log_interval_s`` per kind (saying how many were counted in between),
    so a client sending garbage or connecting in a loop cannot flood the log. Never with a
    traceback: bad input is the client's fault, not ours; only a handler bug (``internal
    error``) carries one.
    """

    __slots__ = (
        "_clock",
        "_logged_at",
        "_unlogged",
        "authentication_failures",
        "bad_input",
        "clients",
        "closed",
        "connections",
        "log_interval_s",
        "requests",
        "requests_by_broker",
    )

    def __init__(
        self, log_interval_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.bad_input: Counter[str] = Counter()
        #: requests by (API name, version)
        self.requests: Counter[tuple[str, int]] = Counter()
        #: requests by (broker id, API name): which broker's listeners took them (a
        #: consumer fetching from a follower, KIP-392, shows on the follower)
        self.requests_by_broker: Counter[tuple[int, str]] = Counter()
        #: connections by the (name, version) of the client software they announced
        self.clients: Counter[tuple[str, str]] = Counter()
        #: connections open now, on every listener
        self.connections = 0
        #: connections the server closed, by reason (``limit``, ``idle_timeout``,
        #: ``session_expired``)
        self.closed: Counter[str] = Counter()
        #: failed SASL authentications, by mechanism
        self.authentication_failures: Counter[str] = Counter()
        self.log_interval_s = log_interval_s
        self._clock = clock
        self._logged_at: dict[str, float] = {}
        self._unlogged: Counter[str] = Counter()

    def requests_of(self, api: str) -> int:
        """Requests of one API (its :class:`ApiKey` name), every version."""
        return sum(n for (name, _), n in self.requests.items() if name == api)

    def requests_to(self, broker: int, api: str) -> int:
        """Requests of one API (its :class:`ApiKey` name) that broker ``broker`` took, on
        any of its listeners."""
        return self.requests_by_broker[broker, api]

    def bad(self, kind: str, detail: str, *, bug: bool = False) -> None:
        self.bad_input[kind] += 1
        self._log(kind, detail, "purgatory_kafka_bad_input_total", bug)

    def authentication_failed(self, mechanism: str, message: str) -> None:
        """A SASL authentication was refused (the client's fault, not bad input)."""
        self.authentication_failures[mechanism] += 1
        self._log(
            f"authentication failed ({mechanism})",
            message,
            "purgatory_kafka_authentication_failures_total",
        )

    def close(self, reason: str, detail: str) -> None:
        """The server closed a connection for ``reason``."""
        self.closed[reason] += 1
        self._log(
            f"connection closed: {reason}", detail, "purgatory_kafka_connections_closed_total"
        )

    def _log(self, kind: str, detail: str, counted_in: str, bug: bool = False) -> None:
        now = self._clock()
        last = self._logged_at.get(kind)
        if last is not None and now - last < self.log_interval_s:
            self._unlogged[kind] += 1
            return
        self._logged_at[kind] = now
        skipped = self._unlogged.pop(kind, 0)
        since = f"; {skipped} more since the last line" if skipped else ""
        log.warning(
            "kafka protocol: %s (%s)%s; counted in %s, logged at most once per %gs",
            kind,
            detail,
            since,
            counted_in,
            self.log_interval_s,
            exc_info=bug,
        )
