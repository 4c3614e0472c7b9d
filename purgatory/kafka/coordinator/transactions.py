"""Kafka's transaction coordinator (KIP-98), one per broker, its state in ``__transaction_state``.

The coordinator of a transactional id is the leader of partition
``abs(String.hashCode(id)) % transaction.state.log.num.partitions`` of the internal topic
``__transaction_state`` (Java's hash, as Kafka computes it, so the partition is Kafka's).
Every change of a transaction's metadata (producer id and epoch, timeout, state,
partitions) is a record appended there, acks=all, before the change takes effect; a broker
that becomes a partition's leader rebuilds that partition's transactions from its replica
of the log and finishes what was in flight: a transaction found in PrepareCommit gets its
commit markers on every partition, one in PrepareAbort its abort markers. What a crashed
coordinator held in memory only (a transition not yet durable) is gone, as in Kafka.

A transaction moves Empty -> Ongoing (AddPartitionsToTxn, AddOffsetsToTxn) ->
PrepareCommit/PrepareAbort (EndTxn, durable before EndTxn answers) -> markers written to
every partition (and the group's pending offsets completed) -> CompleteCommit/CompleteAbort.
An Ongoing transaction waits in the "TxnTimeout" purgatory; past its
``transaction_timeout_ms`` the coordinator bumps the producer epoch (fencing the producer)
and aborts it, as Kafka's coordinator does. An idle transactional id (Empty or complete)
waits in the "TxnIdExpiration" purgatory; ``transactional.id.expiration.ms`` after its last
change the coordinator removes it (a tombstone in ``__transaction_state``), as Kafka's
removes expired ids. The records are Kafka's (:mod:`.txn_log`).

One departure from Kafka, on purpose: a producer that starts its next transaction while
the coordinator still writes the last one's markers (librdkafka does so as soon as
EndTxn answers) is not answered CONCURRENT_TRANSACTIONS at once, to retry after its
backoff (20 ms in librdkafka, 100 ms in the Java client): its AddPartitionsToTxn or
AddOffsetsToTxn waits in the "TxnSettle" purgatory until the transaction completes, up to
``SETTLE_WAIT_MS``, and goes on from there. The client sees the answer it would have seen
after its retry, a backoff sooner.

Transactions V1 throughout (the epoch is bumped by InitProducerId, not by each EndTxn):
clients use V2 (KIP-890 part 2) only when the ``transaction.version`` feature says so, and
these brokers do not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, final

from purgatory import Clock, DelayedOperation, DelayedOperationPurgatory, OperationCancelled
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.offsets_topic import partition_for
from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.coordinator.txn_log import key_bytes, read_key, read_value, value_bytes
from purgatory.kafka.coordinator.txn_metadata import (
    COMPLETE,
    EXHAUSTED_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED,
    TRANSACTION_STATE_TOPIC,
    TxnMetadata,
    TxnSettings,
    TxnState,
)
from purgatory.sim import Cluster, ProduceRequest, TxnMarker
from purgatory.sim.errors import ErrorCode, SimulationError
from purgatory.sim.log import EncodedBatch

logger = logging.getLogger("purgatory.kafka.transactions")

#: how long the coordinator waits before writing markers again to partitions that refused
MARKER_RETRY_BACKOFF_S: Final = 0.05
#: how long AddPartitionsToTxn and AddOffsetsToTxn wait for the previous transaction of
#: their producer to complete before they are answered CONCURRENT_TRANSACTIONS
SETTLE_WAIT_MS: Final = 1000
_PREPARED: Final = PREPARED
_COMPLETE: Final = COMPLETE


class _TxnDeadline(DelayedOperation):
    """A deadline of a transactional id, in one of the coordinator's purgatories: done as
    soon as it no longer applies (:meth:`_current`), acted on (:meth:`_act`) if it still
    applies when it expires."""

    __slots__ = ("coordinator", "op_id", "transactional_id", "txn")
    kind: ClassVar[str] = ""

    def __init__(
        self, coordinator: TransactionCoordinator, txn: TxnMetadata, delay_ms: int
    ) -> None:
        super().__init__(max(delay_ms, 0))
        self.coordinator = coordinator
        self.transactional_id = txn.transactional_id
        self.txn = txn
        self.op_id = (
            f"{self.kind}-{txn.transactional_id}-{txn.producer_id}-{txn.producer_epoch}"
            f"-{txn.last_update_ms}"
        )

    def _current(self) -> bool:
        raise NotImplementedError

    def _act(self) -> None:
        raise NotImplementedError

    def try_complete(self) -> bool:
        return not self._current() and self.force_complete()

    def on_expiration(self) -> None:
        if self._current():
            self._act()


class TxnTimeout(_TxnDeadline):
    """An Ongoing transaction's deadline: done when the transaction leaves Ongoing (or
    another epoch takes over), expired at ``transaction_timeout_ms``: then the coordinator
    fences the producer and aborts it."""

    __slots__ = ()
    kind: ClassVar[str] = "txn-timeout"

    def _current(self) -> bool:
        # partitions added meanwhile replace the metadata: the same transaction still
        txn = self.coordinator.owned_txn(self.transactional_id)
        return (
            txn is not None
            and txn.state is TxnState.ONGOING
            and txn.producer_id == self.txn.producer_id
            and txn.producer_epoch == self.txn.producer_epoch
        )

    def _act(self) -> None:
        self.coordinator.abort_timed_out(self.transactional_id)


class TxnIdExpiration(_TxnDeadline):
    """An idle transactional id's expiration: done when the id changes again (a new
    producer, a transaction), expired ``transactional.id.expiration.ms`` after its last
    change: then the coordinator removes the id."""

    __slots__ = ()
    kind: ClassVar[str] = "txn-id-expiration"

    def _current(self) -> bool:
        # each change replaces the metadata: this one, unchanged since
        return self.coordinator.owned_txn(self.transactional_id) is self.txn

    def _act(self) -> None:
        self.coordinator.expire(self.txn)


@final
@dataclass(slots=True)
class _Loaded:
    """A ``__transaction_state`` partition this broker leads: the leader epoch it was
    loaded at (Kafka's coordinator epoch) and its transactions."""

    epoch: int
    txns: dict[str, TxnMetadata]


@final
class TransactionCoordinator:
    """The transaction coordinator of broker ``broker_id``: it serves the transactional
    ids of the ``__transaction_state`` partitions the broker leads."""

    def __init__(self, broker_id: int, shared: TransactionCoordinators) -> None:
        self.broker_id = broker_id
        self.shared = shared
        self.cluster = shared.cluster
        self._loaded: dict[int, _Loaded] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # -- ownership -------------------------------------------------------------------------

    def _partition(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.shared.settings.num_partitions)

    def _leads(self, index: int) -> int | None:
        """The leader epoch of partition ``index`` if this broker leads it, else None."""
        p = self.cluster.partition(TRANSACTION_STATE_TOPIC, index)
        if p is None or p.leader != self.broker_id or not self.shared.running(self.broker_id):
            return None
        return p.leader_epoch

    def _owned(self, transactional_id: str) -> _Loaded | ErrorCode:
        """The loaded partition of ``transactional_id``, loading it first if this broker
        just became its leader; NOT_COORDINATOR if another broker (or none) leads it."""
        index = self._partition(transactional_id)
        epoch = self._leads(index)
        if epoch is None:
            self._loaded.pop(index, None)
            return ErrorCode.NOT_COORDINATOR
        loaded = self._loaded.get(index)
        if loaded is None or loaded.epoch != epoch:
            loaded = self._load(index, epoch)
        return loaded

    def owned_txn(self, transactional_id: str) -> TxnMetadata | None:
        loaded = self._owned(transactional_id)
        return None if isinstance(loaded, ErrorCode) else loaded.txns.get(transactional_id)

    def elected_or_resigned(self) -> None:
        """Leadership changed somewhere: load the partitions this broker now leads (and
        finish what they had in flight), forget those it no longer leads."""
        if TRANSACTION_STATE_TOPIC not in self.cluster.topics:
            return
        for index in range(len(self.cluster.topics[TRANSACTION_STATE_TOPIC])):
            epoch = self._leads(index)
            loaded = self._loaded.get(index)
            if epoch is None:
                self._loaded.pop(index, None)
            elif loaded is None or loaded.epoch != epoch:
                self._load(index, epoch)

    def _load(self, index: int, epoch: int) -> _Loaded:
        """Rebuild partition ``index``'s transactions from this broker's replica of the
        log (to its end, as Kafka loads), then resume each one: markers for those
        prepared, a deadline for those ongoing."""
        txns: dict[str, TxnMetadata] = {}
        for record in self.cluster.replica_records(TRANSACTION_STATE_TOPIC, index, self.broker_id):
            transactional_id = None if record.key is None else read_key(record.key)
            if transactional_id is None:  # no key, or a version this does not know: skipped
                continue
            if not record.value:  # a tombstone: its id expired
                txns.pop(transactional_id, None)
                continue
            txns[transactional_id] = read_value(transactional_id, record.value)
        loaded = _Loaded(epoch, txns)
        self._loaded[index] = loaded
        for txn in txns.values():
            if txn.state in _PREPARED:
                self._spawn(self._send_markers(txn.transactional_id, epoch))
            elif txn.state is TxnState.ONGOING:
                self._watch_timeout(txn)
            else:
                self._watch_expiration(txn)
        return loaded

    # -- writing the log -------------------------------------------------------------------

    async def _write(self, loaded: _Loaded, txn: TxnMetadata, new: TxnMetadata | None) -> ErrorCode:
        """Append ``new`` (the next state of ``txn``; None: the id removed) to the log,
        acks=all; once durable, and while this broker still coordinates at the same
        epoch, it replaces ``txn``. Errors as Kafka's coordinator maps its log append's.
        Whatever the outcome, the requests waiting for the transaction to settle look
        again."""
        index = self._partition(txn.transactional_id)
        if self._leads(index) != loaded.epoch:
            return ErrorCode.NOT_COORDINATOR
        key = txn.transactional_id
        txn.pending = True
        try:
            value = None if new is None else value_bytes(new)
            request = self.shared.record(index, key_bytes(key), value)
            try:
                result = await self.cluster.produce(request)
            finally:
                txn.pending = False
            error = _append_error(result.error)
            if error is not ErrorCode.NONE:
                return error
            if self._leads(index) != loaded.epoch or self._loaded.get(index) is not loaded:
                return ErrorCode.NOT_COORDINATOR
            if new is None:
                del loaded.txns[key]
            else:
                loaded.txns[key] = new
            self.shared.timeouts.check_and_complete_nowait(key)
            self.shared.expirations.check_and_complete_nowait(key)
            if new is None:
                return ErrorCode.NONE
            if new.state is TxnState.ONGOING and txn.state is not TxnState.ONGOING:
                self._watch_timeout(new)
            elif new.state in _COMPLETE:
                self._watch_expiration(new)
            return ErrorCode.NONE
        finally:
            self.shared.settling.check_and_complete_nowait(key)

    def _watch_expiration(self, txn: TxnMetadata, delay_ms: int | None = None) -> None:
        """Expire the idle ``txn`` ``transactional.id.expiration.ms`` after its last
        change (or after ``delay_ms``)."""
        if delay_ms is None:
            idle = max(self.shared.wall_ms() - txn.last_update_ms, 0)
            delay_ms = self.shared.settings.id_expiration_ms - idle
        op = TxnIdExpiration(self, txn, delay_ms)
        self.shared.expirations.try_complete_else_watch_nowait(op, [txn.transactional_id])

    def expire(self, txn: TxnMetadata) -> None:
        """``txn`` expired: remove its id (Kafka's removeExpiredTransactionalIds), unless
        it changed meanwhile or a change of it is being written."""
        loaded = self._owned(txn.transactional_id)
        if isinstance(loaded, ErrorCode) or loaded.txns.get(txn.transactional_id) is not txn:
            return
        if txn.pending:  # a change is being written: look again once it is done
            self._watch_expiration(txn, int(MARKER_RETRY_BACKOFF_S * 1000))
            return
        logger.info("transactional id %r expired: removing it", txn.transactional_id)
        self._spawn(self._remove(loaded, txn))

    async def _remove(self, loaded: _Loaded, txn: TxnMetadata) -> None:
        error = await self._write(loaded, txn, None)
        if error is not ErrorCode.NONE:
            logger.warning("removing expired %r failed: %s", txn.transactional_id, error)
            if error is not ErrorCode.NOT_COORDINATOR:  # the next coordinator's, else
                self._watch_expiration(txn, int(MARKER_RETRY_BACKOFF_S * 1000))

    def _watch_timeout(self, txn: TxnMetadata) -> None:
        elapsed = max(self.shared.wall_ms() - txn.start_ms, 0)
        op = TxnTimeout(self, txn, txn.timeout_ms - elapsed)
        self.shared.timeouts.try_complete_else_watch_nowait(op, [txn.transactional_id])

    # -- the requests ----------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> tuple[ErrorCode, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch). A new id
        starts at epoch 0; a known one gets its epoch bumped (a new producer id once the
        epoch is used up); an Ongoing transaction is first aborted, with an epoch bump
        that fences its producer, and the caller told CONCURRENT_TRANSACTIONS to retry.
        ``expected``: KIP-360's (producer id, epoch) of a producer that bumps its own."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if not 0 < timeout_ms <= self.shared.settings.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        loaded = self._owned(transactional_id)
        if isinstance(loaded, ErrorCode):
            return loaded, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        now = self.shared.wall_ms()
        txn = loaded.txns.get(transactional_id)
        if txn is None:
            txn = TxnMetadata(
                transactional_id,
                self.shared.producer_ids.next(),
                NO_PRODUCER_EPOCH,
                timeout_ms,
                TxnState.EMPTY,
                last_update_ms=now,
            )
            loaded.txns[transactional_id] = txn  # as Kafka's putTransactionStateIfNotExists
        if txn.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if expected is not None and not (
            txn.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == txn.producer_id
            or (expected[0] == txn.previous_producer_id and expected[1] >= EXHAUSTED_EPOCH)
        ):
            return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if txn.state in _PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if txn.state is TxnState.ONGOING:
            error = await self._fence_and_abort(loaded, txn)
            if error is ErrorCode.NONE:
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        exhausted = txn.producer_epoch >= EXHAUSTED_EPOCH
        base = dict(timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=set(), groups=set())
        if exhausted and (expected is None or expected[1] == txn.producer_epoch):
            new = txn.copy(
                **base,
                producer_id=self.shared.producer_ids.next(),
                producer_epoch=0,
                previous_producer_id=txn.producer_id,
                # KIP-360: a retry naming the old id at this epoch gets the new id again
                last_producer_epoch=NO_PRODUCER_EPOCH if expected is None else txn.producer_epoch,
                start_ms=-1,
                last_update_ms=now,
            )
        elif expected is None:
            new = txn.copy(
                **base,
                producer_epoch=txn.producer_epoch + 1,
                last_producer_epoch=NO_PRODUCER_EPOCH,
                start_ms=-1,
                last_update_ms=now,
            )
        elif txn.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == txn.producer_epoch:
            new = txn.copy(
                **base,
                producer_epoch=txn.producer_epoch + 1,
                last_producer_epoch=txn.producer_epoch,
                start_ms=-1,
                last_update_ms=now,
            )
        elif expected[1] == txn.last_producer_epoch:
            # a retry of a bump whose answer the producer never got: the same epoch again
            return ErrorCode.NONE, txn.producer_id, txn.producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        error = await self._write(loaded, txn, new)
        if error is not ErrorCode.NONE:
            if txn.producer_epoch == NO_PRODUCER_EPOCH and loaded.txns.get(transactional_id) is txn:
                del loaded.txns[transactional_id]  # never durable: nobody knows it
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        return ErrorCode.NONE, new.producer_id, new.producer_epoch

    def _checked(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[_Loaded, TxnMetadata] | ErrorCode:
        """The checks every request of a producer passes, in Kafka's order."""
        found = self._known(transactional_id, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if isinstance(found, ErrorCode):
            return found
        loaded, txn = found
        if txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        return loaded, txn

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]] = (),
        groups: Iterable[str] = (),
    ) -> ErrorCode:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with ``groups``): the transaction is
        Ongoing with them once this returns NONE."""
        checked = self._checked(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode):
            return checked
        loaded, txn = checked
        wanted, wanted_groups = set(partitions), set(groups)
        if txn.pending or txn.state in _PREPARED:
            if not await self._settled(transactional_id):
                return ErrorCode.CONCURRENT_TRANSACTIONS
            checked = self._checked(transactional_id, producer_id, producer_epoch)
            if isinstance(checked, ErrorCode):
                return checked
            loaded, txn = checked
            if txn.pending or txn.state in _PREPARED:
                return ErrorCode.CONCURRENT_TRANSACTIONS
        if (
            txn.state is TxnState.ONGOING
            and wanted <= txn.partitions
            and wanted_groups <= txn.groups
        ):
            return ErrorCode.NONE
        now = self.shared.wall_ms()
        starting = txn.state is not TxnState.ONGOING
        new = txn.copy(
            state=TxnState.ONGOING,
            partitions=(set() if starting else txn.partitions) | wanted,
            groups=(set() if starting else txn.groups) | wanted_groups,
            start_ms=now if starting else txn.start_ms,
            last_update_ms=now,
        )
        return await self._write(loaded, txn, new)

    async def _settled(self, transactional_id: str) -> bool:
        """Wait (in the TxnSettle purgatory, up to ``SETTLE_WAIT_MS``) until no change
        of the transaction is being written and it is not prepared: its markers written
        and its completion durable, or this broker no longer its coordinator."""

        def settled() -> bool:
            txn = self.owned_txn(transactional_id)
            return txn is None or not (txn.pending or txn.state in _PREPARED)

        try:
            return await self.shared.settling.wait_until(
                settled, [transactional_id], SETTLE_WAIT_MS
            )
        except OperationCancelled:  # the coordinators are closing: answered as not settled
            return False

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn's verify_only (KIP-890): is each partition in the producer's
        ongoing transaction? Kafka's answers: TRANSACTION_ABORTABLE for one that is not."""
        wanted = list(partitions)
        checked = self._checked(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode):
            return dict.fromkeys(wanted, checked)
        _, txn = checked
        if txn.state in _PREPARED:
            return dict.fromkeys(wanted, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {
            tp: ErrorCode.NONE
            if txn.state is TxnState.ONGOING and tp in txn.partitions
            else ErrorCode.TRANSACTION_ABORTABLE
            for tp in wanted
        }

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """EndTxn: PrepareCommit/PrepareAbort made durable, then answered; the markers and
        CompleteCommit/CompleteAbort follow in the background. A retry after that is
        NONE; the other outcome than the one prepared, INVALID_TXN_STATE."""
        checked = self._checked(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode):
            return checked
        loaded, txn = checked
        if txn.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return await self._end(loaded, txn, commit)

    async def _end(self, loaded: _Loaded, txn: TxnMetadata, commit: bool) -> ErrorCode:
        done, prepared = (
            (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT)
            if commit
            else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
        )
        if txn.state is done:
            return ErrorCode.NONE
        if txn.state is prepared:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state is not TxnState.ONGOING:
            return ErrorCode.INVALID_TXN_STATE
        new = txn.copy(state=prepared, last_update_ms=self.shared.wall_ms())
        error = await self._write(loaded, txn, new)
        if error is ErrorCode.NONE:
            self._spawn(self._send_markers(txn.transactional_id, loaded.epoch))
        return error

    async def _fence_and_abort(self, loaded: _Loaded, txn: TxnMetadata) -> ErrorCode:
        """Kafka's PrepareEpochFence: bump the epoch (the producer's next request is
        fenced) and abort the transaction with the bumped epoch."""
        fenced = txn.copy(producer_epoch=txn.producer_epoch + 1, last_producer_epoch=-1)
        new = fenced.copy(state=TxnState.PREPARE_ABORT, last_update_ms=self.shared.wall_ms())
        error = await self._write(loaded, txn, new)
        if error is ErrorCode.NONE:
            self._spawn(self._send_markers(txn.transactional_id, loaded.epoch))
        return error

    def abort_timed_out(self, transactional_id: str) -> None:
        """The TxnTimeout of an Ongoing transaction expired: fence and abort it. While
        another change of it is being written, or if the abort cannot be written, it is
        tried again shortly (Kafka's coordinator looks for timed-out ones periodically)."""
        loaded = self._owned(transactional_id)
        if isinstance(loaded, ErrorCode):
            return
        txn = loaded.txns.get(transactional_id)
        if txn is None or txn.state is not TxnState.ONGOING:
            return
        if txn.pending:
            self._retry_timeout(txn)
            return
        logger.info("transaction %r timed out: aborting it", transactional_id)
        self._spawn(self._fence_and_abort_logged(loaded, txn))

    async def _fence_and_abort_logged(self, loaded: _Loaded, txn: TxnMetadata) -> None:
        error = await self._fence_and_abort(loaded, txn)
        if error is not ErrorCode.NONE:
            logger.warning("aborting timed-out %r failed: %s", txn.transactional_id, error)
            if error is not ErrorCode.NOT_COORDINATOR:  # the next coordinator's, else
                self._retry_timeout(txn)

    def _retry_timeout(self, txn: TxnMetadata) -> None:
        op = TxnTimeout(self, txn, int(MARKER_RETRY_BACKOFF_S * 1000))
        self.shared.timeouts.try_complete_else_watch_nowait(op, [txn.transactional_id])

    # -- markers ---------------------------------------------------------------------------

    async def _send_markers(self, transactional_id: str, epoch: int) -> None:
        """Write the prepared outcome's markers to every partition of the transaction
        (again and again to those that refuse, as Kafka's marker channel does), complete
        the groups' pending offsets, then write CompleteCommit/CompleteAbort. Gives up as
        soon as this broker no longer coordinates the partition at ``epoch``: the next
        coordinator loads the prepared state and does it all again."""
        index = self._partition(transactional_id)

        def current() -> tuple[_Loaded, TxnMetadata] | None:
            loaded = self._loaded.get(index)
            if loaded is None or loaded.epoch != epoch or self._leads(index) != epoch:
                return None
            txn = loaded.txns.get(transactional_id)
            return None if txn is None or txn.state not in _PREPARED else (loaded, txn)

        found = current()
        if found is None:
            return
        _, txn = found
        commit = txn.state is TxnState.PREPARE_COMMIT
        remaining = sorted(txn.partitions)
        while remaining:
            marker = TxnMarker(txn.producer_id, txn.producer_epoch, epoch, commit, tuple(remaining))
            results = await self.cluster.write_txn_markers([marker])
            if current() is None:
                return
            remaining = [tp for tp in remaining if self._marker_retry(tp, results.get(tp))]
            if remaining:
                await asyncio.sleep(MARKER_RETRY_BACKOFF_S)
                if current() is None:
                    return
        for group in sorted(txn.groups):
            self.shared.offsets.complete_transaction(group, txn.producer_id, commit)
        while True:
            found = current()
            if found is None:
                return
            loaded, txn = found
            if txn.pending:
                await asyncio.sleep(MARKER_RETRY_BACKOFF_S)
                continue
            new = txn.copy(
                state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                partitions=set(),
                groups=set(),
                last_update_ms=self.shared.wall_ms(),
            )
            error = await self._write(loaded, txn, new)
            if error is ErrorCode.NONE or error is ErrorCode.NOT_COORDINATOR:
                return
            await asyncio.sleep(MARKER_RETRY_BACKOFF_S)

    def _marker_retry(self, tp: tuple[str, int], error: ErrorCode | None) -> bool:
        """Whether a partition's marker must be written again: not once written, nor for
        a partition that is gone (deleted topic), nor when the partition has seen a newer
        producer epoch or coordinator (this one is fenced)."""
        if error is ErrorCode.NONE:
            return False
        if error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self.cluster.partition(*tp) is None:
            return False
        if error in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED):
            logger.warning("marker for %s-%d refused: %s", tp[0], tp[1], error)
            return False
        return True

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        if self.shared.closed:  # a leadership change after close: nothing more to finish
            work.close()
            return
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    # -- describing ------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TxnMetadata | ErrorCode:
        """DescribeTransactions: the id's state, or NOT_COORDINATOR,
        TRANSACTIONAL_ID_NOT_FOUND, INVALID_REQUEST (an empty id)."""
        found = self._known(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return found if isinstance(found, ErrorCode) else found[1]

    def _known(
        self, transactional_id: str, unknown: ErrorCode
    ) -> tuple[_Loaded, TxnMetadata] | ErrorCode:
        """The state of a transactional id this coordinator owns, or why not: an empty id
        INVALID_REQUEST, another coordinator's NOT_COORDINATOR (or the load's error), an
        id without a producer ``unknown``."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        loaded = self._owned(transactional_id)
        if isinstance(loaded, ErrorCode):
            return loaded
        txn = loaded.txns.get(transactional_id)
        if txn is None or txn.producer_epoch == NO_PRODUCER_EPOCH:
            return unknown
        return loaded, txn

    def transactions(self) -> list[TxnMetadata]:
        """Every transactional id this broker coordinates (ListTransactions)."""
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


def _append_error(error: ErrorCode) -> ErrorCode:
    """Kafka's TransactionStateManager: what an append error of the log becomes."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
    ):
        return ErrorCode.NOT_COORDINATOR
    if error is ErrorCode.NONE:
        return error
    return ErrorCode.UNKNOWN_SERVER_ERROR


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
        batch: Callable[[bytes, bytes | None], EncodedBatch] | None = None,
    ) -> None:
        self.cluster = cluster
        self._batch = batch
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
        self.coordinators = {b: TransactionCoordinator(b, self) for b in cluster.brokers}
        self._watching = False
        self.closed = False

    def record(self, index: int, key: bytes, value: bytes | None) -> ProduceRequest:
        """The acks=all append of one record to partition ``index`` of
        ``__transaction_state``: as the Kafka batch ``batch`` builds, when given (a
        tombstone's value null, as Kafka writes it), else as the simulation's entries
        (which have no null value: a tombstone is empty there)."""
        if self._batch is not None:
            return ProduceRequest(
                TRANSACTION_STATE_TOPIC, index, [], acks=-1, wire=self._batch(key, value)
            )
        return ProduceRequest(TRANSACTION_STATE_TOPIC, index, [(key, value or b"")], acks=-1)

    def __getitem__(self, broker_id: int) -> TransactionCoordinator:
        return self.coordinators[broker_id]

    async def ensure_topic(self) -> ErrorCode:
        """Create ``__transaction_state`` on first use: ``num_partitions`` partitions,
        replication factor min(configured, brokers), records kept forever."""
        if TRANSACTION_STATE_TOPIC in self.cluster.topics:
            return ErrorCode.NONE
        rf = min(self.settings.replication_factor, len(self.cluster.brokers))
        try:
            await self.cluster.create_topic(
                TRANSACTION_STATE_TOPIC,
                self.settings.num_partitions,
                rf,
                retention_bytes=-1,
                retention_ms=-1,
                internal=True,
            )
        except SimulationError as exc:
            if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                logger.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self._watch_leadership()
        return ErrorCode.NONE

    def _watch_leadership(self) -> None:
        if self._watching or self.closed or self.cluster.closed:
            return
        self._watching = True
        self.cluster.call_on_change(self._leadership_changed)

    def _leadership_changed(self) -> None:
        self._watching = False
        if self.closed:
            return
        for coordinator in self.coordinators.values():
            coordinator.elected_or_resigned()
        self._watch_leadership()

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
        if txn.state in _PREPARED or txn.pending:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        if txn.state is TxnState.ONGOING and (topic, partition) in txn.partitions:
            return ErrorCode.NONE
        return ErrorCode.INVALID_TXN_STATE

    def verify_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group: str
    ) -> ErrorCode:
        """TxnOffsetCommit's check: the group was added (AddOffsetsToTxn) to the
        producer's ongoing transaction at this epoch. A zombie's offsets are refused."""
        coordinator = self.owner(transactional_id)
        if coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        checked = coordinator._checked(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode):
            return (
                ErrorCode.INVALID_PRODUCER_EPOCH
                if checked is ErrorCode.PRODUCER_FENCED
                else checked
            )
        _, txn = checked
        if txn.state is not TxnState.ONGOING or group not in txn.groups:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    @property
    def purgatories(self) -> dict[str, DelayedOperationPurgatory[DelayedOperation]]:
        return {
            "TxnTimeout": self.timeouts,
            "TxnSettle": self.settling,
            "TxnIdExpiration": self.expirations,
        }

    async def close(self) -> None:
        self.closed = True
        for coordinator in self.coordinators.values():
            await coordinator.close()
        await self.timeouts.shutdown()
        await self.settling.shutdown()
        await self.expirations.shutdown()
