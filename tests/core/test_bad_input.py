"""Bad input: every check happens before anything is registered, statistics stay
consistent, and the compiled and pure-Python builds answer the same (CI runs this file on
both builds)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    ManualClock,
    PurgatoryStatistics,
    SystemTimer,
    TimerCore,
    TimerTask,
)


class Flag(DelayedOperation):
    def __init__(self, delay_ms: int = 60_000, ready: bool = False) -> None:
        super().__init__(delay_ms)
        self.ready = ready

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready else False


class EqRaises:
    """Hashes like every other EqRaises, and raises when compared: dict insertion fails
    only once a second one meets the first in the same slot."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return 42

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing")


class HashRaises:
    def __hash__(self) -> int:
        raise RuntimeError("no hashing")


def _counts(purgatory: DelayedOperationPurgatory[Any]) -> PurgatoryStatistics:
    return purgatory.statistics()


@pytest.mark.asyncio
@pytest.mark.parametrize("nowait", [False, True])
async def test_a_key_whose_eq_raises_registers_nothing(nowait: bool) -> None:
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        await purgatory.try_complete_else_watch(Flag(), [EqRaises("a")])
        before = _counts(purgatory)
        op = Flag()
        keys = ["fine", EqRaises("b")]
        if nowait:
            with pytest.raises(RuntimeError, match="no comparing"):
                purgatory.try_complete_else_watch_nowait(op, keys)
        else:
            with pytest.raises(RuntimeError, match="no comparing"):
                await purgatory.try_complete_else_watch(op, keys)
        assert _counts(purgatory) == before
        assert purgatory.watched >= 0
        # the op is free again and can be handed in with good keys
        assert await purgatory.try_complete_else_watch(op, ["fine"]) is False
        assert (purgatory.watched, purgatory.num_delayed) == (2, 2)
        op.ready = True
        assert await purgatory.check_and_complete("fine") == 1
        assert (purgatory.watched, purgatory.num_delayed) == (1, 1)


@pytest.mark.asyncio
async def test_a_key_whose_hash_raises_registers_nothing() -> None:
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        before = _counts(purgatory)
        with pytest.raises(RuntimeError, match="no hashing"):
            await purgatory.try_complete_else_watch(Flag(), ["fine", HashRaises()])
        assert _counts(purgatory) == before


@pytest.mark.parametrize("delay", [10**400, 2**53 + 1])
def test_a_delay_too_large_is_refused_at_construction(delay: int) -> None:
    with pytest.raises(ValueError, match="at most 2\\*\\*53"):
        Flag(delay)
    with pytest.raises(ValueError, match="at most 2\\*\\*53"):
        TimerCoreTask(delay)


def test_the_largest_delay_and_any_negative_one_are_accepted() -> None:
    assert Flag(2**53).delay_ms == 2**53
    assert Flag(-(10**400)).delay_ms == -(10**400)


@pytest.mark.asyncio
async def test_the_largest_delay_is_scheduled() -> None:
    async with DelayedOperationPurgatory[Flag]("p") as purgatory:
        op = Flag(2**53)
        assert await purgatory.try_complete_else_watch(op, ["k"]) is False
        assert purgatory.num_delayed == 1
        assert op.expiration_ms > 2**53


class TimerCoreTask(TimerTask):
    def run(self) -> None:
        pass


@pytest.mark.parametrize(
    "make",
    [
        lambda: SystemTimer("t", clock=5),  # type: ignore[arg-type]
        lambda: DelayedOperationPurgatory("p", clock="now"),  # type: ignore[arg-type]
    ],
)
def test_a_clock_that_cannot_be_called_is_refused(make: Callable[[], object]) -> None:
    with pytest.raises(TypeError, match="clock must be callable"):
        make()


# The same answer from both builds: the compiled one used to convert a bool to an int at
# the call boundary, and to reject a None from try_complete that pure Python accepted.
@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"purge_interval": True}, TypeError),
        ({"purge_interval": 1.5}, TypeError),
        ({"purge_interval": -1}, ValueError),
        ({"reaper_enabled": 1}, TypeError),
        ({"timer_enabled": None}, TypeError),
        ({"tick_ms": True}, TypeError),
        ({"tick_ms": 0}, ValueError),
        ({"wheel_size": 1}, ValueError),
        ({"wheel_size": 2.0}, TypeError),
    ],
)
def test_purgatory_arguments_are_checked_alike_in_both_builds(
    kwargs: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        DelayedOperationPurgatory("p", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", [5, None, b"bytes"])
def test_names_must_be_str(name: object) -> None:
    # the compiled build checks the annotation first ("str object expected; got int")
    with pytest.raises(TypeError, match="str"):
        DelayedOperationPurgatory(name)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str"):
        SystemTimer(name)  # type: ignore[arg-type]


@pytest.mark.parametrize("delay", [True, 1.0, float("nan"), "10", None])
def test_delays_must_be_ints(delay: object) -> None:
    with pytest.raises(TypeError, match="delay_ms"):
        Flag(delay)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delay_ms"):
        TimerCoreTask(delay)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("timeout", "error"), [(True, TypeError), (1.5, TypeError), (-1, ValueError)]
)
def test_advance_clock_timeouts_are_checked_alike(timeout: object, error: type[Exception]) -> None:
    timer = SystemTimer("t", clock=ManualClock())
    with pytest.raises(error):
        asyncio.run(timer.advance_clock(timeout))  # type: ignore[arg-type]


def test_timer_core_arguments_are_checked_alike() -> None:
    with pytest.raises(TypeError):
        TimerCore(tick_ms=True)
    with pytest.raises(ValueError, match="wheel_size"):
        TimerCore(wheel_size=1)


class ReturnsNone(DelayedOperation):
    def try_complete(self) -> bool:
        return None  # type: ignore[return-value]


@pytest.mark.asyncio
async def test_try_complete_returning_none_means_not_yet_in_both_builds() -> None:
    async with DelayedOperationPurgatory[ReturnsNone]("p") as purgatory:
        op = ReturnsNone(60_000)
        assert await purgatory.try_complete_else_watch(op, ["k"]) is False
        assert await purgatory.check_and_complete("k") == 0
        assert op.check_now() is False
        assert purgatory.statistics().callback_errors == 0
        assert not op.is_done


@pytest.mark.asyncio
async def test_wait_until_arguments_are_checked_before_registering() -> None:
    async with DelayedOperationPurgatory[DelayedOperation]("p") as purgatory:
        before = _counts(purgatory)
        with pytest.raises(TypeError, match="predicate must be callable"):
            await purgatory.wait_until(True, ["k"], 10)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="delay_ms"):
            await purgatory.wait_until(lambda: False, ["k"], 1.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="at least one key"):
            await purgatory.wait_until(lambda: False, [], 10)
        with pytest.raises(TypeError, match="unhashable"):
            await purgatory.wait_until(lambda: False, [["x"]], 10)
        assert _counts(purgatory) == before
