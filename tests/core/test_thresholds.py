"""Threshold waits: ``wait_for_value`` / ``watch_threshold`` until a key's value reaches a
threshold, ``set_value`` to move it. The guarantees of every other wait (never early,
exactly once, cancellation, purge, metrics, shutdown, one loop), and an advance completes
exactly the waiters it reaches, without checking the others.

Deterministic: a ManualClock and ``timer.run_due()`` instead of a reaper and sleeps. Every
async test runs on asyncio and on uvloop (tests/conftest.py); the property test runs on
both loops itself."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    ManualClock,
    OperationCancelled,
    OperationRecord,
    OperationState,
    PurgatoryStatistics,
)
from purgatory.metrics import PurgatoryMetrics

DELAY = 1_000


class Reached(DelayedOperation):
    """A threshold op that notes the clock and the key's value when it completes or
    expires."""

    def __init__(self, delay_ms: int = DELAY) -> None:
        super().__init__(delay_ms)
        self.completions = 0
        self.expirations = 0
        self.finished_at: float | None = None
        self.value_at_finish: int | None = None
        self.purgatory: DelayedOperationPurgatory[Any] | None = None

    def try_complete(self) -> bool:
        raise AssertionError("a threshold op is never checked through try_complete")

    def on_complete(self) -> None:
        self.completions += 1
        if self.purgatory is not None:
            self.finished_at = self.purgatory.timer.now_ms()
            self.value_at_finish = self.purgatory.value_of(self.keys[0])

    def on_expiration(self) -> None:
        self.expirations += 1


def _purgatory(clock: ManualClock, **kwargs: Any) -> DelayedOperationPurgatory[Any]:
    # no reaper: the tests run the timer themselves (timer.run_due()) on the manual clock
    return DelayedOperationPurgatory[Any]("p", reaper_enabled=False, clock=clock, **kwargs)


async def _waiting(
    purgatory: DelayedOperationPurgatory[Any], key: object, threshold: int, timeout_ms: int = DELAY
) -> asyncio.Task[bool]:
    """A task in ``wait_for_value``, returned once it waits (or has its answer)."""
    task = asyncio.create_task(purgatory.wait_for_value(key, threshold, timeout_ms))
    await asyncio.sleep(0)
    return task


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


# -- completion ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_value_already_reached_answers_at_once_and_registers_nothing() -> None:
    async with _purgatory(ManualClock()) as purgatory:
        assert purgatory.set_value("v", 7) == 0
        assert await purgatory.wait_for_value("v", 7, DELAY) is True
        assert await purgatory.wait_for_value("v", -3, DELAY) is True
        stats = purgatory.statistics()
        assert (stats.watched, stats.num_delayed, stats.threshold_keys) == (0, 0, 0)
        assert stats.completed == 2


@pytest.mark.asyncio
async def test_a_set_completes_exactly_the_waiters_it_reaches() -> None:
    async with _purgatory(ManualClock()) as purgatory:
        thresholds = [5, 3, 9, 3, 4, 12]
        ops = [Reached() for _ in thresholds]
        for op, threshold in zip(ops, thresholds, strict=True):
            op.purgatory = purgatory
            assert purgatory.watch_threshold(op, "hw", threshold) is False
        assert (purgatory.watched, purgatory.num_delayed, purgatory.threshold_keys()) == (6, 6, 1)
        assert purgatory.keys_with_threshold_waiters() == ["hw"]
        assert purgatory.watched_keys() == 0  # no watcher list: check_and_complete skips them

        assert purgatory.set_value("hw", 2) == 0
        assert purgatory.set_value("hw", 4) == 3
        assert [op.completions for op in ops] == [0, 1, 0, 1, 1, 0]
        assert [op.value_at_finish for op in ops if op.completions] == [4, 4, 4]
        assert purgatory.set_value("hw", 9) == 2
        assert [op.completions for op in ops] == [1, 1, 1, 1, 1, 0]
        # each op was looked at twice: on the way in and when the value reached it
        assert [op.checks for op in ops] == [2, 2, 2, 2, 2, 1]
        assert (purgatory.watched, purgatory.num_delayed) == (1, 1)
        assert purgatory.pending_operations() == [ops[5]]
        assert purgatory.set_value("hw", 100) == 1
        assert (purgatory.watched, purgatory.num_delayed, purgatory.threshold_keys()) == (0, 0, 0)
        assert purgatory.keys_with_threshold_waiters() == []
        assert purgatory.statistics().completed == 6
        # the values are kept
        assert purgatory.value_of("hw") == 100


@pytest.mark.asyncio
async def test_keys_are_independent_and_check_and_complete_leaves_threshold_waits_alone() -> None:
    async with _purgatory(ManualClock()) as purgatory:
        a = await _waiting(purgatory, "a", 1)
        b = await _waiting(purgatory, "b", 1)
        assert await purgatory.check_and_complete("a") == 0
        assert purgatory.check_and_complete_nowait("a") == 0
        assert await purgatory.check_all() == 0
        assert purgatory.set_value("b", 1) == 1
        await _settle()
        assert b.result() is True
        assert not a.done()
        assert purgatory.set_value("a", 1) == 1
        assert await a is True


@pytest.mark.asyncio
async def test_a_value_going_backwards_completes_nobody_and_keeps_the_waiters() -> None:
    """A truncation: the value is lowered, no waiter completes, every waiter stays and
    completes once a later value reaches it; a new waiter compares with the lowered
    value."""
    async with _purgatory(ManualClock()) as purgatory:
        purgatory.set_value("leo", 10)
        high = await _waiting(purgatory, "leo", 12)
        assert purgatory.set_value("leo", 5) == 0
        assert purgatory.value_of("leo") == 5
        low = await _waiting(purgatory, "leo", 8)  # 10 was reached once, but not now
        assert not low.done()
        assert (purgatory.watched, purgatory.num_delayed) == (2, 2)
        assert purgatory.set_value("leo", 11) == 1
        await _settle()
        assert low.result() is True
        assert not high.done()
        assert purgatory.set_value("leo", 12) == 1
        assert await high is True


@pytest.mark.asyncio
async def test_forget_value_keeps_the_waiters() -> None:
    async with _purgatory(ManualClock()) as purgatory:
        purgatory.set_value("doc", 3)
        assert purgatory.forget_value("doc") == 3
        assert purgatory.forget_value("doc") is None
        assert purgatory.value_of("doc") is None
        waiting = await _waiting(purgatory, "doc", 1)
        assert not waiting.done()
        assert purgatory.set_value("doc", 1) == 1
        assert await waiting is True


@pytest.mark.asyncio
async def test_any_int_works_as_value_and_threshold() -> None:
    class Offset(int):
        pass

    async with _purgatory(ManualClock()) as purgatory:
        huge = 10**30
        waiting = await _waiting(purgatory, "k", huge)
        assert purgatory.set_value("k", Offset(-(10**40))) == 0
        assert purgatory.set_value("k", huge - 1) == 0
        assert purgatory.set_value("k", huge) == 1
        assert await waiting is True
        assert type(purgatory.value_of("k")) is int


# -- timeouts: never early, exactly once -----------------------------------------------------


@pytest.mark.asyncio
async def test_the_timeout_answers_false_at_its_deadline_never_before() -> None:
    clock = ManualClock(1_000)
    async with _purgatory(clock) as purgatory:
        waiting = await _waiting(purgatory, "k", 5, 250)
        op = Reached(250)
        op.purgatory = purgatory
        purgatory.watch_threshold(op, "k", 5)
        clock.advance(249)
        assert purgatory.timer.run_due() == 0
        await _settle()
        assert not waiting.done()
        assert not op.is_done
        clock.advance(1)
        assert purgatory.timer.run_due() == 2
        assert await waiting is False
        assert (op.completions, op.expirations, op.is_expired) == (1, 1, True)
        # a value that comes after the timeout completes nothing, and drops the entries
        assert purgatory.set_value("k", 5) == 0
        assert op.completions == 1
        stats = purgatory.statistics()
        assert (stats.expired, stats.completed, stats.watched, stats.threshold_keys) == (2, 0, 0, 0)


@pytest.mark.asyncio
async def test_a_completed_wait_never_expires() -> None:
    clock = ManualClock()
    async with _purgatory(clock) as purgatory:
        op = Reached(10)
        purgatory.watch_threshold(op, "k", 1)
        purgatory.set_value("k", 1)
        clock.advance(100)
        assert purgatory.timer.run_due() == 0
        assert (op.completions, op.expirations) == (1, 0)
        assert purgatory.set_value("k", 2) == 0
        assert op.completions == 1


# -- cancellation and shutdown ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_cancelling_the_caller_removes_the_wait() -> None:
    async with _purgatory(ManualClock()) as purgatory:
        waiting = await _waiting(purgatory, "k", 5)
        assert (purgatory.watched, purgatory.num_delayed) == (1, 1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert purgatory.num_delayed == 0
        assert purgatory.pending_operations() == []
        assert purgatory.statistics().cancelled == 1
        assert purgatory.set_value("k", 5) == 0  # drops the cancelled entry
        assert (purgatory.watched, purgatory.threshold_keys()) == (0, 0)


@pytest.mark.asyncio
async def test_cancelling_the_op_and_cancel_for_key() -> None:
    async with _purgatory(ManualClock()) as purgatory:
        op = Reached()
        purgatory.watch_threshold(op, "k", 5)
        assert op.cancel() is True
        assert op.operation_state is OperationState.CANCELLED
        assert purgatory.set_value("k", 9) == 0
        assert op.completions == 0

        others = [Reached() for _ in range(3)]
        for i, other in enumerate(others):
            purgatory.watch_threshold(other, "k", 20 + i)
        waiting = await _waiting(purgatory, "k", 30)
        others[1].cancel()
        cancelled = purgatory.cancel_for_key("k")
        assert set(map(id, cancelled)) == {id(others[0]), id(others[2])} | {
            id(op) for op in cancelled if type(op).__name__ == "ThresholdWait"
        }
        assert len(cancelled) == 3
        with pytest.raises(OperationCancelled):
            await waiting
        stats = purgatory.statistics()
        assert (stats.watched, stats.num_delayed, stats.threshold_keys) == (0, 0, 0)
        assert stats.cancelled == 5


@pytest.mark.asyncio
async def test_on_complete_may_set_values_and_cancel_its_own_key() -> None:
    """Re-entrant calls from on_complete leave the heap and the counts consistent."""

    class Chain(Reached):
        def __init__(self, action: Callable[[], object]) -> None:
            super().__init__()
            self.action = action

        def on_complete(self) -> None:
            super().on_complete()
            self.action()

    async with _purgatory(ManualClock()) as purgatory:
        first = Chain(lambda: purgatory.set_value("k", 3))
        second, third = Reached(), Reached()
        purgatory.watch_threshold(first, "k", 1)
        purgatory.watch_threshold(second, "k", 3)
        purgatory.watch_threshold(third, "k", 4)
        assert purgatory.set_value("k", 1) == 1  # the inner set completed `second`
        assert (second.completions, third.completions) == (1, 0)
        assert purgatory.value_of("k") == 3
        assert purgatory.watched == 1

        canceller = Chain(lambda: purgatory.cancel_for_key("k"))
        victim = Reached()
        purgatory.watch_threshold(canceller, "k", 5)
        purgatory.watch_threshold(victim, "k", 6)
        assert purgatory.set_value("k", 10) == 2  # `third`, `canceller`, then the cancel
        assert (third.completions, canceller.completions, victim.is_cancelled) == (1, 1, True)
        stats = purgatory.statistics()
        assert (stats.watched, stats.num_delayed, stats.threshold_keys) == (0, 0, 0)
        assert (stats.completed, stats.cancelled) == (4, 1)


@pytest.mark.asyncio
async def test_shutdown_answers_waiters_with_operation_cancelled() -> None:
    purgatory = _purgatory(ManualClock())
    waiting = await _waiting(purgatory, "k", 5)
    op = Reached()
    purgatory.watch_threshold(op, "j", 5)
    await purgatory.shutdown()
    with pytest.raises(OperationCancelled):
        await waiting
    assert op.is_cancelled
    stats = purgatory.statistics()
    assert (stats.watched, stats.num_delayed, stats.threshold_keys) == (0, 0, 0)
    with pytest.raises(RuntimeError, match="shut down"):
        await purgatory.wait_for_value("k", 1, DELAY)
    assert purgatory.set_value("k", 9) == 0


# -- purge -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_finished_entries_out_of_reach_are_purged() -> None:
    """Cancelled and expired waiters whose threshold no value reaches leave by a purge."""
    clock = ManualClock()
    async with _purgatory(clock, purge_interval=0) as purgatory:
        ops = [Reached(10 if i % 2 else DELAY) for i in range(10)]
        for i, op in enumerate(ops):
            purgatory.watch_threshold(op, "k" if i < 8 else "j", 1_000 + i)
        for op in ops[:4]:
            op.cancel()
        clock.advance(10)
        assert purgatory.timer.run_due() == 3  # ops 5, 7, 9 (1 and 3 are cancelled)
        assert purgatory.watched == 10
        assert await purgatory.purge_completed() == 7
        stats = purgatory.statistics()
        assert (stats.watched, stats.threshold_keys, stats.purged_entries) == (3, 2, 7)
        assert {id(op) for op in purgatory.pending_operations()} == {id(ops[i]) for i in (4, 6, 8)}
        assert purgatory.set_value("k", 2_000) == 2
        assert purgatory.set_value("j", 2_000) == 1
        assert (purgatory.watched, purgatory.threshold_keys()) == (0, 0)


@pytest.mark.asyncio
async def test_the_automatic_purge_bounds_finished_entries() -> None:
    # the purge runs beside the reaper; nothing here waits for time
    async with DelayedOperationPurgatory[Any]("p", purge_interval=100) as purgatory:
        for i in range(1_000):
            op = Reached()
            purgatory.watch_threshold(op, "k", 10**6 + i)
            op.cancel()
            if i % 50 == 49:
                await _settle()  # the purge task runs
        assert purgatory.watched <= 200
        assert purgatory.statistics().purges >= 1


# -- bad input registers nothing -------------------------------------------------------------


class EqRaises:
    """Hashes like every other EqRaises and raises when compared (see test_bad_input)."""

    def __hash__(self) -> int:
        return 42

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing")


def _counts(purgatory: DelayedOperationPurgatory[Any]) -> tuple[PurgatoryStatistics, int]:
    return purgatory.statistics(), purgatory.timer.size


@pytest.mark.asyncio
@pytest.mark.parametrize("threshold", [True, 1.0, float("nan"), "3", None, (1, 2)])
async def test_a_threshold_that_is_not_an_int_is_a_type_error(threshold: object) -> None:
    async with _purgatory(ManualClock()) as purgatory:
        before = _counts(purgatory)
        with pytest.raises(TypeError, match="threshold must be an int"):
            await purgatory.wait_for_value("k", threshold, DELAY)  # type: ignore[arg-type]
        op = Reached()
        with pytest.raises(TypeError, match="threshold must be an int"):
            purgatory.watch_threshold(op, "k", threshold)  # type: ignore[arg-type]
        assert op.keys == ()
        assert _counts(purgatory) == before
        assert purgatory.watch_threshold(op, "k", 1) is False  # the op is still free


@pytest.mark.asyncio
@pytest.mark.parametrize("value", [False, 2.0, "3", None])
async def test_a_value_that_is_not_an_int_is_a_type_error_and_changes_nothing(
    value: object,
) -> None:
    async with _purgatory(ManualClock()) as purgatory:
        purgatory.set_value("k", 1)
        waiting = await _waiting(purgatory, "k", 2)
        with pytest.raises(TypeError, match="value must be an int"):
            purgatory.set_value("k", value)  # type: ignore[arg-type]
        assert purgatory.value_of("k") == 1
        assert not waiting.done()
        waiting.cancel()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("timeout_ms", "error"),
    [(True, TypeError), (1.5, TypeError), ("10", TypeError), (2**53 + 1, ValueError)],
)
async def test_a_bad_timeout_registers_nothing(timeout_ms: object, error: type[Exception]) -> None:
    async with _purgatory(ManualClock()) as purgatory:
        before = _counts(purgatory)
        with pytest.raises(error, match="delay_ms"):
            await purgatory.wait_for_value("k", 1, timeout_ms)  # type: ignore[arg-type]
        assert _counts(purgatory) == before


@pytest.mark.asyncio
async def test_bad_keys_and_taken_ops_register_nothing() -> None:
    async with _purgatory(ManualClock()) as purgatory:
        before = _counts(purgatory)
        with pytest.raises(TypeError, match="unhashable"):
            await purgatory.wait_for_value(["a", "list"], 1, DELAY)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="unhashable"):
            purgatory.set_value({}, 1)  # type: ignore[arg-type]
        assert _counts(purgatory) == before

        purgatory.watch_threshold(Reached(), EqRaises(), 1)
        before = _counts(purgatory)
        op = Reached()
        with pytest.raises(RuntimeError, match="no comparing"):
            purgatory.watch_threshold(op, EqRaises(), 1)
        assert op.keys == ()
        assert _counts(purgatory) == before
        assert purgatory.watch_threshold(op, "fine", 1) is False
        with pytest.raises(ValueError, match="already handed"):
            purgatory.watch_threshold(op, "fine", 1)
        with pytest.raises(TypeError, match="DelayedOperation"):  # both builds say so
            purgatory.watch_threshold(object(), "fine", 1)
        assert purgatory.watched == 2


# -- metrics and listeners -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_threshold_waits_are_counted_like_other_waits() -> None:
    registry = CollectorRegistry()
    metrics = PurgatoryMetrics(registry)
    clock = ManualClock()
    async with _purgatory(clock) as purgatory:
        metrics.track(purgatory)
        records: list[OperationRecord] = []
        purgatory.add_listener(records.append)
        done = await _waiting(purgatory, "k", 1)
        late = await _waiting(purgatory, "k", 9, 10)
        gone = await _waiting(purgatory, "j", 9)

        def sample(name: str, **labels: str) -> float | None:
            return registry.get_sample_value(name, {"purgatory": "p", **labels})

        assert sample("purgatory_threshold_keys") == 2
        assert sample("purgatory_watched_entries") == 3
        assert sample("purgatory_pending_operations", kind="ThresholdWait") == 3
        purgatory.set_value("k", 1)
        clock.advance(10)
        purgatory.timer.run_due()
        gone.cancel()
        await _settle()
        assert (done.result(), late.result(), gone.cancelled()) == (True, False, True)
        assert sample("purgatory_operations_completed_total") == 1
        assert sample("purgatory_operations_expired_total") == 1
        assert sample("purgatory_operations_cancelled_total") == 1
        assert sample("purgatory_expiration_lateness_seconds_count") == 1
        assert sample("purgatory_operation_duration_seconds_count") == 3
        assert [(r.keys, r.outcome.value) for r in records] == [
            (("k",), "completed"),
            (("k",), "expired"),
            (("j",), "cancelled"),
        ]
        metrics.untrack(purgatory)


# -- one loop --------------------------------------------------------------------------------


def test_threshold_waits_refuse_a_second_loop() -> None:
    purgatory = _purgatory(ManualClock())

    async def first() -> None:
        purgatory.set_value("k", 1)
        purgatory.watch_threshold(Reached(), "k", 5)

    asyncio.run(first())

    async def second() -> None:
        with pytest.raises(RuntimeError, match="different event loop"):
            purgatory.set_value("k", 9)
        with pytest.raises(RuntimeError, match="different event loop"):
            await purgatory.wait_for_value("k", 5, DELAY)

    asyncio.run(second())
    assert purgatory.watched == 1


def test_values_may_be_set_before_any_loop_runs() -> None:
    """As check_and_complete_nowait: a purgatory not yet bound to a loop takes initial
    values; the first loop that uses it binds it."""
    purgatory = _purgatory(ManualClock())
    assert purgatory.set_value("k", 1) == 0

    async def main() -> bool:
        return await purgatory.wait_for_value("k", 1, DELAY)

    assert asyncio.run(main()) is True


# -- property: random waits, sets, cancels and time steps ------------------------------------


@dataclass
class _Model:
    key: str
    threshold: int
    deadline: float
    via_task: bool
    op: Reached | None = None
    task: asyncio.Task[bool] | None = None
    state: str = "pending"  # completed / expired / cancelled
    at: float | None = None  # model time of the final state


_KEYS = ("a", "b")
_steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("wait"),
            st.sampled_from(_KEYS),
            st.integers(-5, 30),
            st.integers(1, 40),
            st.booleans(),
        ),
        st.tuples(st.just("set"), st.sampled_from(_KEYS), st.integers(-5, 30)),
        st.tuples(st.just("cancel"), st.integers(0, 200)),
        st.tuples(st.just("time"), st.integers(0, 15)),
        st.tuples(st.just("purge")),
    ),
    max_size=60,
)


def _loop_factories() -> list[Any]:
    factories: list[Any] = [pytest.param(asyncio.new_event_loop, id="asyncio")]
    if sys.platform != "win32":
        import uvloop

        factories.append(pytest.param(uvloop.new_event_loop, id="uvloop"))
    return factories


@pytest.mark.parametrize("loop_factory", _loop_factories())
@settings(max_examples=150, deadline=None)
@given(steps=_steps)
def test_every_waiter_completes_when_first_reached_or_times_out_at_its_deadline(
    loop_factory: Callable[[], asyncio.AbstractEventLoop], steps: list[tuple[Any, ...]]
) -> None:
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(_run_steps(steps))


async def _run_steps(steps: list[tuple[Any, ...]]) -> None:
    clock = ManualClock()
    purgatory = _purgatory(clock)
    values: dict[str, int] = {}
    waiters: list[_Model] = []
    finished_at: dict[int, float] = {}  # task waiters: clock when their task finished

    def finish(model: _Model, state: str) -> None:
        model.state, model.at = state, clock()

    for step in steps:
        kind = step[0]
        if kind == "wait":
            _, key, threshold, timeout, via_task = step
            model = _Model(key, threshold, clock() + timeout, via_task)
            waiters.append(model)
            if key in values and values[key] >= threshold:
                finish(model, "completed")
            if via_task:
                model.task = asyncio.create_task(purgatory.wait_for_value(key, threshold, timeout))
                model.task.add_done_callback(_noting(finished_at, len(waiters) - 1, clock))
            else:
                model.op = Reached(timeout)
                model.op.purgatory = purgatory
                done = purgatory.watch_threshold(model.op, key, threshold)
                assert done is (model.state == "completed")
        elif kind == "set":
            _, key, value = step
            values[key] = value
            reached = [
                m for m in waiters if m.state == "pending" and m.key == key and m.threshold <= value
            ]
            for model in reached:
                finish(model, "completed")
            completed = purgatory.set_value(key, value)
            assert completed == len(reached)
        elif kind == "cancel":
            if not waiters:
                continue
            model = waiters[step[1] % len(waiters)]
            if model.task is not None:
                model.task.cancel()
            else:
                assert model.op is not None
                assert model.op.cancel() is (model.state == "pending")
            if model.state == "pending":
                finish(model, "cancelled")
        elif kind == "time":
            clock.advance(step[1])
            due = [m for m in waiters if m.state == "pending" and m.deadline <= clock()]
            for model in due:
                finish(model, "expired")
            assert purgatory.timer.run_due() == len(due)
        else:
            await purgatory.purge_completed()
            pending = sum(1 for m in waiters if m.state == "pending")
            assert purgatory.watched == pending
        await _settle()  # every task woken by this step has its answer
        for key, value in values.items():
            assert purgatory.value_of(key) == value
        for model in waiters:  # the tasks and ops agree with the model at every step
            _check(model, finished_at.get(waiters.index(model)))

    stats = purgatory.statistics()
    by_state = {s: sum(1 for m in waiters if m.state == s) for s in ("completed", "expired")}
    assert (stats.completed, stats.expired) == (by_state["completed"], by_state["expired"])
    assert stats.num_delayed == sum(1 for m in waiters if m.state == "pending")
    await purgatory.shutdown()
    for model in waiters:
        if model.state == "pending":
            finish(model, "cancelled")
        if model.task is not None:
            await asyncio.gather(model.task, return_exceptions=True)


def _noting(
    finished_at: dict[int, float], index: int, clock: ManualClock
) -> Callable[[asyncio.Task[bool]], None]:
    def note(_: asyncio.Task[bool]) -> None:
        finished_at.setdefault(index, clock())

    return note


def _check(model: _Model, task_finished_at: float | None) -> None:
    if model.op is not None:
        op = model.op
        expected = {
            "pending": OperationState.PENDING,
            "completed": OperationState.COMPLETED,
            "expired": OperationState.EXPIRED,
            "cancelled": OperationState.CANCELLED,
        }[model.state]
        assert op.operation_state is expected
        assert op.completions == (model.state in ("completed", "expired"))  # exactly once
        assert op.expirations == (model.state == "expired")
        if model.state == "completed":
            assert op.finished_at == model.at
            assert op.value_at_finish is not None
            assert op.value_at_finish >= model.threshold
        if model.state == "expired":  # never early: not before its deadline
            assert model.at is not None
            assert model.at >= model.deadline
        return
    task = model.task
    assert task is not None
    if model.state == "pending":
        assert not task.done()
        return
    assert task.done()
    assert task_finished_at == model.at
    if model.state == "cancelled":
        assert task.cancelled()
    else:
        assert task.result() is (model.state == "completed")
