"""The simulated Kafka cluster: the facade that simulations, the service and the Kafka front
door use, and the place where the parts are built and wired.

    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("events", partitions=3, replication_factor=3)
        result = await cluster.produce(ProduceRequest("events", 0, [(None, b"v")]))
        fetched = await cluster.fetch(FetchRequest("events", 0, offset=0, max_wait_ms=500))

The parts, as in Kafka: a :class:`~purgatory.sim.controller.Controller` (topics, elections,
broker liveness) writes the :class:`~purgatory.sim.metadata.MetadataCache`; each broker
has a :class:`~purgatory.sim.replica_manager.ReplicaManager`
(``cluster.brokers[i].replica_manager``) with its own ``Produce``, ``Fetch``,
``DeleteRecords`` and ``ElectLeader`` purgatories, watched on the topic-partition key
``"topic-N"``, and one
:class:`~purgatory.sim.replication.ReplicaFetcher` per leader it follows. A request goes to
the replica manager of its partition's leader, which answers or parks it.

Requests are :class:`~purgatory.sim.messages.ProduceRequest` and friends, checked when
built; conditions a Kafka client would see come back as an :class:`ErrorCode` in the
result. ``send_produce``/``send_fetch`` are the callback forms of ``produce``/``fetch`` (no
task or future per request), which the simulated clients use. Faults (slow, crashed and
restarted brokers, leader failover) are methods here.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, final

from purgatory import DelayedOperationPurgatory
from purgatory._lifecycle import StartClose
from purgatory.errors import ErrorCode
from purgatory.sim import messages
from purgatory.sim.batches import Record, RecordBatch
from purgatory.sim.controller import Controller
from purgatory.sim.errors import SimulationError
from purgatory.sim.latency import Latency
from purgatory.sim.log import LogConfig, LogSpace
from purgatory.sim.metadata import MetadataCache, describe_partition
from purgatory.sim.operations import BrokerOperation, DelayedFetch, DelayedProduce
from purgatory.sim.partition import HighWatermarkListener, Partition
from purgatory.sim.replica_manager import ReplicaConfig, ReplicaManager
from purgatory.sim.replication import FetchLeader, Network
from purgatory.sim.validate import check_int

# A replica fetch's network round trip within a data centre; it also lets a round
# batch every append that arrived meanwhile, as in Kafka.
DEFAULT_REPLICA_RTT = Latency(1.0, 0.25)
# An election's way from the broker to the controller and the new leader's metadata back.
DEFAULT_ELECTION_RTT = Latency(2.0, 0.25)

_UNAVAILABLE = ErrorCode.BROKER_NOT_AVAILABLE

Request = TypeVar(
    "Request", messages.ProduceRequest, messages.FetchRequest, messages.DeleteRecordsRequest
)
Result = TypeVar(
    "Result", messages.ProduceResult, messages.FetchResult, messages.DeleteRecordsResult
)
Parked = TypeVar("Parked", DelayedProduce, DelayedFetch)


@final
class Broker:
    """One simulated broker: its replica manager, liveness and injected latency."""

    __slots__ = ("_metadata", "_network", "broker_id", "replica_manager")

    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata: MetadataCache,
        network: Network,
    ) -> None:
        self.broker_id = replica_manager.broker_id
        self.replica_manager = replica_manager
        self._metadata = metadata
        self._network = network

    @property
    def alive(self) -> bool:
        return self._metadata.alive[self.broker_id]

    @property
    def latency(self) -> Latency | None:
        """The extra replication latency injected into this broker (a slow follower)."""
        return self._network.extra.get(self.broker_id)

    def __repr__(self) -> str:
        return f"<Broker {self.broker_id} {'up' if self.alive else 'down'}>"


@final
class Cluster(StartClose):
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
        election_rtt: Latency | None = DEFAULT_ELECTION_RTT,
        auto_leader_rebalance_enable: bool = False,
        leader_imbalance_check_interval_ms: int = 300_000,
        leader_imbalance_per_broker_percentage: int = 10,
        log_retention_bytes: int = -1,
        log_retention_ms: int = -1,
        log_retention_check_interval_ms: int = 1000,
        max_stored_bytes: int | None = None,
        broker_session_timeout_ms: int = 9_000,
        producer_id_expiration_ms: int = 86_400_000,
        producer_id_expiration_check_interval_ms: int = 600_000,
        log_cleaner_backoff_ms: int = 15_000,
        racks: Sequence[str | None] | None = None,
        replica_selector_class: str | None = None,
    ) -> None:
        """``racks``: each broker's rack (Kafka's broker.rack), one per broker (None or
        no list: none); replicas are then placed round-robin across the racks.
        ``replica_selector_class``: Kafka's replica.selector.class, None or
        ``org.apache.kafka.common.replica.RackAwareReplicaSelector``
        (:mod:`purgatory.sim.replica_selector`): consumers that say their rack are sent
        to an in-sync follower in it (KIP-392)."""
        check_int("brokers", brokers, 1)
        rack_of = check_racks(brokers, racks)
        #: Kafka's broker.session.timeout.ms: how long the controller waits for a silent
        #: broker's heartbeat before fencing it (:meth:`crash_broker_unfenced`)
        self.broker_session_timeout_ms = check_int(
            "broker_session_timeout_ms", broker_session_timeout_ms, 1
        )
        #: brokers crashed unheard of, and the session timeouts that will fence them
        self._unfenced: dict[int, asyncio.TimerHandle] = {}
        config = ReplicaConfig(
            replica_lag_time_max_ms,
            replica_fetch_wait_max_ms,
            replica_fetch_min_bytes,
            replica_fetch_max_bytes,
            min_insync_replicas,
            purge_interval,
            log_retention_check_interval_ms,
            producer_id_expiration_ms,
            producer_id_expiration_check_interval_ms,
            log_cleaner_backoff_ms,
            replica_selector_class,
        ).checked()
        #: every topic's retention unless it sets its own (Kafka's log.retention.*)
        self.log_defaults = LogConfig(log_retention_bytes, log_retention_ms)
        #: the memory every log holds, against ``max_stored_bytes`` (None: no cap)
        self.log_space = LogSpace(max_stored_bytes)
        self._metadata = MetadataCache(range(brokers), seed, rack_of)
        self._network = Network(replica_rtt, random.Random(seed))
        self.controller = Controller(
            self._metadata,
            self._network,
            election_rtt,
            self._leadership_changed,
            auto_leader_rebalance_enable=auto_leader_rebalance_enable,
            leader_imbalance_check_interval_ms=leader_imbalance_check_interval_ms,
            leader_imbalance_per_broker_percentage=leader_imbalance_per_broker_percentage,
            log_space=self.log_space,
        )
        self._replica_managers = _replica_managers(brokers, self._metadata, config, self._network)
        #: broker id -> broker
        self.brokers = {
            b: Broker(rm, self._metadata, self._network) for b, rm in self._replica_managers.items()
        }
        self._op_observers: list[Callable[[BrokerOperation[Any], float], None]] = []
        self._started = False
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every broker: purgatory reapers, replication, the ISR-shrink checks."""
        if self._closed:
            raise RuntimeError("cluster is closed")
        self._started = True
        for rm in self._replica_managers.values():
            await rm.start()
        self.controller.start()

    async def close(self) -> None:
        """Stop replication and shut every broker: each parked request is answered
        (BROKER_NOT_AVAILABLE). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for handle in self._unfenced.values():
            handle.cancel()
        self._unfenced.clear()
        await self.controller.close()
        for rm in self._replica_managers.values():  # no fetch may reach a closed broker
            rm.stop_fetchers()
        for rm in self._replica_managers.values():
            await rm.shutdown()

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
        retention_bytes: int | None = None,
        retention_ms: int | None = None,
        internal: bool = False,
    ) -> None:
        """Create a topic. Replicas are assigned round-robin unless ``assignment`` lists
        each partition's brokers (the first one is the preferred leader).
        ``retention_bytes`` (per partition) and ``retention_ms`` override the cluster's
        ``log_retention_*`` (-1: keep everything). ``internal`` marks a topic the cluster
        runs for itself, as Kafka's ``__consumer_offsets`` (:meth:`is_internal`; Metadata
        says so). Raises :class:`SimulationError` (its ``code`` says why) for a duplicate
        or invalid name, impossible sizes or a bad assignment, and TypeError/ValueError for
        a bad retention."""
        if self._closed:
            raise RuntimeError("cluster is closed")
        defaults = self.log_defaults
        config = LogConfig(
            defaults.retention_bytes if retention_bytes is None else retention_bytes,
            defaults.retention_ms if retention_ms is None else retention_ms,
        )
        if not isinstance(internal, bool):
            raise TypeError(f"internal must be a bool, got {internal!r}")
        self.controller.create_topic(
            name, partitions, replication_factor, assignment, config, internal=internal
        )

    async def delete_topic(self, name: str) -> None:
        """Delete a topic and its records; requests parked on its partitions answer
        NOT_LEADER_OR_FOLLOWER, later ones UNKNOWN_TOPIC_OR_PARTITION. The name may be
        created again. Raises :class:`SimulationError` (UNKNOWN_TOPIC_OR_PARTITION) for
        no such topic."""
        if self._closed:
            raise RuntimeError("cluster is closed")
        self._leadership_changed(self.controller.delete_topic(name))

    async def create_partitions(
        self,
        topic: str,
        count: int,
        assignment: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        """Grow ``topic`` to ``count`` partitions (Kafka's CreatePartitions): replicas
        round-robin with the topic's replication factor unless ``assignment`` lists each
        new partition's brokers; each new partition gets a leader, and Metadata shows them
        at once. ``validate_only``: only check. Raises :class:`SimulationError` (its
        ``code`` says why) for no such topic, a count that is not an increase or a bad
        assignment."""
        if self._closed:
            raise RuntimeError("cluster is closed")
        self.controller.create_partitions(topic, count, assignment, validate_only=validate_only)

    async def reassign_partition(
        self,
        topic: str,
        partition: int,
        replicas: Sequence[int] | None,
        *,
        allow_replication_factor_change: bool = True,
    ) -> None:
        """Reassign ``topic``-``partition`` to ``replicas`` (Kafka's
        AlterPartitionReassignments; None cancels the one in progress): brokers added
        replicate from the leader and join the ISR; once every target broker is in it, the
        brokers removed leave (their logs deleted) and a removed leader hands over to the
        first target broker in the ISR. :meth:`partition_reassignments` shows it while it
        runs; Metadata shows the target's brokers followed by those leaving. Raises
        :class:`SimulationError` (its ``code`` says why, as Kafka's controller answers):
        UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an empty, unknown or
        repeated broker; a cancel that would need an unclean election),
        INVALID_REPLICATION_FACTOR (a changed replication factor not allowed),
        NO_REASSIGNMENT_IN_PROGRESS (a cancel with none)."""
        if self._closed:
            raise RuntimeError("cluster is closed")
        parts = self._metadata.topics.get(topic)
        if parts is None:
            raise SimulationError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
            )
        p = self._metadata.partition(topic, partition)
        if p is None:
            raise SimulationError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Unable to find partition {topic}:{partition}.",
            )
        touched = self.controller.reassign(
            p, replicas, allow_replication_factor_change=allow_replication_factor_change
        )
        self._leadership_changed(touched)

    def partition_reassignments(self) -> list[messages.PartitionReassignment]:
        """The partition reassignments in progress (Kafka's ListPartitionReassignments),
        by topic and partition."""
        return sorted(
            (
                messages.PartitionReassignment(p.topic, p.index, list(p.replicas), adding, removing)
                for p, (adding, removing) in self.controller.reassignments().items()
            ),
            key=lambda r: (r.topic, r.partition),
        )

    def topic_config(self, name: str) -> LogConfig | None:
        """The retention a topic was created with; None if there is no such topic."""
        parts = self._metadata.topics.get(name)
        return None if parts is None else next(iter(parts[0].logs.values())).config

    def set_topic_config(self, name: str, config: Callable[[int], LogConfig]) -> None:
        """Change a topic's config (Kafka's AlterConfigs): each replica's log on broker
        ``b`` takes ``config(b)`` (brokers may differ, as Kafka's resolve a topic's configs
        against their own). Retention applies it on its next pass, a produce at once.
        Raises :class:`SimulationError` (UNKNOWN_TOPIC_OR_PARTITION) for no such topic."""
        parts = self._metadata.topics.get(name)
        if parts is None:
            raise SimulationError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        for p in parts:
            for broker, log in p.logs.items():
                log.config = config(broker)

    @property
    def min_insync_replicas(self) -> int:
        """The brokers' min.insync.replicas: acks=all needs an ISR at least this big."""
        return self._replica_managers[0].config.min_insync_replicas

    @property
    def topics(self) -> dict[str, list[Partition]]:
        """Topic name -> its partitions (read them; the controller changes them)."""
        return self._metadata.topics

    @property
    def hw_listeners(self) -> list[HighWatermarkListener]:
        """Told ``(partition, old, new)`` on every change of a leader's high watermark."""
        return self._metadata.hw_listeners

    def partition(self, topic: str, partition: int) -> Partition | None:
        return self._metadata.partition(topic, partition)

    def partitions(self) -> Iterator[Partition]:
        return self._metadata.partitions()

    def is_alive(self, broker: int) -> bool:
        return self._metadata.alive[broker]

    def is_running(self, broker: int) -> bool:
        """Whether ``broker`` runs: alive, and not hung with the controller not yet knowing
        it (:meth:`crash_broker_unfenced`: it still leads what it led, but does nothing)."""
        return self._metadata.alive[broker] and not self._replica_managers[broker].halted

    def replica_records(self, topic: str, partition: int, broker: int) -> list[Record]:
        """Every record of ``broker``'s replica of the partition, from its log start to its
        end (past the HW: what a new leader loads its state from, as Kafka's coordinators
        do); none if it holds no replica."""
        p = self._metadata.partition(topic, partition)
        log = None if p is None else p.logs.get(broker)
        return [] if log is None else log.read_records(log.log_start_offset, log.leo, 1 << 62)

    def in_transaction(
        self, topic: str, partition: int, producer_id: int, epoch: int | None = None
    ) -> bool:
        """Whether ``producer_id`` has a transaction ongoing on the partition's leader
        (with ``epoch``: begun at that epoch, as Kafka's ``hasOngoingTransaction`` asks
        since Transactions V2 bumps the epoch between transactions)."""
        p = self._metadata.partition(topic, partition)
        if p is None or p.leader is None or producer_id not in p.leader_log.txns.ongoing:
            return False
        return epoch is None or p.leader_log.producers.epoch(producer_id) == epoch

    def call_on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once, soon after the next change of leadership or of a
        broker's liveness (the transaction coordinators load what their broker now leads)."""
        self._metadata.call_on_change(callback)

    def metadata(self) -> messages.ClusterMetadata:
        """Brokers, and per partition: leader, epoch, replicas, ISR, HW, log offsets."""
        return self._metadata.describe(self._network.extra)

    def topic_id(self, name: str) -> uuid.UUID | None:
        """A topic's id (new at each creation); None if there is no such topic."""
        return self._metadata.topic_ids.get(name)

    def is_internal(self, name: str) -> bool:
        """Whether topic ``name`` is one the cluster runs for itself (created with
        ``internal=True``); False for any other, or no such topic."""
        return name in self._metadata.internal_topics

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with id ``topic_id``; None if there is none."""
        return self._metadata.topic_names.get(topic_id)

    def describe_partition(self, topic: str, partition: int) -> messages.PartitionMetadata | None:
        """One partition's entry of :meth:`metadata`; None if there is no such partition."""
        p = self._metadata.partition(topic, partition)
        return None if p is None else describe_partition(p)

    def stored_batches(self, topic: str, partition: int, start: int, end: int) -> list[RecordBatch]:
        """The leader's stored batches that hold offsets ``[start, end)``, in order; none
        if the partition has no leader. The Kafka front door serves the batches clients
        produced from them, as they came (:attr:`RecordBatch.wire`)."""
        p = self._metadata.partition(topic, partition)
        if p is None or p.leader is None:
            return []
        return p.logs[p.leader].read_batches(start, end, 1 << 62)

    def all_purgatories(self) -> list[DelayedOperationPurgatory[Any]]:
        """Every broker's purgatories (each carries its ``broker`` label)."""
        return [
            purgatory
            for rm in self._replica_managers.values()
            for purgatory in rm.purgatories.values()
        ]

    def add_op_observer(self, observer: Callable[[BrokerOperation[Any], float], None]) -> None:
        """Call ``observer(op, now_ms)`` for every request operation created from now on,
        when it finishes: completed, expired, or dropped (cancelled). Cheaper than a
        purgatory listener (no record is built); the simulation's statistics and
        invariant checker use it."""
        self._op_observers.append(observer)
        for rm in self._replica_managers.values():
            rm.op_observer = self._op_finished

    def _op_finished(self, op: BrokerOperation[Any]) -> None:
        now = self._replica_managers[0].now_ms()
        for observer in self._op_observers:
            observer(op, now)

    # -- requests ------------------------------------------------------------------------------

    def _route(self, topic: str, partition: int) -> ReplicaManager:
        """The replica manager of the partition's leader; for an unknown or offline
        partition, any one (it answers the error)."""
        parts = self._metadata.topics.get(topic)
        if parts is not None and partition.__class__ is int and 0 <= partition < len(parts):
            leader = parts[partition].leader
            if leader is not None:
                return self._replica_managers[leader]
        return self._replica_managers[0]

    async def produce(self, request: messages.ProduceRequest) -> messages.ProduceResult:
        """Produce on the partition's leader; acks=-1 waits in its DelayedProduce."""
        return await self._ask(request, ReplicaManager.produce, messages.ProduceResult)

    def send_produce(
        self, request: messages.ProduceRequest, reply: Callable[[messages.ProduceResult], None]
    ) -> DelayedProduce | None:
        """:meth:`produce` for callback clients: ``reply(result)`` runs exactly once, maybe
        before this returns. Returns the parked operation, if any (``cancel()`` drops
        it). No task or future per request: the simulated clients use this."""
        return self._send(request, reply, ReplicaManager.produce, messages.ProduceResult)

    async def fetch(
        self, request: messages.FetchRequest, broker: int | None = None
    ) -> messages.FetchResult:
        """A consumer fetch from the partition's leader: records from the offset up to the
        HW, waiting in its DelayedFetch for ``min_bytes`` or ``max_wait_ms``. ``broker``:
        send it to that broker instead, which serves it as a follower if it is one and
        the request has client metadata (``client_rack``, KIP-392), else answers
        NOT_LEADER_OR_FOLLOWER; a dead broker BROKER_NOT_AVAILABLE."""
        return await self._ask(
            request, ReplicaManager.fetch, messages.FetchResult, self._fetch_route(broker)
        )

    def send_fetch(
        self,
        request: messages.FetchRequest,
        reply: Callable[[messages.FetchResult], None],
        broker: int | None = None,
    ) -> DelayedFetch | None:
        """:meth:`fetch` for callback clients, like :meth:`send_produce`."""
        return self._send(
            request, reply, ReplicaManager.fetch, messages.FetchResult, self._fetch_route(broker)
        )

    def _fetch_route(self, broker: int | None) -> ReplicaManager | None:
        """The replica manager a fetch sent to ``broker`` reaches (None: its leader's)."""
        return None if broker is None else self._broker(broker).replica_manager

    @property
    def racks(self) -> dict[int, str | None]:
        """Each broker's rack (Kafka's broker.rack; None: not set)."""
        return dict(self._metadata.racks)

    @property
    def replica_selector_class(self) -> str | None:
        """Kafka's replica.selector.class the brokers run (None: consumers read from
        leaders only)."""
        return self._replica_managers[0].config.replica_selector_class

    async def write_txn_markers(
        self, markers: Sequence[messages.TxnMarker], timeout_ms: int = 30_000
    ) -> dict[tuple[str, int], ErrorCode]:
        """Write transaction markers, Kafka's WriteTxnMarkers inside the cluster (the
        transaction coordinator's side of EndTxn): each marker goes to each of its
        partitions' current leader as a control batch and is replicated like any batch,
        ending the producer's transaction there (an aborted one enters the partition's
        aborted-transactions index; the last stable offset moves past it once the marker
        is committed). Returns, per ``(topic, partition)``, NONE once the HW passed the
        marker (acks=all, at most ``timeout_ms``: REQUEST_TIMED_OUT), or why not:
        UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (also when leadership moved
        before the marker was committed: write it again through the new leader),
        NOT_ENOUGH_REPLICAS(_AFTER_APPEND), INVALID_PRODUCER_EPOCH (the producer is at a
        newer epoch), TRANSACTION_COORDINATOR_FENCED (a newer coordinator wrote for it),
        KAFKA_STORAGE_ERROR, BROKER_NOT_AVAILABLE (the cluster is closed, or the leader
        crashed under it). ValueError if one call names a partition twice (one marker
        per partition per call: send concurrent calls for several producers)."""
        check_int("timeout_ms", timeout_ms, 0)
        targets: list[tuple[messages.TxnMarker, str, int]] = []
        seen: set[tuple[str, int]] = set()
        for marker in markers:
            if not isinstance(marker, messages.TxnMarker):
                raise TypeError(f"markers must be TxnMarker, got {marker!r}")
            for tp in marker.partitions:
                if tp in seen:
                    raise ValueError(f"partition {tp[0]}-{tp[1]} named twice in one call")
                seen.add(tp)
                targets.append((marker, tp[0], tp[1]))
        if self._closed:
            return dict.fromkeys(seen, _UNAVAILABLE)

        async def one(marker: messages.TxnMarker, topic: str, index: int) -> ErrorCode:
            rm = self._route(topic, index)
            answer = rm.write_txn_marker(marker, topic, index, timeout_ms, None)
            if isinstance(answer, messages.ProduceResult):
                return answer.error
            result: messages.ProduceResult | None = await rm.park(answer)
            return _UNAVAILABLE if result is None else result.error

        errors = await asyncio.gather(*(one(m, t, i) for m, t, i in targets))
        return {(t, i): error for (_, t, i), error in zip(targets, errors, strict=True)}

    async def compact(self, topic: str | None = None) -> int:
        """Compact now, as a test wants it (kfake's ``Compact``): every live broker's log
        cleaner runs over each of its compacted logs (of ``topic``; all by default), its
        active segment rolled, whatever the dirty ratio and compaction lags; each stops
        at its last stable offset. Returns how many logs were cleaned."""
        cleaned = 0
        for b, rm in self._replica_managers.items():
            if self._metadata.alive[b] and not rm.halted:
                cleaned += await rm.clean_logs(force=True, topic=topic)
        return cleaned

    async def delete_records(
        self, request: messages.DeleteRecordsRequest
    ) -> messages.DeleteRecordsResult:
        """Move the log start on the leader, then wait in its DelayedDeleteRecords until
        every live replica's log start reached the offset."""
        return await self._ask(request, ReplicaManager.delete_records, messages.DeleteRecordsResult)

    async def elect_leaders(
        self, request: messages.ElectLeadersRequest
    ) -> messages.ElectLeadersResult:
        """Elect leaders (Kafka's ElectLeaders): the controller plans each election and
        carries it out one election round trip later; the request waits in the
        ElectLeader purgatory of the broker that took it (the controller's, the lowest
        live broker) until every planned leader is in place."""
        if self._closed:
            return messages.ElectLeadersResult(_UNAVAILABLE)
        unclean = request.election_type == "unclean"
        plans, decided = self.controller.plan_elections(request.partitions, unclean)
        rm = self._controller_broker()
        answer = rm.elect_leaders(request, plans, decided, None)
        if isinstance(answer, messages.ElectLeadersResult):
            return answer
        self.controller.schedule_elections(plans, unclean)
        result: messages.ElectLeadersResult | None = await rm.park(answer)
        return result or messages.ElectLeadersResult(_UNAVAILABLE)

    def _controller_broker(self) -> ReplicaManager:
        broker = self.controller.active_broker
        return self._replica_managers[0 if broker is None else broker]

    @property
    def auto_leader_rebalance_enable(self) -> bool:
        """Kafka's auto.leader.rebalance.enable: may be switched at any time."""
        return self.controller.auto_leader_rebalance_enable

    @auto_leader_rebalance_enable.setter
    def auto_leader_rebalance_enable(self, enabled: bool) -> None:
        if not isinstance(enabled, bool):
            raise TypeError("auto_leader_rebalance_enable must be a bool")
        self.controller.auto_leader_rebalance_enable = enabled

    def rebalance_leaders(self) -> int:
        """One automatic rebalancing check, now (see :meth:`Controller.rebalance_leaders`)."""
        return self.controller.rebalance_leaders()

    async def _ask(
        self,
        request: Request,
        handle: Callable[[ReplicaManager, Request, None], Result | BrokerOperation[Result]],
        result_type: type[Result],
        to: ReplicaManager | None = None,
    ) -> Result:
        """Hand ``request`` to its leader's replica manager (or to ``to``); park what it
        cannot answer."""
        if self._closed:
            return result_type(_UNAVAILABLE)
        if to is None:
            rm = self._route(request.topic, request.partition)
        elif not self._metadata.alive[to.broker_id]:
            return result_type(_UNAVAILABLE)
        else:
            rm = to
        if rm.halted:  # crashed, the controller not told yet: nobody answers
            return result_type(_UNAVAILABLE)
        answer = handle(rm, request, None)
        if isinstance(answer, result_type):
            return answer
        assert isinstance(answer, BrokerOperation)
        result: Result | None = await rm.park(answer)
        return result or result_type(_UNAVAILABLE)

    def _send(
        self,
        request: Request,
        reply: Callable[[Result], None],
        handle: Callable[[ReplicaManager, Request, Callable[[Result], None]], Result | Parked],
        result_type: type[Result],
        to: ReplicaManager | None = None,
    ) -> Parked | None:
        """:meth:`_ask` for callback clients: answer through ``reply``."""
        if self._closed:
            reply(result_type(_UNAVAILABLE))
            return None
        if to is None:
            rm = self._route(request.topic, request.partition)
        elif not self._metadata.alive[to.broker_id]:
            reply(result_type(_UNAVAILABLE))
            return None
        else:
            rm = to
        if rm.halted:  # crashed, the controller not told yet: nobody answers
            reply(result_type(_UNAVAILABLE))
            return None
        answer = handle(rm, request, reply)
        if answer.__class__ is result_type:
            reply(answer)
            return None
        rm.watch(answer)  # type: ignore[arg-type]
        return answer  # type: ignore[return-value]

    # -- faults --------------------------------------------------------------------------------

    def set_replication_latency(self, broker: int, latency: Latency | None) -> None:
        """Slow follower: each replication round trip of ``broker`` takes a sample of
        ``latency`` longer (None: back to normal)."""
        self._network.set_latency(self._broker(broker).broker_id, latency)
        self._metadata.bump()

    async def crash_broker(self, broker: int) -> None:
        """Kill ``broker``, and the controller knows at once (its session closed, as when
        a broker's process dies and its connection to the controller resets): it is
        fenced. Its fetchers stop; partitions it led fail over to an ISR member (or go
        offline), so its parked requests answer NOT_LEADER_OR_FOLLOWER; it leaves the
        ISR of every partition it followed in the same step (the last member of an ISR
        stays), so acks=all produces there complete without waiting for it.
        :meth:`crash_broker_unfenced` is the crash the controller does not hear of."""
        rm = self._broker(broker).replica_manager
        self._fence(rm.broker_id)

    async def crash_broker_unfenced(self, broker: int) -> None:
        """``broker`` stops answering and the controller does not hear of it (a hung
        process, a network partition from everyone): it is fenced only when its session
        times out, ``broker_session_timeout_ms`` later (Kafka's
        broker.session.timeout.ms, 9 s by default). Until then it still leads what it
        led (requests to those partitions answer BROKER_NOT_AVAILABLE: nobody answers
        them), nobody replicates from it, and it stays in every ISR, so acks=all
        produces on partitions it follows wait for it until it is fenced or a leader's
        lag check drops it (``replica_lag_time_max_ms``), whichever comes first. Its
        parked requests are answered BROKER_NOT_AVAILABLE (their connections are gone).
        No-op for a broker that is down already."""
        rm = self._broker(broker).replica_manager
        broker = rm.broker_id
        if not self.is_alive(broker) or broker in self._unfenced:
            return
        rm.halted = True
        rm.stop_fetchers()
        for other in self._replica_managers.values():  # nobody can fetch from it
            fetcher = other.fetchers.get(broker)
            if fetcher is not None:
                fetcher.stop()
        rm.answer_parked_unavailable()
        loop = asyncio.get_running_loop()
        self._unfenced[broker] = loop.call_later(
            self.broker_session_timeout_ms / 1000.0, self._fence, broker
        )

    def _fence(self, broker: int) -> None:
        """The controller fences ``broker`` (see :meth:`crash_broker`)."""
        handle = self._unfenced.pop(broker, None)
        if handle is not None:
            handle.cancel()
        rm = self._replica_managers[broker]
        rm.stop_fetchers()
        self._leadership_changed(self.controller.broker_failed(broker))
        rm.halted = False  # down now: the controller's liveness says so
        rm.answer_parked_unavailable()  # anything the new epochs did not answer

    async def restart_broker(self, broker: int) -> None:
        """Bring ``broker`` back: it truncates to the leaders' logs and catches up. A
        broker crashed unfenced is fenced first, as Kafka's controller fences the old
        incarnation of a broker that registers again."""
        rm = self._broker(broker).replica_manager
        if rm.broker_id in self._unfenced:
            self._fence(rm.broker_id)
        touched = self.controller.broker_started(rm.broker_id)
        if self._started and not self._closed:
            rm.start_fetchers()
            for other in self._replica_managers.values():  # replicating from it again
                fetcher = other.fetchers.get(rm.broker_id)
                if fetcher is not None and self.is_alive(other.broker_id) and not other.halted:
                    fetcher.start()
        self._leadership_changed(touched)

    async def fail_over(self, topic: str, partition: int, new_leader: int | None = None) -> int:
        """Move leadership to ``new_leader`` (default: the next live ISR member); the old
        leader becomes a follower. Returns the new leader. Raises
        :class:`SimulationError` if no eligible replica exists."""
        p = self.partition(topic, partition)
        if p is None:
            raise SimulationError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}"
            )
        leader = self.controller.move_leader(p, new_leader)
        self._leadership_changed([p])
        return leader

    def _leadership_changed(self, partitions: list[Partition]) -> None:
        """Requests parked on these partitions, on any of their replicas, look again, and
        so do ElectLeaders requests (parked on whichever broker took them)."""
        for p in partitions:
            for broker in p.replicas:
                self._replica_managers[broker].on_leadership_change(p)
            for rm in self._replica_managers.values():
                rm.on_leader_elected(p)

    def _broker(self, broker: int) -> Broker:
        if isinstance(broker, bool) or broker not in self.brokers:
            raise ValueError(f"no broker {broker!r}; brokers are {sorted(self.brokers)}")
        return self.brokers[broker]

    def __repr__(self) -> str:
        up = sum(b.alive for b in self.brokers.values())
        parts = sum(len(p) for p in self._metadata.topics.values())
        return (
            f"<Cluster brokers={up}/{len(self.brokers)} topics={len(self._metadata.topics)} "
            f"partitions={parts}>"
        )


def _replica_managers(
    brokers: int, metadata: MetadataCache, config: ReplicaConfig, network: Network
) -> dict[int, ReplicaManager]:
    """A replica manager per broker, each knowing every other (the leaders its fetchers
    fetch from)."""
    peers: dict[int, FetchLeader] = {}
    managers = {b: ReplicaManager(b, metadata, config, network, peers) for b in range(brokers)}
    peers.update(managers)
    return managers


def check_racks(brokers: int, racks: Sequence[str | None] | None) -> dict[int, str | None]:
    """Broker id -> rack, from one rack (or None) per broker; ValueError/TypeError if the
    list does not match the brokers or names a rack that is not a non-empty str."""
    if racks is None:
        return dict.fromkeys(range(brokers))
    if isinstance(racks, str) or len(racks) != brokers:
        raise ValueError(f"racks must list one rack per broker ({brokers}), got {racks!r}")
    for rack in racks:
        if rack is not None and (not isinstance(rack, str) or not rack):
            raise TypeError(f"a rack must be a non-empty str or None, got {rack!r}")
    return dict(enumerate(racks))
