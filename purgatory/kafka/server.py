"""The Kafka connection server: frames in, responses out in request order.

Requests are read and responses written through Kafka's own message schemas
(:mod:`purgatory.kafka.schemas`): a handler takes a typed request and returns a typed
response. A client may pipeline requests; as Kafka does, each is taken up only once the
one before it on the connection is answered (a Fetch parked in a purgatory holds up the
requests behind it, which clients allow for), and the responses are written strictly in
the order the requests came (Kafka's per-connection ordering guarantee, which clients rely
on to match correlation ids). Bad input never raises out of a connection: it is answered
with the protocol's error where the protocol has one, otherwise the connection is closed,
and either way it is counted and logged (rate-limited per kind).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol, TypeVar, final

from purgatory import OperationCancelled
from purgatory.errors import ErrorCode
from purgatory.kafka.connections import Connection, stop_accepting
from purgatory.kafka.features import SUPPORTED, Features
from purgatory.kafka.frames import FrameReader
from purgatory.kafka.protocol import MAX_FRAME_BYTES, ApiKey, Frame, RequestHeader
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.sasl import (
    ANONYMOUS,
    AuthenticationFailed,
    SaslListener,
    SaslSession,
    State,
)
from purgatory.kafka.schemas import (
    build,
    encode_response,
    error_response,
    peek,
    read_request,
    respond,
    response_type,
    versions,
)
from purgatory.kafka.throttling import Mute, Throttler
from purgatory.kafka.tls import TlsListener
from purgatory.kafka.wire_errors import DecodeError

if TYPE_CHECKING:
    from purgatory.kafka.messages import ApiVersionsResponseFields

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A handler takes the request header and the request body (kio's dataclass for the
#: request's version) and returns the response (kio's dataclass for the same version),
#: None for no response (Produce acks=0), or an awaitable of either (a request parked in
#: a purgatory).
Response = Any
Handler = Callable[[RequestHeader, Any], Response | Awaitable[Response]]

#: Stands between a listener and its handlers when an authorizer is configured: given the
#: principal (``User:NAME``; ``User:ANONYMOUS`` unauthenticated), the client's host, the
#: request and how to run it, answers it with what the principal may not do refused
#: (:func:`purgatory.kafka.authorization.authorized`).
Guard = Callable[[str, str, Any, Callable[[Any], Any]], Any]


class CloseConnection(Exception):
    """Raised by an :class:`Interceptor`, or by the response it returns: the connection
    closes now, this request unanswered (the responses owed before it are written)."""


class DropResponse(Exception):
    """Raised by a response an :class:`Interceptor` returns: neither this response nor any
    later one on the connection is written (the requests still run), as when a response is
    lost: the client sees nothing until its request times out and it reconnects."""


class Interceptor(Protocol):
    """Stands between a listener and its handlers while fault rules are set: answers a
    request of broker ``broker`` itself, or through ``handler``."""

    def intercept(
        self, broker: int, header: RequestHeader, body: Any, handler: Handler
    ) -> Response | Awaitable[Response]: ...


@final
class RawToken(NamedTuple):
    """A SASL token the server sends as a frame of its own, without a response header:
    the answer to a raw token after a v0 SaslHandshake."""

    token: bytes


class Api(NamedTuple):
    """One API a listener answers: the lowest and highest version served, and the
    handler."""

    low: int
    high: int
    handler: Handler


#: What one set of request handlers answers, by API key: each handler class of
#: :mod:`purgatory.kafka.handlers` has one such table, and the front door registers them all
#: the same way.
ApiTable = Mapping[ApiKey, Api]

# Requests read ahead of the response being written; past this the reader waits, so one
# client pipelining without reading its responses cannot grow our memory without bound.
MAX_IN_FLIGHT: Final = 64


@final
class _Peer:
    """Who is at the other end of one connection: its address, and the client software
    it announced (ApiVersions v3+, KIP-511), logged once per connection."""

    __slots__ = ("address", "closed", "mute", "principal", "software")

    def __init__(self, address: object, principal: str = ANONYMOUS) -> None:
        self.address = address
        #: the throttle the connection's next request waits for (client quotas)
        self.mute = Mute()
        #: who the client is when no SASL login says (an SSL listener's certificate)
        self.principal = principal
        self.software: tuple[str, str] | None = None
        #: the connection has closed
        self.closed = False

    @property
    def host(self) -> str:
        """The client's IP address, as ACLs name hosts."""
        address = self.address
        return str(address[0]) if isinstance(address, tuple) and address else ""

    def announce(self, server: KafkaProtocolServer, name: str, version: str) -> None:
        if self.software == (name, version):
            return
        self.software = (name, version)
        server.stats.clients[name, version] += 1
        log.info(
            "kafka connection from %s to broker %d: client %s %s",
            self.address,
            server.broker_id,
            name,
            version,
        )


#: the connection whose requests the current task handles (each connection's own task)
_CONNECTION: ContextVar[_Peer | None] = ContextVar("purgatory_kafka_connection", default=None)

#: a connection as :func:`current_connection` tells it: ``address`` (the peer's
#: (host, port, ...)), ``software`` (the client's name and version, ApiVersions v3+, or
#: None), ``closed``
Peer = _Peer


def current_connection() -> Peer | None:
    """The connection of the request being handled (None outside a listener's
    connection, as when a test calls a handler itself)."""
    return _CONNECTION.get()


@final
class _Responses:
    """What one connection owes its client, in request order: each request read is queued
    with the future of its response until the response is written."""

    __slots__ = ("owed", "queue")

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[int, asyncio.Future[Response]] | None] = asyncio.Queue(
            MAX_IN_FLIGHT
        )
        #: requests read and not yet answered (a parked Fetch among them): not idle
        self.owed = 0


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """What the Kafka listeners sharing a :class:`ProtocolStats` hold: every connection
    holds a file descriptor, so past ``max_connections`` open on all of them a new one is
    closed at once; one with no request in flight that sends nothing whole for
    ``idle_timeout_s`` is closed too (a parked Fetch is not idle). 600 s is Kafka's
    ``connections.max.idle.ms``: clients close theirs after 9 minutes, so first."""

    max_connections: int = 1024
    idle_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        most = self.max_connections
        if isinstance(most, bool) or not isinstance(most, int):
            raise TypeError(f"max_connections must be an int, got {most!r}")
        if most < 1:
            raise ValueError(f"max_connections must be >= 1, got {most}")
        if not (math.isfinite(self.idle_timeout_s) and self.idle_timeout_s > 0):
            raise ValueError(f"idle_timeout_s must be finite and > 0, got {self.idle_timeout_s!r}")


@final
class KafkaProtocolServer:
    """Serves a table of API handlers on one listening socket, within ``limits``, as
    broker ``broker_id``. While :attr:`interceptor` is set, every request but ApiVersions
    goes through it (fault injection); None, the default, costs one attribute test. With
    ``sasl`` it is a SASL_PLAINTEXT listener: a connection is served once it has
    authenticated (:mod:`purgatory.kafka.sasl`). With ``tls`` it is an SSL listener (with
    ``sasl`` too, SASL_SSL): a connection is served once its TLS handshake is done
    (:mod:`purgatory.kafka.tls`); a failed one is counted and closes it."""

    def __init__(
        self,
        stats: ProtocolStats | None = None,
        limits: ListenerLimits | None = None,
        broker_id: int = 0,
        *,
        sasl: SaslListener | None = None,
        tls: TlsListener | None = None,
    ) -> None:
        self.stats = stats or ProtocolStats()
        self.limits = ListenerLimits() if limits is None else limits
        self.broker_id = broker_id
        self.sasl = sasl
        self.tls = tls
        self.interceptor: Interceptor | None = None
        self.guard: Guard | None = None
        #: applies the client quotas while any is set (None: none, one attribute test)
        self.throttler: Throttler | None = None
        #: the cluster's feature levels ApiVersions v3+ reports (None: none reported)
        self.features: Features | None = None
        self._handlers: dict[int, tuple[int, int, Handler]] = {}
        #: APIs served only while their condition holds (client telemetry): otherwise left
        #: out of ApiVersions and a request of one is an unknown API
        self._conditions: dict[int, Callable[[], bool]] = {}
        self._server: asyncio.Server | None = None
        #: every connection with a transport and no connection_lost yet, served or not
        self._connections: set[Connection] = set()
        self._closing = False

    def register(self, key: ApiKey, served: tuple[int, int], handler: Handler) -> None:
        """Serve ``key`` at the versions ``served``, which Kafka's schemas must have."""
        low, high = versions(key)
        if not low <= served[0] <= served[1] <= high:
            raise ValueError(f"{key.name} v{served[0]}-{served[1]}: the schemas have {low}-{high}")
        self._handlers[key] = (served[0], served[1], handler)

    def register_all(self, apis: ApiTable, *, when: Callable[[], bool] | None = None) -> None:
        """Serve every API of a handler table; with ``when``, only while it returns True.
        ValueError for an API registered already: two handler units would answer it."""
        for key, (low, high, handler) in apis.items():
            if key in self._handlers:
                raise ValueError(f"{key.name} is registered already")
            self.register(key, (low, high), handler)
            if when is not None:
                self._conditions[key] = when

    def _served(self, key: int) -> tuple[int, int, Handler] | None:
        entry = self._handlers.get(key)
        if entry is not None and key in self._conditions and not self._conditions[key]():
            return None
        return entry

    def registered(self) -> list[ApiKey]:
        """Every API registered, served now or only while its condition holds."""
        return [ApiKey(key) for key in self._handlers]

    def supported(self) -> dict[ApiKey, tuple[int, int]]:
        """What ApiVersions names now: every API served, by its versions."""
        table = {
            ApiKey(key): (low, high)
            for key, (low, high, _) in self._handlers.items()
            if self._served(key) is not None
        }
        table[ApiKey.API_VERSIONS] = versions(ApiKey.API_VERSIONS)
        return table

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port (0 picks a free port); returns the bound port."""
        self._closing = False
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: Connection(self), host, port)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop accepting, let the connections already accepted land, then close every
        one, served or not; returns once their sockets are closed. Idempotent."""
        self._closing = True
        server, self._server = self._server, None
        if server is not None:
            stop_accepting(server)
            # A selector loop takes a connection off the backlog in one step and makes its
            # transport in the next, in a task of its own, which fails with the socket
            # open and unreachable if the listener is closed in between (asyncio's
            # Server._attach asserts it is open: CPython gh-109564). No new accept can
            # start now; one step lets those in flight make their transports.
            await asyncio.sleep(0)
            server.close()
            # A transport just made tells its protocol on the next step, which closes
            # it unserved: the server is closing.
            await asyncio.sleep(0)
        while self._connections:
            open_now = list(self._connections)
            for connection in open_now:
                connection.stop()
            for connection in open_now:
                await connection.closed()
        if server is not None:
            await server.wait_closed()

    def _admit(self) -> bool:
        """Whether one more connection may open (it is then counted open)."""
        stats = self.stats
        if stats.connections >= self.limits.max_connections:
            stats.close("limit", f"{stats.connections} open, the most allowed")
            return False
        stats.connections += 1
        return True

    async def _accept(
        self,
        frames: FrameReader,
        connection: Connection,
        principal: str | None = None,
    ) -> None:
        """Serve one connection; ``principal`` (a TLS connection's, admitted at its
        handshake) None for a plaintext one, admitted here."""
        stats = self.stats
        if principal is None:
            throttler = self.throttler
            if throttler is not None and await self._over_connection_rate(throttler, connection):
                return
            if not self._admit():
                connection.close()
                return
            principal = ANONYMOUS
        try:
            await self._serve(frames, connection, principal)
        except asyncio.CancelledError:
            pass  # only close() cancels a connection: it ends here, quietly
        finally:
            stats.connections -= 1
            connection.close()
            with contextlib.suppress(asyncio.CancelledError):
                await connection.lost()

    async def _over_connection_rate(self, throttler: Throttler, connection: Connection) -> bool:
        """Whether the connection's IP is over its ``connection_creation_rate``: then it
        is held for its throttle time, unserved and not counted, and closed (Kafka's
        acceptor closes it once the throttle passes)."""
        peer = connection.peername()
        ip = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        throttle = throttler.connection_throttle(ip)
        if not throttle:
            return False
        self.stats.close("connection_rate", f"{ip} over its connection_creation_rate")
        try:
            await throttler.delay(throttle, connection)
        except OperationCancelled:
            pass  # the front door is closing
        finally:
            connection.close()
        return True

    async def _serve(self, frames: FrameReader, connection: Connection, principal: str) -> None:
        responses = _Responses()
        responder = asyncio.create_task(self._respond(responses, connection))
        session = None if self.sasl is None else SaslSession(self.sasl)
        peer = _Peer(connection.peername(), principal)
        _CONNECTION.set(peer)  # for this connection's task and the handlers it runs
        try:
            while (frame := await self._read_frame(frames, responses, session)) is not None:
                if session is None or (session.authenticated and not _sasl_api(frame)):
                    item = self._dispatch(frame, peer, session)
                else:
                    item = self._authenticate(frame, peer, session)
                if item is None:
                    break
                responses.owed += 1
                await responses.queue.put(item)
                if session is not None and session.state is State.FAILED:
                    # answered (the failure's error), then closed, as Kafka does: after
                    # connection.failed.authentication.delay.ms, so that a client guessing
                    # passwords cannot try them as fast as it can connect
                    await asyncio.sleep(session.listener.failed_close_delay_ms / 1000)
                    break
                # Kafka handles a connection's requests one at a time: the next is not
                # taken up until this one is answered (its channel is muted meanwhile), so
                # a ListOffsets sent right after a parked DeleteRecords sees the records
                # deleted, and a pipelined Produce appends after the one before it.
                if not item[1].done():
                    await asyncio.wait([item[1]])
                mute = peer.mute
                if mute.throttle is not None:
                    # a client quota throttled it: its channel stays muted meanwhile
                    throttle, mute.throttle = mute.throttle, None
                    try:
                        await throttle
                    except OperationCancelled:
                        break  # the front door is closing
            # Responses to requests already read are still owed: the responder writes them,
            # then stops at the end marker.
            await responses.queue.put(None)
            await responder
        finally:
            peer.closed = True
            responder.cancel()

    async def _read_frame(
        self,
        frames: FrameReader,
        responses: _Responses,
        session: SaslSession | None = None,
    ) -> Frame | None:
        """The next request frame (or raw SASL token); None when the connection is to
        close (closed by the client, garbage, idle for ``idle_timeout_s`` with no response
        owed, or its SASL session over)."""
        idle = self.limits.idle_timeout_s
        # A pipelining client's next frame has usually arrived by now: no timer for it.
        size = frames.known_size()
        while size is None:
            try:
                # a cancelled wait takes nothing: it can start over
                async with asyncio.timeout(idle):
                    size = await frames.next_size()
                break
            except TimeoutError:
                if responses.owed == 0:
                    self.stats.close("idle_timeout", f"silent for {idle:g} s")
                    return None
        if size is None:
            return None
        if session is not None and session.authenticated and session.expired():
            # Kafka closes a connection whose session ran out at its next request
            self.stats.close("session_expired", "connections.max.reauth.ms passed")
            return None
        # a raw SASL token (after a v0 handshake) has no request header: any size
        least = 0 if session is not None and session.raw_tokens else 8
        if size < least or size > MAX_FRAME_BYTES:
            # Too small to hold a request header, or beyond what we accept: garbage.
            self.stats.bad("frame size", f"{size} bytes")
            return None
        frame = frames.take()
        if frame is None:
            try:
                async with asyncio.timeout(idle):
                    frame = await frames.next_frame()
            except TimeoutError:
                pass
        if frame is None:
            self.stats.bad("truncated frame", f"closed or stalled before {size} bytes")
        return frame

    def _peek(self, frame: Frame) -> RequestHeader | None:
        """The request header of ``frame`` (:func:`~purgatory.kafka.schemas.peek`); None,
        counted as malformed, when there is none: the connection closes."""
        try:
            return peek(frame)
        except DecodeError as exc:
            self.stats.bad("malformed header", str(exc))
            return None

    def _read(self, frame: Frame, key: ApiKey, version: int) -> tuple[RequestHeader, Any] | None:
        """The request in ``frame``, counted; None, counted as malformed, when it does not
        decode: the connection closes."""
        try:
            read = read_request(frame, key, version)
        except DecodeError as exc:
            self.stats.bad("malformed request", f"{key.name} v{version}: {exc}")
            return None
        self.stats.requests[key.name, version] += 1
        self.stats.requests_by_broker[self.broker_id, key.name] += 1
        return read

    def _dispatch(
        self, frame: Frame, peer: _Peer, session: SaslSession | None = None
    ) -> tuple[int, asyncio.Future[Response]] | None:
        """Start handling one request (its future resolves to the response); None when
        the request cannot be answered and the connection must close. ``session``: the
        SASL login it comes on (None: a plaintext listener, ``User:ANONYMOUS``)."""
        loop = asyncio.get_running_loop()
        front = self._peek(frame)
        if front is None:
            return None
        key, version = front.api_key, front.api_version
        done: asyncio.Future[Response] = loop.create_future()
        if key == ApiKey.API_VERSIONS:
            done.set_result(self._api_versions(frame, version, peer))
            return front.correlation_id, done
        entry = self._served(key)
        if entry is None:
            self.stats.bad("unknown api key", str(key))
            return None
        low, high, handler = entry
        name = ApiKey(key).name
        if not low <= version <= high:
            # Kafka closes the connection here too: a client that read our ApiVersions
            # answer never sends a version outside it.
            self.stats.bad("unsupported version", f"{name} v{version}")
            return None
        read = self._read(frame, ApiKey(key), version)
        if read is None:
            return None
        header, body = read
        interceptor = self.interceptor

        def run(request: Any) -> Response | Awaitable[Response]:
            if interceptor is None:
                return handler(header, request)
            return interceptor.intercept(self.broker_id, header, request, handler)

        guard = self.guard
        throttler = self.throttler
        try:
            if guard is None and throttler is None:
                result = run(body)
            else:
                principal = peer.principal if session is None else session.principal
                if guard is not None:
                    guarded = run

                    def run(request: Any) -> Response | Awaitable[Response]:
                        return guard(principal, peer.host, request, guarded)

                if throttler is None:
                    result = run(body)
                else:
                    result = throttler.serve(
                        key,
                        version,
                        principal.removeprefix("User:"),
                        header.client_id or "",
                        len(frame),
                        body,
                        run,
                        peer.mute,
                    )
        except CloseConnection:
            return None
        except DecodeError as exc:
            self.stats.bad("malformed request", f"{name} v{version}: {exc}")
            return None
        except Exception as exc:  # a handler bug closes this connection, not the server
            self.stats.bad("internal error", repr(exc), bug=True)
            return None
        if inspect.isawaitable(result):
            return header.correlation_id, asyncio.ensure_future(result)
        done.set_result(result)
        return header.correlation_id, done

    def _authenticate(
        self, frame: Frame, peer: _Peer, session: SaslSession
    ) -> tuple[int, asyncio.Future[Response]] | None:
        """A frame on a SASL connection not yet authenticated (or re-authenticating, or
        an authenticated one's SaslHandshake or SaslAuthenticate), answered as Kafka's
        SaslServerAuthenticator answers it; None closes the connection unanswered."""
        done: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        if session.state is State.AUTHENTICATE and session.raw_tokens:
            try:
                answer, _ = session.authenticate(bytes(frame))
            except AuthenticationFailed as exc:
                # no header to answer in: the connection closes
                self.stats.authentication_failed(str(session.mechanism), exc.reason)
                return None
            done.set_result(RawToken(answer))
            return 0, done
        front = self._peek(frame)
        if front is None:
            return None
        key, version = front.api_key, front.api_version
        if session.authenticated:
            if key != ApiKey.SASL_HANDSHAKE or not session.may_reauthenticate():
                # Kafka answers these as any request: ILLEGAL_SASL_STATE (KIP-368 aside)
                return self._dispatch(frame, peer, session)
        expected = (
            (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE)
            if session.state is State.HANDSHAKE
            else (ApiKey.SASL_AUTHENTICATE,)
        )
        if key == ApiKey.API_VERSIONS and key in expected:
            done.set_result(self._api_versions(frame, version, peer))
            return front.correlation_id, done
        entry = self._served(key)
        if entry is None or not entry[0] <= version <= entry[1]:
            session.fail()
            self.stats.bad("illegal sasl state", f"api key {key} v{version} before authentication")
            return None
        name = ApiKey(key).name
        read = self._read(frame, ApiKey(key), version)
        if read is None:
            return None
        header, body = read
        if key not in expected:
            handshaking = session.state is State.HANDSHAKE
            session.fail()
            self.stats.bad("illegal sasl state", f"{name} during SASL authentication")
            if handshaking:
                return None  # Kafka closes before it reads the request
            done.set_result(error_response(body, ErrorCode.ILLEGAL_SASL_STATE))
            return header.correlation_id, done
        if key == ApiKey.SASL_HANDSHAKE:
            enabled = session.handshake(body.mechanism, version)
            error = ErrorCode.NONE if enabled else ErrorCode.UNSUPPORTED_SASL_MECHANISM
            if not enabled:
                self.stats.bad("unsupported sasl mechanism", repr(body.mechanism))
            done.set_result(respond(body, error_code=error, mechanisms=session.listener.mechanisms))
            return header.correlation_id, done
        try:
            answer, lifetime = session.authenticate(body.auth_bytes)
        except AuthenticationFailed as exc:
            self.stats.authentication_failed(str(session.mechanism), exc.reason)
            response = respond(
                body,
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                error_message=exc.message,
            )
        else:
            response = respond(
                body, error_code=ErrorCode.NONE, auth_bytes=answer, session_lifetime=lifetime
            )
        done.set_result(response)
        return header.correlation_id, done

    def _api_versions(self, frame: Frame, version: int, peer: _Peer) -> Response:
        """The ApiVersions answer. A version newer than ours is the usual negotiation,
        not bad input: it is answered in v0 with UNSUPPORTED_VERSION and our ranges, and
        the client retries at the highest version we named (KIP-511)."""
        low, high = versions(ApiKey.API_VERSIONS)
        error = ErrorCode.NONE
        if not low <= version <= high:
            version, error = 0, ErrorCode.UNSUPPORTED_VERSION
        elif version >= 3:
            try:
                body = read_request(frame, ApiKey.API_VERSIONS, version).body
            except DecodeError as exc:
                self.stats.bad("malformed request", f"API_VERSIONS v{version}: {exc}")
                error = ErrorCode.INVALID_REQUEST
            else:
                peer.announce(self, body.client_software_name, body.client_software_version)
        self.stats.requests["API_VERSIONS", version] += 1
        return build(
            response_type(ApiKey.API_VERSIONS, version),
            {
                "error_code": error,
                "api_keys": [
                    {"api_key": key, "min_version": low, "max_version": high}
                    for key, (low, high) in sorted(self.supported().items())
                ],
                **({} if self.features is None else _features(self.features)),
            },
        )

    async def _respond(self, responses: _Responses, connection: Connection) -> None:
        """Write each response as soon as it and every earlier one are ready."""
        pending = responses.queue
        while (item := await pending.get()) is not None:
            correlation_id, future = item
            try:
                response = await future
                if isinstance(response, RawToken):
                    connection.write(len(response.token).to_bytes(4, "big") + response.token)
                    await connection.drain()
                elif response is not None:
                    connection.write(encode_response(correlation_id, response))
                    await connection.drain()
                responses.owed -= 1
                continue
            except DropResponse:
                await self._swallow(responses)
                return
            except CloseConnection:
                pass
            except DecodeError as exc:
                self.stats.bad("malformed request", str(exc))
            except ConnectionError:
                pass
            except Exception as exc:  # a handler bug must not take the server down
                self.stats.bad("internal error", repr(exc), bug=True)
            break
        else:
            return  # the end marker: every response owed was written
        # The connection is done for: closing it ends the reader's wait, and what is still
        # queued is dropped, so the reader never blocks on a full queue.
        connection.close()
        while (item := await pending.get()) is not None:
            item[1].cancel()

    async def _swallow(self, responses: _Responses) -> None:
        """A response was lost: let every later request run, answering none of them."""
        responses.owed -= 1
        while (item := await responses.queue.get()) is not None:
            with contextlib.suppress(Exception):
                await item[1]
            responses.owed -= 1


def _features(features: Features) -> ApiVersionsResponseFields:
    """ApiVersions' feature fields (v3+; older versions have none: :func:`build` leaves
    them out)."""
    return {
        "supported_features": [
            {"name": name, "min_version": low, "max_version": high}
            for name, (low, high) in sorted(SUPPORTED.items())
        ],
        "finalized_features_epoch": features.epoch,
        "finalized_features": [
            {"name": name, "min_version_level": level, "max_version_level": level}
            for name, level in features.finalized().items()
        ],
    }


def _sasl_api(frame: Frame) -> bool:
    """Whether an authenticated connection's frame is a SaslHandshake or SaslAuthenticate
    (a re-authentication starts with one)."""
    return len(frame) >= 2 and int.from_bytes(frame[:2], "big") in (
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
    )
