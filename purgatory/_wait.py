"""Keyed waits without subclassing: the operations behind ``purgatory.wait_until`` and
``purgatory.wait_for_value``.

A wait is a :class:`~purgatory.DelayedOperation` whose condition is the caller's predicate.
A predicate that raises ends the wait: the exception reaches the waiting caller instead of
being logged and retried on every trigger.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import SupportsIndex

from purgatory._operation import DelayedOperation

#: ``predicate()`` returns a bool, or is an ``async def`` returning one
Predicate = Callable[[], bool] | Callable[[], Awaitable[bool]]


class PredicateWait(DelayedOperation):
    """Completes when a synchronous predicate holds."""

    def __init__(self, predicate: Callable[[], object], timeout_ms: SupportsIndex) -> None:
        super().__init__(timeout_ms)
        self.predicate = predicate
        #: what the predicate raised, if it did
        self.raised: Exception | None = None

    def try_complete(self) -> bool:
        try:
            held = self.predicate()
            if inspect.isawaitable(held):
                _close(held)
                raise TypeError(
                    f"wait_until: predicate {self.predicate!r} returned an awaitable; "
                    "pass an 'async def' function (or a sync one returning a bool)"
                )
        except Exception as exc:
            self.raised = exc
            return self.force_complete()
        return self.force_complete() if held else False

    def outcome(self) -> bool:
        """True if the predicate held, False if the wait timed out; re-raises its error."""
        if self.raised is not None:
            raise self.raised
        return not self.is_expired


class AsyncPredicateWait(PredicateWait):
    """Completes when an ``async def`` predicate holds."""

    async def try_complete(self) -> bool:  # type: ignore[override]
        try:
            held = await self.predicate()  # type: ignore[misc]
        except Exception as exc:
            self.raised = exc
            return self.force_complete()
        return self.force_complete() if held else False


class ThresholdWait(DelayedOperation):
    """The operation behind ``wait_for_value``: the purgatory completes it when its key's
    value reaches its threshold, so it has no condition of its own to check."""

    def try_complete(self) -> bool:
        return False


def predicate_wait(predicate: Predicate, timeout_ms: SupportsIndex) -> PredicateWait:
    """The wait operation for ``predicate``, checked before anything is registered."""
    if not callable(predicate):
        raise TypeError(f"wait_until: predicate must be callable, got {predicate!r}")
    if inspect.iscoroutinefunction(predicate):
        return AsyncPredicateWait(predicate, timeout_ms)
    return PredicateWait(predicate, timeout_ms)


def _close(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
