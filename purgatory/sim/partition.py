"""A replicated partition: per-replica logs, leader, epoch, ISR and high watermarks.

This is the synchronous core of replication: methods change state and say what changed
(HW advanced, log start moved, ISR changed); the leader's replica manager, which called
them, turns that into checks of its purgatories (the cluster only relays leadership
changes, made by the controller, to the replica managers). Mirrors Kafka's ``Partition``:
the leader learns each follower's log end offset from the offset it fetches at, and
HW = min LEO over the ISR, never decreasing while the same leader keeps the same epoch.
Each replica's last stable offset (LSO, KIP-98) follows from its HW and the transactions
its log holds: read_committed consumers read up to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import final

from purgatory.sim.batches import EncodedBatch, RecordBatch
from purgatory.sim.log import Log, LogConfig, LogSpace
from purgatory.sim.producers import EndTxnMarker

# fn(partition, old_hw, new_hw): told about every change of the leader's high watermark
HighWatermarkListener = Callable[["Partition", int, int], None]


@final
class ReplicaFetchKey(str):
    """The watch key of follower fetches on a topic-partition.

    It prints as the topic-partition (traces show ``"topic-N"``) but is a separate
    watcher list from consumer fetches: an append can only complete follower fetches
    (consumers read up to the HW), so it need not re-check every parked consumer. A str
    underneath (``"topic-N/replica"``), so the purgatory hashes and compares it in C.
    """

    __slots__ = ()

    def __new__(cls, tp: str) -> ReplicaFetchKey:
        return super().__new__(cls, tp + "/replica")

    @property
    def tp(self) -> str:
        return str.__str__(self)[: -len("/replica")]

    def __str__(self) -> str:
        return self.tp

    def __repr__(self) -> str:
        return f"ReplicaFetchKey({self.tp!r})"


@final
class FollowerState:
    """What the leader knows about one follower (Kafka's remote replica state)."""

    __slots__ = ("last_caught_up_ms", "last_fetch_leader_leo", "last_fetch_ms", "leo", "lso")

    def __init__(self, now_ms: float) -> None:
        self.leo = -1  # unknown until it fetches
        self.lso = -1
        self.last_caught_up_ms = now_ms
        self.last_fetch_ms = now_ms
        self.last_fetch_leader_leo = -1


@final
class Partition:
    """One topic-partition across its replicas. ``key`` is its watch key, ``"topic-N"``."""

    __slots__ = (
        "_hw_listeners",
        "epoch_start_offset",
        "followers",
        "hws",
        "index",
        "isr",
        "key",
        "leader",
        "leader_epoch",
        "logs",
        "replica_key",
        "replicas",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        index: int,
        replicas: Iterable[int],
        now_ms: float,
        hw_listeners: list[HighWatermarkListener] | None = None,
        config: LogConfig | None = None,
        space: LogSpace | None = None,
    ) -> None:
        """``config``: the topic's retention (default none); ``space``: where the replicas'
        logs count their memory (default: a space of this partition's own, no cap)."""
        self.topic = topic
        self.index = index
        self.key = f"{topic}-{index}"
        self.replica_key = ReplicaFetchKey(self.key)
        self.replicas = tuple(replicas)
        if not self.replicas or len(set(self.replicas)) != len(self.replicas):
            raise ValueError(f"bad replica assignment {self.replicas}")
        config = LogConfig() if config is None else config
        space = LogSpace() if space is None else space
        self.logs = {broker: Log(config, space) for broker in self.replicas}
        self.hws = dict.fromkeys(self.replicas, 0)  # each replica's own view of the HW
        self.leader: int | None = self.replicas[0]
        self.leader_epoch = 0
        self.epoch_start_offset = 0  # the leader's LEO when it took over
        self.isr = set(self.replicas)
        self.followers = {b: FollowerState(now_ms) for b in self.replicas[1:]}
        self._hw_listeners = hw_listeners if hw_listeners is not None else []

    # -- leader view -----------------------------------------------------------------------

    @property
    def hw(self) -> int:
        """The leader's high watermark (0 while offline)."""
        return 0 if self.leader is None else self.hws[self.leader]

    @property
    def leader_log(self) -> Log:
        if self.leader is None:
            raise LookupError(f"{self.key} has no leader")
        return self.logs[self.leader]

    @property
    def leo(self) -> int:
        return self.leader_log.leo

    def last_stable_offset(self, broker: int | None = None) -> int:
        """The LSO of ``broker``'s replica (default: the leader's; 0 while offline):
        Kafka's ``firstUnstableOffset`` bounded by the HW, i.e. the first offset of the
        earliest transaction whose marker is not yet below the HW, or the HW. Never below
        the log start (a transaction may have lost its first batches to retention)."""
        if broker is None:
            broker = self.leader
            if broker is None:
                return 0
        hw = self.hws[broker]
        log = self.logs[broker]
        txns = log.txns
        if not txns.ongoing and not txns.completed:
            return hw
        first = txns.first_unstable(hw)
        if first is None or first >= hw:
            return hw
        return max(first, log.log_start_offset)

    def append(
        self,
        entries: list[tuple[bytes | None, bytes]],
        wire: EncodedBatch | None = None,
        now_ms: float = 0.0,
    ) -> tuple[RecordBatch, bool]:
        """Leader append at ``now_ms``; returns the batch and whether the HW advanced (ISR
        of one)."""
        batch = self.logs[self.leader].append(entries, self.leader_epoch, wire, now_ms)  # type: ignore[index]
        # With a follower in the ISR the HW is that follower's LEO or below, which a
        # leader append does not move (followers never hold more than the leader).
        return batch, len(self.isr) == 1 and self.maybe_increment_hw()

    def append_marker(
        self, producer_id: int, producer_epoch: int, marker: EndTxnMarker, now_ms: float = 0.0
    ) -> tuple[RecordBatch, bool]:
        """Leader append of a transaction marker at ``now_ms``, as :meth:`append`."""
        log = self.logs[self.leader]  # type: ignore[index]
        batch = log.append_marker(producer_id, producer_epoch, marker, self.leader_epoch, now_ms)
        return batch, len(self.isr) == 1 and self.maybe_increment_hw()

    def maybe_increment_hw(self) -> bool:
        """HW = min LEO over the ISR; it only moves forward. True if it advanced."""
        leader = self.leader
        if leader is None:
            return False
        new_hw = self.logs[leader].leo
        old = self.hws[leader]
        if new_hw <= old:  # already at the leader's LEO (an idle partition): nothing to do
            return False
        for broker in self.isr:
            if broker != leader:
                leo = self.followers[broker].leo
                if leo < new_hw:
                    new_hw = leo
        if new_hw <= old:
            return False
        self.hws[leader] = new_hw
        for listener in self._hw_listeners:
            listener(self, old, new_hw)
        return True

    def update_follower(
        self, broker: int, fetch_offset: int, log_start: int, now_ms: float
    ) -> tuple[bool, bool, bool]:
        """A follower fetched at ``fetch_offset``: record its LEO and caught-up time, maybe
        put it back in the ISR and advance the HW. Returns (hw_advanced, lso_moved,
        isr_expanded)."""
        state = self.followers[broker]
        leader_leo = self.logs[self.leader].leo  # type: ignore[index]
        # Kafka's lastCaughtUpTime rule: caught up to the leader's LEO now, or to the LEO
        # the leader had at this follower's previous fetch.
        if fetch_offset >= leader_leo:
            state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_leo >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.last_fetch_leader_leo = leader_leo
        state.last_fetch_ms = now_ms
        state.leo = fetch_offset
        lso_moved = log_start != state.lso
        state.lso = log_start
        expanded = False
        # Kafka's ISR expansion rule: caught up to the HW and to the start of this epoch.
        if (
            broker not in self.isr
            and fetch_offset >= self.hw
            and fetch_offset >= self.epoch_start_offset
        ):
            self.isr.add(broker)
            expanded = True
        return self.maybe_increment_hw(), lso_moved, expanded

    def shrink_isr(self, now_ms: float, lag_max_ms: float) -> list[int]:
        """Drop followers that have not caught up within ``lag_max_ms``. A follower at
        the leader's LEO is caught up whenever it last fetched (Kafka's isCaughtUp): an
        idle partition keeps its ISR however long its followers' fetches wait."""
        leader_leo = self.logs[self.leader].leo  # type: ignore[index]
        out = [
            b
            for b in self.isr
            if b != self.leader
            and self.followers[b].leo != leader_leo
            and now_ms - self.followers[b].last_caught_up_ms > lag_max_ms
        ]
        for broker in out:
            self.isr.discard(broker)
        return sorted(out)

    def low_watermark(self, alive: Callable[[int], bool]) -> int:
        """Min log start offset over the replicas on live brokers (DeleteRecords)."""
        leader = self.leader
        if leader is None:
            return -1
        low = self.logs[leader].log_start_offset
        for broker, state in self.followers.items():
            if alive(broker) and state.lso < low:
                low = state.lso
        return low

    # -- leadership ------------------------------------------------------------------------

    def elect(self, new_leader: int | None, now_ms: float) -> None:
        """Make ``new_leader`` the leader (None: offline) and bump the epoch.

        The new leader keeps the HW it had learned as a follower; its view of the
        followers starts over, as in Kafka.
        """
        self.leader_epoch += 1
        self.leader = new_leader
        if new_leader is None:
            return
        self.followers = {b: FollowerState(now_ms) for b in self.replicas if b != new_leader}
        self.isr.add(new_leader)
        self.epoch_start_offset = self.logs[new_leader].leo

    def become_follower(self, broker: int) -> None:
        """Truncate ``broker``'s log to where it diverges from the leader's."""
        if self.leader is None or broker == self.leader:
            return
        log = self.logs[broker]
        log.truncate_to(log.divergence_offset(self.leader_log))
        self.hws[broker] = min(self.hws[broker], log.leo)

    def apply_fetch(
        self, broker: int, batches: list[RecordBatch], leader_hw: int, lso: int
    ) -> bool:
        """A follower appends what it fetched and learns the leader's HW (as far as its
        own log reaches: the HW it serves consumers up to, KIP-392) and log start. True
        if its HW moved."""
        log = self.logs[broker]
        for batch in batches:
            if batch.end_offset <= log.leo:
                continue
            if batch.base_offset < log.leo:  # cannot splice: a later fetch will fix it
                break  # (one starting after the log end: a gap the leader's cleaner left)
            log.append_batch(batch)
        if lso > log.leo:
            log.reset_to(lso)
        elif lso > log.log_start_offset:
            log.delete_before(lso)
        old = self.hws[broker]
        hw = min(leader_hw, log.leo)
        if hw > old:
            self.hws[broker] = hw
            return True
        return False

    def __repr__(self) -> str:
        return (
            f"<Partition {self.key} leader={self.leader} epoch={self.leader_epoch} "
            f"isr={sorted(self.isr)} hw={self.hw}>"
        )
