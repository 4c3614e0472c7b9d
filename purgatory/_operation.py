"""DelayedOperation: an operation that completes when its condition holds, or expires.

Kafka's thread semantics, translated to asyncio:

* ``force_complete`` is exactly-once. Single-threaded asyncio makes the state change atomic.
* ``try_complete`` may be ``async def``. At most one check of an op runs at a time; a
  trigger that arrives during a check marks "check pending" and the running check goes
  again when it finishes (Kafka's tryCompletePending), so no trigger is lost and nobody
  waits for somebody else's check.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable, Generator, Hashable
from typing import TYPE_CHECKING, Any, ClassVar, SupportsIndex

from mypy_extensions import mypyc_attr

from purgatory._wheel import TimerTask, validate_delay

if TYPE_CHECKING:
    from purgatory._purgatory import DelayedOperationPurgatory

logger = logging.getLogger("purgatory.operation")


class OperationCancelled(Exception):
    """Raised by ``await op`` when the operation was dropped (e.g. purgatory shutdown)."""


class OperationState(enum.Enum):
    """Lifecycle of a DelayedOperation: pending, then exactly one final state."""

    PENDING = "pending"
    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


_PENDING = OperationState.PENDING
_COMPLETED = OperationState.COMPLETED
_EXPIRED = OperationState.EXPIRED
_CANCELLED = OperationState.CANCELLED

# Check protocol: no check running / a check running / a check running that must go again
# because a trigger arrived meanwhile (Kafka's tryCompletePending).
_IDLE = "idle"
_CHECKING = "checking"
_RECHECK = "recheck"


@mypyc_attr(allow_interpreted_subclasses=True)
class DelayedOperation(TimerTask):
    """Subclass and implement ``try_complete``, ``on_complete`` and ``on_expiration``.

    ``try_complete`` checks the condition and, if it holds, returns
    ``self.force_complete()``; it may be a coroutine function.
    """

    __slots__ = (
        "_check",
        "_entries",
        "_failure",
        "_purgatory",
        "_state",
        "_waiters",
        "checks",
        "error",
        "keys",
        "started_ms",
    )

    #: whether ``try_complete`` is a coroutine function (computed per subclass)
    is_async: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.is_async = inspect.iscoroutinefunction(cls.try_complete)

    def __init__(self, delay_ms: SupportsIndex) -> None:
        # TimerTask.__init__, inlined: every request builds one of these
        self._delay_ms = delay_ms if delay_ms.__class__ is int else validate_delay(delay_ms)
        self._bucket = None
        self.expiration_ms = -1
        self._state = _PENDING
        self._check = _IDLE
        self._waiters: list[asyncio.Future[None]] | None = None
        self._purgatory: DelayedOperationPurgatory[Any] | None = None
        self._entries = 0  # watcher-list entries that refer to this operation
        # (slot _failure, what on_complete/on_expiration raised, is set only on failure)
        #: the keys it is watched on, once handed to a purgatory
        self.keys: tuple[Hashable, ...] = ()
        #: how many times try_complete ran
        self.checks = 0
        #: an error code for traces and metrics (e.g. "REQUEST_TIMED_OUT"); None on success
        self.error: str | None = None
        #: when a purgatory started watching it (purgatory clock, ms)
        self.started_ms = 0.0

    # -- user hooks ----------------------------------------------------------------------

    def try_complete(self) -> bool | Awaitable[bool]:
        """Check the condition; if met, ``return self.force_complete()``."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """Called exactly once, when the operation completes or expires."""

    def on_expiration(self) -> None:
        """Called after ``on_complete`` when the operation timed out."""

    # -- state ---------------------------------------------------------------------------

    @property
    def operation_state(self) -> OperationState:
        """Lifecycle state (named so as to leave ``state`` free for subclasses)."""
        return self._state

    @property
    def is_completed(self) -> bool:
        """True once completed or expired (Kafka's isCompleted)."""
        return self._state is _COMPLETED or self._state is _EXPIRED

    @property
    def is_expired(self) -> bool:
        return self._state is _EXPIRED

    @property
    def is_cancelled(self) -> bool:
        return self._state is _CANCELLED

    @property
    def is_done(self) -> bool:
        """True in any final state: completed, expired or cancelled."""
        return self._state is not _PENDING

    def force_complete(self) -> bool:
        """Complete now. True only for the caller that completed it."""
        return self._finish(_COMPLETED)

    def run(self) -> None:
        """Expiration: the timer calls this when the delay has passed."""
        self._finish(_EXPIRED)

    def abandon(self) -> bool:
        """Drop the operation: it neither completes nor expires; ``await op`` raises
        :class:`OperationCancelled`. True if it was pending."""
        return self._finish(_CANCELLED)

    def _finish(self, state: OperationState) -> bool:
        if self._state is not _PENDING:
            return False
        self._state = state
        bucket = self._bucket
        if bucket is not None:  # self.cancel(), inlined: remove the timer entry
            prev = self._prev
            nxt = self._next
            prev._next = nxt
            nxt._prev = prev
            self._bucket = None
            bucket.core._size -= 1
        error: BaseException | None = None
        if state is not _CANCELLED:
            callback = "on_complete"
            try:
                self.on_complete()
                if state is _EXPIRED:
                    callback = "on_expiration"
                    self.on_expiration()
            except Exception as exc:
                error = self._failure = exc
                self._report_error(exc, callback)
        purgatory = self._purgatory
        if purgatory is not None:
            purgatory._operation_finished(self)
        waiters = self._waiters
        if waiters is not None:
            self._waiters = None
            for waiter in waiters:
                if waiter.done():
                    continue
                if error is not None:
                    waiter.set_exception(error)
                elif state is _CANCELLED:
                    waiter.set_exception(OperationCancelled(f"{self!r} was cancelled"))
                else:
                    waiter.set_result(None)
        return True

    def _report_error(self, exc: BaseException, where: str) -> None:
        purgatory = self._purgatory
        if purgatory is not None:
            purgatory._callback_errors += 1
        logger.error("%r: %s raised", self, where, exc_info=exc)

    # -- checking --------------------------------------------------------------------------

    def check_now(self) -> bool:
        """Run a synchronous ``try_complete`` with the pending-check protocol.

        True if this call completed the operation.
        """
        if self._state is not _PENDING:
            return False
        if self._check is not _IDLE:
            self._check = _RECHECK
            return False
        try:
            while True:
                self._check = _CHECKING
                self.checks += 1
                done = self.try_complete()
                if done.__class__ is not bool and inspect.isawaitable(done):
                    _discard(done)
                    raise TypeError(
                        f"{type(self).__name__}.try_complete returned an awaitable: "
                        "declare it 'async def' or await it through maybe_try_complete()"
                    )
                if done or self._state is not _PENDING or self._check is _CHECKING:
                    return bool(done) and self._state is not _PENDING
        finally:
            self._check = _IDLE

    async def maybe_try_complete(self) -> bool:
        """Run ``try_complete`` unless a check is already running, in which case mark a
        check pending for that one to redo. True if this call completed the operation."""
        if not self.is_async:
            return self.check_now()
        if self._state is not _PENDING:
            return False
        if self._check is not _IDLE:
            self._check = _RECHECK
            return False
        try:
            while True:
                self._check = _CHECKING
                self.checks += 1
                done = self.try_complete()
                if inspect.isawaitable(done):
                    done = await done
                if done or self._state is not _PENDING or self._check is _CHECKING:
                    return bool(done) and self._state is not _PENDING
        finally:
            self._check = _IDLE

    # -- awaiting ------------------------------------------------------------------------

    def __await__(self) -> Generator[Any, None, None]:
        """Wait until ``on_complete`` (and ``on_expiration``) have run."""
        if self._state is _PENDING:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            if self._waiters is None:
                self._waiters = [waiter]
            else:
                self._waiters.append(waiter)
            yield from waiter.__await__()
        elif self._state is _CANCELLED:
            raise OperationCancelled(f"{self!r} was cancelled")
        else:
            failure: BaseException | None = getattr(self, "_failure", None)
            if failure is not None:
                raise failure

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self._state.value} delay={self._delay_ms}ms "
            f"checks={self.checks}>"
        )


def _discard(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
