"""The controller: topics and replica assignment, leader elections, broker liveness.

It changes the :class:`~purgatory.sim.metadata.MetadataCache` and says which partitions it
touched; the cluster then tells those partitions' replica managers, whose parked requests
notice the new leader epoch and answer NOT_LEADER_OR_FOLLOWER, so their clients retry on
the new leader. Shrinking the ISR is the leader's job (its replica manager), as in Kafka.

Requested elections (ElectLeaders) and the automatic preferred-leader rebalancing are
planned at once and carried out one sampled election round trip later (the LeaderAndIsr
request reaching the new leader); ``on_elected`` then hears which partitions changed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import final

from purgatory import loop_clock_ms
from purgatory.errors import ErrorCode
from purgatory.sim.errors import SimulationError
from purgatory.sim.latency import Latency
from purgatory.sim.log import Log, LogConfig, LogSpace
from purgatory.sim.messages import PartitionElection
from purgatory.sim.metadata import MetadataCache
from purgatory.sim.partition import FollowerState, Partition
from purgatory.sim.replication import Network
from purgatory.sim.validate import check_int, check_topic_name


@dataclass(frozen=True, slots=True)
class UncleanElection:
    """An unclean election made ``leader`` lead ``partition`` from outside the ISR: records
    at offsets ``[lost_from, lost_to)`` (its log end, the HW the ISR had reached) may be
    gone, acknowledged or not. Kafka accepts that loss when asked for it."""

    partition: str
    leader: int
    lost_from: int
    lost_to: int


@final
class Controller:
    """Decides leadership for every partition of ``metadata``."""

    def __init__(
        self,
        metadata: MetadataCache,
        network: Network | None = None,
        election_rtt: Latency | None = None,
        on_elected: Callable[[list[Partition]], None] | None = None,
        *,
        auto_leader_rebalance_enable: bool = False,
        leader_imbalance_check_interval_ms: int = 300_000,
        leader_imbalance_per_broker_percentage: int = 10,
        log_space: LogSpace | None = None,
    ) -> None:
        self.metadata = metadata
        #: where the logs of the partitions it creates count their memory
        self.log_space = LogSpace() if log_space is None else log_space
        self._network = network
        self._election_rtt = election_rtt
        self._on_elected = on_elected
        self._elections: set[asyncio.TimerHandle] = set()  # scheduled, not yet carried out
        if not isinstance(auto_leader_rebalance_enable, bool):
            raise TypeError("auto_leader_rebalance_enable must be a bool")
        #: Kafka's auto.leader.rebalance.enable (may be switched at any time) and its check
        #: (see :meth:`rebalance_leaders`)
        self.auto_leader_rebalance_enable = auto_leader_rebalance_enable
        self.leader_imbalance_check_interval_ms = check_int(
            "leader_imbalance_check_interval_ms", leader_imbalance_check_interval_ms, 1
        )
        self.leader_imbalance_per_broker_percentage = check_int(
            "leader_imbalance_per_broker_percentage", leader_imbalance_per_broker_percentage, 0, 100
        )
        self._rebalancer: asyncio.Task[None] | None = None
        #: every unclean election so far, with the offsets it may have lost
        self.unclean_elections: list[UncleanElection] = []
        #: told about each unclean election as it happens
        self.unclean_listeners: list[Callable[[UncleanElection], None]] = []
        #: partition reassignments in progress (see :meth:`reassign`)
        self._reassignments: dict[Partition, _Reassignment] = {}
        self._completing: set[Partition] = set()  # completion checks scheduled
        metadata.isr_listeners.append(self._isr_expanded)

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        assignment: Sequence[Sequence[int]] | None,
        config: LogConfig | None = None,
        *,
        internal: bool = False,
    ) -> list[Partition]:
        """Add a topic with retention ``config`` (default none); replicas round-robin unless
        ``assignment`` lists each partition's brokers (the first one is the preferred
        leader); ``internal``: one the cluster runs for itself. Raises
        :class:`SimulationError` for a duplicate name, impossible sizes or a bad
        assignment."""
        metadata = self.metadata
        check_topic_name(name)
        if name in metadata.topics:
            raise SimulationError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} exists")
        check_int("partitions", partitions, 1)
        check_int("replication_factor", replication_factor, 1)
        if replication_factor > len(metadata.alive):
            raise SimulationError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication_factor {replication_factor} > {len(metadata.alive)} brokers",
            )
        replicas = self._assign(partitions, replication_factor, assignment)
        now = loop_clock_ms()
        parts = [
            Partition(name, i, r, now, metadata.hw_listeners, config, self.log_space)
            for i, r in enumerate(replicas)
        ]
        metadata.add_topic(name, parts, internal=internal)
        for p in parts:  # a dead broker cannot lead a new partition
            if p.leader is not None and not metadata.alive[p.leader]:
                self._elect(p, exclude=p.leader)
        metadata.bump()
        return parts

    def create_partitions(
        self,
        name: str,
        count: int,
        assignment: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> list[Partition]:
        """Grow topic ``name`` to ``count`` partitions (Kafka's CreatePartitions): the new
        ones get the topic's replication factor and retention, their replicas round-robin
        from where the topic's own started unless ``assignment`` lists each new
        partition's brokers (the first one is the preferred leader); a dead preferred
        leader is passed over, as at creation. Returns the partitions added (none if
        ``validate_only``: only checked). Raises :class:`SimulationError` with Kafka's code
        and reason: no such topic UNKNOWN_TOPIC_OR_PARTITION, a count that is not an
        increase INVALID_PARTITIONS, a bad assignment INVALID_REPLICA_ASSIGNMENT."""
        metadata = self.metadata
        parts = metadata.topics.get(name)
        if parts is None:
            raise SimulationError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"count must be an int, got {count!r}")
        existing = len(parts)
        if count == existing:
            raise SimulationError(
                ErrorCode.INVALID_PARTITIONS, f"Topic already has {existing} partition(s)."
            )
        if count < existing:
            raise SimulationError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {name} currently has {existing} partition(s); {count} would not "
                "be an increase.",
            )
        added = count - existing
        factor = len(parts[0].replicas)
        if assignment is None:
            brokers = metadata.placement_order()
            first = brokers.index(parts[0].replicas[0])
            replicas = [
                [brokers[(first + i + r) % len(brokers)] for r in range(factor)]
                for i in range(existing, count)
            ]
        else:
            replicas = [list(r) for r in assignment]
            if len(replicas) != added:
                raise SimulationError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(replicas)} assignment(s) were specified.",
                )
            for r in replicas:
                if (
                    len(r) != factor
                    or len(set(r)) != len(r)
                    or any(isinstance(b, bool) or b not in metadata.alive for b in r)
                ):
                    raise SimulationError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"each new partition needs {factor} distinct brokers (the topic's "
                        f"replication factor) out of {sorted(metadata.alive)}: got {r!r}",
                    )
        if validate_only:
            return []
        config = next(iter(parts[0].logs.values())).config
        now = loop_clock_ms()
        new = [
            Partition(name, existing + i, r, now, metadata.hw_listeners, config, self.log_space)
            for i, r in enumerate(replicas)
        ]
        parts.extend(new)
        for p in new:  # a dead broker cannot lead a new partition
            if p.leader is not None and not metadata.alive[p.leader]:
                self._elect(p, exclude=p.leader)
        metadata.bump()
        return new

    def delete_topic(self, name: str) -> list[Partition]:
        """Remove a topic: its partitions go offline under a new epoch (so the requests
        parked on them answer NOT_LEADER_OR_FOLLOWER and their clients find the topic
        gone) and their logs let go of their records. Returns the partitions removed.
        Raises :class:`SimulationError` (UNKNOWN_TOPIC_OR_PARTITION) for no such topic."""
        parts = self.metadata.remove_topic(name)
        if parts is None:
            raise SimulationError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        now = loop_clock_ms()
        for p in parts:
            p.elect(None, now)
            for log in p.logs.values():
                log.reset_to(0)
        self.metadata.bump()
        return parts

    def _assign(
        self,
        partitions: int,
        replication_factor: int,
        assignment: Sequence[Sequence[int]] | None,
    ) -> list[list[int]]:
        """Round-robin replica lists (shifted by the topic count) over the brokers in
        :meth:`~MetadataCache.placement_order` (alternating racks when they are set), or
        ``assignment`` once checked."""
        brokers = self.metadata.placement_order()
        n = len(brokers)
        start = len(self.metadata.topics)
        if assignment is None:
            return [
                [brokers[(start + i + r) % n] for r in range(replication_factor)]
                for i in range(partitions)
            ]
        replicas = [list(r) for r in assignment]
        if len(replicas) != partitions or any(
            len(r) != replication_factor
            or len(set(r)) != len(r)
            or any(isinstance(b, bool) or b not in self.metadata.alive for b in r)
            for r in replicas
        ):
            raise SimulationError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"assignment must list {partitions} partitions of {replication_factor} "
                f"distinct brokers out of {sorted(brokers)}: {assignment!r}",
            )
        return replicas

    def _elect(self, p: Partition, exclude: int | None) -> int | None:
        """Clean election: the first live ISR member in assignment order, other than
        ``exclude`` (which leaves the ISR). No candidate: the partition goes offline and
        keeps its ISR, so the last in-sync replica can lead again when it returns."""
        alive = self.metadata.alive
        candidates = [b for b in p.replicas if b != exclude and b in p.isr and alive[b]]
        if not candidates:
            p.elect(None, loop_clock_ms())
            return None
        if exclude is not None:
            p.isr.discard(exclude)
        self._make_leader(p, candidates[0])
        return candidates[0]

    def _make_leader(self, p: Partition, leader: int) -> None:
        p.elect(leader, loop_clock_ms())
        alive = self.metadata.alive
        for broker in p.replicas:
            if broker != leader and alive[broker]:
                p.become_follower(broker)

    def broker_failed(self, broker: int) -> list[Partition]:
        """``broker`` died and is fenced (KRaft's controller, on a broker whose session
        ended): partitions it led fail over to an ISR member (or go offline), and it
        leaves the ISR of every partition it followed in the same step, so acks=all
        produces stop waiting for it at once (not after the leader's lag check) and the
        high watermark moves to what the rest hold. The last member of an ISR stays in
        it, as in Kafka: the partition then waits offline for it. Returns the partitions
        it hosts (their parked requests must look again)."""
        metadata = self.metadata
        if not metadata.alive[broker]:
            return []
        metadata.alive[broker] = False
        touched = []
        for p in metadata.partitions():
            if p.leader == broker:
                self._elect(p, exclude=broker)
                touched.append(p)
            elif broker in p.replicas:
                if broker in p.isr and len(p.isr) > 1:
                    p.isr.discard(broker)
                    p.maybe_increment_hw()  # the cluster wakes the parked produces
                touched.append(p)  # DeleteRecords no longer waits for it
        metadata.bump()
        return touched

    def broker_started(self, broker: int) -> list[Partition]:
        """``broker`` is back: it leads the partitions that were offline waiting for it
        (it was their last in-sync replica) and follows the others, truncated to where
        its log diverges. Returns the partitions whose leader changed."""
        metadata = self.metadata
        if metadata.alive[broker]:
            return []
        metadata.alive[broker] = True
        touched = []
        for p in metadata.partitions():
            if broker not in p.replicas:
                continue
            if p.leader is None and broker in p.isr:
                self._make_leader(p, broker)
                touched.append(p)
            elif p.leader is not None and p.leader != broker:
                p.become_follower(broker)
        metadata.bump()
        return touched

    def move_leader(self, p: Partition, new_leader: int | None) -> int:
        """Move leadership to ``new_leader`` (default: the next live ISR member); the old
        leader becomes a follower. Raises :class:`SimulationError` with
        ELIGIBLE_LEADERS_NOT_AVAILABLE if no eligible replica exists."""
        alive = self.metadata.alive
        candidates = [b for b in p.replicas if b != p.leader and b in p.isr and alive[b]]
        if new_leader is None:
            if not candidates:
                raise SimulationError(
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"{p.key}: no live in-sync replica"
                )
            new_leader = candidates[0]
        elif new_leader not in candidates:
            raise SimulationError(
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"{p.key}: broker {new_leader} is not a live in-sync follower ({candidates})",
            )
        self._make_leader(p, new_leader)
        self.metadata.bump()
        return new_leader

    # -- requested and automatic elections ---------------------------------------------------

    def start(self) -> None:
        """Start the automatic rebalancing check (it acts only while enabled)."""
        if self._rebalancer is None:
            self._rebalancer = asyncio.get_running_loop().create_task(
                self._rebalance_loop(), name="leader-rebalance"
            )

    async def close(self) -> None:
        """Stop the rebalancing check and drop the elections not carried out yet."""
        if self._rebalancer is not None:
            self._rebalancer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rebalancer
        for handle in self._elections:
            handle.cancel()
        self._elections.clear()

    @property
    def active_broker(self) -> int | None:
        """The broker the controller runs on: the lowest live one (None: all are down)."""
        return min((b for b, up in self.metadata.alive.items() if up), default=None)

    def plan_elections(
        self, partitions: Sequence[tuple[str, int]], unclean: bool
    ) -> tuple[list[tuple[Partition, int]], list[PartitionElection]]:
        """(partition, the broker to lead it) for each election to carry out, and the
        answers of the partitions that need none or cannot have one."""
        plans: list[tuple[Partition, int]] = []
        decided: list[PartitionElection] = []
        for topic, index in partitions:
            p = self.metadata.partition(topic, index)
            if p is None:
                decided.append(
                    PartitionElection(topic, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            plan = self.plan_election(p, unclean)
            if isinstance(plan, ErrorCode):
                decided.append(PartitionElection(topic, index, plan, p.leader))
            else:
                plans.append((p, plan))
        return plans, decided

    def schedule_elections(self, plans: list[tuple[Partition, int]], unclean: bool) -> None:
        """Carry ``plans`` out one sampled election round trip from now."""
        loop = asyncio.get_running_loop()

        def carry_out() -> None:
            self._elections.discard(handle)
            touched = [p for p, leader in plans if self.elect(p, leader, unclean)]
            if self._on_elected is not None:
                self._on_elected(touched)

        network = self._network
        delay_ms = 0.0 if network is None else network.sample_ms(self._election_rtt)
        handle = loop.call_later(delay_ms / 1000.0, carry_out)
        self._elections.add(handle)

    def rebalance_leaders(self) -> int:
        """One check of Kafka's automatic preferred-leader rebalancing: a broker whose
        share of the partitions it should lead but does not is above
        ``leader_imbalance_per_broker_percentage`` gets them back by preferred election
        (one election round trip later). Returns how many elections were started."""
        moves = self.preferred_imbalance(self.leader_imbalance_per_broker_percentage)
        if moves:
            self.schedule_elections([(p, p.replicas[0]) for p in moves], unclean=False)
        return len(moves)

    async def _rebalance_loop(self) -> None:
        while True:
            await asyncio.sleep(self.leader_imbalance_check_interval_ms / 1000.0)
            if self.auto_leader_rebalance_enable:
                self.rebalance_leaders()

    def plan_election(self, p: Partition, unclean: bool) -> int | ErrorCode:
        """The broker an election of ``p`` would make leader, or the answer right away.

        Preferred: the first assigned replica, if alive and in the ISR (already leading:
        ELECTION_NOT_NEEDED). Unclean: only for a partition without a live leader; the
        first live ISR member if any, else the first live replica outside it."""
        alive = self.metadata.alive
        if not unclean:
            preferred = p.replicas[0]
            if p.leader == preferred:
                return ErrorCode.ELECTION_NOT_NEEDED
            if alive[preferred] and preferred in p.isr:
                return preferred
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        if p.leader is not None and alive[p.leader]:
            return ErrorCode.ELECTION_NOT_NEEDED
        for candidates in ([b for b in p.replicas if b in p.isr], list(p.replicas)):
            for broker in candidates:
                if alive[broker]:
                    return broker
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE

    def elect(self, p: Partition, leader: int, unclean: bool) -> bool:
        """Carry out a planned election if ``leader`` is still eligible; True if it now
        leads. An unclean one from outside the ISR is recorded in
        :attr:`unclean_elections`."""
        if p.leader == leader or not self.metadata.alive[leader]:
            return False
        if leader not in p.isr:
            if not unclean or (p.leader is not None and self.metadata.alive[p.leader]):
                return False
            committed = max(p.hws.values())
            lost_from = p.logs[leader].leo
            loss = UncleanElection(p.key, leader, lost_from, committed)
            self.unclean_elections.append(loss)
            p.isr.clear()
            self._make_leader(p, leader)
            for listener in self.unclean_listeners:
                listener(loss)
        else:
            self._make_leader(p, leader)
        self.metadata.bump()
        return True

    def preferred_imbalance(self, percentage: int) -> list[Partition]:
        """Kafka's auto leader rebalance check: for every live broker whose share of the
        partitions it should lead (it is their first replica) but does not lead is above
        ``percentage``, those partitions where it is in the ISR."""
        alive = self.metadata.alive
        out = []
        for broker, up in alive.items():
            if not up:
                continue
            preferred = [p for p in self.metadata.partitions() if p.replicas[0] == broker]
            elsewhere = [p for p in preferred if p.leader != broker]
            if preferred and 100 * len(elsewhere) > percentage * len(preferred):
                out += [p for p in elsewhere if broker in p.isr]
        return out

    # -- partition reassignment (KIP-455) ---------------------------------------------------

    def reassign(
        self,
        p: Partition,
        target: Sequence[int] | None,
        *,
        allow_replication_factor_change: bool = True,
    ) -> list[Partition]:
        """Start, replace or (``target`` None) cancel the reassignment of ``p``, as Kafka's
        controller does (KIP-455): the replicas become the target's brokers followed by
        those leaving; the new ones replicate from the leader and join the ISR as any
        follower does; once every target broker is in the ISR the leaving ones go (their
        logs deleted), and a leaving leader hands over to the first target broker in the
        ISR. Where the ISR covers the target already that happens at once. A cancel
        reverts to the replicas before (the adding ones go). Returns the partitions whose
        leadership or replicas changed now. Raises :class:`SimulationError` with Kafka's
        code and reason: a bad target INVALID_REPLICA_ASSIGNMENT, a replication factor
        change not allowed INVALID_REPLICATION_FACTOR, a cancel with nothing in progress
        NO_REASSIGNMENT_IN_PROGRESS, or one that would need an unclean election (no ISR
        member outside the adding replicas) INVALID_REPLICA_ASSIGNMENT."""
        self._forget_deleted()
        ongoing = self._reassignments.get(p)
        if target is None:
            if ongoing is None:
                raise SimulationError(
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    "No partition reassignment is in progress.",
                )
            added = set(ongoing.adding)
            if not added:  # only removing: the replicas stay as they were
                del self._reassignments[p]
                self.metadata.bump()
                return []
            if not p.isr - added:
                raise SimulationError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert partition assignment for {p.topic}:{p.index} because "
                    "it would require an unclean leader election.",
                )
            del self._reassignments[p]
            return self._drop_replicas(p, added)
        target = self._check_target(target)
        current = len(p.replicas) - (0 if ongoing is None else len(ongoing.removing))
        if not allow_replication_factor_change and len(target) != current:
            raise SimulationError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from {current} to {len(target)}",
            )
        removing = sorted(set(p.replicas) - set(target))
        adding = sorted(set(target) - set(p.replicas))
        merged = tuple(target) + tuple(removing)
        if merged != p.replicas:
            config = next(iter(p.logs.values())).config
            now = loop_clock_ms()
            for broker in adding:
                p.logs[broker] = Log(config, self.log_space)
                p.hws[broker] = 0
                if p.leader is not None:
                    p.followers[broker] = FollowerState(now)
            p.replicas = merged
        if adding or removing:
            self._reassignments[p] = _Reassignment(tuple(adding), tuple(removing))
        else:
            self._reassignments.pop(p, None)
        self._complete_reassignment(p)
        self.metadata.bump()
        return [p]

    def reassignments(self) -> dict[Partition, tuple[list[int], list[int]]]:
        """The partitions being reassigned: their adding and removing brokers."""
        self._forget_deleted()
        return {p: (list(r.adding), list(r.removing)) for p, r in self._reassignments.items()}

    def _check_target(self, target: Sequence[int]) -> tuple[int, ...]:
        """``target`` if Kafka's controller would take it as a manual assignment."""
        if not target:
            raise SimulationError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.",
            )
        previous = None
        for broker in sorted(target):
            if isinstance(broker, bool) or broker not in self.metadata.alive:
                raise SimulationError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker}, but no such "
                    "broker is registered.",
                )
            if broker == previous:
                raise SimulationError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker} more than once.",
                )
            previous = broker
        return tuple(target)

    def _forget_deleted(self) -> None:
        """Drop the reassignments of partitions whose topic was deleted."""
        for p in [
            p for p in self._reassignments if self.metadata.partition(p.topic, p.index) is not p
        ]:
            del self._reassignments[p]

    def _isr_expanded(self, p: Partition) -> None:
        """A leader put a follower back in the ISR of ``p``: if ``p`` is being reassigned,
        the controller hears of it one AlterPartition round trip later and completes the
        reassignment if the ISR still covers the target."""
        if p not in self._reassignments or p in self._completing:
            return
        self._completing.add(p)
        loop = asyncio.get_running_loop()

        def complete() -> None:
            self._elections.discard(handle)
            self._completing.discard(p)
            if self.metadata.partition(p.topic, p.index) is p and self._complete_reassignment(p):
                self.metadata.bump()
                if self._on_elected is not None:
                    self._on_elected([p])

        network = self._network
        delay_ms = 0.0 if network is None else network.sample_ms(self._election_rtt)
        handle = loop.call_later(delay_ms / 1000.0, complete)
        self._elections.add(handle)  # dropped by close() as the elections are

    def _complete_reassignment(self, p: Partition) -> bool:
        """Finish the reassignment of ``p`` if every target broker is in its ISR (Kafka's
        ``maybeCompleteReassignment``). True if it did."""
        ongoing = self._reassignments.get(p)
        if ongoing is None:
            return False
        removing = set(ongoing.removing)
        target = [b for b in p.replicas if b not in removing]
        if not set(target) <= p.isr:
            return False
        del self._reassignments[p]
        if removing:
            self._drop_replicas(p, removing)
        return True

    def _drop_replicas(self, p: Partition, gone: set[int]) -> list[Partition]:
        """Take ``gone`` out of the replicas, the ISR and the followers of ``p``, deleting
        their logs; a leader among them hands over to the first remaining ISR member that
        is alive (none: offline). Otherwise the leader stays, under a new epoch, as Kafka's
        controller bumps it when replicas leave (fencing their fetches in flight)."""
        p.replicas = tuple(b for b in p.replicas if b not in gone)
        for broker in gone:
            p.isr.discard(broker)
            p.hws.pop(broker, None)
            p.followers.pop(broker, None)
            p.logs.pop(broker).reset_to(0)  # lets go of its records
        alive = self.metadata.alive
        leader = p.leader
        if leader is None or leader in gone or not alive[leader]:
            candidates = [b for b in p.replicas if b in p.isr and alive[b]]
            if candidates:
                self._make_leader(p, candidates[0])
            else:
                p.elect(None, loop_clock_ms())
        else:
            self._make_leader(p, leader)
        self.metadata.bump()
        return [p]


@final
@dataclass(frozen=True, slots=True)
class _Reassignment:
    """The brokers a reassignment is adding and removing."""

    adding: tuple[int, ...]
    removing: tuple[int, ...]
