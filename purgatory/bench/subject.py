"""The purgatory under test, behind the same interface as the baselines."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, final

from purgatory._operation import DelayedOperation
from purgatory._purgatory import DelayedOperationPurgatory
from purgatory.bench.workload import Tally


class FakeOperation(DelayedOperation):
    """Kafka's FakeOperation: only the completion driver completes it (``try_complete``
    never succeeds), otherwise it expires."""

    __slots__ = ("deadline_ms", "reported", "tally")

    def __init__(self, delay_ms: int, deadline_ms: float, tally: Tally) -> None:
        super().__init__(delay_ms)
        self.deadline_ms = deadline_ms
        self.tally = tally
        self.reported = False

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        if self.reported:
            self.tally.on_duplicate()
            return
        self.reported = True
        if not self.is_expired:
            self.tally.on_completed()

    def on_expiration(self) -> None:
        self.tally.on_expired(self.deadline_ms)


@final
class PurgatoryImplementation:
    """``try_complete_else_watch`` to watch, ``force_complete`` from the completion driver.

    With ``nowait=True`` it watches through ``try_complete_else_watch_nowait`` (the
    synchronous entry point for operations whose ``try_complete`` is sync), which shows
    what the coroutine of the async entry point costs.
    """

    def __init__(
        self,
        tally: Tally,
        timeout_ms: int,
        *,
        tick_ms: int = 1,
        wheel_size: int = 20,
        purge_interval: int = 1000,
        nowait: bool = False,
    ) -> None:
        self.name = "purgatory-nowait" if nowait else "purgatory"
        self.watch_is_async = not nowait
        self._tally = tally
        self._timeout_ms = timeout_ms
        self.purgatory: DelayedOperationPurgatory[FakeOperation] = DelayedOperationPurgatory(
            "bench", purge_interval=purge_interval, tick_ms=tick_ms, wheel_size=wheel_size
        )
        # bound once: the runner calls these 200k times
        self.watch: Callable[[Any, list[str]], Awaitable[object] | None] = (
            self.purgatory.try_complete_else_watch
        )
        if nowait:
            nowait_watch = getattr(self.purgatory, "try_complete_else_watch_nowait", None)
            if nowait_watch is None:
                raise RuntimeError("this purgatory has no try_complete_else_watch_nowait")
            self.watch = nowait_watch
        self.complete: Callable[[Any], object] = FakeOperation.force_complete

    def new_op(self, deadline_ms: float) -> FakeOperation:
        return FakeOperation(self._timeout_ms, deadline_ms, self._tally)

    async def start(self) -> None:
        await self.purgatory.start()

    async def stop(self) -> None:
        await self.purgatory.shutdown()

    def expires(self) -> bool:
        return True
