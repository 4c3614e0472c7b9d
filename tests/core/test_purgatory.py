"""DelayedOperation and DelayedOperationPurgatory: Kafka's DelayedOperationTest, in asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import pytest

from purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    OperationCancelled,
    OperationRecord,
    OperationState,
)


class Flag(DelayedOperation):
    """Completes when its shared flag is set (Kafka's MockDelayedOperation)."""

    def __init__(self, delay_ms: int, ready: list[bool] | None = None) -> None:
        super().__init__(delay_ms)
        self.ready = ready if ready is not None else [False]
        self.completions = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready[0] else False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


class SlowCheck(DelayedOperation):
    """An async try_complete that reads the state, then awaits before deciding."""

    def __init__(self, delay_ms: int, state: dict[str, int], gate: asyncio.Event) -> None:
        super().__init__(delay_ms)
        self.state = state
        self.gate = gate
        self.completions = 0

    async def try_complete(self) -> bool:
        seen = self.state["version"]
        await self.gate.wait()
        return self.force_complete() if seen >= 2 else False

    def on_complete(self) -> None:
        self.completions += 1


@pytest.mark.asyncio
async def test_request_satisfaction() -> None:
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        r1, r2 = Flag(100_000), Flag(100_000)
        assert await purgatory.check_and_complete("test1") == 0
        assert await purgatory.try_complete_else_watch(r1, ["test1"]) is False
        assert await purgatory.try_complete_else_watch(r2, ["test2"]) is False
        assert (purgatory.watched, purgatory.num_delayed) == (2, 2)
        assert await purgatory.check_and_complete("test1") == 0
        r1.ready[0] = True
        assert await purgatory.check_and_complete("test1") == 1
        assert r1.is_completed
        assert not r2.is_completed
        assert (r1.completions, r1.expirations) == (1, 0)
        assert (purgatory.watched, purgatory.num_delayed) == (1, 1)  # key dropped when empty
        assert purgatory.watched_keys() == 1
        await r1  # already completed: returns at once


@pytest.mark.asyncio
async def test_completes_during_first_try_is_never_watched() -> None:
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        op = Flag(1_000, [True])
        assert await purgatory.try_complete_else_watch(op, ["k"]) is True
        assert (purgatory.watched, purgatory.num_delayed, op.checks) == (0, 0, 1)


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_request_expiry_happens_on_time_and_once() -> None:
    loop = asyncio.get_running_loop()
    records: list[OperationRecord] = []
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        purgatory.add_listener(records.append)
        short, long = Flag(1_000), Flag(200_000)
        start = loop.time()
        await purgatory.try_complete_else_watch(short, ["a"])
        await purgatory.try_complete_else_watch(long, ["a", "b"])
        await short
        assert loop.time() - start == pytest.approx(1.0)
        assert short.is_expired
        assert (short.completions, short.expirations) == (1, 1)
        assert not long.is_completed
        assert purgatory.num_delayed == 1
        assert short.force_complete() is False  # exactly once
    [record] = records[:1]
    assert (record.outcome, record.keys, record.timeout_ms) == ("expired", ("a",), 1_000)
    assert record.lateness_ms == pytest.approx(0.0, abs=1e-6)
    assert record.duration_ms == pytest.approx(1_000.0)
    assert records[1].outcome == "cancelled"
    assert records[1].operation is long


@pytest.mark.asyncio
async def test_request_purge() -> None:
    async with DelayedOperationPurgatory[Flag]("p", purge_interval=10_000) as purgatory:
        r1, r2, r3 = Flag(100_000), Flag(100_000), Flag(100_000)
        await purgatory.try_complete_else_watch(r1, ["test1"])
        await purgatory.try_complete_else_watch(r2, ["test1", "test2"])
        await purgatory.try_complete_else_watch(r3, ["test1", "test2", "test3"])
        assert (purgatory.watched, purgatory.num_delayed) == (6, 3)
        r1.force_complete()
        assert (purgatory.watched, purgatory.num_delayed) == (6, 2)  # lazily dropped
        assert await purgatory.purge_completed() == 1
        assert purgatory.watched == 5
        r2.force_complete()
        assert await purgatory.purge_completed() == 2
        assert (purgatory.watched, purgatory.num_delayed) == (3, 1)
        r3.force_complete()
        assert await purgatory.purge_completed() == 3
        assert (purgatory.watched, purgatory.watched_keys()) == (0, 0)


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_watched_falls_back_below_purge_interval_without_any_expiry() -> None:
    async with DelayedOperationPurgatory[Flag]("p", purge_interval=100) as purgatory:
        ops = [Flag(60_000) for _ in range(5_000)]
        for i, op in enumerate(ops):
            await purgatory.try_complete_else_watch(op, [i % 97, i % 89, i % 83])
        assert purgatory.watched == 15_000
        for op in ops:
            op.force_complete()  # completed from outside: no check_and_complete, no expiry
        await asyncio.sleep(0.001)  # let the sliced purge run
        assert purgatory.watched <= purgatory.purge_interval
        assert purgatory.statistics().purges >= 1
        assert purgatory.timer.statistics().tasks_run == 0


@pytest.mark.asyncio
async def test_async_check_pending_loses_no_trigger() -> None:
    """A trigger during an in-flight check makes that check run again, not wait."""
    state = {"version": 1}
    gate = asyncio.Event()
    async with DelayedOperationPurgatory[SlowCheck]("p") as purgatory:
        op = SlowCheck(60_000, state, gate)
        watching = asyncio.ensure_future(purgatory.try_complete_else_watch(op, ["k"]))
        await asyncio.sleep(0)  # the first check has read version 1 and is waiting
        state["version"] = 2
        trigger = asyncio.ensure_future(purgatory.check_and_complete("k"))
        await asyncio.sleep(0)
        assert trigger.done()
        assert trigger.result() == 0
        gate.set()
        assert await watching is True  # the in-flight check went again and saw version 2
        assert (op.completions, op.checks) == (1, 2)
        assert purgatory.num_delayed == 0


@pytest.mark.asyncio
async def test_many_concurrent_triggers_complete_each_op_exactly_once() -> None:
    class Counter(DelayedOperation):
        def __init__(self, need: int, state: dict[str, int]) -> None:
            super().__init__(60_000)
            self.need = need
            self.state = state
            self.completions = 0

        async def try_complete(self) -> bool:
            await asyncio.sleep(0)
            return self.force_complete() if self.state["n"] >= self.need else False

        def on_complete(self) -> None:
            self.completions += 1

    state = {"n": 0}
    async with DelayedOperationPurgatory[Counter]("p") as purgatory:
        ops = [Counter(need, state) for need in range(1, 201)]
        await asyncio.gather(
            *(purgatory.try_complete_else_watch(op, [op.need % 7, "all"]) for op in ops)
        )

        async def bump() -> int:
            state["n"] += 1
            return await purgatory.check_and_complete("all")

        completed = await asyncio.gather(*(bump() for _ in range(200)))
        completed.append(await purgatory.check_and_complete("all"))
        assert sum(completed) == 200
        assert all(op.completions == 1 for op in ops)
        assert purgatory.num_delayed == 0
        assert purgatory.watched_keys() <= 7


@pytest.mark.asyncio
async def test_shutdown_answers_every_awaiter_promptly() -> None:
    purgatory = DelayedOperationPurgatory[Flag]("p")
    ops = [Flag(3_600_000) for _ in range(10)]
    for op in ops:
        await purgatory.try_complete_else_watch(op, ["k"])
    waiters = [asyncio.ensure_future(_await(op)) for op in ops]
    await asyncio.sleep(0)
    await asyncio.wait_for(purgatory.shutdown(), 1)
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, OperationCancelled) for r in results)
    assert all(op.operation_state is OperationState.CANCELLED for op in ops)
    assert (purgatory.watched, purgatory.num_delayed) == (0, 0)
    with pytest.raises(RuntimeError, match="shut down"):
        await purgatory.try_complete_else_watch(Flag(1), ["k"])
    await purgatory.shutdown()  # idempotent


async def _await(op: DelayedOperation) -> None:
    await op


@pytest.mark.asyncio
async def test_cancelling_one_awaiter_leaves_the_others_waiting() -> None:
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        op = Flag(60_000)
        await purgatory.try_complete_else_watch(op, ["k"])
        first = asyncio.ensure_future(_await(op))
        second = asyncio.ensure_future(_await(op))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.sleep(0)
        op.force_complete()
        await asyncio.wait_for(second, 1)
        assert first.cancelled()


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_callback_errors_are_counted_and_the_reaper_survives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Faulty(Flag):
        def on_complete(self) -> None:
            raise ValueError("on_complete failed")

    class BadCheck(Flag):
        def try_complete(self) -> bool:
            raise KeyError("try_complete failed")

    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        faulty, bad, fine = Faulty(10), BadCheck(20), Flag(30)
        for op in (faulty, bad, fine):
            await purgatory.try_complete_else_watch(op, ["k"])
        with pytest.raises(ValueError, match="on_complete failed"):
            await faulty  # the awaiter learns what went wrong
        with pytest.raises(ValueError, match="on_complete failed"):
            await faulty  # and so does a late one
        await bad
        await fine
        assert faulty.is_expired
        assert bad.is_expired
        assert fine.is_expired
        assert purgatory.statistics().callback_errors == 2  # one failed check, one callback
    assert "on_complete raised" in caplog.text
    assert "on_complete failed" in caplog.text
    assert "try_complete raised" in caplog.text
    assert "try_complete failed" in caplog.text


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_idle_purgatory_never_wakes() -> None:
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        await asyncio.sleep(3_600)
        assert purgatory.timer.statistics().wakeups == 0
        op = Flag(10)  # in the finest wheel: one deadline, one wake-up, then idle again
        await purgatory.try_complete_else_watch(op, ["k"])
        await asyncio.sleep(3_600)
        assert op.is_expired
        assert purgatory.timer.statistics().wakeups == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("nowait", [False, True])
@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: ["a"], ("a",)),
        (lambda: ["a", "b"], ("a", "b")),
        (lambda: ["a", "b", "c"], ("a", "b", "c")),
        (lambda: ["a", "b", "c", "d"], ("a", "b", "c", "d")),
        (lambda: ("a", "b"), ("a", "b")),
        (lambda: iter("ab"), ("a", "b")),
        (lambda: {"x": 1}, ("x",)),
    ],
    ids=["list1", "list2", "list3", "list4", "tuple", "iterator", "dict"],
)
async def test_keys_whatever_collection_handed_them_in(
    make: Callable[[], Iterable[str]], expected: tuple[str, ...], nowait: bool
) -> None:
    # lists of up to three keys are held in the op itself, anything else as a tuple: the
    # keys, the watch and the record read the same either way
    keys = make()
    records: list[OperationRecord] = []
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        purgatory.add_listener(records.append)
        op, ready = Flag(100_000), [False]
        op.ready = ready
        assert op.keys == ()
        if nowait:
            assert purgatory.try_complete_else_watch_nowait(op, keys) is False
        else:
            assert await purgatory.try_complete_else_watch(op, keys) is False
        if isinstance(keys, list):
            keys.append("later")  # the caller's list is not the op's
        assert op.keys == expected
        assert op.keys is op.keys
        if isinstance(keys, tuple):
            assert op.keys is keys
        assert purgatory.watched == len(expected)
        assert purgatory.pending_operations() == [op]
        ready[0] = True
        assert await purgatory.check_and_complete("later") == 0
        assert await purgatory.check_and_complete(expected[-1]) == 1
    assert [record.keys for record in records] == [expected]


@pytest.mark.asyncio
async def test_bad_input_registers_nothing() -> None:
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        with pytest.raises(ValueError, match="at least one key"):
            await purgatory.try_complete_else_watch(Flag(10), [])
        with pytest.raises(TypeError, match="unhashable"):
            await purgatory.try_complete_else_watch(Flag(10), ["ok", ["not", "hashable"]])
        with pytest.raises(TypeError, match="not a single str"):
            await purgatory.try_complete_else_watch(Flag(10), "abc")
        with pytest.raises(TypeError, match="DelayedOperation"):
            await purgatory.try_complete_else_watch(object(), ["k"])  # type: ignore[arg-type]
        assert (purgatory.watched, purgatory.num_delayed, purgatory.watched_keys()) == (0, 0, 0)
        op = Flag(10)
        await purgatory.try_complete_else_watch(op, ["k"])
        with pytest.raises(ValueError, match="already handed"):
            await purgatory.try_complete_else_watch(op, ["k"])
    with pytest.raises(ValueError, match="purge_interval"):
        DelayedOperationPurgatory("p", purge_interval=-1)


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_negative_delay_expires_at_once() -> None:
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        op = Flag(-100)
        start = asyncio.get_running_loop().time()
        await purgatory.try_complete_else_watch(op, ["k"])
        await op
        assert op.is_expired
        assert asyncio.get_running_loop().time() == start


@pytest.mark.asyncio
async def test_reaper_disabled_means_no_expiry() -> None:
    purgatory = DelayedOperationPurgatory[Flag]("p", reaper_enabled=False)
    op = Flag(1)
    await purgatory.try_complete_else_watch(op, ["k"])
    await asyncio.sleep(0.01)
    assert not op.is_done
    assert purgatory.num_delayed == 1
    assert purgatory.timer.run_due() == 1
    assert op.is_expired
    await purgatory.shutdown()


def test_repr_shows_state() -> None:
    purgatory = DelayedOperationPurgatory[Flag]("produce")
    assert repr(purgatory) == (
        "<DelayedOperationPurgatory 'produce' idle watched=0 delayed=0 keys=0>"
    )
    assert repr(Flag(5)) == "<Flag pending delay=5ms checks=0>"


@pytest.mark.asyncio
async def test_nowait_cores() -> None:
    state = {"version": 1}
    gate = asyncio.Event()
    gate.set()
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:
        ready = [False]
        sync_op, async_op = Flag(60_000, ready), SlowCheck(60_000, state, gate)
        assert purgatory.try_complete_else_watch_nowait(sync_op, ("k",)) is False
        with pytest.raises(TypeError, match="is async"):
            purgatory.try_complete_else_watch_nowait(async_op, ["k"])
        assert (purgatory.watched, purgatory.num_delayed) == (1, 1)  # nothing registered
        assert await purgatory.try_complete_else_watch(async_op, ["k"]) is False
        ready[0] = True
        state["version"] = 2
        # sync checks run now and are counted; async ones are started as tasks
        assert purgatory.check_and_complete_nowait("k") == 1
        assert sync_op.is_completed
        assert not async_op.is_completed
        await async_op
        assert purgatory.num_delayed == 0


@pytest.mark.asyncio
async def test_pending_operations_lists_each_watched_pending_op_once() -> None:
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        ready = [False]
        both, one, done = Flag(60_000, ready), Flag(60_000), Flag(60_000, [True])
        await purgatory.try_complete_else_watch(both, ["a", "b"])
        await purgatory.try_complete_else_watch(one, ["b"])
        await purgatory.try_complete_else_watch(done, ["a"])  # completes at once
        assert sorted(map(id, purgatory.pending_operations())) == sorted(map(id, [both, one]))
        ready[0] = True
        await purgatory.check_and_complete("a")
        assert purgatory.pending_operations() == [one]
