"""What the in-process bus tests park: a wait for a key's version in a dict that stands in
for the shared store; and how they wait for what has no callback to await."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from purgatory import DelayedOperation, DelayedOperationPurgatory

Purgatory = DelayedOperationPurgatory[DelayedOperation]


def waiter(
    purgatory: Purgatory, state: dict[str, int], key: str, version: int = 1
) -> asyncio.Task[bool]:
    """A parked wait for ``state[key] >= version``, timing out after 10 minutes."""
    return asyncio.create_task(
        purgatory.wait_until(lambda: state.get(key, 0) >= version, [key], 600_000)
    )


async def until(condition: Callable[[], bool], within_s: float = 10.0) -> float:
    """Wait for ``condition()`` to hold; return how long it took; fail past ``within_s``.
    (For what no callback tells: a counter, a connection state.)"""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > within_s:
            raise AssertionError(f"not true within {within_s} s")
        await asyncio.sleep(0.005)
    return time.monotonic() - started


async def parked(purgatory: Purgatory, count: int) -> None:
    """Wait until ``count`` waiters are parked (wait_until has no "parked" callback)."""
    await until(lambda: purgatory.watched >= count, 5)
