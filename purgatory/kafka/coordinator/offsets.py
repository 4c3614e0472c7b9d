"""Committed offsets, as Kafka's group coordinator keeps them in ``__consumer_offsets``.

One store serves every broker: the simulation has no internal offsets topic to fail over,
so every broker may coordinate every group.
"""

from __future__ import annotations

from typing import NamedTuple, final


class Committed(NamedTuple):
    """A partition's committed position: the offset, its leader epoch, the metadata string."""

    offset: int
    leader_epoch: int
    metadata: str | None


#: what OffsetFetch answers for a partition the group never committed
NOTHING_COMMITTED = Committed(-1, -1, "")


@final
class OffsetStore:
    """Committed offsets per (group, topic, partition)."""

    def __init__(self) -> None:
        self.committed: dict[tuple[str, str, int], Committed] = {}

    def commit(self, group: str, topic: str, partition: int, position: Committed) -> None:
        self.committed[group, topic, partition] = position

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
        return len(gone)

    def groups(self) -> list[str]:
        """Every group that committed, in the order they first did."""
        return list(dict.fromkeys(group for group, _, _ in self.committed))
