"""One broker's transaction state manager (Kafka's ``TransactionStateManager``): the
``__transaction_state`` partitions the broker leads, each loaded from the broker's replica
of the log when it becomes their leader, and the appends that make a transaction's next
state durable (acks=all) before it replaces the last. The records are Kafka's
(:mod:`.txn_log`). It knows nothing of requests, purgatories or markers: the coordinator
(:mod:`.txn_coordinator`) drives it and is told of each partition it loads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.offsets_topic import partition_for
from purgatory.kafka.coordinator.state_topic import append_error
from purgatory.kafka.coordinator.txn_log import key_bytes, read_key, read_value, value_bytes
from purgatory.kafka.coordinator.txn_metadata import (
    NO_PRODUCER_EPOCH,
    TRANSACTION_STATE_TOPIC,
    TxnMetadata,
)
from purgatory.sim import Cluster, ProduceRequest
from purgatory.sim.batches import EncodedBatch

#: builds one ``__transaction_state`` record (key, value; None: a tombstone) as a Kafka batch
BatchEncoder = Callable[[bytes, bytes | None], EncodedBatch]


@final
@dataclass(slots=True)
class LoadedPartition:
    """A ``__transaction_state`` partition this broker leads: its index, the leader epoch
    it was loaded at (Kafka's coordinator epoch) and its transactions."""

    index: int
    epoch: int
    txns: dict[str, TxnMetadata]


@final
class TransactionStateManager:
    """The ``__transaction_state`` partitions broker ``broker_id`` leads, of the
    ``num_partitions``. ``on_load`` is told of each partition once loaded (the coordinator
    finishes what was in flight); ``batch`` encodes a record as a Kafka batch (else the
    simulation's entries, where a tombstone is an empty value)."""

    def __init__(
        self,
        broker_id: int,
        cluster: Cluster,
        num_partitions: int,
        on_load: Callable[[LoadedPartition], None],
        batch: BatchEncoder | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.cluster = cluster
        self.num_partitions = num_partitions
        self._on_load = on_load
        self._batch = batch
        self._loaded: dict[int, LoadedPartition] = {}

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def leads(self, index: int) -> int | None:
        """The leader epoch of partition ``index`` if this broker leads it (and runs),
        else None."""
        p = self.cluster.partition(TRANSACTION_STATE_TOPIC, index)
        if p is None or p.leader != self.broker_id or not self.cluster.is_running(self.broker_id):
            return None
        return p.leader_epoch

    def owned(self, transactional_id: str) -> LoadedPartition | ErrorCode:
        """The loaded partition of ``transactional_id``, loading it first if this broker
        just became its leader; NOT_COORDINATOR if another broker (or none) leads it."""
        index = self.partition_of(transactional_id)
        epoch = self.leads(index)
        if epoch is None:
            self._loaded.pop(index, None)
            return ErrorCode.NOT_COORDINATOR
        loaded = self._loaded.get(index)
        if loaded is None or loaded.epoch != epoch:
            loaded = self._load(index, epoch)
        return loaded

    def owned_txn(self, transactional_id: str) -> TxnMetadata | None:
        loaded = self.owned(transactional_id)
        return None if isinstance(loaded, ErrorCode) else loaded.txns.get(transactional_id)

    def current(self, index: int, epoch: int) -> LoadedPartition | None:
        """Partition ``index`` if this broker still leads it at ``epoch``, as loaded then."""
        loaded = self._loaded.get(index)
        if loaded is None or loaded.epoch != epoch or self.leads(index) != epoch:
            return None
        return loaded

    def known(
        self, transactional_id: str, unknown: ErrorCode
    ) -> tuple[LoadedPartition, TxnMetadata] | ErrorCode:
        """The state of a transactional id this broker owns, or why not: an empty id
        INVALID_REQUEST, another coordinator's NOT_COORDINATOR, an id without a producer
        ``unknown``."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        loaded = self.owned(transactional_id)
        if isinstance(loaded, ErrorCode):
            return loaded
        txn = loaded.txns.get(transactional_id)
        if txn is None or txn.producer_epoch == NO_PRODUCER_EPOCH:
            return unknown
        return loaded, txn

    def elected_or_resigned(self) -> None:
        """Leadership changed somewhere: load the partitions this broker now leads (and
        tell ``on_load``), forget those it no longer leads."""
        if TRANSACTION_STATE_TOPIC not in self.cluster.topics:
            return
        for index in range(len(self.cluster.topics[TRANSACTION_STATE_TOPIC])):
            epoch = self.leads(index)
            loaded = self._loaded.get(index)
            if epoch is None:
                self._loaded.pop(index, None)
            elif loaded is None or loaded.epoch != epoch:
                self._load(index, epoch)

    def _load(self, index: int, epoch: int) -> LoadedPartition:
        """Rebuild partition ``index``'s transactions from this broker's replica of the log
        (to its end, as Kafka loads): a record's key of a version Kafka's format does not
        know is skipped, a tombstone removes its id."""
        txns: dict[str, TxnMetadata] = {}
        for record in self.cluster.replica_records(TRANSACTION_STATE_TOPIC, index, self.broker_id):
            transactional_id = None if record.key is None else read_key(record.key)
            if transactional_id is None:
                continue
            if not record.value:  # a tombstone: its id expired
                txns.pop(transactional_id, None)
                continue
            txns[transactional_id] = read_value(transactional_id, record.value)
        loaded = LoadedPartition(index, epoch, txns)
        self._loaded[index] = loaded
        self._on_load(loaded)
        return loaded

    async def append(
        self, loaded: LoadedPartition, txn: TxnMetadata, new: TxnMetadata | None
    ) -> ErrorCode:
        """Append ``new`` (the next state of ``txn``; None: the id removed) to the log,
        acks=all, ``txn`` pending meanwhile; once durable, and while this broker still
        leads the partition at the epoch it loaded, it replaces ``txn``. Errors as Kafka's
        state manager maps its log append's."""
        if self.leads(loaded.index) != loaded.epoch:
            return ErrorCode.NOT_COORDINATOR
        key = txn.transactional_id
        txn.pending = True
        try:
            result = await self.cluster.produce(
                self._record(
                    loaded.index, key_bytes(key), None if new is None else value_bytes(new)
                )
            )
        finally:
            txn.pending = False
        error = append_error(result.error)
        if error is not ErrorCode.NONE:
            return error
        if self.leads(loaded.index) != loaded.epoch or self._loaded.get(loaded.index) is not loaded:
            return ErrorCode.NOT_COORDINATOR
        if new is None:
            del loaded.txns[key]
        else:
            loaded.txns[key] = new
        return ErrorCode.NONE

    def _record(self, index: int, key: bytes, value: bytes | None) -> ProduceRequest:
        if self._batch is not None:
            return ProduceRequest(
                TRANSACTION_STATE_TOPIC, index, [], acks=-1, wire=self._batch(key, value)
            )
        return ProduceRequest(TRANSACTION_STATE_TOPIC, index, [(key, value or b"")], acks=-1)

    def transactions(self) -> list[TxnMetadata]:
        """Every transactional id with a producer this broker coordinates."""
        self.elected_or_resigned()
        return [
            txn
            for loaded in self._loaded.values()
            for txn in loaded.txns.values()
            if txn.producer_epoch != NO_PRODUCER_EPOCH
        ]

    def by_producer(self, producer_id: int) -> TxnMetadata | None:
        for loaded in self._loaded.values():
            for txn in loaded.txns.values():
                if txn.producer_id == producer_id:
                    return txn
        return None
