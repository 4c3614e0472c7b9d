"""Committed offsets, as Kafka's group coordinator keeps them in ``__consumer_offsets``,
and their expiry (``offsets.retention.minutes``).

One store serves every broker: the simulation has no internal offsets topic to fail over,
so every broker may coordinate every group.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple, final

from purgatory._clock import Clock


class Committed(NamedTuple):
    """A partition's committed position: the offset, its leader epoch, the metadata string."""

    offset: int
    leader_epoch: int
    metadata: str | None


#: what OffsetFetch answers for a partition the group never committed
NOTHING_COMMITTED = Committed(-1, -1, "")


def _monotonic_ms() -> float:
    return time.monotonic() * 1000.0


@final
class OffsetStore:
    """Committed offsets per (group, topic, partition), each with when it was committed
    by ``clock`` (monotonic milliseconds; the group coordinator's in the front door)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.committed: dict[tuple[str, str, int], Committed] = {}
        self._committed_ms: dict[tuple[str, str, int], float] = {}
        self.clock: Clock = _monotonic_ms if clock is None else clock
        #: TxnOffsetCommit's offsets, per (group, producer id), until the transaction ends
        self.pending: dict[tuple[str, int], dict[tuple[str, int], Committed]] = {}

    def commit(self, group: str, topic: str, partition: int, position: Committed) -> None:
        self.committed[group, topic, partition] = position
        self._committed_ms[group, topic, partition] = self.clock()

    def expire(
        self, retention_ms: float, since: Callable[[str], float | None]
    ) -> list[tuple[str, str, int]]:
        """Kafka's offset expiry, now (``clock``): a group's committed offsets go
        ``retention_ms`` after ``since(group)`` (the group coordinator's word: None for
        after each commit, ``math.inf`` for never). Returns the (group, topic, partition)
        whose offsets went."""
        now = self.clock()
        gone = []
        for key, committed_ms in self._committed_ms.items():
            base = since(key[0])
            if now - (committed_ms if base is None else base) >= retention_ms:
                gone.append(key)
        for key in gone:
            del self.committed[key]
            del self._committed_ms[key]
        return gone

    def commit_pending(
        self, group: str, producer_id: int, topic: str, partition: int, position: Committed
    ) -> None:
        """A transactional commit: held apart until the transaction commits (then it is
        the committed position) or aborts (then it is dropped), as Kafka's group
        coordinator holds pending transactional offsets."""
        self.pending.setdefault((group, producer_id), {})[topic, partition] = position

    def complete_transaction(self, group: str, producer_id: int, commit: bool) -> None:
        """The transaction marker reached the group: its pending offsets become visible
        (commit) or go (abort). Idempotent, as a marker written again must be."""
        for (topic, partition), position in self.pending.pop((group, producer_id), {}).items():
            if commit:  # committed now, as far as offset expiry is concerned
                self.commit(group, topic, partition, position)

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """Whether a transaction holds an offset of the partition not yet committed
        (OffsetFetch's require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile)."""
        return any(
            (topic, partition) in held for (g, _), held in self.pending.items() if g == group
        )

    def position(self, group: str, topic: str, partition: int) -> Committed:
        """What ``group`` committed for the partition (NOTHING_COMMITTED if nothing)."""
        return self.committed.get((group, topic, partition), NOTHING_COMMITTED)

    def partitions(self, group: str) -> dict[str, list[int]]:
        """Every partition ``group`` committed, by topic."""
        out: dict[str, list[int]] = {}
        for g, topic, partition in self.committed:
            if g == group:
                out.setdefault(topic, []).append(partition)
        return out

    def delete(self, group: str, topic: str, partition: int) -> bool:
        """Forget what ``group`` committed for one partition (OffsetDelete); whether it
        had committed anything."""
        return self.committed.pop((group, topic, partition), None) is not None

    def delete_group(self, group: str) -> int:
        """Forget everything ``group`` committed (DeleteGroups); returns how many
        partitions' offsets went."""
        gone = [key for key in self.committed if key[0] == group]
        for key in gone:
            del self.committed[key]
            del self._committed_ms[key]
        return len(gone)

    def has_group(self, group: str) -> bool:
        """Whether ``group`` committed, or holds offsets of a transaction (either way
        Kafka's coordinator keeps the group, Empty if nobody joined it)."""
        return any(g == group for g, _, _ in self.committed) or any(
            g == group for g, _ in self.pending
        )

    def groups(self) -> list[str]:
        """Every group that committed, in the order they first did."""
        return list(dict.fromkeys(group for group, _, _ in self.committed))
