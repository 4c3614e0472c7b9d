"""PostgresBus: the bus over PostgreSQL's LISTEN/NOTIFY, with asyncpg.

One connection LISTENs on the channel; another one publishes with ``pg_notify``. asyncpg
never reconnects on its own, so a lost listening connection always ends the subscription
here and the bus re-checks every watched key once it has listened again. A connection that
dies without a word (a host gone, a cable cut) is found by a cheap query on the listening
connection every ``ping_interval_s``, which must answer within ``ping_interval_s``.

NOTIFY payloads are shorter than 8000 bytes: longer key sets are split over several
messages. Notifications are delivered when the publishing transaction commits.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Unpack
from urllib.parse import urlsplit

from purgatory.bus._bus import Bus, BusOptions, _positive
from purgatory.bus._envelope import check_keys, encode

try:
    import asyncpg
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("PostgresBus needs asyncpg: pip install 'purgatory-aio[postgres]'") from exc

#: NOTIFY refuses a payload of 8000 bytes or more
_MAX_PAYLOAD_BYTES = 7999
#: PostgreSQL names are at most NAMEDATALEN - 1 bytes; LISTEN would silently truncate
_MAX_CHANNEL_BYTES = 63
#: who sends what notify_arguments builds: no bus's own id, so this process hears it too
_TRANSACTION_SENDER = ""


def _check_channel(channel: object) -> str:
    if not isinstance(channel, str):
        raise TypeError(f"channel must be a str, got {channel!r}")
    try:
        size = len(channel.encode())
    except UnicodeEncodeError:
        raise ValueError(f"channel {channel!r} is not encodable as UTF-8 text") from None
    if not 1 <= size <= _MAX_CHANNEL_BYTES or "\x00" in channel:
        raise ValueError(
            f"channel must be a PostgreSQL identifier: 1 to {_MAX_CHANNEL_BYTES} bytes of "
            f"UTF-8 with no NUL, got {channel!r} ({size} bytes)"
        )
    return channel


def _check_dsn(dsn: object) -> str:
    if not isinstance(dsn, str):
        raise TypeError(f"dsn must be a str, got {dsn!r}")
    if urlsplit(dsn).scheme not in ("postgresql", "postgres"):
        raise ValueError(
            f"dsn must be a postgresql:// URL (e.g. postgresql://user@host:5432/db), "
            f"got {_without_password(dsn)!r}"
        )
    return dsn


def _without_password(dsn: str) -> str:
    """``scheme://user@host:port/db``: no password, no query (it may hold one)."""
    parts = urlsplit(dsn)
    user, at, hosts = parts.netloc.rpartition("@")
    user = user.partition(":")[0]
    return f"{parts.scheme}://{user}{at}{hosts}{parts.path}"


class PostgresBus(Bus):
    """A bus over PostgreSQL LISTEN/NOTIFY on ``channel`` (see the module docstring).

    - ``dsn``: a ``postgresql://`` URL, as asyncpg takes it (a password in it never shows
      in messages);
    - ``channel``: the NOTIFY channel, any name of 1 to 63 bytes (quoted in ``LISTEN``, so
      it is case-sensitive and may hold any character but NUL);
    - ``ping_interval_s``: how often the listening connection is probed with a query that
      must answer within the same time (a silently dead connection is noticed within twice
      this).

    The listening connection's ``application_name`` is :attr:`application_name` (the
    publishing one's adds `` (publish)``), so ``pg_stat_activity`` shows them.
    """

    max_message_bytes = _MAX_PAYLOAD_BYTES

    def __init__(
        self,
        dsn: str,
        *,
        channel: str = "purgatory",
        name: str = "postgres",
        ping_interval_s: float = 5.0,
        **options: Unpack[BusOptions],
    ) -> None:
        super().__init__(name=name, **options)
        self.dsn = _check_dsn(dsn)
        self.channel = _check_channel(channel)
        self.ping_interval_s = _positive("ping_interval_s", ping_interval_s)
        #: the listening connection's application_name (pg_stat_activity shows it)
        self.application_name = f"purgatory-bus {name}"[:_MAX_CHANNEL_BYTES]
        self._listener: Any = None  # asyncpg.Connection
        self._sender: Any = None
        self._lost: asyncio.Future[None] | None = None
        self._send_lock = asyncio.Lock()

    def notify_arguments(self, *keys: str) -> list[tuple[str, str]]:
        """The ``(channel, payload)`` pairs that trigger ``keys``, to send with
        ``SELECT pg_notify($1, $2)`` in your own transaction, the one that changes the
        state: the trigger is delivered when that change commits, and not at all if it
        rolls back. Every process hears it after the commit, this one included."""
        messages = encode(_TRANSACTION_SENDER, check_keys(keys), self.max_message_bytes)
        return [(self.channel, message) for message in messages]

    # -- the backend -------------------------------------------------------------------------

    async def _open(self, role: str) -> Any:
        application_name = self.application_name
        if role != "listen":
            application_name = f"{application_name[: _MAX_CHANNEL_BYTES - 10]} ({role})"
        return await asyncpg.connect(
            self.dsn,
            timeout=self.connect_timeout_s,
            server_settings={"application_name": application_name},
        )

    async def _connect(self) -> None:
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lost = lost
        self._listener = listener = await self._open("listen")

        def on_terminated(connection: object) -> None:
            if not lost.done():
                lost.set_exception(ConnectionResetError("the listening connection closed"))

        listener.add_termination_listener(on_terminated)
        # add_listener returns once LISTEN has completed: from then on, every NOTIFY
        # committed on the channel reaches this connection.
        await listener.add_listener(self.channel, self._on_notification)
        self._sender = await self._open("publish")  # ready for the first publish

    def _on_notification(self, connection: object, pid: int, channel: str, payload: str) -> None:
        self._deliver(payload)

    async def _receive(self) -> None:
        lost, listener = self._lost, self._listener
        assert lost is not None
        assert listener is not None
        while True:
            done, _ = await asyncio.wait([lost], timeout=self.ping_interval_s)
            if done:
                lost.result()  # raises why it ended
            try:
                async with asyncio.timeout(self.ping_interval_s):
                    await listener.fetchval("SELECT 1")
            except TimeoutError:
                raise ConnectionError(
                    f"the listening connection did not answer a ping within "
                    f"{self.ping_interval_s} s"
                ) from None

    async def _send(self, message: str) -> None:
        async with self._send_lock:
            sender = self._sender
            if sender is None or sender.is_closed():
                sender = await self._open("publish")
                if self._lost is None:  # disconnected meanwhile: it would outlive the bus
                    sender.terminate()
                    raise ConnectionError("the bus disconnected while publishing")
                self._sender = sender
            try:
                await sender.execute("SELECT pg_notify($1, $2)", self.channel, message)
            except BaseException:
                # A failed or cancelled send leaves the connection in an unknown state.
                if self._sender is sender:
                    self._sender = None
                sender.terminate()
                raise

    async def _disconnect(self) -> None:
        lost, self._lost = self._lost, None
        if lost is not None:
            if lost.done():
                lost.exception()  # reported already, or no longer news
            else:
                lost.set_result(None)  # ended here: terminating it is no news
        listener, sender = self._listener, self._sender
        self._listener = self._sender = None
        for connection in (listener, sender):
            if connection is not None:
                with contextlib.suppress(Exception):
                    connection.terminate()

    def _describe(self) -> str:
        return f"{_without_password(self.dsn)} channel {self.channel!r}"
