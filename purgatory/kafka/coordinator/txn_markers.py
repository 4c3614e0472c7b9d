"""The transaction marker channel (Kafka's ``TransactionMarkerChannelManager``): writes a
prepared transaction's COMMIT or ABORT markers to every partition it touched, again and
again to those that refuse, and completes the pending offsets of the groups it added. It
knows nothing of the coordinator's state: it is told the transaction and asked, after each
round, whether it is still the one to write them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.txn_metadata import TxnMetadata
from purgatory.sim import Cluster, TxnMarker

logger = logging.getLogger("purgatory.kafka.transactions")

#: how long the coordinator waits before writing markers again to partitions that refused
MARKER_RETRY_BACKOFF_S: Final = 0.05


@final
class TransactionMarkerChannel:
    """Writes markers through ``cluster`` and completes group offsets in ``offsets``."""

    def __init__(
        self, cluster: Cluster, offsets: OffsetStore, backoff_s: float = MARKER_RETRY_BACKOFF_S
    ) -> None:
        self.cluster = cluster
        self.offsets = offsets
        self.backoff_s = backoff_s

    async def send(
        self, txn: TxnMetadata, coordinator_epoch: int, commit: bool, current: Callable[[], bool]
    ) -> bool:
        """Write ``txn``'s markers (commit or abort, at ``coordinator_epoch``) to every
        partition of it, then complete its groups' pending offsets. Gives up, returning
        False, as soon as ``current()`` says the coordinator no longer owns the
        transaction at that epoch (the next one does it all again)."""
        remaining = sorted(txn.partitions)
        while remaining:
            marker = TxnMarker(
                txn.producer_id, txn.producer_epoch, coordinator_epoch, commit, tuple(remaining)
            )
            results = await self.cluster.write_txn_markers([marker])
            if not current():
                return False
            remaining = [tp for tp in remaining if self._again(tp, results.get(tp))]
            if remaining:
                await asyncio.sleep(self.backoff_s)
                if not current():
                    return False
        for group in sorted(txn.groups):
            self.offsets.complete_transaction(group, txn.producer_id, commit)
        return True

    def _again(self, tp: tuple[str, int], error: ErrorCode | None) -> bool:
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
