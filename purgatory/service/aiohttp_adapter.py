"""Every private aiohttp attribute the connection guard needs, behind public names.

aiohttp's server has no public hook for what :mod:`purgatory.service.connections` adds (a
connection budget, deadlines for a request's head and body, evicting idle keep-alive
connections): it must know when a request head has been parsed and with what body, whether
a connection waits for its next request, and it takes over aiohttp's keep-alive timer. Only
private attributes of ``web.RequestHandler``, ``web.Server`` and ``web.AppRunner`` tell
that, so they are read and written here and nowhere else:

========================================  =============================================
aiohttp (3.14)                            here
========================================  =============================================
``Server._kwargs``                        :attr:`AdaptedServer.connection_kwargs`
``AppRunner._make_server()``              :meth:`AdaptedAppRunner.adapt_server`
``RequestHandler._request_count``         :attr:`AdaptedConnection.heads_received`
``RequestHandler._messages``              :meth:`AdaptedConnection.latest_body`
``RequestHandler._waiter``                :attr:`AdaptedConnection.waiting_for_request`
``RequestHandler._request_in_progress``   :attr:`AdaptedConnection.handling_request`
``RequestHandler._force_close``           :attr:`AdaptedConnection.force_closing`
``RequestHandler._current_request``       :attr:`AdaptedConnection.current_request`
``RequestHandler._keepalive_handle``      :meth:`AdaptedConnection.stop_keepalive_timer`
``RequestHandler._process_keepalive()``   :meth:`AdaptedConnection.may_close_idle`,
                                          :meth:`AdaptedConnection.closed_idle`
========================================  =============================================

``pyproject.toml`` bounds aiohttp below its next minor release, and
``tests/service/test_service_aiohttp_adapter.py`` checks each row against the installed
aiohttp: a release that renames or repurposes one fails those tests loudly instead of
silently switching the limits off.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.streams import StreamReader


class AdaptedServer(web.Server):
    """``web.Server`` rebuilt from the plain one ``AppRunner`` makes (same handler, request
    factory and connection settings), so that a subclass can make its own connections."""

    def __init__(self, plain: web.Server) -> None:
        super().__init__(
            plain.request_handler,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            **plain._kwargs,
        )

    @property
    def connection_kwargs(self) -> dict[str, Any]:
        """What each ``RequestHandler`` is built with (keep-alive timeout, access log, ...)."""
        return dict(self._kwargs)


class AdaptedAppRunner(web.AppRunner):
    """``web.AppRunner`` whose server a subclass may replace (:meth:`adapt_server`)."""

    def adapt_server(self, plain: web.Server) -> web.Server:
        """The server to run instead of ``plain`` (which has started the app)."""
        return plain

    async def _make_server(self) -> web.Server:
        return self.adapt_server(await super()._make_server())


class AdaptedConnection(web.RequestHandler):
    """``web.RequestHandler`` with its parsing and keep-alive state under public names."""

    @property
    def heads_received(self) -> int:
        """Request heads parsed on this connection so far (counted as soon as parsed)."""
        count: int = self._request_count
        return count

    def latest_body(self) -> StreamReader | None:
        """The body stream of the last parsed request not yet handed to its handler."""
        return self._messages[-1][1] if self._messages else None

    @property
    def waiting_for_request(self) -> bool:
        """Waiting for a next request head: no handler runs and none is queued."""
        waiter = self._waiter
        return waiter is not None and not waiter.done()

    @property
    def handling_request(self) -> bool:
        in_progress: bool = self._request_in_progress
        return in_progress

    @property
    def force_closing(self) -> bool:
        closing: bool = self._force_close
        return closing

    @property
    def current_request(self) -> web.BaseRequest | None:
        return self._current_request

    def stop_keepalive_timer(self) -> None:
        """Cancel aiohttp's keep-alive timer (armed for a new connection too); it is armed
        again when the next response has been written."""
        if self._keepalive_handle is not None:
            self._keepalive_handle.cancel()
            self._keepalive_handle = None

    def may_close_idle(self) -> bool:
        """Whether aiohttp's keep-alive timer may close the connection now (override)."""
        return True

    def closed_idle(self) -> None:
        """aiohttp's keep-alive timer has just closed the connection (override)."""

    def _process_keepalive(self) -> None:
        if not self.may_close_idle():
            self._keepalive_handle = None  # so that aiohttp arms it again
            return
        was_open = self.transport is not None
        super()._process_keepalive()
        if was_open and self.transport is None:
            self.closed_idle()
