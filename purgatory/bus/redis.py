"""RedisBus: the bus over Redis pub/sub (``PUBLISH`` / ``SUBSCRIBE`` on one channel).

Redis pub/sub keeps nothing: a message published while a subscriber is not connected is
gone. redis-py's ``PubSub`` reconnects and re-subscribes on its own when its connection
drops (even with retries disabled its failure handler reconnects once), so the app is not
told that it missed messages. This bus therefore does not use ``PubSub``: it subscribes on
one plain redis-py connection of its own that is never reconnected; when that connection
ends for any reason (server gone, killed by the server's pub/sub output-buffer limit, no
answer to a health-check PING) the bus's base reconnects on a new one and re-checks every
watched key. Publishing uses a separate client whose retries are disabled, so a failed
``PUBLISH`` raises at once instead of being retried for ever.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final, Unpack

from purgatory.bus._bus import Bus, BusOptions, _positive

try:
    from redis.asyncio import BlockingConnectionPool, Connection, Redis
    from redis.asyncio.connection import AbstractConnection, parse_url
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "RedisBus needs the redis client library: pip install 'purgatory-aio[redis]'"
    ) from exc

if TYPE_CHECKING:
    from collections.abc import Mapping

#: Redis takes strings up to 512 MB, but every subscriber's copy of a message sits in the
#: server's pub/sub output buffer (by default a client is cut off past 32 MB, or past 8 MB
#: for 60 s): 1 MiB keeps a message far below that, and keys are split over messages.
MAX_MESSAGE_BYTES: Final = 1 << 20

#: how long the subscription may stay silent before a PING checks that it is alive
DEFAULT_HEALTH_CHECK_INTERVAL_S: Final = 5.0

#: publish calls that run at once, each on its own connection (more wait their turn; the
#: URL's ``max_connections`` sets it)
DEFAULT_MAX_PUBLISH_CONNECTIONS: Final = 16

# Connection settings the bus owns, whatever the URL's query says: no retries inside
# redis-py (the bus reconnects itself, and must see every gap), its own timeouts, RESP2 and
# bytes (pub/sub replies as arrays of bytes).
_OWNED_OPTIONS: Final = (
    "retry",
    "retry_on_timeout",
    "retry_on_error",
    "socket_timeout",
    "socket_connect_timeout",
    "health_check_interval",
    "protocol",
    "decode_responses",
    "encoding",
    "encoding_errors",
    "timeout",
)


class RedisBus(Bus):
    """A bus over Redis pub/sub on ``channel`` of the server at ``url``.

    ``url`` is ``redis://[[user]:password@]host[:port][/db]`` (or ``rediss://`` for TLS,
    ``unix:///path/to/socket``). ``health_check_interval_s``: when the subscription has
    received nothing for this long, a PING checks that the server still answers; no answer
    within as long again ends the connection (and the bus reconnects and re-checks), so a
    silently dead connection is noticed within twice this interval.
    """

    max_message_bytes = MAX_MESSAGE_BYTES

    def __init__(
        self,
        url: str,
        *,
        channel: str = "purgatory",
        name: str = "redis",
        health_check_interval_s: float = DEFAULT_HEALTH_CHECK_INTERVAL_S,
        **options: Unpack[BusOptions],
    ) -> None:
        super().__init__(name=name, **options)
        if not isinstance(url, str):
            raise TypeError(f"url must be a str such as 'redis://127.0.0.1:6379/0', got {url!r}")
        if not isinstance(channel, str) or not channel:
            raise ValueError(f"channel must be a non-empty str, got {channel!r}")
        self.health_check_interval_s = _positive("health_check_interval_s", health_check_interval_s)
        scheme = url.partition(":")[0]
        try:
            parsed: dict[str, Any] = dict(parse_url(url))
        except ValueError as exc:  # the URL is not shown: it may hold a password
            raise ValueError(f"not a Redis URL (scheme {scheme!r}): {exc}") from None
        self.channel = channel
        self._where = _where(scheme, parsed)
        self._connection_class: type[AbstractConnection] = parsed.pop(
            "connection_class", Connection
        )
        for option in _OWNED_OPTIONS:
            parsed.pop(option, None)
        self._max_publish_connections: int = parsed.pop(
            "max_connections", DEFAULT_MAX_PUBLISH_CONNECTIONS
        )
        self._connection_options: Mapping[str, Any] = {
            **parsed,
            "retry": Retry(NoBackoff(), 0),
            "socket_connect_timeout": self.connect_timeout_s,
            "socket_timeout": self.publish_timeout_s,
            "protocol": 2,
        }
        try:  # an unknown option in the URL's query: say so now, not at every connect
            self._connection_class(**self._connection_options)
        except TypeError as exc:
            raise ValueError(
                f"unsupported option in the Redis URL for {self._where}: {exc}"
            ) from None
        self._subscription: AbstractConnection | None = None
        self._publisher: Redis | None = None
        # A turn at the publishing connections, first come first served: redis-py's blocking
        # pool hands a returned connection to whoever asks next, so a busy caller kept
        # taking it back while earlier callers starved into publish_timeout_s.
        self._publish_turns = asyncio.Semaphore(self._max_publish_connections)

    async def _connect(self) -> None:
        subscription = self._connection_class(**self._connection_options)
        self._subscription = subscription
        await subscription.connect()  # type: ignore[no-untyped-call]
        await subscription.send_command("SUBSCRIBE", self.channel)
        reply = await subscription.read_response(timeout=self.connect_timeout_s)
        if reply is None:
            raise TimeoutError(f"no answer to SUBSCRIBE within {self.connect_timeout_s} s")
        if not (isinstance(reply, list) and reply[:2] == [b"subscribe", self.channel.encode()]):
            raise ConnectionError(f"unexpected answer to SUBSCRIBE: {reply!r}")
        if self._publisher is None:
            pool = BlockingConnectionPool(
                connection_class=self._connection_class,
                max_connections=self._max_publish_connections,
                timeout=self.publish_timeout_s,
                **self._connection_options,
            )
            self._publisher = Redis(connection_pool=pool)

    async def _receive(self) -> None:
        subscription = self._subscription
        assert subscription is not None
        channel = self.channel.encode()
        pinged = False
        while True:
            # read_response disconnects the connection and raises on any error; the bus
            # then makes a new one, so redis-py never reconnects this one behind our back.
            reply = await subscription.read_response(timeout=self.health_check_interval_s)
            if reply is None:
                if pinged:
                    raise TimeoutError(
                        f"the subscription got no answer to PING within "
                        f"{self.health_check_interval_s} s"
                    )
                await subscription.send_command("PING")
                pinged = True
                continue
            pinged = False  # anything that arrives shows the connection is alive
            if isinstance(reply, list) and len(reply) == 3 and reply[0] == b"message":
                if reply[1] == channel:
                    self._deliver(reply[2])

    async def _send(self, message: str) -> None:
        publisher = self._publisher
        if publisher is None:
            raise ConnectionError("not connected")
        async with self._publish_turns:
            await publisher.publish(self.channel, message)

    async def _disconnect(self) -> None:
        subscription, self._subscription = self._subscription, None
        publisher, self._publisher = self._publisher, None
        if subscription is not None:
            try:
                await subscription.disconnect(nowait=True)
            except Exception:  # closing a broken socket may fail: it is closed all the same
                pass
        if publisher is not None:
            try:
                await publisher.aclose()
                await publisher.connection_pool.disconnect()
            except Exception:
                pass

    def _describe(self) -> str:
        return f"{self._where} channel {self.channel!r}"


def _where(scheme: str, options: Mapping[str, Any]) -> str:
    """The server, as a URL without user or password."""
    if scheme == "unix":
        return f"unix://{options.get('path', '')}"
    host, port, db = (
        options.get("host", "localhost"),
        options.get("port", 6379),
        options.get("db", 0),
    )
    return f"{scheme}://{host}:{port}/{db}"
