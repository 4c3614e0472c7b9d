"""The transaction APIs (KIP-98) as broker ``broker_id`` answers them: InitProducerId 0-5,
AddPartitionsToTxn 0-5 (v4+ batched, with KIP-890's ``verify_only``), AddOffsetsToTxn
0-4, EndTxn 0-5, TxnOffsetCommit 0-5, DescribeTransactions 0 and ListTransactions 0-2.
EndTxn v5 and TxnOffsetCommit v5 are Transactions V2's (KIP-890 part 2, see
:mod:`~purgatory.kafka.coordinator.txn_coordinator`).

The broker's :class:`~purgatory.kafka.coordinator.txn_coordinator.TransactionCoordinator`
serves the transactional ids whose ``__transaction_state`` partition the broker leads;
any other is answered NOT_COORDINATOR (the client asks FindCoordinator again). As Kafka
answers older clients, a fenced producer is told INVALID_PRODUCER_EPOCH by the versions
that predate PRODUCER_FENCED (KIP-588: InitProducerId before v4, the others before v2).
TxnOffsetCommit goes to the group coordinator: its offsets are held pending in the offset
store until the transaction's marker completes them.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.offsets import Committed, OffsetStore
from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.coordinator.transactions import TransactionCoordinators
from purgatory.kafka.coordinator.txn_coordinator import TransactionCoordinator
from purgatory.kafka.coordinator.txn_metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnState
from purgatory.kafka.features import TV_2
from purgatory.kafka.handlers.units import ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import millis, respond, versions
from purgatory.kafka.server import Api, ApiTable, Handler
from purgatory.sim import Cluster

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnRequestTransactionsTopics,
        AddPartitionsToTxnRequestV3AndBelowTopics,
        AddPartitionsToTxnResponse,
        AddPartitionsToTxnResponseResultsByTransactionTopicResults,
        AddPartitionsToTxnResponseResultsByTransactionTopicResultsResultsByPartition,
        AddPartitionsToTxnResult,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        DescribeTransactionsTransactionState,
        EndTxnRequest,
        EndTxnResponse,
        InitProducerIdRequest,
        InitProducerIdResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
        ListTransactionsTransactionState,
        TxnOffsetCommitRequest,
        TxnOffsetCommitRequestPartition,
        TxnOffsetCommitRequestTopic,
        TxnOffsetCommitResponse,
        TxnOffsetCommitResponseTopic,
    )

#: the first version of each API that knows PRODUCER_FENCED (KIP-588)
_FENCED_SINCE: Final = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
    ApiKey.TXN_OFFSET_COMMIT: 2,
}
#: the first EndTxn and TxnOffsetCommit versions of Transactions V2 (KIP-890 part 2)
_END_TXN_V2: Final = 5
_TXN_OFFSET_COMMIT_V2: Final = 5
#: the first AddPartitionsToTxn version only brokers send (KIP-890 part 1)
_ADD_PARTITIONS_BY_BROKERS: Final = 4
#: ListTransactions' state names (its filters must be among them)
_STATES: Final = {state.value: state for state in TxnState}
#: Kafka's states no transaction here is ever in (a filter naming them is known, matches none)
_TRANSIENT: Final = frozenset({"Dead", "PrepareEpochFence"})


def _for_version(key: ApiKey, version: int, error: ErrorCode) -> ErrorCode:
    if error is ErrorCode.PRODUCER_FENCED and version < _FENCED_SINCE[key]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _utc(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


@final
class TransactionHandlers:
    """The transaction APIs of broker ``broker_id``; ``producer_ids`` serves idempotent
    producers (InitProducerId without a transactional id) too; ``transactions_v2`` says
    whether the cluster's ``transaction.version`` is 2."""

    def __init__(
        self,
        coordinators: TransactionCoordinators,
        broker_id: int,
        producer_ids: ProducerIds,
        groups: GroupCoordinator,
        offsets: OffsetStore,
        cluster: Cluster,
        transactions_v2: Callable[[], bool] = lambda: True,
    ) -> None:
        self.coordinators = coordinators
        #: whether ``transaction.version`` is finalized at 2 (TxnOffsetCommit v5 adds
        #: its group then)
        self.transactions_v2 = transactions_v2
        self.coordinator: TransactionCoordinator = coordinators[broker_id]
        self.broker_id = broker_id
        self.producer_ids = producer_ids
        self.groups = groups
        self.offsets = offsets
        self.cluster = cluster

    def apis(self) -> ApiTable:
        table: dict[ApiKey, Handler] = {
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            ApiKey.END_TXN: self.end_txn,
            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
            ApiKey.DESCRIBE_TRANSACTIONS: self.describe_transactions,
            ApiKey.LIST_TRANSACTIONS: self.list_transactions,
        }
        return {key: Api(*versions(key), handler) for key, handler in table.items()}

    async def init_producer_id(
        self, header: RequestHeader, request: InitProducerIdRequest
    ) -> InitProducerIdResponse:
        """A fresh producer id at epoch 0 for an idempotent producer (no transactional
        id); for a transactional one, the coordinator's id and (bumped) epoch."""
        if request.transactional_id is None:
            return respond(request, producer_id=self.producer_ids.next(), producer_epoch=0)
        expected: tuple[int, int] | None = None
        if hasattr(request, "producer_id") and hasattr(request, "producer_epoch"):  # v3+
            pid, epoch = request.producer_id, request.producer_epoch
            if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
                return self._init_error(request, ErrorCode.INVALID_REQUEST)
            expected = None if pid == NO_PRODUCER_ID else (pid, epoch)
        error, pid, epoch = await self.coordinator.init_producer_id(
            request.transactional_id, millis(request.transaction_timeout), expected
        )
        if error is not ErrorCode.NONE:
            return self._init_error(request, error)
        return respond(request, producer_id=pid, producer_epoch=epoch)

    @staticmethod
    def _init_error(request: InitProducerIdRequest, error: ErrorCode) -> InitProducerIdResponse:
        error = _for_version(ApiKey.INIT_PRODUCER_ID, request.__version__, error)
        return respond(
            request, error_code=error, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
        )

    async def add_partitions_to_txn(
        self, header: RequestHeader, request: AddPartitionsToTxnRequest
    ) -> AddPartitionsToTxnResponse:
        """v0-3: one producer's partitions; v4+: several transactions at once (brokers
        verifying produce requests send these), each maybe ``verify_only``."""
        version = header.api_version
        if not hasattr(request, "transactions"):  # v0-3
            results = await self._add(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                request.v3_and_below_topics,
                False,
                version,
            )
            return respond(request, results_by_topic_v3_and_below=results)
        answered: list[AddPartitionsToTxnResult] = []
        for txn in request.transactions:
            results = await self._add(
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                txn.topics,
                txn.verify_only,
                version,
            )
            answered.append({"transactional_id": txn.transactional_id, "topic_results": results})
        return respond(request, error_code=ErrorCode.NONE, results_by_transaction=answered)

    async def _add(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        topics: Sequence[AddPartitionsToTxnRequestV3AndBelowTopics]
        | Sequence[AddPartitionsToTxnRequestTransactionsTopics],
        verify_only: bool,
        version: int,
    ) -> list[AddPartitionsToTxnResponseResultsByTransactionTopicResults]:
        wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
        if verify_only:
            errors = self.coordinator.verify(transactional_id, producer_id, producer_epoch, wanted)
        else:
            unknown = {tp for tp in wanted if self.cluster.partition(*tp) is None}
            if unknown:
                # as Kafka: nothing is added, the known partitions are not attempted
                errors = {
                    tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if tp in unknown
                    else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in wanted
                }
            else:
                error = await self.coordinator.add_partitions(
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    wanted,
                    # v4+ comes from a leader adding a V2 client's partition (Kafka's
                    # transactionVersionForAddPartitionsToTxn: version > 3 is TV_2)
                    client_txn_version=TV_2 if version >= _ADD_PARTITIONS_BY_BROKERS else 0,
                )
                error = _for_version(ApiKey.ADD_PARTITIONS_TO_TXN, version, error)
                errors = dict.fromkeys(wanted, error)
        return _by_topic(errors)

    async def add_offsets_to_txn(
        self, header: RequestHeader, request: AddOffsetsToTxnRequest
    ) -> AddOffsetsToTxnResponse:
        """The group's offsets join the transaction (Kafka adds the group's
        ``__consumer_offsets`` partition to it)."""
        error = await self.coordinator.add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            groups=[request.group_id],
        )
        return respond(
            request, error_code=_for_version(ApiKey.ADD_OFFSETS_TO_TXN, header.api_version, error)
        )

    async def end_txn(self, header: RequestHeader, request: EndTxnRequest) -> EndTxnResponse:
        """Commit or abort: answered once PrepareCommit/PrepareAbort is durable. v5 is
        Transactions V2 (Kafka's ``isTransactionV2Enabled``): the answer carries the
        bumped epoch (or the new producer id) the next transaction uses."""
        error, pid, epoch = await self.coordinator.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            TV_2 if header.api_version >= _END_TXN_V2 else 0,
        )
        error = _for_version(ApiKey.END_TXN, header.api_version, error)
        return respond(request, error_code=error, producer_id=pid, producer_epoch=epoch)

    async def txn_offset_commit(
        self, header: RequestHeader, request: TxnOffsetCommitRequest
    ) -> TxnOffsetCommitResponse:
        """Offsets committed inside a transaction: a topic or partition the cluster does
        not have is refused UNKNOWN_TOPIC_OR_PARTITION first (Kafka's broker); for the
        others an empty group id is INVALID_GROUP_ID, then they are checked against the
        transaction (the group must have been added at this producer epoch; from v5,
        with ``transaction.version`` 2 finalized, the request adds it) and the group
        (:meth:`_group_error`), then held pending until the marker."""
        version = header.api_version
        group = request.group_id
        topics: Sequence[TxnOffsetCommitRequestTopic] = request.topics
        unknown = {
            (i, p.partition_index)
            for i, topic in enumerate(topics)
            for p in topic.partitions
            if self.cluster.partition(topic.name, p.partition_index) is None
        }
        error = ErrorCode.NONE
        if len(unknown) < sum(len(topic.partitions) for topic in request.topics):
            if not group:
                error = ErrorCode.INVALID_GROUP_ID  # Kafka's group coordinator, first
            else:
                error = await self.coordinators.verify_offsets(
                    request.transactional_id,
                    request.producer_id,
                    request.producer_epoch,
                    group,
                    implicit=version >= _TXN_OFFSET_COMMIT_V2 and self.transactions_v2(),
                )
            if error is ErrorCode.NONE:
                error = self._group_error(version, group, request)
            error = _for_version(ApiKey.TXN_OFFSET_COMMIT, version, error)
        answered: list[TxnOffsetCommitResponseTopic] = []
        for i, topic in enumerate(topics):
            partitions: Sequence[TxnOffsetCommitRequestPartition] = topic.partitions
            errors = [
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if (i, p.partition_index) in unknown else error
                for p in partitions
            ]
            for partition, partition_error in zip(partitions, errors, strict=True):
                if partition_error is ErrorCode.NONE:
                    epoch = (  # v2+
                        partition.committed_leader_epoch
                        if hasattr(partition, "committed_leader_epoch")
                        else -1
                    )
                    metadata = partition.committed_metadata
                    self.offsets.commit_pending(
                        group,
                        request.producer_id,
                        topic.name,
                        partition.partition_index,
                        Committed(
                            partition.committed_offset, epoch, "" if metadata is None else metadata
                        ),
                    )
            answered.append(
                {
                    "name": topic.name,
                    "partitions": [
                        {"partition_index": p.partition_index, "error_code": e}
                        for p, e in zip(partitions, errors, strict=True)
                    ],
                }
            )
        return respond(request, topics=answered)

    def _group_error(self, version: int, group: str, request: TxnOffsetCommitRequest) -> ErrorCode:
        """Kafka's validateTransactionalOffsetCommit: the checks of an OffsetCommit but the
        group's state (none while it completes a rebalance), a KIP-848 member's other epoch
        ILLEGAL_GENERATION. Before v3 the request names no member: generation -1."""
        # v3+ (getattr for each: mypy narrows a hasattr to the one field it names)
        generation: int = getattr(request, "generation_id", -1)
        member_id: str = getattr(request, "member_id", "")
        instance_id: str | None = getattr(request, "group_instance_id", None)
        return self.groups.commit_error(
            group,
            generation,
            member_id,
            instance_id,
            version=version,
            committed=self.offsets.has_group(group),
            transactional=True,
        )

    def describe_transactions(
        self, header: RequestHeader, request: DescribeTransactionsRequest
    ) -> DescribeTransactionsResponse:
        states: list[DescribeTransactionsTransactionState] = []
        for transactional_id in request.transactional_ids:
            found = self.coordinator.describe(transactional_id)
            if isinstance(found, ErrorCode):
                # the other fields keep the schema's defaults, as Kafka leaves them
                states.append({"transactional_id": transactional_id, "error_code": found})
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(found.partitions):
                by_topic.setdefault(topic, []).append(index)
            states.append(
                {
                    "transactional_id": transactional_id,
                    "error_code": ErrorCode.NONE,
                    "transaction_state": found.state.value,
                    "transaction_timeout": found.timeout_ms,
                    "transaction_start_time": _utc(found.start_ms),
                    "producer_id": found.producer_id,
                    "producer_epoch": found.producer_epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            )
        return respond(request, transaction_states=states)

    def list_transactions(
        self, header: RequestHeader, request: ListTransactionsRequest
    ) -> ListTransactionsResponse:
        """This broker's transactional ids, filtered by state names (unknown ones are
        echoed back), producer ids, v1+ by running longer than ``duration_filter`` ms,
        v2+ by a regular expression on the id (Java's syntax; Python's ``re`` here)."""
        unknown = [s for s in request.state_filters if s not in _STATES and s not in _TRANSIENT]
        states = {_STATES[s] for s in request.state_filters if s in _STATES}
        if request.state_filters and not states:
            return respond(request, error_code=ErrorCode.NONE, unknown_state_filters=unknown)
        producers = set(request.producer_id_filters)
        duration = request.duration_filter if hasattr(request, "duration_filter") else -1  # v1+
        pattern = (  # v2+
            request.transactional_id_pattern
            if hasattr(request, "transactional_id_pattern")
            else None
        )
        matcher = None
        if pattern:
            try:
                matcher = re.compile(pattern)
            except re.error:
                return respond(request, error_code=ErrorCode.INVALID_REQUEST)
        now = self.coordinators.wall_ms()
        listed: list[ListTransactionsTransactionState] = []
        for txn in self.coordinator.transactions():
            if states and txn.state not in states:
                continue
            if producers and txn.producer_id not in producers:
                continue
            if duration >= 0 and now - txn.start_ms <= duration:
                continue
            if matcher is not None and not matcher.fullmatch(txn.transactional_id):
                continue
            listed.append(
                {
                    "transactional_id": txn.transactional_id,
                    "producer_id": txn.producer_id,
                    "transaction_state": txn.state.value,
                }
            )
        return respond(
            request,
            error_code=ErrorCode.NONE,
            unknown_state_filters=unknown,
            transaction_states=listed,
        )


def _by_topic(
    errors: dict[tuple[str, int], ErrorCode],
) -> list[AddPartitionsToTxnResponseResultsByTransactionTopicResults]:
    by_topic: dict[
        str, list[AddPartitionsToTxnResponseResultsByTransactionTopicResultsResultsByPartition]
    ] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": index, "partition_error_code": error}
        )
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


UNIT: Final = ListenerUnit(
    lambda c: TransactionHandlers(
        c.shared.transactions,
        c.broker_id,
        c.shared.producer_ids,
        c.shared.coordinator,
        c.shared.offsets,
        c.shared.cluster,
        lambda: c.shared.features.transactions_v2,
    )
)
