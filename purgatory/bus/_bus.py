"""Bus: triggers that cross processes, treated as hints, re-checked after every gap.

A bus carries keys, not state. When a process publishes a key, every purgatory attached to
the bus, in every process, runs ``check_and_complete(key)``: each watched operation
re-checks its own condition against the shared state. So a lost message can never lose a
wake-up as long as the bus re-checks everything after anything that may have lost one:

- after its subscription is confirmed, on the first connect and on every reconnect, every
  attached purgatory re-checks every watched key (``check_all``);
- while it is disconnected, it keeps reconnecting (jittered, capped backoff) and re-checks
  every watched key every ``recheck_interval_s``, so waiters move if the state is readable;
- ``publish`` triggers this process's purgatories at once, then sends; when the bus is down
  it raises :class:`BusUnavailable` after ``publish_timeout_s``, never returns as if sent;
- triggers of one key that arrive together cost one check (a bounded set of pending keys;
  past its bound the set gives way to one re-check of everything).

A bus also carries values, for the threshold waits (``wait_for_value``): ``publish_value``
advances a key in every process, and a purgatory attached with a ``values`` reader has the
values of its waited keys read again at every re-check, so an advance lost with a message is
found there as a trigger is. An advance only raises a value: one that arrives after a higher
one changes nothing (a truncation stays the business of the process that sees it).

A backend (Redis, PostgreSQL, Kafka, memory) implements four coroutines: connect and
subscribe, receive until the connection ends, send one message, disconnect.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import inspect
import logging
import math
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypedDict

from purgatory._lifecycle import StartClose
from purgatory._purgatory import DelayedOperationPurgatory, checked_value
from purgatory.bus._envelope import check_keys, decode, encode

logger = logging.getLogger("purgatory.bus")

DEFAULT_RECHECK_INTERVAL_S: Final = 5.0
"""How often (seconds) watched keys are re-checked while the bus is disconnected."""

ValueReader: TypeAlias = Callable[[str], "int | Awaitable[int | None] | None"]
"""Reads a key's value from the state every process shares (None: it has none yet); a
plain function or a coroutine function."""


class BusError(Exception):
    """Base of the bus's own errors."""


class BusUnavailable(BusError):
    """The bus could not reach its server in time: nothing was sent (this process's own
    purgatories were triggered all the same)."""


class BusClosed(BusError, RuntimeError):
    """The bus was closed; it cannot be attached to, published on, or started again."""


@dataclass(frozen=True, slots=True)
class BusStatistics:
    """Counters of one bus, as a frozen snapshot."""

    name: str
    connected: bool
    attached: int
    published: int  # keys and values published by this process (sent, or refused)
    publish_errors: int  # publish calls that raised BusUnavailable
    messages_sent: int
    messages_received: int  # from other processes (own messages are skipped)
    received: int  # keys received from other processes
    values_received: int  # values received from other processes
    coalesced: int  # triggers merged into a check already pending for the key
    checks: int  # check_and_complete calls the triggers ran, per purgatory
    rechecks: int  # passes that re-checked every watched key
    rechecked_keys: int
    reconnects: int  # connections made after the first
    disconnected_s: float  # seconds spent disconnected since the first connect
    pending_keys: int
    overflows: int  # times the pending set was full and gave way to a full re-check
    malformed: int  # messages that were not the bus's (each answered by a full re-check)


class BusOptions(TypedDict, total=False):
    """What every backend takes besides where to connect (see :class:`Bus`)."""

    recheck_interval_s: float
    connect_timeout_s: float
    publish_timeout_s: float
    backoff_initial_s: float
    backoff_max_s: float
    max_pending_keys: int


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


class Bus(StartClose):
    """Carries triggers between processes; see the module docstring for the guarantees.

    Use it as an async context manager (or ``await start()`` / ``await close()``).

    - ``recheck_interval_s``: while disconnected, re-check every watched key this often;
    - ``connect_timeout_s``: how long :meth:`start` tries to make the first connection
      (retrying), and how long one connection attempt may take;
    - ``publish_timeout_s``: how long :meth:`publish` waits for the bus to be connected
      and the server to take its messages before raising :class:`BusUnavailable`;
    - ``backoff_initial_s``, ``backoff_max_s``: the reconnect backoff (jittered, doubling);
    - ``max_pending_keys``: keys waiting for their check at most; past it, one full
      re-check replaces them (memory stays bounded under a flood of distinct keys).
    """

    #: the largest message the backend takes, in UTF-8 bytes
    max_message_bytes: int = 1 << 20

    def __init__(
        self,
        *,
        name: str,
        recheck_interval_s: float = DEFAULT_RECHECK_INTERVAL_S,
        connect_timeout_s: float = 5.0,
        publish_timeout_s: float = 5.0,
        backoff_initial_s: float = 0.05,
        backoff_max_s: float = 2.0,
        max_pending_keys: int = 100_000,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {name!r}")
        self.name = name
        self.recheck_interval_s = _positive("recheck_interval_s", recheck_interval_s)
        self.connect_timeout_s = _positive("connect_timeout_s", connect_timeout_s)
        self.publish_timeout_s = _positive("publish_timeout_s", publish_timeout_s)
        self.backoff_initial_s = _positive("backoff_initial_s", backoff_initial_s)
        self.backoff_max_s = _positive("backoff_max_s", backoff_max_s)
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError(
                f"backoff_max_s ({backoff_max_s}) must be >= backoff_initial_s "
                f"({backoff_initial_s})"
            )
        if isinstance(max_pending_keys, bool) or not isinstance(max_pending_keys, int):
            raise TypeError(f"max_pending_keys must be an int, got {max_pending_keys!r}")
        if max_pending_keys < 1:
            raise ValueError(f"max_pending_keys must be >= 1, got {max_pending_keys}")
        self.max_pending_keys = max_pending_keys
        #: tells this bus's own messages apart from other processes'
        self.sender_id = uuid.uuid4().hex
        self._purgatories: list[DelayedOperationPurgatory[Any]] = []
        self._readers: dict[DelayedOperationPurgatory[Any], ValueReader] = {}
        self._pending: dict[str, None] = {}
        self._recheck_wanted = False
        self._started = False
        self._closed = False
        self._connected = asyncio.Event()
        self._disconnected_at: float | None = None
        self._ever_connected = False
        self._supervisor: asyncio.Task[None] | None = None
        self._drainer: asyncio.Task[None] | None = None
        self._outage_rechecker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_error: BaseException | None = None
        self._published = self._publish_errors = self._sent = 0
        self._messages_received = self._received = self._coalesced = self._checks = 0
        self._values_received = 0
        self._rechecks = self._rechecked_keys = self._reconnects = 0
        self._overflows = self._malformed = 0
        self._disconnected_s = 0.0

    # -- what a backend implements ----------------------------------------------------------

    @abc.abstractmethod
    async def _connect(self) -> None:
        """Connect and subscribe; return once the subscription is confirmed (a message sent
        by anyone after this returns will be received). Raise if it cannot."""

    @abc.abstractmethod
    async def _receive(self) -> None:
        """Hand every message that arrives to :meth:`_deliver` until the connection ends;
        then return or raise (either way the bus reconnects)."""

    @abc.abstractmethod
    async def _send(self, message: str) -> None:
        """Send one message (at most :attr:`max_message_bytes`); raise if it was not
        accepted by the server."""

    @abc.abstractmethod
    async def _disconnect(self) -> None:
        """Close what :meth:`_connect` opened; never raises; safe to call twice."""

    @abc.abstractmethod
    def _describe(self) -> str:
        """Where the bus connects, for messages (no password)."""

    # -- the public operations -----------------------------------------------------------

    def attach(
        self, purgatory: DelayedOperationPurgatory[Any], *, values: ValueReader | None = None
    ) -> None:
        """Have every trigger on the bus run ``purgatory.check_and_complete(key)``, and
        every value published advance ``purgatory``'s key (``set_value``, when it raises
        the value).

        ``values`` reads a key's value from the shared state: at every re-check (after a
        connect, and while disconnected) each key with threshold waiters in ``purgatory``
        is read and advanced, so an advance whose message was lost still wakes its
        waiters. Without it, threshold waiters hear only the advances that arrive."""
        if self._closed:
            raise BusClosed(f"bus {self.name!r} is closed: it cannot be attached to")
        if not isinstance(purgatory, DelayedOperationPurgatory):
            raise TypeError(f"expected a DelayedOperationPurgatory, got {purgatory!r}")
        if values is not None and not callable(values):
            raise TypeError(f"values must be a function of a key, got {values!r}")
        if any(p is purgatory for p in self._purgatories):
            raise ValueError(f"{purgatory!r} is already attached to bus {self.name!r}")
        self._purgatories.append(purgatory)
        if values is not None:
            self._readers[purgatory] = values

    def detach(self, purgatory: DelayedOperationPurgatory[Any]) -> None:
        """Stop triggering ``purgatory``."""
        for i, attached in enumerate(self._purgatories):
            if attached is purgatory:
                del self._purgatories[i]
                self._readers.pop(purgatory, None)
                return
        raise ValueError(f"{purgatory!r} is not attached to bus {self.name!r}")

    async def publish(self, *keys: str) -> None:
        """Trigger ``keys`` in every attached purgatory of every process.

        This process's purgatories are triggered at once; then the keys are sent. Raises
        :class:`BusUnavailable` if the bus cannot send them within ``publish_timeout_s``
        (other processes re-check every watched key when their bus reconnects, but a
        process whose connection never dropped will not hear these keys: publish again)."""
        checked = check_keys(keys)
        messages = encode(self.sender_id, checked, self.max_message_bytes)
        self._check_started("publish on")
        self._published += len(checked)
        self._trigger(checked)
        await self._send_all(messages)

    async def _send_all(self, messages: list[str]) -> None:
        try:
            async with asyncio.timeout(self.publish_timeout_s):
                await self._connected.wait()
                for message in messages:
                    await self._send(message)
                    self._sent += 1
        except TimeoutError:
            self._publish_errors += 1
            raise BusUnavailable(self._unavailable("publish", self.publish_timeout_s)) from None
        except Exception as exc:  # the backend's own connection errors
            self._publish_errors += 1
            raise BusUnavailable(f"bus {self.name!r} could not publish: {exc}") from exc

    async def publish_value(self, key: str, value: int) -> None:
        """Advance ``key`` to ``value`` in every attached purgatory of every process: each
        runs ``set_value(key, value)`` unless its value is already at or past it, which
        completes the threshold waiters it reaches.

        This process's purgatories first, then the message; :class:`BusUnavailable` as for
        :meth:`publish` (processes attached with a ``values`` reader read the value again
        when their bus reconnects)."""
        (checked,) = check_keys([key])
        new = checked_value("value", value)
        messages = encode(self.sender_id, [(checked, new)], self.max_message_bytes)
        self._check_started("publish on")
        self._published += 1
        self._advance(checked, new)
        await self._send_all(messages)

    @property
    def connected(self) -> bool:
        """True while the subscription is confirmed and receiving."""
        return self._connected.is_set()

    def statistics(self) -> BusStatistics:
        """The counters now."""
        disconnected = self._disconnected_s
        if self._disconnected_at is not None and self._ever_connected:
            disconnected += self._now() - self._disconnected_at
        return BusStatistics(
            name=self.name,
            connected=self.connected,
            attached=len(self._purgatories),
            published=self._published,
            publish_errors=self._publish_errors,
            messages_sent=self._sent,
            messages_received=self._messages_received,
            received=self._received,
            values_received=self._values_received,
            coalesced=self._coalesced,
            checks=self._checks,
            rechecks=self._rechecks,
            rechecked_keys=self._rechecked_keys,
            reconnects=self._reconnects,
            disconnected_s=disconnected,
            pending_keys=len(self._pending),
            overflows=self._overflows,
            malformed=self._malformed,
        )

    async def start(self) -> None:
        """Connect; raise :class:`BusUnavailable` if the first connection does not succeed
        within ``connect_timeout_s`` (retrying meanwhile). Later losses are repaired in the
        background."""
        self._check_open("start")
        if self._started:
            raise RuntimeError(f"bus {self.name!r} is already started")
        self._bind_loop()
        self._started = True
        self._disconnected_at = self._now()
        self._supervisor = asyncio.get_running_loop().create_task(
            self._supervise(), name=f"purgatory-bus-{self.name}"
        )
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                await self._connected.wait()
        except TimeoutError:
            await self.close()
            raise BusUnavailable(self._unavailable("connect", self.connect_timeout_s)) from None

    async def close(self) -> None:
        """Stop receiving, finish the checks already triggered, disconnect."""
        if self._closed:
            return
        self._closed = True
        self._connected.clear()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        self._stop_outage_rechecks()
        if self._drainer is not None:
            await asyncio.shield(self._drainer)
        await self._disconnect()

    # -- receiving (called by the backends) -----------------------------------------------

    def _deliver(self, message: str | bytes) -> None:
        """One message arrived: trigger its keys, unless this bus sent it."""
        try:
            sender, keys, values = decode(message)
        except ValueError as exc:
            # Not ours, or damaged: what it meant is unknown, so check everything.
            self._malformed += 1
            if self._malformed == 1:
                logger.warning("bus %r: %s; re-checking every watched key", self.name, exc)
            self._want_recheck()
            return
        if sender == self.sender_id:
            return
        self._messages_received += 1
        self._received += len(keys)
        self._values_received += len(values)
        for key, value in values:
            self._advance(key, value)
        if keys:
            self._trigger(keys)

    def _advance(self, key: str, value: int) -> None:
        """``set_value(key, value)`` in every attached purgatory whose value it raises."""
        for purgatory in tuple(self._purgatories):
            if purgatory.closed:
                continue
            current = purgatory.value_of(key)
            if current is not None and current >= value:
                continue
            try:
                purgatory.set_value(key, value)
            except Exception:
                logger.exception("bus %r: advancing %r in %r failed", self.name, key, purgatory)

    # -- triggering ----------------------------------------------------------------------

    def _trigger(self, keys: list[str]) -> None:
        pending = self._pending
        for key in keys:
            if key in pending:
                self._coalesced += 1
            elif len(pending) < self.max_pending_keys:
                pending[key] = None
            else:
                # A flood of distinct keys: one re-check of everything covers them all.
                self._overflows += 1
                pending.clear()
                self._want_recheck()
                return
        self._ensure_drainer()

    def _want_recheck(self) -> None:
        self._recheck_wanted = True
        self._ensure_drainer()

    def _ensure_drainer(self) -> None:
        if self._drainer is None and self._loop is not None:
            self._drainer = self._loop.create_task(
                self._drain(), name=f"purgatory-bus-checks-{self.name}"
            )

    async def _drain(self) -> None:
        """Run the pending checks: a key triggered again while its check runs is checked
        once more afterwards (the trigger may have come after the check read the state)."""
        try:
            while self._pending or self._recheck_wanted:
                if self._recheck_wanted:
                    self._recheck_wanted = False
                    self._pending.clear()  # the full re-check covers them
                    await self._recheck_all()
                    continue
                batch, self._pending = self._pending, {}
                for key in batch:
                    for purgatory in tuple(self._purgatories):
                        await self._check(purgatory, key)
        finally:
            self._drainer = None

    async def _check(self, purgatory: DelayedOperationPurgatory[Any], key: Hashable) -> None:
        if purgatory.closed:
            return
        self._checks += 1
        try:
            await purgatory.check_and_complete(key)
        except Exception:
            logger.exception("bus %r: checking %r in %r failed", self.name, key, purgatory)

    async def _recheck_all(self) -> None:
        self._rechecks += 1
        for purgatory in tuple(self._purgatories):
            if purgatory.closed:
                continue
            self._rechecked_keys += purgatory.watched_keys()
            try:
                await purgatory.check_all()
            except Exception:
                logger.exception("bus %r: re-checking %r failed", self.name, purgatory)
            reader = self._readers.get(purgatory)
            if reader is not None:
                await self._reread_values(purgatory, reader)

    async def _reread_values(
        self, purgatory: DelayedOperationPurgatory[Any], reader: ValueReader
    ) -> None:
        """Read again the value of every key ``purgatory`` has threshold waiters on (keys
        a bus can carry: str) and advance it."""
        for key in purgatory.keys_with_threshold_waiters():
            if not isinstance(key, str):
                continue
            self._rechecked_keys += 1
            try:
                value = reader(key)
                if inspect.isawaitable(value):
                    value = await value
                if value is not None:
                    self._advance(key, checked_value("value", value))
            except Exception:
                logger.exception("bus %r: reading the value of %r failed", self.name, key)

    # -- the connection --------------------------------------------------------------------

    async def _supervise(self) -> None:
        """Connect, receive until the connection ends, reconnect; re-check around gaps."""
        failures = 0
        while True:
            try:
                async with asyncio.timeout(self.connect_timeout_s):
                    await self._connect()
            except Exception as exc:
                await self._disconnect()
                self._last_error = exc
                failures += 1
                await self._wait_before_retry(failures)
                continue
            failures = 0
            self._on_connected()
            try:
                await self._receive()
                self._last_error = ConnectionError("the server closed the subscription")
            except Exception as exc:
                self._last_error = exc
            self._on_disconnected()
            await self._disconnect()

    def _on_connected(self) -> None:
        now = self._now()
        if self._ever_connected:
            self._reconnects += 1
            if self._disconnected_at is not None:
                gap = now - self._disconnected_at
                self._disconnected_s += gap
                logger.warning(
                    "bus %r reconnected to %s after %.1f s; re-checking every watched key",
                    self.name,
                    self._describe(),
                    gap,
                )
        self._ever_connected = True
        self._disconnected_at = None
        self._stop_outage_rechecks()
        self._connected.set()
        # Anything published while this process was not subscribed was not heard.
        self._want_recheck()

    def _on_disconnected(self) -> None:
        self._connected.clear()
        self._disconnected_at = self._now()
        if self._loop is not None:
            self._outage_rechecker = self._loop.create_task(
                self._recheck_while_disconnected(), name=f"purgatory-bus-rechecks-{self.name}"
            )
        logger.warning(
            "bus %r lost its connection to %s (%s); reconnecting, and re-checking every "
            "watched key every %.1f s meanwhile",
            self.name,
            self._describe(),
            self._last_error,
            self.recheck_interval_s,
        )

    async def _wait_before_retry(self, failures: int) -> None:
        """Sleep a jittered backoff: doubling from ``backoff_initial_s``, capped at
        ``backoff_max_s``, between half of it and all of it (so that processes cut off
        together do not all come back in the same instant)."""
        ceiling = min(self.backoff_max_s, self.backoff_initial_s * 2 ** min(failures - 1, 30))
        await asyncio.sleep(ceiling / 2 + random.uniform(0, ceiling / 2))

    async def _recheck_while_disconnected(self) -> None:
        """Keep waiters moving while triggers cannot arrive: their state may be readable."""
        while True:
            await asyncio.sleep(self.recheck_interval_s)
            self._want_recheck()

    # -- helpers -----------------------------------------------------------------------------

    def _stop_outage_rechecks(self) -> None:
        if self._outage_rechecker is not None:
            self._outage_rechecker.cancel()
            self._outage_rechecker = None

    def _bind_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError(f"bus {self.name!r} is bound to a different event loop")

    def _now(self) -> float:
        return time.monotonic()

    def _check_started(self, doing: str) -> None:
        self._check_open(doing)
        if not self._started:
            raise RuntimeError(
                f"bus {self.name!r} is not started: use `async with bus:` or `await bus.start()`"
            )
        self._bind_loop()

    def _check_open(self, doing: str) -> None:
        if self._closed:
            raise BusClosed(f"bus {self.name!r} is closed: cannot {doing} it")

    def _unavailable(self, doing: str, waited: float) -> str:
        cause = f": {self._last_error}" if self._last_error is not None else ""
        return f"bus {self.name!r} could not {doing} {self._describe()} within {waited} s{cause}"

    def __repr__(self) -> str:
        state = "closed" if self._closed else "connected" if self.connected else "disconnected"
        return f"<{type(self).__name__} {self.name!r} {self._describe()} {state}>"
