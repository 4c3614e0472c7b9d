"""A broker's replica manager (Kafka's ``ReplicaManager``): its purgatories, the leader's
request handlers, high-watermark triggers, ISR shrink, and its fetchers as a follower.

Handlers are synchronous: each either answers at once (returns the result) or returns the
delayed operation for the caller to park, with :meth:`ReplicaManager.watch` (callback
clients: no task or future per request) or :meth:`ReplicaManager.park` (async callers).
A parked operation answers through its ``reply`` callback or, once awaited, its
``result``. Requests for a partition this broker does not lead are answered
NOT_LEADER_OR_FOLLOWER, as by a Kafka broker.

Each broker's purgatories are its own (they carry the label ``broker``): a crashed broker
answers its own parked requests and nobody else's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar, final

from purgatory import DelayedOperationPurgatory, OperationCancelled
from purgatory.errors import ErrorCode
from purgatory.sim.cleaner import clean
from purgatory.sim.errors import SimulationError
from purgatory.sim.messages import (
    READ_COMMITTED,
    DeleteRecordsRequest,
    DeleteRecordsResult,
    ElectLeadersRequest,
    ElectLeadersResult,
    FetchRequest,
    FetchResult,
    PartitionElection,
    ProduceRequest,
    ProduceResult,
    TxnMarker,
)
from purgatory.sim.metadata import MetadataCache
from purgatory.sim.operations import (
    BrokerOperation,
    DelayedDeleteRecords,
    DelayedElectLeader,
    DelayedFetch,
    DelayedProduce,
    DelayedReplicaFetch,
    FollowerResponse,
    Observer,
    PartitionStatus,
    read_consumer_fetch,
    read_follower_fetch,
    readable_at_least,
)
from purgatory.sim.partition import Partition
from purgatory.sim.producers import EndTxnMarker
from purgatory.sim.replica_selector import check_replica_selector, select_read_replica
from purgatory.sim.replication import FetchLeader, Network, ReplicaFetcher, ReplicaFetchRequest
from purgatory.sim.validate import check_int

_NONE = ErrorCode.NONE

# A value past every threshold: set on a key when leadership of its partition moved, so
# that the key's threshold waiters all complete (each answers NOT_LEADER_OR_FOLLOWER).
_LEADERSHIP_MOVED: Final = 1 << 62

#: The purgatories of every replica manager, by name: Kafka's four.
PURGATORY_NAMES: Final = ("Produce", "Fetch", "DeleteRecords", "ElectLeader")

Op = TypeVar("Op", bound=BrokerOperation[Any])


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """The broker settings replication and acks=all depend on (Kafka's names)."""

    replica_lag_time_max_ms: int = 10_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1 << 20
    min_insync_replicas: int = 1
    purge_interval: int = 1000
    #: how often the leader applies time-based retention to idle partitions (on every
    #: HW advance it applies it anyway); Kafka checks every 5 minutes, on disk
    log_retention_check_interval_ms: int = 1000
    #: an idle producer (no transaction open) is forgotten by each log this long after
    #: its last write (Kafka's producer.id.expiration.ms, KIP-854) ...
    producer_id_expiration_ms: int = 86_400_000
    #: ... on the check every this often (Kafka's producer.id.expiration.check.interval.ms)
    producer_id_expiration_check_interval_ms: int = 600_000
    #: how often the log cleaner looks for compacted logs to clean (Kafka's
    #: log.cleaner.backoff.ms, its wait when none is due)
    log_cleaner_backoff_ms: int = 15_000
    #: Kafka's replica.selector.class: which replica a consumer that says its rack
    #: should fetch from (:mod:`purgatory.sim.replica_selector`); None: the leader
    replica_selector_class: str | None = None

    def checked(self) -> ReplicaConfig:
        """These settings checked (TypeError/ValueError naming the setting), the replica
        selector None unless one is named."""
        for name, minimum in _MINIMUMS:
            check_int(name, getattr(self, name), minimum)
        selector = check_replica_selector(self.replica_selector_class)
        return dataclasses.replace(self, replica_selector_class=selector)


#: each int setting of :class:`ReplicaConfig`, in the order checked, and the least it may be
_MINIMUMS: Final = (
    ("replica_lag_time_max_ms", 1),
    ("replica_fetch_wait_max_ms", 0),
    ("replica_fetch_min_bytes", 0),
    ("replica_fetch_max_bytes", 1),
    ("min_insync_replicas", 1),
    ("purge_interval", 0),
    ("log_retention_check_interval_ms", 1),
    ("producer_id_expiration_ms", 1),
    ("producer_id_expiration_check_interval_ms", 1),
    ("log_cleaner_backoff_ms", 1),
)


@final
class ReplicaManager:
    """Broker ``broker_id``'s replicas, purgatories and fetchers. ``peers`` maps every
    broker id to its replica manager (the leaders this broker's fetchers fetch from); the
    cluster fills it once all exist."""

    def __init__(
        self,
        broker_id: int,
        metadata: MetadataCache,
        config: ReplicaConfig,
        network: Network,
        peers: Mapping[int, FetchLeader],
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self._metadata = metadata
        self._network = network
        self._peers = peers
        labels = {"broker": str(broker_id)}
        interval = config.purge_interval
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = (
            DelayedOperationPurgatory("Produce", purge_interval=interval, labels=labels)
        )
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch | DelayedReplicaFetch] = (
            DelayedOperationPurgatory("Fetch", purge_interval=interval, labels=labels)
        )
        self.delete_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = (
            DelayedOperationPurgatory("DeleteRecords", purge_interval=interval, labels=labels)
        )
        self.elect_purgatory: DelayedOperationPurgatory[DelayedElectLeader] = (
            DelayedOperationPurgatory("ElectLeader", purge_interval=interval, labels=labels)
        )
        #: purgatory name -> this broker's purgatory
        self.purgatories: dict[str, DelayedOperationPurgatory[Any]] = {
            p.name: p
            for p in (
                self.produce_purgatory,
                self.fetch_purgatory,
                self.delete_purgatory,
                self.elect_purgatory,
            )
        }
        #: leader id -> the fetcher that replicates what this broker follows on it
        self.fetchers: dict[int, ReplicaFetcher] = {}
        #: handed to every request operation; None while nobody observes them
        self.op_observer: Observer | None = None
        #: the purgatories' clock (the running loop's, in ms); bound on first use
        self.now_ms: Callable[[], float] = self._bind_clock
        self._ids = itertools.count(1)
        self._tasks: list[asyncio.Task[None]] = []  # the ISR-shrink, retention, expiry checks
        #: crashed but not fenced yet (:meth:`Cluster.crash_broker_unfenced`): the
        #: controller still counts it alive, but it does nothing and answers nothing
        self.halted = False
        #: threshold keys -> the leader epoch their waiters were parked in: the produce
        #: purgatory's (a partition's key, valued its HW) and the fetch purgatory's (the
        #: key, valued the HW, and the replica key, valued the leader's log end)
        self._produce_epochs: dict[str, int] = {}
        self._fetch_epochs: dict[str, int] = {}

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the purgatories' reapers, the ISR-shrink and retention checks and, if
        alive, the fetchers."""
        for purgatory in self.purgatories.values():
            await purgatory.start()
        for leader, side in self._peers.items():
            if leader != self.broker_id and leader not in self.fetchers:
                self.fetchers[leader] = ReplicaFetcher(
                    self.broker_id,
                    leader,
                    side,
                    self._metadata,
                    self._network,
                    self._follower_high_watermark,
                )
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(self._isr_shrink_loop(), name=f"isr-shrink-{self.broker_id}"),
                loop.create_task(self._retention_loop(), name=f"retention-{self.broker_id}"),
                loop.create_task(
                    self._producer_expiration_loop(), name=f"producer-expiry-{self.broker_id}"
                ),
                loop.create_task(self._cleaner_loop(), name=f"log-cleaner-{self.broker_id}"),
            ]
        if self._metadata.alive[self.broker_id]:
            self.start_fetchers()

    async def shutdown(self) -> None:
        """Stop, answering every parked request BROKER_NOT_AVAILABLE. Idempotent."""
        for task in self._tasks:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        self.stop_fetchers()
        self.answer_parked_unavailable()
        for purgatory in self.purgatories.values():
            await purgatory.shutdown()

    def start_fetchers(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.start()

    def stop_fetchers(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.stop()

    def answer_parked_unavailable(self) -> None:
        """Answer every request still parked here BROKER_NOT_AVAILABLE (a crash or a
        shutdown: the client learns at once instead of at its timeout)."""
        for purgatory in self.purgatories.values():
            for op in purgatory.pending_operations():
                op.answer_unavailable()

    def _bind_clock(self) -> float:
        loop_time = asyncio.get_running_loop().time

        def now_ms() -> float:
            return loop_time() * 1000.0

        self.now_ms = now_ms
        return now_ms()

    def _next_op_id(self, kind: str) -> str:
        return f"{kind}-{self.broker_id}.{next(self._ids)}"

    # -- parking -------------------------------------------------------------------------------

    def watch(self, op: BrokerOperation[Any]) -> None:
        """Park ``op`` for a callback client (it answers through its ``reply``)."""
        if not self._watch_threshold(op):
            self.purgatories[op.purgatory_name].try_complete_else_watch_nowait(op, op.watch_keys())

    async def park(self, op: BrokerOperation[Any]) -> Any:
        """Park ``op`` with the core's ``park`` (cancelled if the awaiting task is cancelled,
        e.g. an HTTP client went away) and return its answer; None if the broker shut down
        or crashed under it without one."""
        with contextlib.suppress(OperationCancelled):  # answered unavailable, or not at all
            if not self._watch_threshold(op):
                await self.purgatories[op.purgatory_name].park(op, op.watch_keys())
            else:
                try:
                    await op
                except asyncio.CancelledError:
                    op.cancel()
                    raise
        return op.result

    def _watch_threshold(self, op: BrokerOperation[Any]) -> bool:
        """Watch ``op`` by threshold if its condition is one: a produce on one partition
        waits for the HW to reach its last offset + 1, a consumer fetch of one partition
        from the leader, up to the HW and for one byte, for the HW to pass its offset.
        False for any other op (a re-check on a watcher list). Leadership moves complete
        them too (:meth:`_set_threshold_value`)."""
        cls = op.__class__
        if cls is DelayedProduce:
            if len(op.statuses) != 1:
                return False
            status = op.statuses[0]
            p = status.partition
            self._watch_value(
                self.produce_purgatory,
                self._produce_epochs,
                op,
                p.key,
                status.epoch,
                p.hws[self.broker_id],
                status.required_offset,
            )
            return True
        if cls is DelayedFetch:
            if (
                len(op.statuses) != 1
                or op.min_bytes != 1  # type: ignore[attr-defined]
                or op.read_committed  # type: ignore[attr-defined]
                or op.replica is not None  # type: ignore[attr-defined]
            ):
                return False
            status = op.statuses[0]
            p = status.partition
            self._watch_value(
                self.fetch_purgatory,
                self._fetch_epochs,
                op,
                p.key,
                status.epoch,
                p.hws[self.broker_id],
                status.required_offset + 1,
            )
            return True
        return False

    def _watch_value(
        self,
        purgatory: DelayedOperationPurgatory[Any],
        epochs: dict[str, int],
        op: BrokerOperation[Any],
        key: str,
        epoch: int,
        value: int,
        threshold: int,
    ) -> None:
        """Watch ``op`` until ``key``'s value (``value`` now) reaches ``threshold``; the
        key's waiters from an earlier leader epoch are answered first."""
        if epochs.get(key) != epoch:
            if key in epochs:
                self._leadership_moved(purgatory, epochs, key)
            epochs[key] = epoch
        purgatory.set_value(key, value)  # what every trigger since has set, or this epoch's
        purgatory.watch_threshold(op, key, threshold)

    def _set_threshold_value(
        self,
        purgatory: DelayedOperationPurgatory[Any],
        epochs: dict[str, int],
        p: Partition,
        key: str,
        value: int,
    ) -> None:
        """A trigger: ``key``'s value is now ``value`` (the HW, or the log end, of ``p``);
        if leadership of ``p`` moved since its waiters were parked, they all complete,
        answering NOT_LEADER_OR_FOLLOWER, as a re-check finds them."""
        epoch = epochs.get(key)
        if epoch is None:  # no threshold waiter was ever parked on it here
            return
        if epoch != p.leader_epoch:
            self._leadership_moved(purgatory, epochs, key)
        else:
            purgatory.set_value(key, value)

    @staticmethod
    def _leadership_moved(
        purgatory: DelayedOperationPurgatory[Any], epochs: dict[str, int], key: str
    ) -> None:
        del epochs[key]
        purgatory.set_value(key, _LEADERSHIP_MOVED)  # each answers from its on_complete
        purgatory.forget_value(key)

    # -- the leader's handlers -----------------------------------------------------------------

    def _led(self, topic: str, partition: int) -> Partition | ErrorCode:
        p = self._metadata.lookup(topic, partition)
        if isinstance(p, Partition) and p.leader != self.broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return p

    def produce(
        self, request: ProduceRequest, reply: Callable[[ProduceResult], None] | None
    ) -> ProduceResult | DelayedProduce:
        """Append on this leader; acks=-1 returns a DelayedProduce to park until the HW
        covers the records."""
        p = self._led(request.topic, request.partition)
        if isinstance(p, ErrorCode):
            return ProduceResult(p)
        acks = request.acks
        # the topic's own min.insync.replicas, else the broker's
        min_isr = (
            p.logs[self.broker_id].config.min_insync_replicas or self.config.min_insync_replicas
        )
        if acks == -1 and len(p.isr) < min_isr:
            return ProduceResult(ErrorCode.NOT_ENOUGH_REPLICAS)
        # raises KAFKA_STORAGE_ERROR, appending nothing, past the stored-bytes cap
        batch, hw_advanced = p.append(request.records, request.wire, self.now_ms())  # type: ignore[arg-type]
        # new bytes for parked follower fetches (consumers wait for the HW)
        self.fetch_purgatory.check_and_complete_nowait(p.replica_key)
        if hw_advanced:
            self.apply_retention(p)
            self.on_high_watermark(p, produce=False)
        if acks != -1:
            return ProduceResult(_NONE, batch.base_offset if acks == 1 else -1)
        status = PartitionStatus(p, batch.end_offset, batch.base_offset)
        return DelayedProduce(
            request.timeout_ms,
            [status],
            self._next_op_id("produce"),
            min_isr,
            reply,
            self.op_observer,
        )

    def write_txn_marker(
        self,
        marker: TxnMarker,
        topic: str,
        partition: int,
        timeout_ms: int,
        reply: Callable[[ProduceResult], None] | None,
    ) -> ProduceResult | DelayedProduce:
        """Append ``marker`` to ``topic``-``partition`` on this leader as a control batch
        (Kafka's WriteTxnMarkers, which appends with acks=all): a DelayedProduce to park
        until the HW passes it, or the refusal (not the leader, too few in-sync
        replicas, a fenced producer or coordinator)."""
        p = self._led(topic, partition)
        if isinstance(p, ErrorCode):
            return ProduceResult(p)
        min_isr = self.config.min_insync_replicas
        if len(p.isr) < min_isr:
            return ProduceResult(ErrorCode.NOT_ENOUGH_REPLICAS)
        try:
            batch, hw_advanced = p.append_marker(
                marker.producer_id,
                marker.producer_epoch,
                EndTxnMarker(marker.commit, marker.coordinator_epoch),
                self.now_ms(),
            )
        except SimulationError as exc:
            return ProduceResult(exc.code)
        self.fetch_purgatory.check_and_complete_nowait(p.replica_key)
        if hw_advanced:
            self.apply_retention(p)
            self.on_high_watermark(p, produce=False)
        return DelayedProduce(
            timeout_ms,
            [PartitionStatus(p, batch.end_offset, batch.base_offset)],
            self._next_op_id("txn-marker"),
            min_isr,
            reply,
            self.op_observer,
        )

    def fetch(
        self, request: FetchRequest, reply: Callable[[FetchResult], None] | None
    ) -> FetchResult | DelayedFetch:
        """A consumer fetch: answer now if ``min_bytes`` are below the HW (or no wait is
        allowed), else return a DelayedFetch to park. With a replica selector and the
        consumer's rack (``client_rack``), the leader may answer at once with no records
        and the replica to fetch from instead (KIP-392); a follower serves a fetch with
        client metadata from its own log (:meth:`_follower_fetch`)."""
        p = self._metadata.lookup(request.topic, request.partition)
        if isinstance(p, ErrorCode):
            return FetchResult(p)
        if p.leader != self.broker_id:
            if request.client_rack is None or self.broker_id not in p.logs:
                return FetchResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return self._follower_fetch(p, request, reply)
        offset = request.offset
        log = p.logs[self.broker_id]
        if request.client_rack is not None and self.config.replica_selector_class is not None:
            preferred = select_read_replica(p, self._metadata.racks, request.client_rack, offset)
            if preferred is not None:  # Kafka's leader skips the read when it redirects
                return FetchResult(
                    _NONE,
                    p.hw,
                    [],
                    log.log_start_offset,
                    [],
                    p.last_stable_offset(),
                    preferred_read_replica=preferred,
                )
        if offset < log.log_start_offset or offset > log.leo:
            return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, p.hw, [], log.log_start_offset)
        read_committed = request.isolation_level == READ_COMMITTED
        end = p.last_stable_offset() if read_committed else p.hws[self.broker_id]
        return self._park_or_read(p, request, reply, end, read_committed, None)

    def _park_or_read(
        self,
        p: Partition,
        request: FetchRequest,
        reply: Callable[[FetchResult], None] | None,
        end: int,
        read_committed: bool,
        replica: int | None,
    ) -> FetchResult | DelayedFetch:
        """The records from the fetch offset up to ``end`` now, or, while fewer than
        ``min_bytes`` are there and the fetch may wait, a DelayedFetch to park; from the
        leader's log, or follower ``replica``'s (KIP-392)."""
        offset = request.offset
        log = p.logs[self.broker_id if replica is None else replica]
        min_bytes = request.min_bytes
        if request.max_wait_ms > 0 and (
            end <= offset or readable_at_least(log, offset, end, min_bytes) < min_bytes
        ):
            return DelayedFetch(
                request.max_wait_ms,
                [PartitionStatus(p, offset)],
                min_bytes,
                self._next_op_id("fetch"),
                request.max_bytes,
                reply,
                self.op_observer,
                request.as_batches,
                read_committed,
                replica,
            )
        return read_consumer_fetch(
            p, offset, request.max_bytes, request.as_batches, read_committed, replica
        )

    def _follower_fetch(
        self,
        p: Partition,
        request: FetchRequest,
        reply: Callable[[FetchResult], None] | None,
    ) -> FetchResult | DelayedFetch:
        """A consumer fetch this follower serves (KIP-392): records up to its own HW (or
        LSO), which it learns in its replica fetches; OFFSET_OUT_OF_RANGE below its log
        start or past its log end, as Kafka's follower answers (between its HW and log end:
        nothing yet, waiting as on a leader). With a replica selector, a consumer the
        leader's selector would now send elsewhere (this follower left the ISR, fell
        behind the offset, or another replica suits the rack better) is answered at once
        with no records and that replica as the preferred one: the leader's id to go back
        to the leader. (Kafka's follower selects nothing; its consumers go back to the
        leader when their preferred replica expires, metadata.max.age.ms, or on an
        error.)"""
        broker = self.broker_id
        offset = request.offset
        log = p.logs[broker]
        hw = p.hws[broker]
        if self.config.replica_selector_class is not None:
            rack = request.client_rack or ""
            preferred = select_read_replica(p, self._metadata.racks, rack, offset)
            if preferred != broker:
                return FetchResult(
                    _NONE,
                    hw,
                    [],
                    log.log_start_offset,
                    [],
                    p.last_stable_offset(broker),
                    preferred_read_replica=p.leader if preferred is None else preferred,  # type: ignore[arg-type]
                )
        if offset < log.log_start_offset or offset > log.leo:
            return FetchResult(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                hw,
                [],
                log.log_start_offset,
                [],
                p.last_stable_offset(broker),
            )
        read_committed = request.isolation_level == READ_COMMITTED
        end = p.last_stable_offset(broker) if read_committed else hw
        return self._park_or_read(p, request, reply, end, read_committed, broker)

    def _follower_high_watermark(self, p: Partition) -> None:
        """This follower learnt a higher HW of ``p``: consumer fetches it serves may be
        done."""
        self.fetch_purgatory.check_and_complete_nowait(p.key)

    def delete_records(
        self, request: DeleteRecordsRequest, reply: Callable[[DeleteRecordsResult], None] | None
    ) -> DeleteRecordsResult | DelayedDeleteRecords:
        """Move this leader's log start; return the DelayedDeleteRecords to park until every
        live replica followed."""
        p = self._led(request.topic, request.partition)
        if isinstance(p, ErrorCode):
            return DeleteRecordsResult(p)
        target = p.hw if request.offset == -1 else request.offset
        if target > p.hw:
            return DeleteRecordsResult(ErrorCode.OFFSET_OUT_OF_RANGE)
        p.leader_log.delete_before(target)
        self.on_leadership_change(p)  # parked fetches below the new log start
        return DelayedDeleteRecords(
            request.timeout_ms,
            [PartitionStatus(p, target)],
            self._next_op_id("delete"),
            self._metadata.is_alive,
            reply,
            self.op_observer,
        )

    def elect_leaders(
        self,
        request: ElectLeadersRequest,
        plans: list[tuple[Partition, int]],
        decided: list[PartitionElection],
        reply: Callable[[ElectLeadersResult], None] | None,
    ) -> ElectLeadersResult | DelayedElectLeader:
        """The broker side of ElectLeaders, once the controller has planned the elections:
        the answer now if nothing is to be elected, else a DelayedElectLeader to park until
        every planned leader is in place."""
        if not plans:
            return ElectLeadersResult.in_order(decided, request.partitions)
        return DelayedElectLeader(
            request.timeout_ms,
            plans,
            decided,
            list(request.partitions),
            self._next_op_id("elect-leader"),
            reply,
            self.op_observer,
        )

    def replica_fetch(
        self,
        follower: int,
        requests: list[ReplicaFetchRequest],
        reply: Callable[[list[FollowerResponse]], None] | None,
    ) -> list[FollowerResponse] | DelayedReplicaFetch:
        """The leader side of a replica fetch: record each follower's fetch offset (which
        may advance the HW), then park until ``replica_fetch_min_bytes`` past the offsets
        or the max wait; the answer is read when it completes."""
        now = self.now_ms()
        broker_id = self.broker_id
        errors: dict[int, ErrorCode] | None = None  # by request index, rare
        statuses: list[PartitionStatus] = []
        i = -1
        for p, epoch, offset, lso in requests:
            i += 1
            if p.leader_epoch != epoch or p.leader != broker_id:
                errors = errors or {}
                errors[i] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            log = p.logs[broker_id]
            if offset > log.leo or offset < log.log_start_offset:
                errors = errors or {}
                errors[i] = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            hw_advanced, lso_moved, expanded = p.update_follower(follower, offset, lso, now)
            if expanded:
                for listener in self._metadata.isr_listeners:
                    listener(p)
            if hw_advanced:
                self.apply_retention(p)
                self.on_high_watermark(p)
            elif lso_moved:
                self.delete_purgatory.check_and_complete_nowait(p.key)
            statuses.append(PartitionStatus(p, offset))
        config = self.config
        max_bytes = config.replica_fetch_max_bytes
        wait = config.replica_fetch_wait_max_ms
        if statuses and errors is None and wait > 0:
            need = config.replica_fetch_min_bytes
            available = 0
            for status in statuses:
                log = status.partition.logs[broker_id]
                offset = status.required_offset
                leo = log.leo
                if leo > offset:
                    available += readable_at_least(log, offset, leo, need - available)
            if available < need:
                op = DelayedReplicaFetch(
                    wait,
                    statuses,
                    need,
                    self._next_op_id("replica-fetch"),
                    max_bytes,
                    reply,
                    self.op_observer,
                )
                keys = tuple([status.partition.replica_key for status in statuses])
                self.fetch_purgatory.try_complete_else_watch_nowait(op, keys)
                return op
        out: list[FollowerResponse] = []
        i = -1
        for p, epoch, offset, _lso in requests:
            i += 1
            error = None if errors is None else errors.get(i)
            if error is None:
                out.append(read_follower_fetch(p, epoch, offset, max_bytes))
            else:
                out.append((p, epoch, error, [], -1, -1))
        return out

    # -- triggers ------------------------------------------------------------------------------

    def apply_retention(self, p: Partition) -> bool:
        """Let the retention of ``p`` (led here) drop batches below its HW. True if the log
        start moved: parked follower fetches are told here; parked consumer fetches below
        it (answered OFFSET_OUT_OF_RANGE) are the caller's to check, with the HW's."""
        log = p.logs[self.broker_id]
        if log.config.retains and log.apply_retention(p.hws[self.broker_id], self.now_ms()):
            self.fetch_purgatory.check_and_complete_nowait(p.replica_key)
            return True
        return False

    def remove_expired_producers(self) -> int:
        """Kafka's PeriodicProducerExpirationCheck, once: every log of this broker (led or
        followed) forgets the producers idle for ``producer_id_expiration_ms`` by its
        clock, :attr:`now_ms`, with no transaction open there. Returns how many went.
        Nothing else removes a producer but a truncation: not DeleteRecords, not
        retention."""
        now = self.now_ms()
        expiration_ms = self.config.producer_id_expiration_ms
        broker_id = self.broker_id
        removed = 0
        for p in list(self._metadata.partitions()):
            log = p.logs.get(broker_id)
            if log is not None:
                removed += log.remove_expired_producers(now, expiration_ms)
        return removed

    async def clean_logs(self, *, force: bool = False, topic: str | None = None) -> int:
        """Kafka's log cleaner, once: each compacted log of this broker (led or followed;
        each replica cleans its own) that is due is cleaned up to its last stable offset,
        in slices between which the loop runs; ``force`` cleans every one whatever its
        dirty ratio and lags, its active segment rolled (``topic``: only its partitions).
        Returns how many logs were cleaned."""
        broker_id = self.broker_id
        cleaned = 0
        for p in list(self._metadata.partitions()):
            log = p.logs.get(broker_id)
            if log is None or not log.config.compact or (topic is not None and p.topic != topic):
                continue
            first_dirty = log.first_dirty
            for _ in clean(log, p.last_stable_offset(broker_id), self.now_ms(), force=force):
                await asyncio.sleep(0)
            cleaned += log.first_dirty != first_dirty
        return cleaned

    def on_leadership_change(self, p: Partition) -> None:
        """The epoch or the log start of ``p`` moved: every request parked here on it may be
        done."""
        self.fetch_purgatory.check_and_complete_nowait(p.replica_key)
        self.on_high_watermark(p)

    def on_high_watermark(self, p: Partition, *, produce: bool = True) -> None:
        """The HW moved (or leadership did): parked produces, consumer fetches and deletes
        may be done. Threshold waiters complete as far as the HW reaches, then the
        watcher lists are re-checked."""
        key = p.key
        hw = p.hws.get(self.broker_id, 0)
        if produce:
            self._set_threshold_value(self.produce_purgatory, self._produce_epochs, p, key, hw)
            self.produce_purgatory.check_and_complete_nowait(key)
        self._set_threshold_value(self.fetch_purgatory, self._fetch_epochs, p, key, hw)
        self.fetch_purgatory.check_and_complete_nowait(key)
        self.delete_purgatory.check_and_complete_nowait(key)

    def on_leader_elected(self, p: Partition) -> None:
        """``p`` has a new leader: an ElectLeaders request parked here may be done."""
        self.elect_purgatory.check_and_complete_nowait(p.key)

    async def _isr_shrink_loop(self) -> None:
        """Kafka's isr-expiration task, on the leader: every ``replica_lag_time_max_ms / 2``,
        drop followers that have not caught up within ``replica_lag_time_max_ms``."""
        lag = self.config.replica_lag_time_max_ms
        metadata = self._metadata
        while True:
            await asyncio.sleep(lag / 2000.0)
            if not metadata.alive[self.broker_id] or self.halted:
                continue
            now = self.now_ms()
            for p in list(metadata.partitions()):
                if p.leader == self.broker_id and p.shrink_isr(now, lag) and p.maybe_increment_hw():
                    self.on_high_watermark(p)

    async def _retention_loop(self) -> None:
        """Kafka's log-retention task: every ``log_retention_check_interval_ms``, apply
        retention to the partitions this broker leads (time passes without HW moves)."""
        metadata = self._metadata
        while True:
            await asyncio.sleep(self.config.log_retention_check_interval_ms / 1000.0)
            if not metadata.alive[self.broker_id]:
                continue
            for p in list(metadata.partitions()):
                if p.leader == self.broker_id and self.apply_retention(p):
                    self.fetch_purgatory.check_and_complete_nowait(p.key)

    async def _producer_expiration_loop(self) -> None:
        """Every ``producer_id_expiration_check_interval_ms``: :meth:`remove_expired_producers`."""
        metadata = self._metadata
        while True:
            await asyncio.sleep(self.config.producer_id_expiration_check_interval_ms / 1000.0)
            if metadata.alive[self.broker_id] and not self.halted:
                self.remove_expired_producers()

    async def _cleaner_loop(self) -> None:
        """Every ``log_cleaner_backoff_ms``: :meth:`clean_logs`."""
        metadata = self._metadata
        while True:
            await asyncio.sleep(self.config.log_cleaner_backoff_ms / 1000.0)
            if metadata.alive[self.broker_id] and not self.halted:
                await self.clean_logs()

    def __repr__(self) -> str:
        parked = sum(p.num_delayed for p in self.purgatories.values())
        return f"<ReplicaManager broker={self.broker_id} parked={parked}>"
