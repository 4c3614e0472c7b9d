"""The simulated Kafka cluster: the public async API that simulations and the service use.

    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("events", partitions=3, replication_factor=3)
        result = await cluster.produce("events", 0, [(None, b"v")], acks=-1, timeout_ms=1000)
        fetched = await cluster.fetch("events", 0, offset=0, min_bytes=1, max_wait_ms=500)

Requests parked because they cannot be answered yet wait in three purgatories, Kafka's:
``cluster.purgatories["Produce" | "Fetch" | "DeleteRecords"]``, watched on the
topic-partition key ``"topic-N"``. Arguments of the wrong type or range raise
``ValueError``/``TypeError``; conditions a Kafka client would see come back as an
:class:`ErrorCode` in the result. ``send_produce``/``send_fetch`` are the callback forms
of ``produce``/``fetch`` (no task or future per request), which the simulated clients
use. Faults (slow, crashed and restarted brokers, leader failover) are methods here,
driven by the controller logic in :mod:`purgatory.sim.controller`.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar, final

from purgatory import DelayedOperationPurgatory, OperationCancelled, loop_clock_ms
from purgatory.sim import controller, handlers, requests
from purgatory.sim.errors import ErrorCode, SimulationError
from purgatory.sim.faults import Latency
from purgatory.sim.messages import (
    ClusterMetadata,
    DeleteRecordsResult,
    FetchResult,
    ProduceResult,
)
from purgatory.sim.operations import (
    BrokerOperation,
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedProduce,
    DelayedReplicaFetch,
    Observer,
)
from purgatory.sim.partition import HighWatermarkListener, Partition
from purgatory.sim.replication import ReplicaFetcher
from purgatory.sim.requests import Entries
from purgatory.sim.validate import check_int, check_topic_name

# A replica fetch's network round trip within a data centre; it also lets a round
# batch every append that arrived meanwhile, as in Kafka.
DEFAULT_REPLICA_RTT = Latency(1.0, 0.25)


@final
class Broker:
    """A broker's liveness and injected replication latency."""

    __slots__ = ("alive", "broker_id", "latency")

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.alive = True
        self.latency: Latency | None = None

    def __repr__(self) -> str:
        return f"<Broker {self.broker_id} {'up' if self.alive else 'down'}>"


@final
class Cluster:
    """Brokers, topics and replicated partitions, in process, on the running event loop."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        seed: int = 0,
        replica_lag_time_max_ms: int = 10_000,
        replica_fetch_wait_max_ms: int = 500,
        replica_fetch_min_bytes: int = 1,
        replica_fetch_max_bytes: int = 1 << 20,
        min_insync_replicas: int = 1,
        purge_interval: int = 1000,
        replica_rtt: Latency | None = DEFAULT_REPLICA_RTT,
    ) -> None:
        check_int("brokers", brokers, 1)
        check_int("replica_lag_time_max_ms", replica_lag_time_max_ms, 1)
        check_int("replica_fetch_wait_max_ms", replica_fetch_wait_max_ms, 0)
        check_int("replica_fetch_min_bytes", replica_fetch_min_bytes, 0)
        check_int("replica_fetch_max_bytes", replica_fetch_max_bytes, 1)
        check_int("min_insync_replicas", min_insync_replicas, 1)
        self.brokers = {b: Broker(b) for b in range(brokers)}
        self.rng = random.Random(seed)
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.replica_fetch_wait_max_ms = replica_fetch_wait_max_ms
        self.replica_fetch_min_bytes = replica_fetch_min_bytes
        self.replica_fetch_max_bytes = replica_fetch_max_bytes
        self.min_insync_replicas = min_insync_replicas
        #: network round trip of a replica fetch (None: instant); faults add to it
        self.replica_rtt = replica_rtt
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = (
            DelayedOperationPurgatory("Produce", purge_interval=purge_interval)
        )
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch | DelayedReplicaFetch] = (
            DelayedOperationPurgatory("Fetch", purge_interval=purge_interval)
        )
        self.delete_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = (
            DelayedOperationPurgatory("DeleteRecords", purge_interval=purge_interval)
        )
        #: purgatory name -> purgatory, for metrics and traces
        self.purgatories: dict[
            str,
            DelayedOperationPurgatory[DelayedProduce]
            | DelayedOperationPurgatory[DelayedFetch | DelayedReplicaFetch]
            | DelayedOperationPurgatory[DelayedDeleteRecords],
        ] = {
            p.name: p for p in (self.produce_purgatory, self.fetch_purgatory, self.delete_purgatory)
        }
        self.topics: dict[str, list[Partition]] = {}
        # one fetcher per (follower, leader) pair; idle while it has nothing to follow
        self.fetchers = {
            (f, ld): ReplicaFetcher(self, f, ld)
            for f in self.brokers
            for ld in self.brokers
            if f != ld
        }
        self.hw_listeners: list[HighWatermarkListener] = []
        #: bumped on every leadership or liveness change (fetchers recompute their targets)
        self.metadata_version = 0
        self._metadata_event = asyncio.Event()
        self._metadata_callbacks: list[Callable[[], None]] = []
        self._op_observers: list[Callable[[BrokerOperation[Any], float], None]] = []
        #: the purgatories' clock (the running loop's, in ms); bound on first use
        self.now_ms: Callable[[], float] = self._bind_clock
        #: handed to every request operation; None while nobody observes them
        self.op_observer: Observer | None = None
        self._ids = itertools.count(1)
        self._isr_task: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the purgatories' reapers, replication and the ISR-shrink check."""
        if self._closed:
            raise RuntimeError("cluster is closed")
        for purgatory in self.purgatories.values():
            await purgatory.start()
        if self._isr_task is None:
            self._isr_task = asyncio.get_running_loop().create_task(
                controller.isr_shrink_loop(self), name="isr-shrink"
            )
        for fetcher in self.fetchers.values():
            if self.brokers[fetcher.follower].alive:
                fetcher.start()

    async def close(self) -> None:
        """Stop replication and shut the purgatories: every parked request is answered
        (BROKER_NOT_AVAILABLE). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._isr_task is not None:
            self._isr_task.cancel()
            try:
                await self._isr_task
            except asyncio.CancelledError:
                pass
        for fetcher in self.fetchers.values():
            fetcher.stop()
        for purgatory in self.purgatories.values():
            for p in self.partitions():
                for key in (p.key, p.replica_key):
                    for op in purgatory.cancel_for_key(key):
                        op.answer_unavailable()
            await purgatory.shutdown()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- topics and metadata -------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 3,
        *,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Create a topic. Replicas are assigned round-robin unless ``assignment`` lists
        each partition's brokers (the first one is the preferred leader). Raises
        ValueError for a duplicate name, impossible sizes or a bad assignment."""
        check_topic_name(name)
        if name in self.topics:
            raise SimulationError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} exists")
        check_int("partitions", partitions, 1)
        check_int("replication_factor", replication_factor, 1)
        if replication_factor > len(self.brokers):
            raise SimulationError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication_factor {replication_factor} > {len(self.brokers)} brokers",
            )
        if self._closed:
            raise RuntimeError("cluster is closed")
        replicas = controller.assign_replicas(
            self, partitions, replication_factor, assignment, start=len(self.topics)
        )
        now = loop_clock_ms()
        self.topics[name] = [
            Partition(name, i, r, now, self.hw_listeners) for i, r in enumerate(replicas)
        ]
        for p in self.topics[name]:  # a dead broker cannot lead a new partition
            if p.leader is not None and not self.brokers[p.leader].alive:
                controller.elect_leader(self, p, exclude=p.leader)
        self.bump_metadata()
        if self._isr_task is not None:
            self.ensure_fetchers()

    def partition(self, topic: str, partition: int) -> Partition | None:
        parts = self.topics.get(topic)
        if parts is None or not 0 <= partition < len(parts):
            return None
        return parts[partition]

    def partitions(self) -> Iterator[Partition]:
        for parts in self.topics.values():
            yield from parts

    def metadata(self) -> ClusterMetadata:
        """Brokers, and per partition: leader, epoch, replicas, ISR, HW, log offsets."""
        return controller.describe(self)

    def is_alive(self, broker: int) -> bool:
        return self.brokers[broker].alive

    def bump_metadata(self) -> None:
        self.metadata_version += 1
        event, self._metadata_event = self._metadata_event, asyncio.Event()
        event.set()
        callbacks, self._metadata_callbacks = self._metadata_callbacks, []
        if callbacks:
            loop = asyncio.get_running_loop()
            for callback in callbacks:
                loop.call_soon(callback)

    def call_on_metadata_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once, soon after the next leadership or liveness change."""
        self._metadata_callbacks.append(callback)

    async def metadata_changed(self) -> None:
        """Wait for the next leadership or liveness change."""
        await self._metadata_event.wait()

    def add_op_observer(self, observer: Callable[[BrokerOperation[Any], float], None]) -> None:
        """Call ``observer(op, now_ms)`` for every request operation created from now on,
        when it finishes: completed, expired, or dropped (cancelled). Cheaper than a
        purgatory listener (no record is built); the simulation's statistics and
        invariant checker use it."""
        self._op_observers.append(observer)
        self.op_observer = self._op_finished

    def _op_finished(self, op: BrokerOperation[Any]) -> None:
        now = self.now_ms()
        for observer in self._op_observers:
            observer(op, now)

    def _bind_clock(self) -> float:
        loop_time = asyncio.get_running_loop().time

        def now_ms() -> float:
            return loop_time() * 1000.0

        self.now_ms = now_ms
        return now_ms()

    def next_op_id(self, kind: str) -> str:
        return f"{kind}-{next(self._ids)}"

    def ensure_fetchers(self) -> None:
        for (follower, _leader), fetcher in self.fetchers.items():
            if self.brokers[follower].alive:
                fetcher.start()

    # -- requests ------------------------------------------------------------------------------

    async def produce(
        self,
        topic: str,
        partition: int,
        records: Entries,
        acks: int = -1,
        timeout_ms: int = 30_000,
    ) -> ProduceResult:
        """Append ``records`` (``(key, value)`` pairs) on the leader. acks=-1 (all) waits
        in DelayedProduce until the HW covers them; acks=1 answers after the leader
        append; acks=0 too, with base_offset -1 (Kafka sends no response)."""
        answer = requests.produce(self, topic, partition, records, acks, timeout_ms, None)
        if isinstance(answer, ProduceResult):
            return answer
        parked = await _park(self.produce_purgatory, answer)
        return parked or ProduceResult(ErrorCode.BROKER_NOT_AVAILABLE)

    def send_produce(
        self,
        topic: str,
        partition: int,
        records: Entries,
        acks: int,
        timeout_ms: int,
        reply: Callable[[ProduceResult], None],
    ) -> DelayedProduce | None:
        """:meth:`produce` for callback clients: ``reply(result)`` runs exactly once, maybe
        before this returns. Returns the parked operation, if any (``abandon()`` drops
        it). No task or future per request: the simulated clients use this."""
        answer = requests.produce(self, topic, partition, records, acks, timeout_ms, reply)
        if isinstance(answer, ProduceResult):
            reply(answer)
            return None
        self.produce_purgatory.try_complete_else_watch_nowait(answer, answer.watch_keys())
        return answer

    async def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        min_bytes: int = 1,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 500,
    ) -> FetchResult:
        """A consumer fetch: records from ``offset`` up to the HW. Waits in DelayedFetch
        until ``min_bytes`` are readable or ``max_wait_ms`` passes."""
        answer = requests.fetch(
            self, topic, partition, offset, min_bytes, max_bytes, max_wait_ms, None
        )
        if isinstance(answer, FetchResult):
            return answer
        return await _park(self.fetch_purgatory, answer) or FetchResult(
            ErrorCode.BROKER_NOT_AVAILABLE
        )

    def send_fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        min_bytes: int,
        max_bytes: int,
        max_wait_ms: int,
        reply: Callable[[FetchResult], None],
    ) -> DelayedFetch | None:
        """:meth:`fetch` for callback clients, like :meth:`send_produce`."""
        answer = requests.fetch(
            self, topic, partition, offset, min_bytes, max_bytes, max_wait_ms, reply
        )
        if isinstance(answer, FetchResult):
            reply(answer)
            return None
        self.fetch_purgatory.try_complete_else_watch_nowait(answer, answer.watch_keys())
        return answer

    async def delete_records(
        self, topic: str, partition: int, offset: int, timeout_ms: int = 30_000
    ) -> DeleteRecordsResult:
        """Move the log start offset to ``offset`` (-1: the HW) on the leader, then wait in
        DelayedDeleteRecords until every live replica's log start reached it."""
        check_int("offset", offset, -1)
        check_int("timeout_ms", timeout_ms, 0)
        p = requests.leader_partition(self, topic, partition)
        if isinstance(p, ErrorCode):
            return DeleteRecordsResult(p)
        answer = handlers.delete_records(self, p, offset, timeout_ms, None)
        if isinstance(answer, DeleteRecordsResult):
            return answer
        parked = await _park(self.delete_purgatory, answer)
        return parked or DeleteRecordsResult(ErrorCode.BROKER_NOT_AVAILABLE)

    def on_leadership_change(self, p: Partition) -> None:
        """The epoch or the log start moved: every parked request on ``p`` may be done."""
        self.fetch_purgatory.check_and_complete_nowait(p.replica_key)
        self.on_high_watermark(p)

    def on_high_watermark(self, p: Partition, *, produce: bool = True) -> None:
        """The HW moved: parked produces, consumer fetches and deletes may be done."""
        key = p.key
        if produce:
            self.produce_purgatory.check_and_complete_nowait(key)
        self.fetch_purgatory.check_and_complete_nowait(key)
        self.delete_purgatory.check_and_complete_nowait(key)

    # -- faults --------------------------------------------------------------------------------

    def set_replication_latency(self, broker: int, latency: Latency | None) -> None:
        """Slow follower: each replication round trip of ``broker`` takes a sample of
        ``latency`` longer (None: back to normal)."""
        self._broker(broker).latency = latency
        self.bump_metadata()

    async def crash_broker(self, broker: int) -> None:
        """Kill ``broker``: its fetchers stop; partitions it led fail over to an ISR
        member (or go offline); as a follower it leaves the ISR once it lags
        ``replica_lag_time_max_ms``."""
        controller.crash_broker(self, self._broker(broker))

    async def restart_broker(self, broker: int) -> None:
        """Bring ``broker`` back: it truncates to the leaders' logs and catches up."""
        controller.restart_broker(self, self._broker(broker))

    async def fail_over(self, topic: str, partition: int, new_leader: int | None = None) -> int:
        """Move leadership to ``new_leader`` (default: the next live ISR member); the old
        leader becomes a follower. Returns the new leader. Raises ValueError if no
        eligible replica exists."""
        p = self.partition(topic, partition)
        if p is None:
            raise SimulationError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}"
            )
        return controller.move_leader(self, p, new_leader)

    def _broker(self, broker: int) -> Broker:
        if isinstance(broker, bool) or broker not in self.brokers:
            raise ValueError(f"no broker {broker!r}; brokers are {sorted(self.brokers)}")
        return self.brokers[broker]

    def __repr__(self) -> str:
        up = sum(b.alive for b in self.brokers.values())
        parts = sum(len(p) for p in self.topics.values())
        return (
            f"<Cluster brokers={up}/{len(self.brokers)} topics={len(self.topics)} "
            f"partitions={parts}>"
        )


Op = TypeVar("Op", bound=BrokerOperation[Any])


async def _park(purgatory: DelayedOperationPurgatory[Op], op: Op) -> Any:
    """Park ``op`` with the core's ``park`` (abandoned if the awaiting task is cancelled,
    e.g. an HTTP client went away) and return its answer; None if the broker shut down
    under it."""
    try:
        await purgatory.park(op, op.watch_keys())
    except OperationCancelled:
        return None
    return op.result
