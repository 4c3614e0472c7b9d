"""What the in-process bus tests park: a wait for a key's version in a dict that stands in
for the shared store."""

from __future__ import annotations

import asyncio

from purgatory import DelayedOperation, DelayedOperationPurgatory

Purgatory = DelayedOperationPurgatory[DelayedOperation]


def waiter(
    purgatory: Purgatory, state: dict[str, int], key: str, version: int = 1
) -> asyncio.Task[bool]:
    """A parked wait for ``state[key] >= version``, timing out after 10 minutes."""
    return asyncio.create_task(
        purgatory.wait_until(lambda: state.get(key, 0) >= version, [key], 600_000)
    )
