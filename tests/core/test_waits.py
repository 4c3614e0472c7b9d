"""Keyed waits without subclassing: ``wait_until`` and ``park``."""

from __future__ import annotations

import asyncio
import gc
import sys

import pytest

from purgatory import DelayedOperation, DelayedOperationPurgatory, OperationCancelled


@pytest.mark.asyncio
async def test_a_predicate_that_holds_at_once_registers_nothing() -> None:
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:
        assert await purgatory.wait_until(lambda: True, ["k"], 60_000) is True
        assert (purgatory.watched, purgatory.num_delayed) == (0, 0)


@pytest.mark.asyncio
async def test_a_trigger_of_one_of_the_keys_ends_the_wait() -> None:
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:
        version = 0
        waiting = asyncio.create_task(
            purgatory.wait_until(lambda: version >= 2, ["a", "b"], 60_000)
        )
        await asyncio.sleep(0)
        version = 1
        assert await purgatory.check_and_complete("b") == 0
        version = 2
        assert await purgatory.check_and_complete("c") == 0  # not one of its keys
        assert not waiting.done()
        assert await purgatory.check_and_complete("a") == 1
        assert await waiting is True


@pytest.mark.asyncio
async def test_an_async_predicate() -> None:
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:
        state = {"ready": False}

        async def ready() -> bool:
            await asyncio.sleep(0)
            return state["ready"]

        waiting = asyncio.create_task(purgatory.wait_until(ready, ["k"], 60_000))
        await asyncio.sleep(0.01)
        state["ready"] = True
        assert await purgatory.check_and_complete("k") == 1
        assert await waiting is True


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_the_timeout_answers_false_on_time() -> None:
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert await purgatory.wait_until(lambda: False, ["k"], 250) is False
        assert loop.time() - start == pytest.approx(0.25)
        assert purgatory.statistics().expired == 1


@pytest.mark.asyncio
async def test_shutdown_answers_with_operation_cancelled() -> None:
    purgatory = DelayedOperationPurgatory[DelayedOperation]("p")
    waiting = asyncio.create_task(purgatory.wait_until(lambda: False, ["k"], 60_000))
    await asyncio.sleep(0.01)
    await purgatory.shutdown()
    with pytest.raises(OperationCancelled):
        await waiting


@pytest.mark.asyncio
async def test_a_predicate_error_reaches_the_waiter() -> None:
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:
        calls = 0

        def flaky() -> bool:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise KeyError("state gone")
            return False

        waiting = asyncio.create_task(purgatory.wait_until(flaky, ["k"], 60_000))
        await asyncio.sleep(0.01)
        await purgatory.check_and_complete("k")
        with pytest.raises(KeyError, match="state gone"):
            await waiting
        assert purgatory.num_delayed == 0


@pytest.mark.asyncio
async def test_a_sync_predicate_returning_a_coroutine_is_an_error() -> None:
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:

        async def ready() -> bool:
            return True

        with pytest.raises(TypeError, match="returned an awaitable"):
            await purgatory.wait_until(lambda: ready(), ["k"], 60_000)


class Answer(DelayedOperation):
    def __init__(self) -> None:
        super().__init__(60_000)
        self.ready = False
        self.answer: str | None = None

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.answer = "expired" if self.is_expired else "done"


@pytest.mark.asyncio
async def test_park_returns_the_op_once_on_complete_ran() -> None:
    async with DelayedOperationPurgatory[Answer]("p") as purgatory:
        op = Answer()
        parked = asyncio.create_task(purgatory.park(op, ["k"]))
        await asyncio.sleep(0.01)
        assert not parked.done()
        op.ready = True
        await purgatory.check_and_complete("k")
        assert await parked is op
        assert op.answer == "done"


@pytest.mark.asyncio
async def test_park_raises_operation_cancelled_on_shutdown() -> None:
    purgatory = DelayedOperationPurgatory[Answer]("p")
    parked = asyncio.create_task(purgatory.park(Answer(), ["k"]))
    await asyncio.sleep(0.01)
    await purgatory.shutdown()
    with pytest.raises(OperationCancelled):
        await parked


@pytest.mark.slow
@pytest.mark.asyncio
async def test_many_concurrent_waits_are_all_answered_and_leave_no_memory() -> None:
    """100k waiting callers, 1M triggers (each caller's key is triggered 10 times; its
    predicate holds at the 10th): every caller answered, the purgatory empty, and the
    interpreter's allocated blocks back where they were."""
    callers, triggers_per_key = 100_000, 10
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:
        seen = [0] * callers

        def waiter(i: int) -> asyncio.Task[bool]:
            return asyncio.create_task(
                purgatory.wait_until(lambda: seen[i] >= triggers_per_key, [i], 600_000)
            )

        await _round(purgatory, [waiter(i) for i in range(100)], seen, 100, triggers_per_key)
        await asyncio.sleep(0)
        gc.collect()
        baseline = sys.getallocatedblocks()
        tasks = [waiter(i) for i in range(callers)]
        await _round(purgatory, tasks, seen, callers, triggers_per_key)
        assert all(task.result() is True for task in tasks)
        stats = purgatory.statistics()
        assert (stats.watched, stats.keys, stats.num_delayed) == (0, 0, 0)
        assert stats.completed == callers + 100
        del tasks
        await asyncio.sleep(0)  # leave the step whose wake-up handle still holds gather()
        gc.collect()
        assert sys.getallocatedblocks() - baseline < 2_000


async def _round(
    purgatory: DelayedOperationPurgatory[DelayedOperation],
    tasks: list[asyncio.Task[bool]],
    seen: list[int],
    callers: int,
    triggers_per_key: int,
) -> None:
    await asyncio.sleep(0)  # every caller is waiting
    for _ in range(triggers_per_key):
        for i in range(callers):
            seen[i] += 1
            await purgatory.check_and_complete(i)
    await asyncio.gather(*tasks)
    for i in range(callers):
        seen[i] = 0


@pytest.mark.asyncio
async def test_check_all_rechecks_every_watched_key() -> None:
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:
        state = {"a": 0, "b": 0, "c": 0}
        waits = {
            key: asyncio.create_task(
                purgatory.wait_until(lambda k=key: state[k] > 0, [key], 60_000)
            )
            for key in state
        }
        await asyncio.sleep(0)
        state["a"] = state["c"] = 1  # changed, but nobody triggered them
        assert await purgatory.check_all() == 2
        assert await waits["a"] is True
        assert await waits["c"] is True
        assert not waits["b"].done()
        assert purgatory.watched_keys() == 1
        waits["b"].cancel()
