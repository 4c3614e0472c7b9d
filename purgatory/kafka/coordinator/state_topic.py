"""A coordinator's state topic (``__transaction_state``, ``__share_group_state``), as
Kafka's coordinators keep theirs: made on first use, its leadership followed once it
exists (each broker's coordinator told to take up or give up the partitions it now
leads), and what an append to it that failed answers."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol, final

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster
from purgatory.sim.errors import SimulationError

logger = logging.getLogger("purgatory.kafka.coordinator")


class Coordinator(Protocol):
    """A broker's coordinator of a state topic's partitions."""

    def elected_or_resigned(self) -> None:
        """Leadership changed: load the partitions led now, drop the others."""


@final
class StateTopic:
    """Topic ``name`` of ``partitions`` partitions, replication factor
    min(``replication_factor``, brokers), internal, its records kept forever; the
    ``coordinators`` (by broker id) follow its leadership once it exists, until
    :meth:`close`."""

    def __init__(
        self,
        cluster: Cluster,
        name: str,
        partitions: int,
        replication_factor: int,
        coordinators: Mapping[int, Coordinator],
    ) -> None:
        self.cluster = cluster
        self.name = name
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.coordinators = coordinators
        self.closed = False
        self._watching = False

    async def ensure(self) -> ErrorCode:
        """Create the topic unless it exists, and follow its leadership: NONE once it
        exists; COORDINATOR_NOT_AVAILABLE (logged) when the cluster cannot make it now."""
        if self.name not in self.cluster.topics:
            try:
                await self.cluster.create_topic(
                    self.name,
                    self.partitions,
                    min(self.replication_factor, len(self.cluster.brokers)),
                    retention_bytes=-1,
                    retention_ms=-1,
                    internal=True,
                )
            except SimulationError as exc:
                if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                    logger.warning("cannot create %s: %s", self.name, exc)
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self._watch_leadership()
        return ErrorCode.NONE

    def close(self) -> None:
        self.closed = True

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


def append_error(error: ErrorCode) -> ErrorCode:
    """What a failed append to a state topic answers (Kafka's coordinator runtime and
    TransactionStateManager map them alike)."""
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
