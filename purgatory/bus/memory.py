"""MemoryBus: the bus inside one process, for tests and single-worker apps.

Buses made with one :class:`MemoryHub` hear each other as processes sharing a server
would; ``hub.stop()`` and ``hub.start()`` play a server outage, so a test can check what an
app does when its bus goes down, with no server to run.
"""

from __future__ import annotations

import asyncio
from typing import Unpack

from purgatory.bus._bus import Bus, BusOptions


class MemoryHub:
    """What the buses made with it share: the subscriptions, and whether it is up."""

    def __init__(self) -> None:
        self._subscribers: dict[MemoryBus, asyncio.Future[None]] = {}
        self._up = True

    @property
    def up(self) -> bool:
        return self._up

    def stop(self) -> None:
        """An outage: every subscription ends and nothing connects or sends until
        :meth:`start`."""
        self._up = False
        subscribers, self._subscribers = self._subscribers, {}
        for lost in subscribers.values():
            if not lost.done():
                lost.set_exception(ConnectionResetError("the memory hub stopped"))

    def start(self) -> None:
        """The end of an outage: buses reconnect on their own (and re-check)."""
        self._up = True

    def _check_up(self) -> None:
        if not self._up:
            raise ConnectionRefusedError("the memory hub is stopped")

    def _subscribe(self, bus: MemoryBus) -> asyncio.Future[None]:
        self._check_up()
        lost = asyncio.get_running_loop().create_future()
        self._subscribers[bus] = lost
        return lost

    def _unsubscribe(self, bus: MemoryBus) -> None:
        lost = self._subscribers.pop(bus, None)
        if lost is not None and not lost.done():
            lost.cancel()

    def _send(self, message: str) -> None:
        self._check_up()
        for bus in list(self._subscribers):
            bus._deliver(message)


class MemoryBus(Bus):
    """A bus within one process and one event loop; see :class:`MemoryHub` for several."""

    def __init__(
        self,
        hub: MemoryHub | None = None,
        *,
        name: str = "memory",
        **options: Unpack[BusOptions],
    ) -> None:
        super().__init__(name=name, **options)
        if hub is not None and not isinstance(hub, MemoryHub):
            raise TypeError(f"hub must be a MemoryHub, got {hub!r}")
        self.hub = hub if hub is not None else MemoryHub()
        self._lost: asyncio.Future[None] | None = None

    async def _connect(self) -> None:
        self._lost = self.hub._subscribe(self)

    async def _receive(self) -> None:
        assert self._lost is not None
        await self._lost

    async def _send(self, message: str) -> None:
        self.hub._send(message)

    async def _disconnect(self) -> None:
        self.hub._unsubscribe(self)
        self._lost = None

    def _describe(self) -> str:
        return f"memory hub {id(self.hub):#x}"
