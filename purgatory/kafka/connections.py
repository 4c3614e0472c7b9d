"""One accepted Kafka connection, from the moment its transport exists (its listener
closes it however far it got), through a TLS listener's handshake (asyncio's own TLS,
started here so that a failed one is counted and logged), to the task that serves it."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Coroutine, Generator
from typing import Any, Final, Generic, Protocol, TypeVar, cast, final

from purgatory.kafka.frames import FrameReader
from purgatory.kafka.protocol import MAX_FRAME_BYTES
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.tls import NoMatchingRule, TlsListener

T = TypeVar("T")


class Listener(Protocol):
    """What a connection needs of the listener that accepted it
    (:class:`~purgatory.kafka.server.KafkaProtocolServer`)."""

    stats: ProtocolStats
    tls: TlsListener | None
    #: every connection with a transport and no connection_lost yet, served or not
    _connections: set[Connection]
    _closing: bool

    def _admit(self) -> bool:
        """Count the connection open, or close it and return False over the limit."""
        ...

    async def _accept(
        self,
        frames: FrameReader,
        connection: Connection,
        principal: str | None = None,
    ) -> None:
        """Serve the connection; ``principal`` a TLS connection's (None: plaintext)."""
        ...


@final
class _Begun(Generic[T]):
    """A coroutine run now up to its first wait (as Python 3.12's eager tasks start
    one), the rest when this is awaited: what it waits on, its result or its exception,
    and a cancellation thrown into it, pass through as through ``await``."""

    __slots__ = ("_coroutine", "_first", "_outcome")

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self._coroutine = coroutine
        self._first: Any = None
        self._outcome: tuple[T] | BaseException | None = None
        try:
            self._first = coroutine.send(None)
        except StopIteration as stop:
            self._outcome = (stop.value,)
        except Exception as exc:
            self._outcome = exc

    def __await__(self) -> Generator[Any, Any, T]:
        outcome = self._outcome
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome is not None:
            return outcome[0]
        coroutine, waited = self._coroutine, self._first
        while True:
            try:
                try:
                    sent = yield waited
                except BaseException as exc:  # a cancellation: the coroutine's to handle
                    waited = coroutine.throw(exc)
                else:
                    waited = coroutine.send(sent)
            except StopIteration as stop:
                result: T = stop.value
                return result


#: the reasons of a TLS handshake refused for the client's certificate (none sent when
#: ``ssl.client.auth=required``, or one the CA did not sign): failed authentications
_CERTIFICATE_REFUSED: Final = frozenset(
    {"PEER_DID_NOT_RETURN_A_CERTIFICATE", "CERTIFICATE_VERIFY_FAILED", "NO_CERTIFICATE_RETURNED"}
)


def _address(transport: asyncio.BaseTransport) -> object:
    return transport.get_extra_info("peername")


def stop_accepting(server: asyncio.Server) -> None:
    """Stop taking connections off ``server``'s listening sockets, leaving them open and
    the server attachable. A selector loop accepts from a reader callback, removed here;
    the loops with none (uvloop, proactor) make a connection's transport in the step that
    accepts it, so have none in flight when the server closes."""
    loop = server.get_loop()
    for sock in server.sockets:
        with contextlib.suppress(NotImplementedError):
            loop.remove_reader(sock.fileno())


@final
class Connection(asyncio.BufferedProtocol):
    """One accepted connection, known to its listener from the moment its transport
    exists, before any handler task: the listener closes it however far it got, and one
    made once the listener is closing is closed unserved.

    It reads as a buffered protocol, into its :class:`FrameReader` (asyncio's transports,
    its TLS and uvloop's read into ``get_buffer`` for a protocol that is not an
    ``asyncio.Protocol``), and is its handler's writer: ``write``, ``drain`` (which waits
    while the transport's buffer is full, as a StreamWriter's), ``close``."""

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._frames = FrameReader(MAX_FRAME_BYTES)
        #: set while the transport asks us to stop writing (its buffer is full)
        self._writable: asyncio.Future[None] | None = None
        self._made: asyncio.Transport | None = None
        self._handler: asyncio.Task[None] | None = None
        self._lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: a TLS connection's principal once its handshake is done (None: plaintext)
        self._principal: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream server's transport (asyncio's and uvloop's have no common base class)
        made = cast(asyncio.Transport, transport)
        listener = self._listener
        if self._made is None:
            self._made = made
            listener._connections.add(self)
            if listener._closing:
                made.abort()  # accepted as the listener closed: never served
                return
            tls = listener.tls
            if tls is not None:
                if not listener._admit():
                    self._drop(made)
                    return
                # The TLS layer takes the socket's transport over now, before this
                # callback returns: uvloop starts reading once it has, and a byte read
                # by this protocol would be lost to the handshake.
                started = _Begun(
                    asyncio.get_running_loop().start_tls(
                        made,
                        self,
                        tls.context,
                        server_side=True,
                        ssl_handshake_timeout=tls.handshake_timeout_s,
                    )
                )
                handshake = asyncio.get_running_loop().create_task(
                    self._handshake(made, tls, started)
                )
                handshake.add_done_callback(self._served)
                self._handler = handshake
                return
        else:
            self._made = made  # the TLS transport, over the socket's
        self._frames.set_transport(made)
        self._serve()

    async def _handshake(
        self, socket: asyncio.Transport, tls: TlsListener, started: _Begun[asyncio.Transport | None]
    ) -> None:
        """A TLS listener's connection: admitted, its handshake done (within
        ``tls.handshake_timeout_s``), its client certificate's principal found, then
        served. asyncio's own TLS (``loop.start_tls``, what ``create_server(ssl=...)``
        runs) does the handshake: started here rather than by the server, a failed one
        reaches this listener, to be counted and logged (asyncio's server only logs it,
        in debug mode). Bad input (plaintext, garbage, a handshake cut off or too slow)
        closes the connection, counted as ``tls handshake``; a certificate refused counts
        as a failed ``SSL`` authentication."""
        stats = self._listener.stats
        secured: asyncio.BaseTransport | None = None
        try:
            secured = await started
            if secured is None:
                raise ConnectionResetError("connection lost during the handshake")
            principal = tls.principal(secured.get_extra_info("ssl_object"))
        except asyncio.CancelledError:
            stats.connections -= 1
            self._drop(socket if secured is None else secured)
            return  # the listener is closing
        except NoMatchingRule as exc:
            stats.connections -= 1
            stats.authentication_failed("SSL", str(exc))
            self._drop(socket if secured is None else secured)
            return
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            stats.connections -= 1
            reason = getattr(exc, "reason", None)
            if isinstance(exc, ssl.SSLError) and reason in _CERTIFICATE_REFUSED:
                stats.authentication_failed("SSL", f"{reason} from {_address(socket)}")
            else:
                stats.bad("tls handshake", f"{_address(socket)}: {type(exc).__name__}: {exc}")
            self._drop(socket)
            return
        self._principal = principal
        self.connection_made(secured)  # the TLS transport reads and writes from here on
        # served by this task, counted open since connection_made: a cancellation from
        # here on ends in _accept, which counts it closed
        await self._listener._accept(self._frames, self, principal)

    def _drop(self, transport: asyncio.BaseTransport) -> None:
        """A TLS connection that will not be served: closed now. Its socket's transport
        tells the TLS layer, not this protocol, that it is lost: this does."""
        transport.abort() if isinstance(transport, asyncio.Transport) else transport.close()
        self._listener._connections.discard(self)
        if not self._lost.done():
            # the socket closes in a callback the loop runs before the next step
            asyncio.get_running_loop().call_soon(self._set_lost)

    def _set_lost(self) -> None:
        if not self._lost.done():
            self._lost.set_result(None)

    def _serve(self) -> None:
        if self._principal is not None:  # a TLS connection: its handshake's task serves it
            return
        handler = asyncio.get_running_loop().create_task(self._listener._accept(self._frames, self))
        handler.add_done_callback(self._served)
        self._handler = handler

    def _served(self, handler: asyncio.Task[None]) -> None:
        # _accept closes the connection however it ends; a bug is reported here, as
        # asyncio's start_server reports a failed client_connected_cb.
        if not handler.cancelled() and (exc := handler.exception()) is not None:
            handler.get_loop().call_exception_handler(
                {"message": "kafka connection handler failed", "exception": exc, "protocol": self}
            )

    # -- reading, into the frame reader ----------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._frames.buffer_updated(nbytes)

    def eof_received(self) -> bool:
        self._frames.feed_eof()
        # True keeps a plaintext socket open for the responses still owed (a TLS
        # transport half-closes no socket, and warns on True)
        made = self._made
        return made is not None and made.get_extra_info("sslcontext") is None

    # -- writing, for the handler ----------------------------------------------------------

    def peername(self) -> object:
        return None if self._made is None else _address(self._made)

    def write(self, data: bytes) -> None:
        assert self._made is not None
        self._made.write(data)

    async def drain(self) -> None:
        """Return once the transport takes more; ConnectionResetError if it is lost."""
        if self._made is not None and self._made.is_closing():
            await asyncio.sleep(0)  # a closing transport reports its loss in a callback
        if self._lost.done():
            raise ConnectionResetError("connection lost")
        writable = self._writable
        if writable is not None:
            await asyncio.shield(writable)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._release_writers(None)

    def _release_writers(self, exc: BaseException | None) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            if exc is None:
                writable.set_result(None)
            else:
                writable.set_exception(exc)
                writable.exception()  # retrieved: no warning if no writer waits

    def close(self) -> None:
        if self._made is not None:
            self._made.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._frames.feed_eof()
        self._release_writers(ConnectionResetError("connection lost"))
        self._listener._connections.discard(self)
        if not self._lost.done():
            self._lost.set_result(None)

    def stop(self) -> None:
        """Cancel the handler and drop the connection, unsent bytes and all, as a broker
        that goes away does: the listener is closing, and must not wait on a client that
        does not read."""
        if self._handler is not None:
            self._handler.cancel()
        if self._made is not None:
            self._made.abort()

    async def lost(self) -> None:
        """Return once the transport has reported the connection lost (after close())."""
        await asyncio.shield(self._lost)

    async def closed(self) -> None:
        """Return once the handler has ended and the socket is closed."""
        if self._handler is not None:
            await asyncio.wait([self._handler])
        await self._lost
