"""Every broker's transaction coordinator (KIP-98) and what they share: built here, each
of its parts given what it needs. The coordinator of a transactional id is the leader of
partition ``abs(String.hashCode(id)) % transaction.state.log.num.partitions`` of the
internal topic ``__transaction_state`` (Java's hash, so the partition is Kafka's). As
Kafka splits it, a broker's coordinator is its request logic
(:class:`~.txn_coordinator.TransactionCoordinator`), its state manager
(:class:`~.txn_state.TransactionStateManager`: the partitions it leads, loaded from and
written to the log in Kafka's format, :mod:`.txn_log`) and its marker channel
(:class:`~.txn_markers.TransactionMarkerChannel`). This hub creates the topic, follows
leadership, routes an id to its coordinator and answers the produce path's checks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Final, final

from purgatory import Clock, DelayedOperation, DelayedOperationPurgatory
from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.offsets_topic import partition_for
from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.coordinator.state_topic import StateTopic
from purgatory.kafka.coordinator.txn_coordinator import TransactionCoordinator, TxnPurgatories
from purgatory.kafka.coordinator.txn_metadata import (
    PREPARED,
    TRANSACTION_STATE_TOPIC,
    TxnSettings,
    TxnState,
)
from purgatory.kafka.coordinator.txn_state import BatchEncoder
from purgatory.kafka.features import TV_2
from purgatory.sim import Cluster

logger = logging.getLogger("purgatory.kafka.transactions")

#: the coordinator's answers a produce gives otherwise (Kafka's AddPartitionsToTxnManager)
_PRODUCE_ERRORS: Final = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
}


@final
class TransactionCoordinators:
    """Every broker's transaction coordinator and what they share: the cluster, the
    producer ids, the offset store (for TxnOffsetCommit's pending offsets), the settings
    and the "TxnTimeout" purgatory (labelled as the group coordinator's are). ``clock``
    schedules the timeouts (None: the loop's); ``wall_ms`` stamps the records and measures
    how long a transaction has run (Unix milliseconds, as Kafka's); ``batch`` encodes a
    ``__transaction_state`` record as a Kafka batch (the front door's); without
    ``reaper_enabled`` nothing expires a timeout but ``timeouts.timer.run_due()`` (tests
    on a manual clock)."""

    def __init__(
        self,
        cluster: Cluster,
        producer_ids: ProducerIds,
        offsets: OffsetStore,
        settings: TxnSettings | None = None,
        *,
        labels: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        wall_ms: Callable[[], int] | None = None,
        reaper_enabled: bool = True,
        batch: BatchEncoder | None = None,
    ) -> None:
        self.cluster = cluster
        self.producer_ids = producer_ids
        self.offsets = offsets
        self.settings = TxnSettings() if settings is None else settings
        self.timeouts: DelayedOperationPurgatory[DelayedOperation] = DelayedOperationPurgatory(
            "TxnTimeout", labels=labels, clock=clock, reaper_enabled=reaper_enabled
        )
        self.settling: DelayedOperationPurgatory[DelayedOperation] = DelayedOperationPurgatory(
            "TxnSettle", labels=labels, clock=clock, reaper_enabled=reaper_enabled
        )
        self.expirations: DelayedOperationPurgatory[DelayedOperation] = DelayedOperationPurgatory(
            "TxnIdExpiration", labels=labels, clock=clock, reaper_enabled=reaper_enabled
        )
        self.wall_ms: Callable[[], int] = wall_ms or (lambda: int(time.time() * 1000))
        purgatories = TxnPurgatories(self.timeouts, self.settling, self.expirations)
        self.coordinators = {
            b: TransactionCoordinator(
                b,
                cluster,
                producer_ids,
                offsets,
                self.settings,
                purgatories,
                self.wall_ms,
                batch,
            )
            for b in cluster.brokers
        }
        self.state_topic = StateTopic(
            cluster,
            TRANSACTION_STATE_TOPIC,
            self.settings.num_partitions,
            self.settings.replication_factor,
            self.coordinators,
        )

    @property
    def closed(self) -> bool:
        return self.state_topic.closed

    def __getitem__(self, broker_id: int) -> TransactionCoordinator:
        return self.coordinators[broker_id]

    async def ensure_topic(self) -> ErrorCode:
        """Create ``__transaction_state`` on first use: ``num_partitions`` partitions,
        replication factor min(configured, brokers), records kept forever."""
        return await self.state_topic.ensure()

    def running(self, broker: int) -> bool:
        """Whether ``broker`` runs: not crashed, nor hung with the controller not yet
        knowing it (``crash_broker_unfenced``), when it still leads what it led but its
        coordinator does nothing, as a dead Kafka broker's."""
        return self.cluster.is_running(broker)

    def coordinator_of(self, transactional_id: str) -> tuple[ErrorCode, int]:
        """FindCoordinator's answer for a transactional id: the leader of its partition,
        or COORDINATOR_NOT_AVAILABLE while it has none."""
        index = partition_for(transactional_id, self.settings.num_partitions)
        p = self.cluster.partition(TRANSACTION_STATE_TOPIC, index)
        if p is None or p.leader is None or not self.cluster.is_alive(p.leader):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        return ErrorCode.NONE, p.leader

    def owner(self, transactional_id: str) -> TransactionCoordinator | None:
        """The coordinator serving ``transactional_id`` now, if any."""
        error, broker = self.coordinator_of(transactional_id)
        return None if error is not ErrorCode.NONE else self.coordinators[broker]

    def verify_produce(
        self, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        """KIP-890's check of a transactional Produce, as a partition leader asks the
        coordinator (AddPartitionsToTxn verify_only), with the answers Kafka's produce path
        gives: NONE if the partition is in the producer's ongoing transaction;
        INVALID_PRODUCER_EPOCH for an older epoch; INVALID_TXN_STATE if the partition was
        not added; INVALID_PRODUCER_ID_MAPPING for a producer no coordinator knows; and
        NOT_ENOUGH_REPLICAS (retriable) while the answer cannot be had: a
        ``__transaction_state`` partition without a leader (its coordinator may be the
        missing one), or the transaction being committed or aborted (Kafka's
        CONCURRENT_TRANSACTIONS, mapped so for a produce)."""
        txn = None
        for coordinator in self.coordinators.values():
            coordinator.elected_or_resigned()
            txn = coordinator.by_producer(producer_id)
            if txn is not None:
                break
        if txn is None:
            state = self.cluster.topics.get(TRANSACTION_STATE_TOPIC, [])
            if any(p.leader is None or not self.running(p.leader) for p in state):
                return ErrorCode.NOT_ENOUGH_REPLICAS
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch < txn.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if txn.state in PREPARED or txn.pending:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        if txn.state is TxnState.ONGOING and (topic, partition) in txn.partitions:
            return ErrorCode.NONE
        return ErrorCode.INVALID_TXN_STATE

    async def verify_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group: str,
        *,
        implicit: bool = False,
    ) -> ErrorCode:
        """TxnOffsetCommit's check: the group was added (AddOffsetsToTxn) to the
        producer's ongoing transaction at this epoch. A zombie's offsets are refused.
        ``implicit`` (Transactions V2's TxnOffsetCommit v5): the group is added now, as
        Kafka's group coordinator has its partition added to the transaction."""
        coordinator = self.owner(transactional_id)
        if coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if implicit:
            error = await coordinator.add_partitions(
                transactional_id,
                producer_id,
                producer_epoch,
                groups=[group],
                client_txn_version=TV_2,
            )
            if error is not ErrorCode.NONE:
                return error
        return coordinator.verify_offsets(transactional_id, producer_id, producer_epoch, group)

    async def add_for_produce(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        topic: str,
        partition: int,
    ) -> ErrorCode:
        """Transactions V2's Produce (v12+): the partition added to the producer's
        transaction by the partition's leader (Kafka's AddPartitionsToTxnManager, not
        verify-only), with the answers Kafka's produce path gives: NONE once added;
        INVALID_PRODUCER_EPOCH for a fenced epoch; INVALID_PRODUCER_ID_MAPPING for a
        producer the coordinator does not know under that id; NOT_ENOUGH_REPLICAS
        (retriable) while it cannot be done: no coordinator, or the last transaction
        still completing past the coordinator's wait."""
        coordinator = self.owner(transactional_id)
        if coordinator is None:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        error = await coordinator.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            [(topic, partition)],
            client_txn_version=TV_2,
        )
        return _PRODUCE_ERRORS.get(error, error)

    @property
    def purgatories(self) -> dict[str, DelayedOperationPurgatory[DelayedOperation]]:
        return {
            "TxnTimeout": self.timeouts,
            "TxnSettle": self.settling,
            "TxnIdExpiration": self.expirations,
        }

    async def close(self) -> None:
        self.state_topic.close()
        for coordinator in self.coordinators.values():
            await coordinator.close()
        await self.timeouts.shutdown()
        await self.settling.shutdown()
        await self.expirations.shutdown()
