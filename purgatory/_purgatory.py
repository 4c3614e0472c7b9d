"""DelayedOperationPurgatory: watcher lists per key plus a timer for timeouts.

Operations wait here until ``check_and_complete(key)`` finds their condition met, or until
their delay passes and the reaper expires them. Watcher lists are plain lists (append is
the cheapest watch); completed operations are dropped lazily, by the next check of the
key or by a purge, which runs in slices so that it never stalls expirations.

Threshold waits (``watch_threshold``, ``wait_for_value``, ``set_value``) skip the checks
altogether: each key holds an integer value and a heap of its waiters ordered by threshold,
and setting the value pops exactly the waiters it reaches (O(log n) each). Their finished
entries are dropped the same lazy way: when they reach the top of the heap, or by a purge.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import operator
from collections.abc import Hashable, Iterable, Mapping
from types import MappingProxyType, TracebackType
from typing import Final, Generic, Self, SupportsIndex, TypeVar, cast, final

from purgatory._clock import Clock
from purgatory._operation import (
    INLINE_KEYS,
    DelayedOperation,
    OperationState,
    check_operation,
    hold_keys,
    key_at,
    report_callback_error,
)
from purgatory._outcomes import Listener, OperationRecord, PurgatoryStatistics
from purgatory._timer import SystemTimer
from purgatory._wait import Predicate, ThresholdWait, predicate_wait
from purgatory._wheel import checked_int

logger = logging.getLogger("purgatory")

Op = TypeVar("Op", bound=DelayedOperation)

# Watcher-list entries a purge handles before yielding to the loop.
PURGE_SLICE: Final = 4096

_PENDING: Final = OperationState.PENDING

# A threshold waiter in its key's heap: (threshold, sequence number, operation). The
# sequence number breaks ties in arrival order, so operations are never compared.
ThresholdEntry = tuple[int, int, DelayedOperation]

# None outside a loop. It costs about 300 ns on Python 3.11, more than a whole watch, so the
# hot paths call it only while no reaper runs: on first use, or once the loop that ran the
# reaper has torn it down (what a second asyncio.run finds).
_running_loop: Final = asyncio._get_running_loop


@final
class DelayedOperationPurgatory(Generic[Op]):
    """Holds delayed operations, completes them on triggers, expires them on time."""

    def __init__(
        self,
        name: str,
        *,
        purge_interval: SupportsIndex = 1000,
        reaper_enabled: bool = True,
        timer_enabled: bool = True,
        tick_ms: SupportsIndex = 1,
        wheel_size: SupportsIndex = 20,
        clock: Clock | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {name!r}")
        checked_labels = check_labels(labels)
        for flag, value in (("reaper_enabled", reaper_enabled), ("timer_enabled", timer_enabled)):
            if not isinstance(value, bool):
                raise TypeError(f"{flag} must be a bool, got {value!r}")
        self.name = name
        #: what tells this purgatory apart from others of the same name (say, the broker
        #: it belongs to); metrics and traces carry them
        self.labels: Mapping[str, str] = checked_labels
        self.purge_interval = checked_int("purge_interval", purge_interval, 0)
        self.reaper_enabled = reaper_enabled
        self.timer_enabled = timer_enabled
        self.timer = SystemTimer(name, tick_ms, wheel_size, clock=clock)
        self._watchers: dict[Hashable, list[Op]] = {}
        self._watched = 0  # entries across all watcher lists and threshold heaps
        # threshold waits: each key's value, and its waiters in a heap by threshold
        self._values: dict[Hashable, int] = {}
        self._thresholds: dict[Hashable, list[ThresholdEntry]] = {}
        self._threshold_seq = 0
        # Entries of finished operations still in some list. Kafka estimates this as
        # estimatedTotalOperations - numDelayed (in operations); counting entries exactly
        # bounds `watched` by purge_interval whatever the number of keys per operation.
        self._stale_entries = 0
        self._listeners: list[Listener] = []
        self._reaper: asyncio.Task[None] | None = None
        self._purger: asyncio.Task[None] | None = None
        # checks running on their own: async checks started by *_nowait, and checks handed
        # over by a caller cancelled in the middle of them
        self._background: set[asyncio.Task[bool]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None  # bound on first use
        self._closed = False
        self._completed = 0
        self._expired = 0
        self._cancelled = 0
        self._callback_errors = 0
        self._purges = 0
        self._purged_entries = 0

    # -- the public operations -----------------------------------------------------------

    async def try_complete_else_watch(self, op: Op, keys: Iterable[Hashable]) -> bool:
        """Try to complete ``op``; if it cannot complete yet, watch it on every key and
        time it out after ``op.delay_ms``. True if it completed during this call."""
        self._register(op, keys)
        if not op.is_async:
            return self._check_else_watch(op)
        if await self._try_or_cancel(op):
            return True
        if self._closed:
            op.cancel()
            return False
        self._watch(op)
        # The first check awaited before the op was watched: a trigger may have come and
        # gone meanwhile, so check again now that every trigger will find it.
        if await self._try_or_cancel(op):
            return True
        self._schedule_timeout(op, self.timer.now_ms())
        return False

    async def park(self, op: Op, keys: Iterable[Hashable]) -> Op:
        """Hand ``op`` in (:meth:`try_complete_else_watch`) and wait until its
        ``on_complete`` has run; return ``op``.

        If the calling task is cancelled, ``op`` is cancelled. Raises
        :class:`~purgatory.OperationCancelled` if the op was cancelled (e.g. by
        :meth:`shutdown`), and whatever ``on_complete``/``on_expiration`` raised.
        """
        await self.try_complete_else_watch(op, keys)
        try:
            await op
        except asyncio.CancelledError:
            op.cancel()
            raise
        return op

    async def wait_until(
        self, predicate: Predicate, keys: Iterable[Hashable], timeout_ms: SupportsIndex
    ) -> bool:
        """Wait until ``predicate()`` holds: True as soon as it does, False once
        ``timeout_ms`` has passed.

        ``predicate`` (a function, or an ``async def``) is checked at once and on every
        :meth:`check_and_complete` of one of ``keys``. Cancelling the caller removes the
        wait; :class:`~purgatory.OperationCancelled` on shutdown; an exception raised by
        the predicate ends the wait and is raised here.
        """
        wait = predicate_wait(predicate, timeout_ms)
        await self.park(cast(Op, wait), keys)
        return wait.outcome()

    # -- threshold waits ---------------------------------------------------------------------

    def watch_threshold(self, op: Op, key: Hashable, threshold: SupportsIndex) -> bool:
        """Complete ``op`` (``force_complete``) once ``key``'s value reaches ``threshold``
        (value >= threshold, see :meth:`set_value`); time it out after ``op.delay_ms``.
        True if the value already reaches it: ``op`` completed during this call and is not
        watched. Its ``try_complete`` is never called: the threshold is its condition.

        ``threshold`` is an int (a bool or a float is a ``TypeError``). Nothing is
        registered if an argument is refused."""
        bound = checked_value("threshold", threshold)
        values = self._values
        heaps = self._thresholds
        value = values.get(key)  # a key that cannot be hashed or compared fails here
        heap = heaps.get(key)
        self._register(op, (key,))
        op.checks += 1
        if value is not None and value >= bound:
            op.force_complete()
            return True
        self._threshold_seq += 1
        entry = (bound, self._threshold_seq, cast(DelayedOperation, op))
        if heap is None:
            try:
                heaps[key] = [entry]
            except BaseException:  # a key's __eq__ raised: the op is free again
                release(op)
                raise
        else:
            heapq.heappush(heap, entry)
        op._entries = 1
        self._watched += 1
        self._schedule_timeout(op, op.started_ms)  # no await since _register read the clock
        return False

    async def wait_for_value(
        self, key: Hashable, threshold: SupportsIndex, timeout_ms: SupportsIndex
    ) -> bool:
        """Wait until ``key``'s value reaches ``threshold`` (value >= threshold, see
        :meth:`set_value`): True as soon as it does (at once if it already does), False
        once ``timeout_ms`` has passed.

        Cancelling the caller removes the wait; :class:`~purgatory.OperationCancelled` on
        shutdown. Unlike :meth:`wait_until` nothing is checked per waiter: a
        :meth:`set_value` completes exactly the waiters it reaches."""
        wait = ThresholdWait(timeout_ms)
        if self.watch_threshold(cast(Op, wait), key, threshold):
            return True
        try:
            await wait
        except asyncio.CancelledError:
            wait.cancel()
            raise
        return not wait.is_expired

    def set_value(self, key: Hashable, value: SupportsIndex) -> int:
        """Set ``key``'s value and complete every threshold waiter of ``key`` it reaches
        (threshold <= value), in threshold order; return how many this call completed.

        The value may go down (a truncation): it is lowered, no waiter completes, and the
        waiters stay until a later value reaches them. ``value`` is an int (a bool or a
        float is a ``TypeError``, and nothing changes)."""
        new = checked_value("value", value)
        if self._reaper is None:
            self._check_loop(_running_loop())
        self._values[key] = new
        heaps = self._thresholds
        heap = heaps.get(key)
        if not heap or heap[0][0] > new:
            return 0
        completed = 0
        pop = heapq.heappop
        while heap and heap[0][0] <= new:
            op = pop(heap)[2]
            self._watched -= 1
            if op._state is _PENDING:
                op._entries = 0  # its one entry is gone: nothing stale left behind
                op.checks += 1
                if op.force_complete():
                    completed += 1
                if heaps.get(key) is not heap:  # on_complete ran cancel_for_key(key)
                    return completed
            else:
                self._stale_entries -= 1
        if not heap:
            del heaps[key]
        return completed

    def value_of(self, key: Hashable) -> int | None:
        """``key``'s value (the last :meth:`set_value`), or None if it has none."""
        return self._values.get(key)

    def forget_value(self, key: Hashable) -> int | None:
        """Forget ``key``'s value (say, the key was deleted) and return it; its waiters
        stay, waiting for a :meth:`set_value` that reaches them."""
        return self._values.pop(key, None)

    def try_complete_else_watch_nowait(self, op: Op, keys: Iterable[Hashable]) -> bool:
        """The synchronous core of :meth:`try_complete_else_watch`, for operations whose
        ``try_complete`` is not async. No await happens between the check and the watch,
        so no trigger can fall in between and one check suffices."""
        self._register(op, keys)
        if op.is_async:
            op._purgatory = None
            raise TypeError(f"{type(op).__name__}.try_complete is async: use the async method")
        return self._check_else_watch(op)

    def _check_else_watch(self, op: Op) -> bool:
        """Check a registered synchronous op once; if it is not done, watch it."""
        try:
            if check_operation(op):
                return True
        except Exception as exc:
            report_callback_error(op, exc, "try_complete")
        self._watch(op)
        self._schedule_timeout(op, op.started_ms)  # no await since _register read the clock
        return False

    async def check_and_complete(self, key: Hashable) -> int:
        """Check every operation watched on ``key``; return how many *this call* completed
        (operations completed meanwhile by someone else are not counted). Completed ones
        leave the key's watcher list; a key whose list empties is dropped."""
        ops = self._watch_list(key)
        if ops is None:
            return 0
        completed = 0
        stale = False
        pending = ops[:]  # a copy: checks may await while others append to the list
        for i, op in enumerate(pending):
            if op._state is not _PENDING:
                stale = True
            elif op.is_async:
                try:
                    done = await self._try(op)
                except BaseException:
                    # Cancelled: the ops not checked yet are checked in the background,
                    # so this trigger is not lost (the interrupted one hands itself over).
                    for later in pending[i + 1 :]:
                        if later._state is _PENDING:
                            self._check_later(later)
                    raise
                if done:
                    completed += 1
            elif self._try_now(op):
                completed += 1
        if stale or completed:  # finished operations leave the list
            self._compact(key)
        return completed

    def check_and_complete_nowait(self, key: Hashable) -> int:
        """The synchronous core of :meth:`check_and_complete`: checks synchronous operations
        now and returns how many completed; checks of async operations on the key are
        started as tasks (not counted)."""
        ops = self._watch_list(key)
        if ops is None:
            return 0
        completed = 0
        stale = False
        for op in ops[:]:  # a check may trigger other keys, which may append here
            if op._state is not _PENDING:
                stale = True
            elif op.is_async:
                self._check_later(op)
            elif self._try_now(op):
                completed += 1
        if stale or completed:
            self._compact(key)
        return completed

    async def check_all(self) -> int:
        """:meth:`check_and_complete` every watched key; return how many operations this
        call completed. For whoever may have missed triggers (a bus that lost its
        connection): the operations' own conditions say which are done."""
        completed = 0
        for key in list(self._watchers):  # a copy: checks may add and drop keys
            completed += await self.check_and_complete(key)
        return completed

    def _watch_list(self, key: Hashable) -> list[Op] | None:
        """The watcher list of ``key``, if any (a trigger's first step: check the loop)."""
        if self._reaper is None:
            self._check_loop(_running_loop())
        return self._watchers.get(key)

    def cancel_for_key(self, key: Hashable) -> list[Op]:
        """Cancel every pending operation watched on ``key`` (each as ``op.cancel()``
        does: it leaves the timer and all its keys, ``await op`` raises
        :class:`~purgatory.OperationCancelled`) and drop the key's watcher list. Returns
        the operations it cancelled."""
        ops = self._watchers.pop(key, [])
        heap = self._thresholds.pop(key, None)
        if heap is not None:
            ops.extend(cast(Op, entry[2]) for entry in heap)
        self._watched -= len(ops)
        cancelled = []
        for op in ops:
            if op._state is _PENDING:
                # this entry is gone with the list; cancelling marks the op's entries
                # under its other keys stale
                op._entries -= 1
                op.cancel()
                cancelled.append(op)
            else:
                self._stale_entries -= 1
        return cancelled

    @property
    def watched(self) -> int:
        """Entries across all watcher lists (may count completed ops not yet purged)."""
        return self._watched

    @property
    def num_delayed(self) -> int:
        """Operations waiting in the timer."""
        return self.timer.size

    @property
    def closed(self) -> bool:
        """True once :meth:`shutdown` has run."""
        return self._closed

    def pending_operations(self) -> list[Op]:
        """Every watched operation still pending, once each (for metrics and debugging;
        it walks the watcher lists, so it costs one step per watched entry)."""
        seen: set[int] = set()
        pending: list[Op] = []
        for ops in list(self._watchers.values()):  # a copy: safe from a scraping thread too
            for op in ops[:]:
                if op._state is _PENDING and id(op) not in seen:
                    seen.add(id(op))
                    pending.append(op)
        for heap in list(self._thresholds.values()):
            for entry in heap[:]:
                waiter = entry[2]
                if waiter._state is _PENDING:  # in one heap only: no duplicates
                    pending.append(cast(Op, waiter))
        return pending

    def watched_keys(self) -> int:
        """How many keys have a watcher list."""
        return len(self._watchers)

    def threshold_keys(self) -> int:
        """How many keys have threshold waiters."""
        return len(self._thresholds)

    def keys_with_threshold_waiters(self) -> list[Hashable]:
        """The keys that have threshold waiters now (a copy), for whoever re-reads their
        values after a gap (a bus after an outage)."""
        return list(self._thresholds)

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(record)`` for every operation that leaves the purgatory."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener``."""
        self._listeners.remove(listener)

    # -- checks ----------------------------------------------------------------------------

    def _try_now(self, op: Op) -> bool:
        try:
            return check_operation(op)
        except Exception as exc:
            report_callback_error(op, exc, "try_complete")
            return False

    async def _try(self, op: Op) -> bool:
        try:
            return await op.maybe_try_complete()
        except Exception as exc:
            report_callback_error(op, exc, "try_complete")
            return False

    async def _try_or_cancel(self, op: Op) -> bool:
        """A check on the way in: if the caller is cancelled during it, the op is cancelled
        (``await op`` raises OperationCancelled), so it is never left watched without its
        timeout."""
        try:
            return await self._try(op)
        except BaseException:
            op.cancel()
            raise

    def _register(self, op: Op, keys: Iterable[Hashable]) -> None:
        """Check the arguments and bind ``op`` to this purgatory; registers no key yet."""
        if self._closed:
            raise RuntimeError(f"purgatory {self.name!r} is shut down")
        if self._reaper is None:
            self._check_loop(_running_loop())
        try:
            taken = op._purgatory is not None or op._state is not _PENDING
        except AttributeError:  # cheaper than an isinstance check on every request
            if isinstance(op, DelayedOperation):
                raise TypeError(
                    f"{type(op).__name__}.__init__ did not call super().__init__(delay_ms): "
                    "the operation is not initialised"
                ) from None
            raise TypeError(f"expected a DelayedOperation, got {type(op).__name__}") from None
        if taken:
            raise ValueError(f"{op!r} was already handed to a purgatory")
        waiters = op._waiters
        if waiters is not None and waiters[0].get_loop() is not self._loop:
            raise RuntimeError(f"{op!r} is awaited on a different event loop")
        kind = type(keys)
        # ignores rather than cast(), which is a function call when interpreted
        if kind is list and 0 < len(keys) <= INLINE_KEYS:  # type: ignore[arg-type]
            key_list: list[Hashable] = keys  # type: ignore[assignment]
            for key in key_list:
                # TypeError for an unhashable key, before anything is registered. A str is
                # hashable: the compiled hash() boxes half of all hash values into a new int
                if type(key) is not str:
                    hash(key)
            hold_keys(op, key_list)
        else:
            if kind is tuple:
                watch_keys: tuple[Hashable, ...] = keys  # type: ignore[assignment]
            elif kind is not list and isinstance(keys, (str, bytes)):
                raise TypeError("keys must be a collection of keys, not a single str/bytes")
            else:
                watch_keys = tuple(keys)
            if not watch_keys:
                raise ValueError("an operation must be watched on at least one key")
            hash(watch_keys)  # TypeError for an unhashable key, before anything is registered
            op._keys = watch_keys
            op._nkeys = len(watch_keys)
        op._purgatory = self
        op.started_ms = self.timer.now_ms()

    def _watch(self, op: Op) -> None:
        watchers = self._watchers
        count = op._nkeys
        added = 0
        try:
            while added < count:
                key = key_at(op, added)
                try:
                    watchers[key].append(op)
                except KeyError:
                    watchers[key] = [op]
                added += 1
        except BaseException:  # a key's __eq__ raised
            self._unwatch(op, added)
            raise
        op._entries = count
        self._watched += count

    def _unwatch(self, op: Op, added: int) -> None:
        """Undo a watch that failed after ``added`` keys: the op leaves no entry behind
        and is free again, as if it had never been handed in."""
        watchers = self._watchers
        for index in range(added):
            key = key_at(op, index)
            ops = watchers[key]
            ops.pop()  # op is the last entry: nothing ran since it was appended
            if not ops:
                del watchers[key]
        release(op)

    def _check_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Bind to ``loop`` on first use; refuse any other loop afterwards."""
        if loop is self._loop:
            return
        if loop is None:
            raise RuntimeError(f"purgatory {self.name!r} must be used from a running event loop")
        if self._loop is not None:
            raise RuntimeError(
                f"purgatory {self.name!r} is bound to a different event loop (a purgatory, "
                "its timer and its operations belong to the loop that first used them)"
            )
        self.timer._check_loop(loop)
        self._loop = loop

    def _check_later(self, op: Op) -> None:
        """Check ``op`` in a background task (cancelled at shutdown)."""
        loop = self._loop
        if self._closed or loop is None:
            return
        task = loop.create_task(self._try(op))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _schedule_timeout(self, op: Op, now: float) -> None:
        """Time ``op`` out ``op.delay_ms`` after ``now`` (the timer's clock), unless it is
        done already; cancel it if the purgatory shut down meanwhile."""
        if op._state is not _PENDING:
            return
        if self._closed:
            op.cancel()
        elif self.timer_enabled:
            self.timer._add_at(op, now)
            if self._reaper is None:
                self._ensure_reaper()

    def _compact(self, key: Hashable) -> None:
        ops = self._watchers.get(key)
        if ops is None:
            return
        kept = 0
        for op in ops:  # in place: no new list to grow, and the list keeps its capacity
            if op._state is _PENDING:
                ops[kept] = op
                kept += 1
        removed = len(ops) - kept
        self._watched -= removed
        self._stale_entries -= removed
        if kept:
            del ops[kept:]
        else:
            del self._watchers[key]

    def _compact_thresholds(self, key: Hashable) -> None:
        heap = self._thresholds.get(key)
        if heap is None:
            return
        kept = [entry for entry in heap if entry[2]._state is _PENDING]
        removed = len(heap) - len(kept)
        if not removed:
            return
        self._watched -= removed
        self._stale_entries -= removed
        if kept:
            heapq.heapify(kept)
            heap[:] = kept  # in place: set_value may be popping from this very list
        else:
            heap.clear()
            del self._thresholds[key]

    # -- completion bookkeeping (called by the operation) ------------------------------------

    def _operation_finished(self, op: DelayedOperation) -> None:
        state = op._state
        if state is OperationState.COMPLETED:
            self._completed += 1
        elif state is OperationState.EXPIRED:
            self._expired += 1
        else:
            self._cancelled += 1
        if self._listeners:
            self._notify(op, state)
        self._stale_entries += op._entries
        # Purge once finished entries exceed purge_interval *and* outnumber live ones: a
        # purge rewrites every list, so it must free at least as much as it visits
        # (amortised O(1) per operation; CPython's timer heap uses the same rule).
        stale = self._stale_entries
        if (
            stale > self.purge_interval
            and stale + stale > self._watched
            and self._purger is None
            and self._reaper is not None
        ):
            self._purger = asyncio.get_running_loop().create_task(
                self._purge(), name=f"purgatory-purge-{self.name}"
            )

    def _notify(self, op: DelayedOperation, state: OperationState) -> None:
        record = OperationRecord.of(self.name, self.labels, op, self.timer.now_ms())
        for listener in self._listeners:
            try:
                listener(record)
            except Exception:
                self._callback_errors += 1
                logger.exception("purgatory %r: listener %r failed", self.name, listener)

    # -- reaper and purge ----------------------------------------------------------------

    def _ensure_reaper(self) -> None:
        if self._reaper is None and self.reaper_enabled and not self._closed:
            self._reaper = asyncio.get_running_loop().create_task(
                self._reap(), name=f"purgatory-reaper-{self.name}"
            )
            self._reaper.add_done_callback(self._reaper_done)

    def _reaper_done(self, task: asyncio.Task[None]) -> None:
        # Ended without shutdown(): its loop cancelled it on the way out (asyncio.run does).
        if self._reaper is task:
            self._reaper = None

    async def _reap(self) -> None:
        while not self._closed:
            await self.timer.advance_clock(None)

    async def _purge(self) -> None:
        """Drop completed operations from every watcher list, a slice at a time."""
        try:
            self._purges += 1
            budget = PURGE_SLICE
            for key in list(self._watchers):
                ops = self._watchers.get(key)
                if ops is None:
                    continue
                before = self._watched
                budget -= len(ops)  # entries visited (before compaction, which is in place)
                self._compact(key)
                self._purged_entries += before - self._watched
                if budget <= 0:
                    budget = PURGE_SLICE
                    await asyncio.sleep(0)
            for key in list(self._thresholds):
                heap = self._thresholds.get(key)
                if heap is None:
                    continue
                before = self._watched
                budget -= len(heap)
                self._compact_thresholds(key)
                self._purged_entries += before - self._watched
                if budget <= 0:
                    budget = PURGE_SLICE
                    await asyncio.sleep(0)
        finally:
            self._purger = None

    async def purge_completed(self) -> int:
        """Purge now (normally automatic); return how many entries were dropped."""
        before = self._watched
        while self._purger is not None:
            await self._purger
        self._purger = asyncio.get_running_loop().create_task(self._purge())
        await self._purger
        return before - self._watched

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the reaper (also started by ``async with`` and by the first watch)."""
        if self._closed:
            raise RuntimeError(f"purgatory {self.name!r} is shut down")
        self._check_loop(_running_loop())
        self._ensure_reaper()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stop the reaper; every pending operation is cancelled, so ``await op`` raises
        :class:`~purgatory.OperationCancelled` instead of hanging."""
        if self._closed:
            return
        self._check_loop(_running_loop())
        self._closed = True
        for task in (self._reaper, self._purger, *self._background):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._reaper = self._purger = None
        for ops in list(self._watchers.values()):
            for op in ops:
                op.cancel()
        for heap in list(self._thresholds.values()):
            for entry in heap:
                entry[2].cancel()
        self._thresholds.clear()
        for leftover in self.timer.close():
            if isinstance(leftover, DelayedOperation):
                leftover.cancel()
        self._watchers.clear()
        self._watched = self._stale_entries = 0

    def statistics(self) -> PurgatoryStatistics:
        """Sizes and counters now, as a frozen dataclass (what metrics and tests read)."""
        return PurgatoryStatistics(
            name=self.name,
            labels=self.labels,
            watched=self._watched,
            keys=len(self._watchers),
            threshold_keys=len(self._thresholds),
            num_delayed=self.timer.size,
            completed=self._completed,
            expired=self._expired,
            cancelled=self._cancelled,
            callback_errors=self._callback_errors,
            purges=self._purges,
            purged_entries=self._purged_entries,
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running" if self._reaper else "idle"
        labels = "".join(f" {k}={v}" for k, v in self.labels.items())
        return (
            f"<DelayedOperationPurgatory {self.name!r}{labels} {state} watched={self._watched} "
            f"delayed={self.timer.size} keys={len(self._watchers)}>"
        )


def release(op: DelayedOperation) -> None:
    """Free ``op`` of a purgatory that refused it halfway: no purgatory, no keys."""
    op._purgatory = None
    op._keys = ()
    op._nkeys = 0


# Names the metrics give their own labels, and Prometheus' reserved prefix.
_RESERVED_LABELS: Final = frozenset({"purgatory", "kind"})


def check_labels(labels: Mapping[str, str] | None) -> Mapping[str, str]:
    """A read-only copy of ``labels`` once every name is a usable metric label name (an
    identifier, not reserved) and every value a str."""
    if labels is None:
        return MappingProxyType({})
    if not isinstance(labels, Mapping):
        raise TypeError(f"labels must be a mapping of str to str, got {labels!r}")
    # typed as objects: the compiled build would otherwise check the pairs itself, with
    # its own message, before these checks run
    items: Iterable[tuple[object, object]] = labels.items()
    for key, value in items:
        if not isinstance(key, str) or not key.isidentifier() or not key.isascii():
            raise ValueError(f"label name {key!r} is not an ASCII identifier")
        if key in _RESERVED_LABELS or key.startswith("__"):
            raise ValueError(f"label name {key!r} is reserved")
        if not isinstance(value, str):
            raise TypeError(f"label {key!r} must be a str, got {value!r}")
    return MappingProxyType(dict(labels))


def checked_value(name: str, value: object) -> int:
    """``value`` as an int: a key's value or a threshold. A bool, a float or anything
    without ``__index__`` is a ``TypeError``."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not a bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}") from None
