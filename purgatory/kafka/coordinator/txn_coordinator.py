"""The request logic of Kafka's transaction coordinator (KIP-98), one per broker: InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, their checks, the timeouts and expirations.
Its state is kept by :mod:`.txn_state`, its markers written by :mod:`.txn_markers`.

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

Transactions V2 (KIP-890 part 2) beside V1, as Kafka 4.x runs them: a client uses V2 once
ApiVersions finalizes ``transaction.version`` at 2. Its EndTxn (v5) bumps the producer
epoch: the prepared state, the markers and the next transaction carry epoch + 1, which
EndTxn answers, and a retry of that EndTxn (at the epoch before) is recognised as one;
with the epoch used up the coordinator takes a new producer id, which the completed
transaction carries at epoch 0 (Kafka's ``nextProducerId``). Its Produce (v12+) and
TxnOffsetCommit (v5) add their partition or group themselves, through
:meth:`TransactionCoordinator.add_partitions`; an abort is allowed before anything was
added. Which version a transaction runs is its metadata's ``client_txn_version``, kept in
``__transaction_state`` (Kafka's ClientTransactionVersion), so a new coordinator knows
it. V1 clients (EndTxn v0-4) keep their epoch from one InitProducerId to the next.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, final

from purgatory import DelayedOperation, DelayedOperationPurgatory, OperationCancelled
from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.coordinator.txn_markers import TransactionMarkerChannel
from purgatory.kafka.coordinator.txn_metadata import (
    COMPLETE,
    EXHAUSTED_EPOCH,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED,
    TxnMetadata,
    TxnSettings,
    TxnState,
)
from purgatory.kafka.coordinator.txn_state import (
    BatchEncoder,
    LoadedPartition,
    TransactionStateManager,
)
from purgatory.kafka.features import TV_2
from purgatory.sim import Cluster

logger = logging.getLogger("purgatory.kafka.transactions")

#: how long AddPartitionsToTxn and AddOffsetsToTxn wait for the previous transaction of
#: their producer to complete before they are answered CONCURRENT_TRANSACTIONS
SETTLE_WAIT_MS: Final = 1000


@final
@dataclass(frozen=True, slots=True)
class TxnPurgatories:
    """The coordinators' deadlines and waits: "TxnTimeout" (an Ongoing transaction's
    timeout), "TxnSettle" (a request waiting for the last transaction to complete),
    "TxnIdExpiration" (an idle id's removal), each keyed by the transactional id."""

    timeouts: DelayedOperationPurgatory[DelayedOperation]
    settling: DelayedOperationPurgatory[DelayedOperation]
    expirations: DelayedOperationPurgatory[DelayedOperation]


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
class TransactionCoordinator:
    """The transaction coordinator of broker ``broker_id``: the request logic over the
    transactional ids of the ``__transaction_state`` partitions the broker leads, whose
    state its :class:`TransactionStateManager` keeps and whose markers its
    :class:`TransactionMarkerChannel` writes. ``purgatories`` are the deadlines and waits
    (shared by every broker's coordinator, as Kafka's are per broker but labelled "all"
    here), ``wall_ms`` stamps the records and measures how long a transaction has run."""

    def __init__(
        self,
        broker_id: int,
        cluster: Cluster,
        producer_ids: ProducerIds,
        offsets: OffsetStore,
        settings: TxnSettings,
        purgatories: TxnPurgatories,
        wall_ms: Callable[[], int],
        batch: BatchEncoder | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.producer_ids = producer_ids
        self.settings = settings
        self.purgatories = purgatories
        self.wall_ms = wall_ms
        self.state = TransactionStateManager(
            broker_id, cluster, settings.num_partitions, self._resume, batch
        )
        self.markers = TransactionMarkerChannel(cluster, offsets)
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def owned_txn(self, transactional_id: str) -> TxnMetadata | None:
        return self.state.owned_txn(transactional_id)

    def elected_or_resigned(self) -> None:
        """Leadership changed somewhere: see :meth:`TransactionStateManager.elected_or_resigned`."""
        self.state.elected_or_resigned()

    def _resume(self, loaded: LoadedPartition) -> None:
        """A partition was loaded: resume each transaction, markers for those prepared, a
        deadline for the others."""
        epoch = loaded.epoch
        txns = loaded.txns
        for txn in txns.values():
            if txn.state in PREPARED:
                self._spawn(self._send_markers(txn.transactional_id, epoch))
            elif txn.state is TxnState.ONGOING:
                self._watch_timeout(txn)
            else:
                self._watch_expiration(txn)

    # -- writing the log -------------------------------------------------------------------

    async def _write(
        self, loaded: LoadedPartition, txn: TxnMetadata, new: TxnMetadata | None
    ) -> ErrorCode:
        """Make ``new`` (the next state of ``txn``; None: the id removed) durable through the
        state manager; once it is, the deadlines of the id look again and the new state
        gets its own. Whatever the outcome, the requests waiting for the transaction to
        settle look again."""
        key = txn.transactional_id
        try:
            error = await self.state.append(loaded, txn, new)
            if error is not ErrorCode.NONE:
                return error
            self.purgatories.timeouts.check_and_complete_nowait(key)
            self.purgatories.expirations.check_and_complete_nowait(key)
            if new is None:
                return ErrorCode.NONE
            if new.state is TxnState.ONGOING and txn.state is not TxnState.ONGOING:
                self._watch_timeout(new)
            elif new.state in COMPLETE:
                self._watch_expiration(new)
            return ErrorCode.NONE
        finally:
            self.purgatories.settling.check_and_complete_nowait(key)

    def _watch_expiration(self, txn: TxnMetadata, delay_ms: int | None = None) -> None:
        """Expire the idle ``txn`` ``transactional.id.expiration.ms`` after its last
        change (or after ``delay_ms``)."""
        if delay_ms is None:
            idle = max(self.wall_ms() - txn.last_update_ms, 0)
            delay_ms = self.settings.id_expiration_ms - idle
        op = TxnIdExpiration(self, txn, delay_ms)
        self.purgatories.expirations.try_complete_else_watch_nowait(op, [txn.transactional_id])

    def expire(self, txn: TxnMetadata) -> None:
        """``txn`` expired: remove its id (Kafka's removeExpiredTransactionalIds), unless
        it changed meanwhile or a change of it is being written."""
        loaded = self.state.owned(txn.transactional_id)
        if isinstance(loaded, ErrorCode) or loaded.txns.get(txn.transactional_id) is not txn:
            return
        if txn.pending:  # a change is being written: look again once it is done
            self._watch_expiration(txn, int(self.markers.backoff_s * 1000))
            return
        logger.info("transactional id %r expired: removing it", txn.transactional_id)
        self._spawn(self._remove(loaded, txn))

    async def _remove(self, loaded: LoadedPartition, txn: TxnMetadata) -> None:
        error = await self._write(loaded, txn, None)
        if error is not ErrorCode.NONE:
            logger.warning("removing expired %r failed: %s", txn.transactional_id, error)
            if error is not ErrorCode.NOT_COORDINATOR:  # the next coordinator's, else
                self._watch_expiration(txn, int(self.markers.backoff_s * 1000))

    def _watch_timeout(self, txn: TxnMetadata) -> None:
        elapsed = max(self.wall_ms() - txn.start_ms, 0)
        op = TxnTimeout(self, txn, txn.timeout_ms - elapsed)
        self.purgatories.timeouts.try_complete_else_watch_nowait(op, [txn.transactional_id])

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
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        loaded = self.state.owned(transactional_id)
        if isinstance(loaded, ErrorCode):
            return loaded, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        now = self.wall_ms()
        txn = loaded.txns.get(transactional_id)
        if txn is None:
            txn = TxnMetadata(
                transactional_id,
                self.producer_ids.next(),
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
        if txn.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if txn.state is TxnState.ONGOING:
            error = await self._fence_and_abort(loaded, txn)
            if error is ErrorCode.NONE:
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        new = self._bumped(txn, timeout_ms, expected, now)
        if isinstance(new, tuple):
            return new
        error = await self._write(loaded, txn, new)
        if error is not ErrorCode.NONE:
            if txn.producer_epoch == NO_PRODUCER_EPOCH and loaded.txns.get(transactional_id) is txn:
                del loaded.txns[transactional_id]  # never durable: nobody knows it
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        return ErrorCode.NONE, new.producer_id, new.producer_epoch

    def _bumped(
        self, txn: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None, now: int
    ) -> TxnMetadata | tuple[ErrorCode, int, int]:
        """InitProducerId's next state of the (not Ongoing) ``txn``: its epoch bumped, or
        a new producer id once the epoch is used up; or the answer at once (a retry of a
        bump whose answer was lost, a fenced producer)."""
        exhausted = txn.producer_epoch >= EXHAUSTED_EPOCH
        base = dict(timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=set(), groups=set())
        if exhausted and (expected is None or expected[1] == txn.producer_epoch):
            new = txn.copy(
                **base,
                producer_id=self.producer_ids.next(),
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
        return new

    def _checked(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[LoadedPartition, TxnMetadata] | ErrorCode:
        """The checks every request of a producer passes, in Kafka's order."""
        found = self.state.known(transactional_id, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
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
        client_txn_version: int = 0,
    ) -> ErrorCode:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with ``groups``): the transaction is
        Ongoing with them once this returns NONE. ``client_txn_version`` 2: a V2 client's
        Produce or TxnOffsetCommit adding them implicitly (V1's requests: 0)."""
        checked = self._checked(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode) and not self._handing_over(transactional_id, producer_id):
            return checked
        wanted, wanted_groups = set(partitions), set(groups)
        if isinstance(checked, ErrorCode) or checked[1].pending or checked[1].state in PREPARED:
            if not await self._settled(transactional_id):
                return ErrorCode.CONCURRENT_TRANSACTIONS
            checked = self._checked(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode):
            return checked
        loaded, txn = checked
        if txn.pending or txn.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if (
            txn.state is TxnState.ONGOING
            and wanted <= txn.partitions
            and wanted_groups <= txn.groups
        ):
            return ErrorCode.NONE
        now = self.wall_ms()
        starting = txn.state is not TxnState.ONGOING
        new = txn.copy(
            state=TxnState.ONGOING,
            partitions=(set() if starting else txn.partitions) | wanted,
            groups=(set() if starting else txn.groups) | wanted_groups,
            start_ms=now if starting else txn.start_ms,
            last_update_ms=now,
            client_txn_version=client_txn_version,
        )
        return await self._write(loaded, txn, new)

    def _handing_over(self, transactional_id: str, producer_id: int) -> bool:
        """Whether ``producer_id`` is the new id a V2 EndTxn at a used-up epoch gave, its
        transaction still completing under the old one: the producer's next transaction
        waits for it, as after any EndTxn."""
        txn = self.owned_txn(transactional_id)
        return txn is not None and txn.next_producer_id == producer_id != NO_PRODUCER_ID

    async def _settled(self, transactional_id: str) -> bool:
        """Wait (in the TxnSettle purgatory, up to ``SETTLE_WAIT_MS``) until no change
        of the transaction is being written and it is not prepared: its markers written
        and its completion durable, or this broker no longer its coordinator."""

        def settled() -> bool:
            txn = self.owned_txn(transactional_id)
            return txn is None or not (txn.pending or txn.state in PREPARED)

        try:
            return await self.purgatories.settling.wait_until(
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
        if txn.state in PREPARED:
            return dict.fromkeys(wanted, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {
            tp: ErrorCode.NONE
            if txn.state is TxnState.ONGOING and tp in txn.partitions
            else ErrorCode.TRANSACTION_ABORTABLE
            for tp in wanted
        }

    def verify_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group: str
    ) -> ErrorCode:
        """TxnOffsetCommit's check: the group was added (AddOffsetsToTxn) to the
        producer's ongoing transaction at this epoch. A zombie's offsets are refused."""
        checked = self._checked(transactional_id, producer_id, producer_epoch)
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

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_txn_version: int = 0,
    ) -> tuple[ErrorCode, int, int]:
        """EndTxn: (error, producer id, epoch to go on with). PrepareCommit/PrepareAbort
        made durable, then answered; the markers and CompleteCommit/CompleteAbort follow
        in the background. A retry after that is NONE; the other outcome than the one
        prepared, INVALID_TXN_STATE. ``client_txn_version`` 2 (EndTxn v5): Transactions
        V2, the epoch bumped (Kafka's endTransaction)."""
        found = self.state.known(transactional_id, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if isinstance(found, ErrorCode):
            return found, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        loaded, txn = found
        v2 = txn.client_txn_version >= TV_2
        # a V2 retry names the epoch before the bump (or the id before a new one)
        retry_overflow = (
            v2
            and txn.previous_producer_id == producer_id
            and producer_epoch == EXHAUSTED_EPOCH
            and txn.producer_epoch == 0
        )
        retry = retry_overflow or (v2 and txn.producer_epoch == producer_epoch + 1)
        current = producer_epoch == txn.producer_epoch
        if not v2 or txn.state in (TxnState.ONGOING, TxnState.EMPTY):
            valid = current
        elif txn.state in PREPARED:
            valid = retry
        else:  # complete: a retry, or (at the epoch it gave) the next transaction's abort
            valid = retry or current
        if txn.producer_id != producer_id and not retry_overflow:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if not valid:
            return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if txn.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        return await self._end(loaded, txn, commit, client_txn_version, retry)

    async def _end(
        self, loaded: LoadedPartition, txn: TxnMetadata, commit: bool, version: int, retry: bool
    ) -> tuple[ErrorCode, int, int]:
        done, prepared = (
            (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT)
            if commit
            else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
        )
        refused = ErrorCode.INVALID_TXN_STATE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if txn.state is done and (retry or txn.client_txn_version < TV_2):
            return ErrorCode.NONE, txn.producer_id, txn.producer_epoch
        if txn.state is prepared:
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        # V2 aborts a transaction nothing was added to yet (Kafka's noPartitionAdded)
        empty_abort = not commit and not retry and version >= TV_2 and txn.state in COMPLETE
        if txn.state is not TxnState.ONGOING and not empty_abort:
            return refused
        now = self.wall_ms()
        new = txn.copy(state=prepared, client_txn_version=version, last_update_ms=now)
        if empty_abort:
            new = new.copy(partitions=set(), groups=set(), start_ms=now)
        if version >= TV_2:
            new = new.copy(
                producer_epoch=txn.producer_epoch + 1, last_producer_epoch=txn.producer_epoch
            )
            if txn.producer_epoch >= EXHAUSTED_EPOCH:  # the id goes on at epoch 0 once complete
                new = new.copy(next_producer_id=self.producer_ids.next())
        error = await self._write(loaded, txn, new)
        if error is not ErrorCode.NONE:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        self._spawn(self._send_markers(txn.transactional_id, loaded.epoch))
        if new.next_producer_id != NO_PRODUCER_ID:
            return ErrorCode.NONE, new.next_producer_id, 0
        return ErrorCode.NONE, new.producer_id, new.producer_epoch

    async def _fence_and_abort(self, loaded: LoadedPartition, txn: TxnMetadata) -> ErrorCode:
        """Kafka's PrepareEpochFence: bump the epoch (the producer's next request is
        fenced) and abort the transaction with the bumped epoch. A V2 transaction's
        abort bumps it once more, as any V2 EndTxn does: else the fenced producer's
        EndTxn, one epoch behind, would pass for a retry of the abort."""
        fenced = txn.producer_epoch + 1
        if txn.client_txn_version >= TV_2:
            new = txn.copy(producer_epoch=min(fenced + 1, MAX_EPOCH), last_producer_epoch=fenced)
        else:
            new = txn.copy(producer_epoch=fenced, last_producer_epoch=NO_PRODUCER_EPOCH)
        new = new.copy(state=TxnState.PREPARE_ABORT, last_update_ms=self.wall_ms())
        error = await self._write(loaded, txn, new)
        if error is ErrorCode.NONE:
            self._spawn(self._send_markers(txn.transactional_id, loaded.epoch))
        return error

    def abort_timed_out(self, transactional_id: str) -> None:
        """The TxnTimeout of an Ongoing transaction expired: fence and abort it. While
        another change of it is being written, or if the abort cannot be written, it is
        tried again shortly (Kafka's coordinator looks for timed-out ones periodically)."""
        loaded = self.state.owned(transactional_id)
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

    async def _fence_and_abort_logged(self, loaded: LoadedPartition, txn: TxnMetadata) -> None:
        error = await self._fence_and_abort(loaded, txn)
        if error is not ErrorCode.NONE:
            logger.warning("aborting timed-out %r failed: %s", txn.transactional_id, error)
            if error is not ErrorCode.NOT_COORDINATOR:  # the next coordinator's, else
                self._retry_timeout(txn)

    def _retry_timeout(self, txn: TxnMetadata) -> None:
        op = TxnTimeout(self, txn, int(self.markers.backoff_s * 1000))
        self.purgatories.timeouts.try_complete_else_watch_nowait(op, [txn.transactional_id])

    # -- markers ---------------------------------------------------------------------------

    async def _send_markers(self, transactional_id: str, epoch: int) -> None:
        """The prepared outcome's markers through the marker channel, then
        CompleteCommit/CompleteAbort written. Gives up as soon as this broker no longer
        coordinates the partition at ``epoch``: the next coordinator loads the prepared
        state and does it all again."""
        index = self.state.partition_of(transactional_id)

        def current() -> tuple[LoadedPartition, TxnMetadata] | None:
            loaded = self.state.current(index, epoch)
            txn = None if loaded is None else loaded.txns.get(transactional_id)
            return (
                None
                if loaded is None or txn is None or txn.state not in PREPARED
                else (
                    loaded,
                    txn,
                )
            )

        found = current()
        if found is None:
            return
        _, txn = found
        commit = txn.state is TxnState.PREPARE_COMMIT
        if not await self.markers.send(txn, epoch, commit, lambda: current() is not None):
            return
        while True:
            found = current()
            if found is None:
                return
            loaded, txn = found
            if txn.pending:
                await asyncio.sleep(self.markers.backoff_s)
                continue
            new = txn.copy(
                state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                partitions=set(),
                groups=set(),
                last_update_ms=self.wall_ms(),
            )
            if txn.next_producer_id != NO_PRODUCER_ID:  # V2's epoch was used up
                new = new.copy(
                    producer_id=txn.next_producer_id,
                    producer_epoch=0,
                    previous_producer_id=txn.producer_id,
                    next_producer_id=NO_PRODUCER_ID,
                )
            error = await self._write(loaded, txn, new)
            if error is ErrorCode.NONE or error is ErrorCode.NOT_COORDINATOR:
                return
            await asyncio.sleep(self.markers.backoff_s)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        if self.closed:  # a leadership change after close: nothing more to finish
            work.close()
            return
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self.closed = True
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
        found = self.state.known(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return found if isinstance(found, ErrorCode) else found[1]

    def transactions(self) -> list[TxnMetadata]:
        """Every transactional id this broker coordinates (ListTransactions)."""
        return self.state.transactions()

    def by_producer(self, producer_id: int) -> TxnMetadata | None:
        return self.state.by_producer(producer_id)
