"""Mistakes a new user makes explain themselves."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

import purgatory
from purgatory import DelayedOperation, DelayedOperationPurgatory


@pytest.mark.asyncio
async def test_truthy_while_pending_warns_once_per_class_naming_the_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class ForgotForceComplete(DelayedOperation):  # a new class per run: warned once each
        def try_complete(self) -> bool:
            return True  # should be: return self.force_complete()

    caplog.set_level(logging.WARNING, logger="purgatory")
    async with DelayedOperationPurgatory[ForgotForceComplete]("p") as purgatory:
        for _ in range(3):
            op = ForgotForceComplete(60_000)
            assert await purgatory.try_complete_else_watch(op, ["k"]) is False
            assert not op.is_done
        assert await purgatory.check_and_complete("k") == 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "ForgotForceComplete.try_complete returned True" in message
    assert "return self.force_complete()" in message


class NoSuper(DelayedOperation):
    def __init__(self, delay_ms: int) -> None:
        self.delay = delay_ms  # forgot super().__init__(delay_ms)

    def try_complete(self) -> bool:
        return False


@pytest.mark.asyncio
async def test_a_subclass_that_skipped_super_init_is_told_so() -> None:
    async with DelayedOperationPurgatory[NoSuper]("p") as purgatory:
        with pytest.raises(TypeError, match=r"NoSuper.__init__ did not call super\(\).__init__"):
            await purgatory.try_complete_else_watch(NoSuper(10), ["k"])
        with pytest.raises(TypeError, match=r"did not call super\(\).__init__"):
            purgatory.try_complete_else_watch_nowait(NoSuper(10), ["k"])
        assert purgatory.watched == 0


class Bare(DelayedOperation):  # no __init__ of its own
    def try_complete(self) -> bool:
        return False


def test_super_init_is_the_compiled_method_not_the_constructors_slot_wrapper() -> None:
    """What a subclass's super().__init__(delay_ms) calls: the compiled build's fast-call
    method rather than the slot wrapper that parses a tuple of arguments by keyword (see
    docs/performance.md); it initialises the operation however it is called."""
    init = DelayedOperation.__dict__["__init__"]
    assert init is DelayedOperation.__dict__["_initialise"]
    assert type(init).__name__ == ("method_descriptor" if purgatory.COMPILED else "function")
    for op in (Bare(7), Bare(delay_ms=7), Raises("nowhere")):
        assert (op.delay_ms > 0, op.is_done, op.keys, op.checks) == (True, False, (), 0)
    with pytest.raises(TypeError, match="delay_ms must be an int"):
        Bare(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delay_ms"):
        Bare()  # type: ignore[call-arg]


class Raises(DelayedOperation):
    def __init__(self, where: str) -> None:
        super().__init__(0 if where == "on_expiration" else 60_000)
        self.where = where

    def try_complete(self) -> bool:
        if self.where == "try_complete":
            raise ValueError("bug in try_complete")
        return self.force_complete() if self.where == "on_complete" else False

    def on_complete(self) -> None:
        if self.where == "on_complete":
            raise ValueError("bug in on_complete")

    def on_expiration(self) -> None:
        raise ValueError("bug in on_expiration")


@pytest.mark.asyncio
@pytest.mark.parametrize("where", ["try_complete", "on_complete", "on_expiration"])
async def test_tracebacks_from_user_callbacks_end_in_the_users_code(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="purgatory")
    async with DelayedOperationPurgatory[Raises]("p") as purgatory:
        op = Raises(where)
        await purgatory.try_complete_else_watch(op, ["k"])
        await asyncio.sleep(0.01)
    [record] = [r for r in caplog.records if r.exc_info]
    assert f"{where} raised" in record.getMessage()
    assert record.exc_info is not None
    tb = record.exc_info[2]
    assert tb is not None
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert Path(tb.tb_frame.f_code.co_filename) == Path(__file__)
    assert tb.tb_frame.f_code.co_name == where
