"""Invariant checks for any run of the cluster, fed by the cluster's operation observer
and HW listeners.

* every operation leaves its purgatory exactly once;
* nothing completes before its condition holds, nor expires before its timeout;
* the leader's HW never decreases within a leader epoch, and its last stable offset
  stays between the log start and the HW;
* (at the end, with the workload) no acks=all record is missing from the leader's log.

Violations are collected as strings, so a test can print them all. The observer sees
each op as it finishes (in ``on_complete``, or when dropped); :meth:`check_accounting`
then compares that count with the purgatories' own counters, so an op that left a
purgatory any other way (or twice) is caught too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, final

from purgatory import OperationState
from purgatory.errors import ErrorCode
from purgatory.sim import operations
from purgatory.sim.cluster import Cluster
from purgatory.sim.controller import UncleanElection
from purgatory.sim.partition import Partition

# The timer works in whole ms on a float clock; the loop may fire a hair early.
_EPSILON_MS = 1e-3
_EXPIRED = OperationState.EXPIRED
_CANCELLED = OperationState.CANCELLED


@final
class InvariantChecker:
    """Attach to a cluster before it runs; read :attr:`violations` afterwards."""

    def __init__(self, cluster: Cluster, max_violations: int = 100) -> None:
        self.cluster = cluster
        self.violations: list[str] = []
        self.max_violations = max_violations
        self.finished = 0
        self._seen: set[str] = set()  # op ids (ids of objects could be reused)
        self._hw: dict[str, tuple[int, int | None, int]] = {}
        # what "done" must mean, per operation class
        self._checks: dict[type, Callable[[Any], None]] = {
            operations.DelayedProduce: self._check_produce,
            operations.DelayedFetch: self._check_fetch,
            operations.DelayedReplicaFetch: self._check_fetch,
            operations.DelayedDeleteRecords: self._check_delete,
            operations.DelayedElectLeader: self._check_election,
        }
        #: losses an unclean election accepted (asked for): recorded, not violations
        self.accepted_losses: list[str] = []
        cluster.hw_listeners.append(self._on_hw)
        cluster.add_op_observer(self.on_finished)
        cluster.controller.unclean_listeners.append(self._on_unclean_election)

    def _on_unclean_election(self, e: UncleanElection) -> None:
        self.accepted_losses.append(
            f"{e.partition}: broker {e.leader} elected from outside the ISR, offsets "
            f"{e.lost_from}..{e.lost_to} may be lost"
        )

    def _fail(self, message: str) -> None:
        if len(self.violations) < self.max_violations:
            self.violations.append(message)

    def _on_hw(self, p: Partition, old: int, new: int) -> None:
        self.check_hw(p)
        if new < old:
            self._fail(f"{p.key}: HW moved back {old} -> {new} in epoch {p.leader_epoch}")

    def check_hw(self, p: Partition) -> None:
        """Compare the leader's HW with the last one seen in the same epoch."""
        last = self._hw.get(p.key)
        hw = p.hw
        if last is not None and last[0] == p.leader_epoch and last[1] == p.leader and hw < last[2]:
            self._fail(f"{p.key}: HW decreased {last[2]} -> {hw} in epoch {p.leader_epoch}")
        self._hw[p.key] = (p.leader_epoch, p.leader, hw)
        if p.leader is not None:
            lso = p.last_stable_offset()
            if not p.leader_log.log_start_offset <= lso <= hw:
                self._fail(f"{p.key}: LSO {lso} outside [log start, HW {hw}]")

    def sample(self) -> None:
        for p in self.cluster.partitions():
            self.check_hw(p)

    def on_finished(self, op: operations.BrokerOperation[Any], now_ms: float) -> None:
        """The observer: ``op`` just finished at ``now_ms``."""
        self.finished += 1
        seen = self._seen
        before = len(seen)
        seen.add(op.op_id)
        if len(seen) == before:
            self._fail(f"{op.purgatory_name}: {op!r} finished twice")
        state = op.operation_state
        if state is _EXPIRED:
            if now_ms - op.started_ms + _EPSILON_MS < op.delay_ms:
                self._fail(
                    f"{op.op_id} expired after {now_ms - op.started_ms:.3f} ms, "
                    f"before its {op.delay_ms} ms timeout"
                )
        elif state is not _CANCELLED:
            self._checks[op.__class__](op)

    def _check_produce(self, op: operations.DelayedProduce) -> None:
        for status in op.statuses:
            p = status.partition
            if status.error is ErrorCode.NONE and (
                p.leader_epoch != status.epoch or p.hw < status.required_offset
            ):
                self._fail(
                    f"{op.op_id}: acknowledged before HW {p.hw} reached {status.required_offset}"
                )
            elif (
                status.error is ErrorCode.NOT_LEADER_OR_FOLLOWER and p.leader_epoch == status.epoch
            ):
                self._fail(f"{op.op_id}: NOT_LEADER_OR_FOLLOWER but the epoch did not change")
            elif status.error is None:
                self._fail(f"{op.op_id}: completed with {p.key} undecided")

    def _check_fetch(self, op: operations.DelayedFetch | operations.DelayedReplicaFetch) -> None:
        if op.error is not None:
            if not any(s.partition.leader_epoch != s.epoch for s in op.statuses):
                self._fail(f"{op.op_id}: completed with {op.error} but no leader changed")
            return
        available = 0
        for status in op.statuses:
            p = status.partition
            log = p.leader_log
            offset = status.required_offset
            if offset < log.log_start_offset or offset > log.leo:
                return  # answered because the log moved under it
            if op.follower:
                end = log.leo
            else:
                end = p.last_stable_offset() if op.read_committed else p.hw
            if end > offset:
                available += operations.readable_at_least(
                    log, offset, end, op.min_bytes - available
                )
        if available < op.min_bytes:
            self._fail(f"{op.op_id}: completed with {available} < min_bytes {op.min_bytes}")

    def _check_delete(self, op: operations.DelayedDeleteRecords) -> None:
        for status in op.statuses:
            p = status.partition
            low = p.low_watermark(self.cluster.is_alive)
            if status.error is ErrorCode.NONE and low < status.required_offset:
                self._fail(f"{op.op_id}: done with low watermark {low} < {status.required_offset}")

    def _check_election(self, op: operations.DelayedElectLeader) -> None:
        for status in op.statuses:
            p = status.partition
            leader = op.expected_leaders[p.key]
            if status.error is not ErrorCode.NONE or (
                p.leader_epoch == status.epoch and p.leader != leader
            ):
                self._fail(f"{op.op_id}: completed before broker {leader} led")

    def check_accounting(self) -> None:
        """After the cluster closed: every operation handed to a purgatory left it."""
        total = 0
        for purgatory in self.cluster.all_purgatories():
            s = purgatory.statistics()
            total += s.completed + s.expired + s.cancelled
            if s.watched or s.num_delayed:
                self._fail(
                    f"{s.name} {dict(s.labels)}: {s.watched} watched, {s.num_delayed} delayed "
                    "after close"
                )
        if total != self.finished:
            self._fail(f"purgatories finished {total} operations, the observer saw {self.finished}")
