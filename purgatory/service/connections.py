"""Connections: the descriptor budget, slow-client timeouts and parser-level refusals.

aiohttp accepts every connection and waits for it forever, so a flood of long polls uses
every file descriptor (and then nothing, not even ``/healthz``, is answered) and a client
sending one byte a second holds its socket for as long as it likes. The server here adds:

* **A connection budget.** At most ``max_connections`` connections are served at once; the
  CLI derives it from ``RLIMIT_NOFILE`` with headroom for listeners, the Kafka ports and
  files, so ``accept()`` never meets ``EMFILE``. A connection over the budget evicts the
  longest-open idle keep-alive connection (as nginx does), else one still sending its
  request head a second after it began (it gets a 503); if there is none, the new
  connection gets a 503 and is closed. Since parked requests are capped well below the budget
  (``max_pending``), there is always room for ``/healthz``, ``/metrics`` and produces.
* **Timeouts.** A request head must arrive within ``header_timeout_s`` of its first byte
  (of the connection, for a new one), a body within ``body_timeout_s`` of its head, and a
  keep-alive connection may wait ``idle_timeout_s`` for its next request. A late client
  gets 408 and is closed. A handler that is running (a parked long poll) is never idle.
* **Quiet refusals.** A request the HTTP parser rejects gets a JSON 400 and one log line,
  not aiohttp's ERROR with a traceback.

Refusals and timeouts are counted (``purgatory_http_connections_*``) and logged at most
once per ten seconds with a count of what happened since. What aiohttp does not tell
through public API comes from :mod:`purgatory.service.aiohttp_adapter`, and only from there.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final, final

import msgspec
from aiohttp import web

from purgatory.errors import ErrorCode
from purgatory.service.aiohttp_adapter import AdaptedAppRunner, AdaptedConnection, AdaptedServer
from purgatory.service.app import STATE, json_response
from purgatory.service.bodies import ErrorBody
from purgatory.service.config import ConnectionLimits, reserve
from purgatory.service.http_metrics import ConnectionMetrics, ServiceMetrics
from purgatory.service.refusals import ServiceRefusal
from purgatory.service.throttled import Throttled

logger = logging.getLogger("purgatory.service.connections")

#: a connection refused over the budget may take this long to send its request before
#: the 503 (reading it first lets the socket close with FIN, not RST, so the client sees
#: the 503)
REFUSAL_GRACE_S: Final = 1.0
#: at the budget, a connection still sending its request head after this many seconds may
#: be closed (with a 503) to make room: clients that are not slow send it at once
STALE_HEAD_S: Final = 1.0


def raw_response(status: int, reason: str, code: ErrorCode | ServiceRefusal, message: str) -> bytes:
    """A complete ``Connection: close`` JSON error response, written outside aiohttp."""
    body = msgspec.json.encode(ErrorBody(code, message))
    head = (
        f"HTTP/1.1 {status} {reason}\r\nServer: purgatory\r\n"
        f"Content-Type: application/json; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        + ("Retry-After: 1\r\n" if status == 503 else "")
        + "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def _budget_full(max_connections: int) -> bytes:
    return raw_response(
        503,
        "Service Unavailable",
        ServiceRefusal.TOO_MANY_CONNECTIONS,
        f"{max_connections} connections are open (max_connections)",
    )


@final
class GuardedServer(AdaptedServer):
    """aiohttp's protocol factory, making :class:`GuardedConnection`\\ s and keeping the
    budget. Built from the plain server :class:`ServiceRunner` would have used."""

    def __init__(
        self,
        plain: web.Server,
        limits: ConnectionLimits,
        metrics: ConnectionMetrics,
        requests: ServiceMetrics,
    ) -> None:
        super().__init__(plain)
        self.limits = limits
        self.metrics = metrics
        self.requests = requests
        self.served = 0  # connections within the budget
        self.refusing = 0  # connections over it, being answered 503
        self.refusals = Throttled(logger)
        self.timeouts = Throttled(logger)
        metrics.max_connections.set(limits.max_connections)

    def __call__(self) -> GuardedConnection:
        return GuardedConnection(self, loop=asyncio.get_running_loop(), **self.connection_kwargs)

    def admit(self, connection: GuardedConnection) -> bool:
        """Count a new connection in, making room at the budget; False: refuse it."""
        if self.served >= self.limits.max_connections:
            victim = self._victim()
            if victim is None:
                self.refusing += 1
                self.metrics.refused.inc()
                self.refusals.warning(
                    "connection refused with 503: %d connections open (--max-connections %d)",
                    self.served,
                    self.limits.max_connections,
                )
                return False
            victim.evict()
        self.served += 1
        self.metrics.open.inc()
        return True

    def _victim(self) -> GuardedConnection | None:
        """The longest-open idle keep-alive connection, else the longest-open one whose
        request head is overdue by ``STALE_HEAD_S`` (a slow client, not a fresh one)."""
        stale = None
        now = asyncio.get_running_loop().time()
        for connection in self.connections:
            if not isinstance(connection, GuardedConnection):
                continue
            if connection.is_idle():
                return connection
            if stale is None and connection.head_waited(now) >= STALE_HEAD_S:
                stale = connection
        return stale

    def release(self, admitted: bool) -> None:
        if admitted:
            self.served -= 1
            self.metrics.open.dec()
        else:
            self.refusing -= 1


class GuardedConnection(AdaptedConnection):
    """One HTTP connection: aiohttp's, plus the budget, the deadlines and quiet 400s.

    At most one deadline runs at a time: for the request head while one is being read (or
    a new connection waits for its first), for the body while it is being read. aiohttp's
    own keep-alive timer is the idle timeout: it closes only a connection waiting for a
    request, never one whose handler runs.
    """

    def __init__(self, manager: GuardedServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._guard = manager
        self._event_loop = asyncio.get_running_loop()
        self._admitted: bool | None = None  # None until connection_made
        self._reading: str | None = None  # "header" or "body" while a deadline runs
        self._reading_since = 0.0
        self._deadline = 0.0
        self._deadline_handle: asyncio.TimerHandle | None = None
        self._body: Any = None  # the payload stream whose arrival the body deadline awaits

    # -- the budget ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._admitted = self._guard.admit(self)
        if not self._admitted:
            # Not handed to aiohttp: answer once the request arrives (or the grace ends),
            # unless so many wait for their 503 that descriptors would run out.
            self.transport = transport  # type: ignore[assignment]
            if self._guard.refusing > max(32, reserve(self._guard.limits.max_connections)):
                transport.abort()  # type: ignore[attr-defined]
                return
            self._deadline_handle = self._event_loop.call_later(REFUSAL_GRACE_S, self._refuse)
            return
        super().connection_made(transport)
        # a new connection has the header timeout for its first request, not the idle one
        self.stop_keepalive_timer()
        self._start_deadline("header", self._guard.limits.header_timeout_s)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._stop_deadline()
        if self._admitted is not None:
            self._guard.release(self._admitted)
            admitted, self._admitted = self._admitted, None
            if not admitted:
                self.transport = None
                return
        super().connection_lost(exc)

    def _refuse(self) -> None:
        self._deadline_handle = None
        if self.transport is not None:
            self.transport.write(
                raw_response(
                    503,
                    "Service Unavailable",
                    ServiceRefusal.TOO_MANY_CONNECTIONS,
                    f"{self._guard.limits.max_connections} connections are open (max_connections)",
                )
            )
            self.transport.close()

    def is_idle(self) -> bool:
        """Waiting for a next request on keep-alive, no byte of it received yet."""
        return (
            self.heads_received > 0
            and self._reading is None
            and self.waiting_for_request
            and not self.force_closing
        )

    def head_waited(self, now: float) -> float:
        """Seconds this connection has been sending the head of a request (0 if not)."""
        return now - self._reading_since if self._reading == "header" else 0.0

    def evict(self) -> None:
        """Close to make room: quietly if idle, else with a 503 for the unfinished request."""
        if self._reading is not None and self.transport is not None:
            self.transport.write(_budget_full(self._guard.limits.max_connections))
        self.close_for("evicted")

    def close_for(self, reason: str) -> None:
        self._guard.metrics.closed.labels(reason).inc()
        self.force_close()

    # -- the deadlines ------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._admitted is False:
            if self._deadline_handle is not None:  # the request is here: answer it now
                self._deadline_handle.cancel()
                self._refuse()
            return
        if self._reading == "body" and self._body is not None and self._body.is_eof():
            self._stop_deadline()
        heads = self.heads_received
        super().data_received(data)
        if self.heads_received != heads:  # a request head is complete
            self._stop_deadline()
            body = self.latest_body()
            if body is not None and not body.is_eof():
                self._body = body
                self._start_deadline("body", self._guard.limits.body_timeout_s)
        elif data and self._reading is None and not self.handling_request:
            self._start_deadline("header", self._guard.limits.header_timeout_s)

    def _start_deadline(self, reading: str, timeout_s: float) -> None:
        self._reading = reading
        self._reading_since = self._event_loop.time()
        self._deadline = self._reading_since + timeout_s
        handle = self._deadline_handle
        if handle is not None and handle.when() > self._deadline:
            handle.cancel()
            handle = None
        if handle is None:
            self._deadline_handle = self._event_loop.call_at(self._deadline, self._check_deadline)

    def _stop_deadline(self) -> None:
        # the timer stays armed, and finds nothing to do (cheaper than cancelling each time)
        self._reading = None
        self._body = None

    def _check_deadline(self) -> None:
        self._deadline_handle = None
        if self._reading is None or self.transport is None:
            return
        if self._reading == "body" and self._body is not None and self._body.is_eof():
            self._stop_deadline()
            return
        if self._event_loop.time() < self._deadline:  # a later deadline replaced the first
            self._deadline_handle = self._event_loop.call_at(self._deadline, self._check_deadline)
            return
        reading = self._reading
        limit = self._guard.limits
        timeout_s = limit.header_timeout_s if reading == "header" else limit.body_timeout_s
        self._guard.timeouts.warning(
            "closed a connection that sent no complete request %s within %g s",
            reading,
            timeout_s,
        )
        request = self.current_request
        if reading == "header" or (request is not None and request.writer.output_size == 0):
            # (not once a response was written: lingering over an unread body)
            self.transport.write(
                raw_response(
                    408,
                    "Request Timeout",
                    ServiceRefusal.REQUEST_TIMEOUT,
                    f"the request {reading} did not arrive within {timeout_s:g} s",
                )
            )
        self.close_for(f"{reading}_timeout")

    def may_close_idle(self) -> bool:
        return self._reading is None  # the next request is arriving: its deadline rules

    def closed_idle(self) -> None:
        self._guard.metrics.closed.labels("idle_timeout").inc()

    # -- refusals by the parser ---------------------------------------------------------

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500:  # a bug or a timeout in a handler: aiohttp logs the traceback
            return super().handle_error(request, status, exc, message)
        why = message or (str(exc) if exc is not None else "bad request")
        logger.info("bad request from %s refused: %s", request.remote, why.splitlines()[0])
        self._guard.requests.reject("malformed")
        response = json_response(
            ErrorBody(ErrorCode.INVALID_REQUEST, f"malformed HTTP request: {why}"),
            status=status,
            headers={"Server": "purgatory"},
        )
        response.force_close()
        return response


@final
class ServiceRunner(AdaptedAppRunner):
    """``web.AppRunner`` for a :func:`~purgatory.service.app.create_app` app, serving
    through :class:`GuardedServer`; the connection metrics go into the app's registry."""

    def __init__(self, app: web.Application, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(
            app,
            handler_cancellation=True,  # a disconnected client's parked operation is dropped
            keepalive_timeout=limits.idle_timeout_s,
            access_log=None,
            **kwargs,
        )
        self._limits = limits

    def adapt_server(self, plain: web.Server) -> web.Server:
        state = self.app[STATE]
        metrics = ConnectionMetrics(state.registry)
        return GuardedServer(plain, self._limits, metrics, state.metrics)
