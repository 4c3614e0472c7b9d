"""One loop: a purgatory, a timer and an operation belong to the loop that first uses them;
any other loop gets a RuntimeError that says so (as asyncio's own primitives do)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer, TimerTask


class Never(DelayedOperation):
    def try_complete(self) -> bool:
        return False


class Noop(TimerTask):
    def run(self) -> None:
        pass


def test_a_purgatory_used_again_under_a_second_asyncio_run_refuses() -> None:
    purgatory = DelayedOperationPurgatory[Never]("p")

    async def submit() -> bool:
        return await purgatory.try_complete_else_watch(Never(10), ["k"])

    assert asyncio.run(submit()) is False
    with pytest.raises(RuntimeError, match="different event loop"):
        asyncio.run(submit())

    async def trigger() -> int:
        return await purgatory.check_and_complete("k")

    with pytest.raises(RuntimeError, match="different event loop"):
        asyncio.run(trigger())
    with pytest.raises(RuntimeError, match="different event loop"):
        asyncio.run(purgatory.shutdown())


def test_the_nowait_entry_points_refuse_another_loop_too() -> None:
    purgatory = DelayedOperationPurgatory[Never]("p", reaper_enabled=False)

    async def submit() -> None:
        purgatory.try_complete_else_watch_nowait(Never(10), ["k"])
        purgatory.check_and_complete_nowait("k")

    asyncio.run(submit())
    with pytest.raises(RuntimeError, match="different event loop"):
        asyncio.run(submit())


def test_a_timer_refuses_a_second_loop() -> None:
    timer = SystemTimer("t")

    async def add() -> None:
        timer.add(Noop(10_000))

    asyncio.run(add())
    with pytest.raises(RuntimeError, match="different event loop"):
        asyncio.run(timer.advance_clock(0))


@pytest.mark.asyncio
async def test_awaiting_an_op_from_another_loop_refuses() -> None:
    async with DelayedOperationPurgatory[Never]("p") as purgatory:
        op = Never(60_000)
        await purgatory.try_complete_else_watch(op, ["k"])
        errors: list[BaseException] = []

        def other_thread() -> None:
            async def wait() -> None:
                await op

            try:
                asyncio.run(wait())
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(5)
        assert len(errors) == 1
        assert isinstance(errors[0], RuntimeError)
        assert "different event loop" in str(errors[0])


def test_an_op_awaited_on_one_loop_cannot_join_a_purgatory_on_another() -> None:
    op = Never(60_000)
    started = threading.Event()
    release = threading.Event()

    def first_loop() -> None:
        async def wait() -> None:
            waiting = asyncio.ensure_future(_await(op))
            await asyncio.sleep(0)
            started.set()
            await asyncio.get_running_loop().run_in_executor(None, release.wait)
            waiting.cancel()

        asyncio.run(wait())

    thread = threading.Thread(target=first_loop)
    thread.start()
    try:
        started.wait(5)

        async def submit() -> None:
            purgatory = DelayedOperationPurgatory[Never]("p")
            with pytest.raises(RuntimeError, match="different event loop"):
                await purgatory.try_complete_else_watch(op, ["k"])
            assert purgatory.watched == 0
            await purgatory.shutdown()

        asyncio.run(submit())
    finally:
        release.set()
        thread.join(5)


async def _await(op: DelayedOperation) -> None:
    await op
