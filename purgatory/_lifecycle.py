"""``async with`` for the objects that are started and closed: the trigger bus, the
simulated cluster and the embedded Kafka share one definition of it.

(The purgatory spells it out itself: it is in the core that mypyc compiles, whose classes
do not inherit from interpreted ones, and it exits with ``shutdown()``.)"""

from __future__ import annotations

import abc
from typing import Self


class StartClose(abc.ABC):
    """``async with obj:`` awaits ``obj.start()`` on entry and ``obj.close()`` on exit,
    also when the body raises."""

    __slots__ = ()

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
