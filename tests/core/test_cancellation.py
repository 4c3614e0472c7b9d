"""A task cancelled at any await point of the async paths leaves nothing half-done: the op
is either watched with its timeout, or abandoned (``await op`` raises OperationCancelled);
and the checks a cancelled caller had not finished still happen."""

from __future__ import annotations

import asyncio

import pytest

from purgatory import DelayedOperation, DelayedOperationPurgatory, OperationCancelled


class Gated(DelayedOperation):
    """An async check that waits for a pass (``gate.release()``, one per check, or
    ``open()`` for all); completes if ``ready`` then."""

    def __init__(self, delay_ms: int = 60_000) -> None:
        super().__init__(delay_ms)
        self.ready = False
        self.gate = asyncio.Semaphore(0)
        self.entered = asyncio.Event()

    def open(self) -> None:
        self.gate.release()
        self.gate.release()
        self.gate.release()

    async def try_complete(self) -> bool:
        self.entered.set()
        await self.gate.acquire()
        return self.force_complete() if self.ready else False


async def _cancel(task: asyncio.Task[object]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def _assert_nothing_left(purgatory: DelayedOperationPurgatory[Gated]) -> None:
    stats = purgatory.statistics()
    assert stats.num_delayed == 0
    assert stats.watched - stats.keys >= 0  # counts never go negative
    assert stats.cancelled == 1


@pytest.mark.asyncio
async def test_cancelled_during_the_first_check_abandons_the_op() -> None:
    async with DelayedOperationPurgatory[Gated]("p") as purgatory:
        op = Gated()
        submit = asyncio.create_task(purgatory.try_complete_else_watch(op, ["k"]))
        await op.entered.wait()
        await _cancel(submit)
        assert op.is_cancelled
        with pytest.raises(OperationCancelled):
            await op
        assert (purgatory.watched, purgatory.num_delayed) == (0, 0)
        _assert_nothing_left(purgatory)


@pytest.mark.asyncio
async def test_cancelled_during_the_second_check_abandons_the_watched_op() -> None:
    async with DelayedOperationPurgatory[Gated]("p") as purgatory:
        op = Gated()
        submit = asyncio.create_task(purgatory.try_complete_else_watch(op, ["k"]))
        await op.entered.wait()
        op.entered.clear()
        op.gate.release()  # the first check says "not yet"; the op gets watched
        await op.entered.wait()  # ... and the second check is in flight
        assert purgatory.watched == 1
        await _cancel(submit)
        assert op.is_cancelled
        with pytest.raises(OperationCancelled):
            await op
        assert purgatory.num_delayed == 0  # never a watched op without its timeout
        _assert_nothing_left(purgatory)
        assert await purgatory.check_and_complete("k") == 0  # its stale entry goes
        assert purgatory.watched == 0


@pytest.mark.asyncio
async def test_shutdown_after_a_cancelled_submit_leaves_nobody_hanging() -> None:
    purgatory = DelayedOperationPurgatory[Gated]("p")
    op = Gated()
    submit = asyncio.create_task(purgatory.try_complete_else_watch(op, ["k"]))
    await op.entered.wait()
    await _cancel(submit)
    await purgatory.shutdown()
    with pytest.raises(OperationCancelled):
        await asyncio.wait_for(op, 1)


@pytest.mark.asyncio
async def test_a_cancelled_check_and_complete_loses_no_trigger() -> None:
    async with DelayedOperationPurgatory[Gated]("p") as purgatory:
        first, second = Gated(), Gated()
        for op in (first, second):
            op.gate.release()
            op.gate.release()
            assert await purgatory.try_complete_else_watch(op, ["k"]) is False
            op.entered.clear()
            op.ready = True
        trigger = asyncio.create_task(purgatory.check_and_complete("k"))
        await first.entered.wait()  # checking `first`; `second` not yet checked
        await _cancel(trigger)
        assert not first.is_completed
        assert not second.is_completed
        first.open()
        second.open()
        await asyncio.wait_for(asyncio.gather(first, second), 1)  # checked in the background
        assert first.is_completed
        assert second.is_completed
        assert not first.is_expired
        assert not second.is_expired


@pytest.mark.asyncio
async def test_a_cancelled_check_hands_over_a_pending_recheck() -> None:
    async with DelayedOperationPurgatory[Gated]("p") as purgatory:
        op = Gated()
        op.gate.release()
        op.gate.release()
        assert await purgatory.try_complete_else_watch(op, ["k"]) is False
        op.entered.clear()
        checking = asyncio.create_task(op.maybe_try_complete())
        await op.entered.wait()
        assert await op.maybe_try_complete() is False  # a trigger: marks a recheck
        await _cancel(checking)
        op.ready = True
        op.open()
        await asyncio.wait_for(op, 1)
        assert op.is_completed
        assert not op.is_expired


@pytest.mark.asyncio
async def test_cancelling_park_abandons_the_op() -> None:
    async with DelayedOperationPurgatory[Gated]("p") as purgatory:
        op = Gated()
        op.open()
        parked = asyncio.create_task(purgatory.park(op, ["k"]))
        await asyncio.sleep(0.01)
        assert purgatory.num_delayed == 1
        await _cancel(parked)
        assert op.is_cancelled
        assert purgatory.num_delayed == 0


@pytest.mark.asyncio
async def test_cancelling_wait_until_removes_the_wait() -> None:
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:
        waiting = asyncio.create_task(purgatory.wait_until(lambda: False, ["k"], 60_000))
        await asyncio.sleep(0.01)
        assert (purgatory.watched, purgatory.num_delayed) == (1, 1)
        await _cancel(waiting)
        assert purgatory.num_delayed == 0
        assert purgatory.statistics().cancelled == 1
        assert await purgatory.check_and_complete("k") == 0
        assert purgatory.watched == 0
