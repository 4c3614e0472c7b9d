"""A transactional id's state (Kafka's ``TransactionMetadata``), the states a transaction
moves through and the broker configs the transaction coordinator reads: what every part
of the coordinator (:mod:`.txn_state`, :mod:`.txn_markers`, :mod:`.txn_coordinator`)
shares, and what :mod:`.txn_log` writes to ``__transaction_state``."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Final

#: the internal topic that holds every transaction's state
TRANSACTION_STATE_TOPIC: Final = "__transaction_state"
#: Kafka's RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
#: an epoch this high is used up: the next bump takes a new producer id (Short.MaxValue - 1)
EXHAUSTED_EPOCH: Final = (1 << 15) - 2
#: the highest epoch (Short.MaxValue): a V2 EndTxn at the exhausted epoch writes its
#: markers at it
MAX_EPOCH: Final = EXHAUSTED_EPOCH + 1


class TxnState(enum.Enum):
    """A transaction's state; the value is Kafka's name (DescribeTransactions,
    ListTransactions' filters), :attr:`id` the byte ``__transaction_state`` stores."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def id(self) -> int:
        """Kafka's ``TransactionState.id`` (Dead 6 and PrepareEpochFence 7 are never
        stored here)."""
        return _IDS[self]


_IDS: Final = {state: i for i, state in enumerate(TxnState)}
#: the states by the byte ``__transaction_state`` stores
STATES_BY_ID: Final = {i: state for state, i in _IDS.items()}
PREPARED: Final = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
COMPLETE: Final = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id's state, as its records in ``__transaction_state`` carry it.
    ``groups``: the consumer groups AddOffsetsToTxn added (Kafka adds their
    ``__consumer_offsets`` partition; the offset store here has no such topic).
    ``next_producer_id`` and ``client_txn_version``: Transactions V2's (the id a used-up
    epoch goes on with once the transaction completes; 2 for a V2 client, else 0)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    next_producer_id: int = NO_PRODUCER_ID
    client_txn_version: int = 0
    #: a transition being written (not durable yet): requests meanwhile are CONCURRENT
    pending: bool = field(default=False, compare=False)

    def copy(self, **changes: Any) -> TxnMetadata:
        return dataclasses.replace(self, pending=False, **changes)


@dataclass(frozen=True, slots=True)
class TxnSettings:
    """The broker configs the coordinator reads (Kafka's names)."""

    num_partitions: int = 50  # transaction.state.log.num.partitions
    replication_factor: int = 3  # transaction.state.log.replication.factor
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    verification: bool = True  # transaction.partition.verification.enable
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
