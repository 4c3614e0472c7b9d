"""``op.cancel()`` cancels the operation, as ``Future.cancel()`` cancels a future;
``cancel_for_key`` cancels what it drops; ``abandon()`` is a deprecated alias. The timer's
own removal stays timer-only: a plain TimerTask's ``cancel()``, re-adding a task, and a task
handed out of the ready list.

Deterministic: a ManualClock and ``timer.run_due()`` instead of a reaper and sleeps. Every
async test runs on asyncio and on uvloop (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    ManualClock,
    OperationCancelled,
    OperationState,
    SystemTimer,
    TimerCore,
    TimerTask,
)

DELAY = 1_000


class Flag(DelayedOperation):
    """Completes when ``ready``; counts its callbacks and checks."""

    def __init__(self, delay_ms: int = DELAY) -> None:
        super().__init__(delay_ms)
        self.ready = False
        self.completions = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


class Plain(TimerTask):
    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.runs = 0

    def run(self) -> None:
        self.runs += 1


def _purgatory(clock: ManualClock) -> DelayedOperationPurgatory[Flag]:
    # no reaper: the test runs the timer itself (timer.run_due()) on the manual clock
    return DelayedOperationPurgatory[Flag]("p", reaper_enabled=False, clock=clock)


async def _awaiting(op: DelayedOperation) -> asyncio.Task[None]:
    """A task that awaits ``op``, returned once it does (no sleep: the event is set in the
    same step that reaches ``await op``)."""
    started = asyncio.Event()

    async def wait() -> None:
        started.set()
        await op

    task = asyncio.create_task(wait())
    await started.wait()
    return task


def _assert_cancelled(op: Flag) -> None:
    assert op.operation_state is OperationState.CANCELLED
    assert op.is_cancelled
    assert op.is_done
    assert not op.is_completed
    assert not op.is_expired
    assert not op.is_scheduled
    assert (op.completions, op.expirations) == (0, 0)


# -- op.cancel() -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cancel_cancels_a_watched_operation() -> None:
    """The issue's check: watch, cancel, await. The op goes CANCELLED, leaves the timer and
    its keys, never calls on_complete, and every awaiter gets OperationCancelled."""
    clock = ManualClock()
    async with _purgatory(clock) as purgatory:
        op = Flag()
        assert await purgatory.try_complete_else_watch(op, ["a", "b"]) is False
        waiter = await _awaiting(op)
        assert (purgatory.watched, purgatory.num_delayed) == (2, 1)

        assert op.cancel() is True
        _assert_cancelled(op)
        assert purgatory.num_delayed == 0
        assert purgatory.pending_operations() == []
        assert purgatory.statistics().cancelled == 1
        with pytest.raises(OperationCancelled):
            await waiter
        with pytest.raises(OperationCancelled):
            await op

        # no trigger checks it again; its entries go as a finished op's do
        op.ready = True
        checks = op.checks
        assert await purgatory.check_and_complete("a") == 0
        assert purgatory.check_and_complete_nowait("b") == 0
        assert op.checks == checks
        assert (purgatory.watched, purgatory.watched_keys()) == (0, 0)
        # ... and it never expires
        clock.advance(DELAY * 2)
        assert purgatory.timer.run_due() == 0
        _assert_cancelled(op)
        assert op.cancel() is False  # already done


@pytest.mark.asyncio
async def test_cancel_of_a_done_operation_returns_false_and_changes_nothing() -> None:
    clock = ManualClock()
    async with _purgatory(clock) as purgatory:
        completed, expired = Flag(), Flag()
        await purgatory.try_complete_else_watch(completed, ["k"])
        await purgatory.try_complete_else_watch(expired, ["k"])
        completed.ready = True
        assert await purgatory.check_and_complete("k") == 1
        clock.advance(DELAY)
        assert purgatory.timer.run_due() == 1
        assert completed.cancel() is False
        assert expired.cancel() is False
        assert completed.operation_state is OperationState.COMPLETED
        assert expired.operation_state is OperationState.EXPIRED
        assert (completed.completions, expired.completions, expired.expirations) == (1, 1, 1)
        await completed  # still answered, not cancelled
        await expired
        assert purgatory.statistics().cancelled == 0


@pytest.mark.asyncio
async def test_cancel_during_an_async_check_wins_over_the_check() -> None:
    class Gated(Flag):
        def __init__(self) -> None:
            super().__init__()
            self.entered = asyncio.Event()
            self.gate = asyncio.Event()

        async def try_complete(self) -> bool:  # type: ignore[override]
            self.entered.set()
            await self.gate.wait()
            return self.force_complete() if self.ready else False

    async with DelayedOperationPurgatory[Gated]("p", reaper_enabled=False) as purgatory:
        op = Gated()
        op.gate.set()
        assert await purgatory.try_complete_else_watch(op, ["k"]) is False
        op.gate.clear()
        op.entered.clear()
        op.ready = True
        trigger = asyncio.create_task(purgatory.check_and_complete("k"))
        await op.entered.wait()  # the check is in flight
        assert op.cancel() is True
        op.gate.set()
        assert await trigger == 0  # its force_complete() found the op cancelled
        _assert_cancelled(op)
        with pytest.raises(OperationCancelled):
            await op


@pytest.mark.asyncio
async def test_operation_cancelled_is_not_a_cancelled_error() -> None:
    """The operation was cancelled, not the task awaiting it: that task ends with the
    exception, it is not itself cancelled (see docs/contract.md)."""
    assert issubclass(OperationCancelled, Exception)
    assert not issubclass(OperationCancelled, asyncio.CancelledError)
    async with _purgatory(ManualClock()) as purgatory:
        op = Flag()
        await purgatory.try_complete_else_watch(op, ["k"])
        waiter = await _awaiting(op)
        assert op.cancel() is True
        results = await asyncio.gather(waiter, return_exceptions=True)
        assert not waiter.cancelled()
        assert isinstance(results[0], OperationCancelled)


# -- the timer's own removal stays timer-only ---------------------------------------------------


@pytest.mark.asyncio
async def test_plain_timer_task_cancel_only_unschedules() -> None:
    clock = ManualClock()
    timer = SystemTimer("t", clock=clock)
    task = Plain(10)
    assert task.cancel() is False  # not scheduled: nothing to do
    timer.add(task)
    assert task.cancel() is True
    assert (task.is_scheduled, timer.size) == (False, 0)
    assert task.cancel() is False
    clock.advance(10)
    assert timer.run_due() == 0
    timer.add(task)  # a plain task can be scheduled again after cancel()
    clock.advance(10)
    assert timer.run_due() == 1
    assert task.runs == 1


@pytest.mark.asyncio
async def test_re_adding_an_operation_to_a_timer_moves_it_without_cancelling_it() -> None:
    clock = ManualClock()
    timer = SystemTimer("t", clock=clock)
    op = Flag(10)
    timer.add(op)
    clock.advance(5)
    timer.add(op)  # moved: now due at 15
    assert op.operation_state is OperationState.PENDING
    assert timer.size == 1
    clock.advance(5)
    assert timer.run_due() == 0
    clock.advance(5)
    assert timer.run_due() == 1
    assert op.is_expired
    assert (op.completions, op.expirations) == (1, 1)


def test_an_operation_handed_out_of_the_ready_list_is_not_cancelled() -> None:
    """With tick_ms > 1 a task due in its bucket but not yet at its deadline waits in the
    ready list; handing it out unlinks it from there, which must not cancel an op."""
    core = TimerCore(10, 4, start_ms=0)
    op = Flag(15)
    core.schedule(op, 15)
    assert core.advance_to(10) == []  # its bucket is due; its deadline is not
    assert op.is_scheduled
    assert core.advance_to(15) == [op]
    assert op.operation_state is OperationState.PENDING
    assert (op.is_scheduled, core.size) == (False, 0)
    op.run()  # what the timer does with it
    assert op.is_expired


@pytest.mark.asyncio
async def test_an_operation_from_the_ready_list_expires_through_the_timer() -> None:
    clock = ManualClock()
    timer = SystemTimer("t", tick_ms=10, wheel_size=4, clock=clock)
    op = Flag(15)
    timer.add(op)
    clock.advance(10)
    assert timer.run_due() == 0
    clock.advance(5)
    assert timer.run_due() == 1
    assert op.is_expired
    assert (op.completions, op.expirations) == (1, 1)


# -- cancel_for_key ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cancel_for_key_cancels_every_operation_it_drops() -> None:
    clock = ManualClock()
    async with _purgatory(clock) as purgatory:
        only_key, both, only_other, done = Flag(), Flag(), Flag(), Flag()
        await purgatory.try_complete_else_watch(only_key, ["key"])
        await purgatory.try_complete_else_watch(both, ["key", "other"])
        await purgatory.try_complete_else_watch(only_other, ["other"])
        await purgatory.try_complete_else_watch(done, ["key"])
        done.force_complete()  # a finished op's stale entry: dropped, not returned
        waiters = [await _awaiting(op) for op in (only_key, both)]

        assert purgatory.cancel_for_key("key") == [only_key, both]
        assert purgatory.cancel_for_key("missing") == []
        for op in (only_key, both):
            _assert_cancelled(op)
            with pytest.raises(OperationCancelled):
                await op
        for waiter in waiters:
            with pytest.raises(OperationCancelled):
                await waiter
        assert purgatory.statistics().cancelled == 2
        assert purgatory.num_delayed == 1
        assert purgatory.pending_operations() == [only_other]

        # not reachable through its other key either
        both.ready = True
        checks = both.checks
        assert await purgatory.check_and_complete("other") == 0
        assert both.checks == checks
        assert (purgatory.watched, purgatory.watched_keys()) == (1, 1)
        clock.advance(DELAY)
        assert purgatory.timer.run_due() == 1
        assert only_other.is_expired
        _assert_cancelled(both)


@pytest.mark.asyncio
async def test_shutdown_cancel_for_key_and_a_cancelled_park_call_an_overridden_cancel() -> None:
    cancelled: list[str] = []

    class Observed(Flag):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def cancel(self) -> bool:
            if not super().cancel():
                return False
            cancelled.append(self.name)
            return True

    purgatory = DelayedOperationPurgatory[Observed]("p", reaper_enabled=False)
    await purgatory.try_complete_else_watch(Observed("by key"), ["key"])
    await purgatory.try_complete_else_watch(Observed("at shutdown"), ["other"])
    parked_op = Observed("parked")
    started = asyncio.Event()

    async def park() -> None:
        started.set()
        await purgatory.park(parked_op, ["parked"])

    parked = asyncio.create_task(park())
    await started.wait()  # `parked` reached `await op` in the step that set the event
    assert purgatory.pending_operations()[-1] is parked_op
    parked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await parked
    purgatory.cancel_for_key("key")
    await purgatory.shutdown()
    assert cancelled == ["parked", "by key", "at shutdown"]


# -- abandon(): deprecated -----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_abandon_is_a_deprecated_alias_of_cancel() -> None:
    async with _purgatory(ManualClock()) as purgatory:
        op = Flag()
        await purgatory.try_complete_else_watch(op, ["k"])
        with pytest.warns(DeprecationWarning, match=r"abandon\(\) is deprecated") as record:
            assert op.abandon() is True
        assert record[0].filename == __file__  # the warning names the caller
        _assert_cancelled(op)
        assert purgatory.num_delayed == 0
        with pytest.warns(DeprecationWarning, match="use cancel"):
            assert op.abandon() is False
        with pytest.raises(OperationCancelled):
            await op


def test_overriding_abandon_is_deprecated() -> None:
    with pytest.warns(DeprecationWarning, match=r"override cancel\(\) instead") as record:

        class Old(Flag):
            def abandon(self) -> bool:
                return super().abandon()

    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class New(Flag):  # overriding cancel() is fine
            def cancel(self) -> bool:
                return super().cancel()

    assert Old(1).is_async is New(1).is_async is False
