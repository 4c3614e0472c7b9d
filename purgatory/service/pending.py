"""The parked-request budget (``max_pending``), kept apart by kind as Kafka keeps its
purgatories apart.

Long-poll fetches wait for a write, so if fetches could take every slot, the acks=-1
produce that would wake them would be refused and every poll would wait out its timeout.
Fetches may therefore take all of the budget but a reserve
(:func:`~purgatory.service.config.write_reserve`) that
only writes use: acks=-1 produces and leader elections, the requests that answer parked
fetches. Writes may take any free slot: a parked write never waits for a fetch.
"""

from __future__ import annotations

import enum
from typing import final

from purgatory.service.config import write_reserve


@enum.unique
class Parks(enum.Enum):
    """Whether a request may park, and in which share of the budget."""

    NEVER = "never"  #: answered at once, not counted
    FETCH = "fetch"  #: a long poll: within the fetch share
    WRITE = "write"  #: an acks=-1 produce or an election: any free slot


@final
class PendingBudget:
    """How many requests are parked now, and whether one more of a kind may park."""

    def __init__(self, max_pending: int) -> None:
        self.max_pending = max_pending
        self.max_fetches = max_pending - write_reserve(max_pending)
        self.parked = 0
        self.fetches = 0

    def refusal(self, parks: Parks) -> str | None:
        """Why a request of this kind may not park now, or None if it may."""
        if parks is Parks.NEVER:
            return None
        if self.parked >= self.max_pending:
            return f"{self.parked} requests are already parked (max_pending)"
        if parks is Parks.FETCH and self.fetches >= self.max_fetches:
            return (
                f"{self.fetches} fetches are already parked (max_pending less "
                f"{self.max_pending - self.max_fetches} kept for produces)"
            )
        return None

    def take(self, parks: Parks) -> None:
        """Count one more parked request (FETCH or WRITE); call :meth:`refusal` first."""
        self.parked += 1
        if parks is Parks.FETCH:
            self.fetches += 1

    def give_back(self, parks: Parks) -> None:
        self.parked -= 1
        if parks is Parks.FETCH:
            self.fetches -= 1
