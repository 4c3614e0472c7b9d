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
import warnings
from collections.abc import Awaitable, Generator, Hashable
from typing import TYPE_CHECKING, Any, ClassVar, Final, SupportsIndex, final

from mypy_extensions import mypyc_attr

from purgatory._wheel import TimerTask

if TYPE_CHECKING:
    from purgatory._purgatory import DelayedOperationPurgatory

logger = logging.getLogger("purgatory.operation")


class OperationCancelled(Exception):
    """Raised by ``await op`` (and ``park``, ``wait_until``) when the operation was
    cancelled instead of completing: ``op.cancel()`` or ``cancel_for_key`` was called, the
    purgatory shut down, or the submitting or parking task was cancelled.
    ``from purgatory import OperationCancelled``.

    An ``Exception``, deliberately not an :class:`asyncio.CancelledError`: the *operation*
    was cancelled, not the task awaiting it. A ``CancelledError`` escaping a task marks that
    task cancelled (``task.cancelled()``, ``asyncio.gather``, ``TaskGroup`` and
    ``asyncio.timeout`` all treat it as a cancellation of the task itself)."""


class OperationState(enum.Enum):
    """Lifecycle of a DelayedOperation: pending, then exactly one final state."""

    PENDING = "pending"
    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


# Final: the compiled core keeps these in C statics instead of looking them up per use.
_PENDING: Final = OperationState.PENDING
_COMPLETED: Final = OperationState.COMPLETED
_EXPIRED: Final = OperationState.EXPIRED
_CANCELLED: Final = OperationState.CANCELLED

# Check protocol: no check running / a check running / a check running that must go again
# because a trigger arrived meanwhile (Kafka's tryCompletePending).
_IDLE: Final = 0
_CHECKING: Final = 1
_RECHECK: Final = 2

# warnings.warn's stacklevel that names the caller of the function warning: a compiled
# function has no Python frame of its own, so its caller is one level closer.
_CALLER: Final = 2 if __file__.endswith(".py") else 1


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
        "_key0",
        "_key1",
        "_key2",
        "_keys",
        "_nkeys",
        "_purgatory",
        "_state",
        "_waiters",
        "checks",
        "error",
        "started_ms",
    )

    # what on_complete/on_expiration raised; set only on failure
    _failure: BaseException
    # Up to INLINE_KEYS keys handed in as a list are held here, not in a tuple built per
    # operation: that tuple outlived nearly every young-generation collection, so it made
    # the cyclic GC run almost twice as often (see key_at and keys)
    _key0: Hashable
    _key1: Hashable
    _key2: Hashable

    #: whether ``try_complete`` is a coroutine function (computed per subclass)
    is_async: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.is_async = inspect.iscoroutinefunction(cls.try_complete)
        if "abandon" in vars(cls):
            warnings.warn(
                f"{cls.__qualname__} overrides abandon(), a deprecated alias of cancel() that "
                "the purgatory no longer calls (shutdown, cancel_for_key and cancelled callers "
                "call cancel()): override cancel() instead",
                DeprecationWarning,
                stacklevel=_CALLER,
            )

    def __init__(self, delay_ms: SupportsIndex) -> None:
        self._initialise(delay_ms)

    @final
    def _initialise(self, delay_ms: SupportsIndex) -> None:
        """What ``__init__`` does, and what the class holds as ``__init__`` (see below)."""
        TimerTask.__init__(self, delay_ms)
        self._state = _PENDING
        self._check = _IDLE
        self._waiters: list[asyncio.Future[None]] | None = None
        self._purgatory: DelayedOperationPurgatory[Any] | None = None
        self._entries = 0  # watcher-list entries that refer to this operation
        # the keys as a tuple, or None while they are held in _key0.._key2
        self._keys: tuple[Hashable, ...] | None = ()
        self._nkeys = 0
        self.checks = 0
        """How many times ``try_complete`` ran."""
        self.error: str | None = None
        """An error code your hooks may set for listeners, traces and metrics (e.g.
        ``"REQUEST_TIMED_OUT"``); None on success. The library never sets it."""
        self.started_ms = 0.0
        """When a purgatory took the operation (its clock, in milliseconds)."""

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
    def keys(self) -> tuple[Hashable, ...]:
        """The keys it is watched on, once handed to a purgatory (else empty)."""
        keys = self._keys
        if keys is None:  # built once, on the first read
            count = self._nkeys
            if count == 1:
                keys = (self._key0,)
            elif count == 2:
                keys = (self._key0, self._key1)
            else:
                keys = (self._key0, self._key1, self._key2)
            self._keys = keys
        return keys

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
        """True if the operation timed out (then ``is_completed`` is True as well)."""
        return self._state is _EXPIRED

    @property
    def is_cancelled(self) -> bool:
        """True if the operation was cancelled (``await op`` raises OperationCancelled)."""
        return self._state is _CANCELLED

    @property
    def is_done(self) -> bool:
        """True in any final state: completed, expired or cancelled."""
        return self._state is not _PENDING

    def force_complete(self) -> bool:
        """Complete now. True only for the caller that completed it."""
        return finish_operation(self, _COMPLETED)

    def run(self) -> None:
        """Expiration: the timer calls this when the delay has passed."""
        finish_operation(self, _EXPIRED)

    def cancel(self) -> bool:
        """Cancel the operation, as ``Future.cancel()`` cancels a future: it goes
        CANCELLED, leaves the timer and every watcher list (no trigger checks it again),
        ``on_complete`` and ``on_expiration`` never run, and ``await op`` raises
        :class:`OperationCancelled`. True if this call cancelled it; False if it was
        already done (completed, expired or cancelled).

        Unlike ``TimerTask.cancel()``, which only takes a plain task off its timer, this
        never leaves an operation pending without its timeout. The purgatory cancels
        through this method (shutdown, ``cancel_for_key``, a cancelled caller): an
        override that calls ``super().cancel()`` sees every cancellation."""
        return finish_operation(self, _CANCELLED)

    def abandon(self) -> bool:
        """Deprecated alias of :meth:`cancel` (``DeprecationWarning``)."""
        warnings.warn(
            "DelayedOperation.abandon() is deprecated: use cancel(), which does the same",
            DeprecationWarning,
            stacklevel=_CALLER,
        )
        return self.cancel()

    # -- checking --------------------------------------------------------------------------

    def check_now(self) -> bool:
        """Run a synchronous ``try_complete`` with the pending-check protocol.

        True if this call completed the operation.
        """
        return check_operation(self)

    async def maybe_try_complete(self) -> bool:
        """Run ``try_complete`` unless a check is already running, in which case mark a
        check pending for that one to redo. True if this call completed the operation.

        If the awaiting task is cancelled in the middle of a check, the check is handed
        to a background task of the operation's purgatory, so no trigger is lost."""
        if not self.is_async:
            return check_operation(self)
        if not may_check(self):
            return False
        try:
            while True:
                self._check = _CHECKING
                self.checks += 1
                done: object = self.try_complete()
                if inspect.isawaitable(done):
                    done = await done
                if done or self._state is not _PENDING or self._check == _CHECKING:
                    return check_result(self, done)
        except asyncio.CancelledError:
            purgatory = self._purgatory
            if purgatory is not None and self._state is _PENDING:
                purgatory._check_later(self)
            raise
        finally:
            self._check = _IDLE

    # -- awaiting ------------------------------------------------------------------------

    def __await__(self) -> Generator[Any, None, None]:
        """Wait until ``on_complete`` (and ``on_expiration``) have run."""
        if self._state is _PENDING:
            loop = asyncio.get_running_loop()
            purgatory = self._purgatory
            if purgatory is not None:
                purgatory._check_loop(loop)
            waiters = self._waiters
            if waiters is None:
                waiters = self._waiters = []
            elif waiters[0].get_loop() is not loop:
                raise RuntimeError(f"{self!r} is awaited on a different event loop")
            waiter: asyncio.Future[None] = loop.create_future()
            waiters.append(waiter)
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


# A subclass's super().__init__(delay_ms) calls what the class holds as "__init__". For the
# compiled class that is the slot wrapper of its C constructor, which packs the arguments
# into a tuple and parses them by keyword: most of what the call costs, and the call was
# most of what constructing a subclass costs above a plain object's construction. A compiled
# method is called as a fast-call method instead (see docs/performance.md, "Constructing a
# subclass"). The pure-Python build holds the same function, so both behave alike.
setattr(DelayedOperation, "__init__", DelayedOperation._initialise)  # noqa: B010


# The protocol lives in functions rather than methods: a method call on an instance of an
# interpreted subclass goes through a Python attribute lookup in the compiled build (the
# subclass might override it), a function call is a direct C call.


def finish_operation(op: DelayedOperation, state: OperationState) -> bool:
    """Move a pending ``op`` to its final ``state``, exactly once; run its callbacks, tell
    its purgatory and its awaiters. False if it was already done."""
    if op._state is not _PENDING:
        return False
    op._state = state
    if op._bucket is not None:
        # Timer-only removal (op.cancel() cancels the operation), and TimerTask._unschedule(op)
        # rather than op._unschedule(): in the compiled build a method call on an interpreted
        # subclass is a Python attribute lookup (about 10% of a completion), this is a
        # direct call (within 2% of the hand-inlined copy it replaced)
        TimerTask._unschedule(op)
    error: BaseException | None = None
    if state is not _CANCELLED:
        callback = "on_complete"
        try:
            op.on_complete()
            if state is _EXPIRED:
                callback = "on_expiration"
                op.on_expiration()
        except Exception as exc:
            error = op._failure = exc
            report_callback_error(op, exc, callback)
    purgatory = op._purgatory
    if purgatory is not None:
        purgatory._operation_finished(op)
    waiters = op._waiters
    if waiters is not None:
        op._waiters = None
        for waiter in waiters:
            if waiter.done():
                continue
            if error is not None:
                waiter.set_exception(error)
            elif state is _CANCELLED:
                waiter.set_exception(OperationCancelled(f"{op!r} was cancelled"))
            else:
                waiter.set_result(None)
    return True


def check_operation(op: DelayedOperation) -> bool:
    """``op.check_now()``: a synchronous check under the pending-check protocol."""
    if not may_check(op):
        return False
    try:
        while True:
            op._check = _CHECKING
            op.checks += 1
            # object, not the declared bool: a None from a user's override must behave the
            # same in the compiled build (which would otherwise reject it) as interpreted
            done: object = op.try_complete()
            if type(done) is not bool and inspect.isawaitable(done):
                _discard(done)
                raise TypeError(
                    f"{type(op).__name__}.try_complete returned an awaitable: "
                    "declare it 'async def' or await it through maybe_try_complete()"
                )
            if done or op._state is not _PENDING or op._check == _CHECKING:
                return check_result(op, done)
    finally:
        op._check = _IDLE


#: How many keys an operation holds in itself when they are handed in as a list.
INLINE_KEYS: Final = 3


def hold_keys(op: DelayedOperation, keys: list[Hashable]) -> None:
    """Hold ``keys`` (1 to INLINE_KEYS of them, each hashable) in ``op`` itself."""
    count = len(keys)
    op._key0 = keys[0]
    if count > 1:
        op._key1 = keys[1]
        if count > 2:
            op._key2 = keys[2]
    op._keys = None
    op._nkeys = count


def key_at(op: DelayedOperation, index: int) -> Hashable:
    """``op.keys[index]``, without building the tuple of keys."""
    keys = op._keys
    if keys is not None:
        return keys[index]
    if index == 0:
        return op._key0
    return op._key1 if index == 1 else op._key2


def may_check(op: DelayedOperation) -> bool:
    """Whether a check of ``op`` may start now: not if it is done, nor while another check
    runs (which is then told to go again, so the trigger is not lost)."""
    if op._state is not _PENDING:
        return False
    if op._check != _IDLE:
        op._check = _RECHECK
        return False
    return True


def check_result(op: DelayedOperation, done: object) -> bool:
    """Whether a finished check completed ``op``: its ``try_complete`` said so and it is
    no longer pending. A truthy answer for a pending op is a bug in the subclass."""
    if not done:
        return False
    if op._state is _PENDING:
        _warn_still_pending(type(op), done)
        return False
    return True


_warned_still_pending: set[type] = set()


def _warn_still_pending(cls: type, done: object) -> None:
    if cls in _warned_still_pending:
        return
    _warned_still_pending.add(cls)
    logger.warning(
        "%s.try_complete returned %r but the operation is still pending: when the condition "
        "holds, complete it with 'return self.force_complete()' (logged once per class)",
        cls.__qualname__,
        done,
    )


def report_callback_error(op: DelayedOperation, exc: BaseException, where: str) -> None:
    """Log and count an exception raised by one of ``op``'s callbacks."""
    purgatory = op._purgatory
    if purgatory is not None:
        purgatory._callback_errors += 1
    logger.error("%r: %s raised", op, where, exc_info=exc)


def _discard(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
