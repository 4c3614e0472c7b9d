"""Every handler module's unit in one declared list (:data:`UNITS`), and a listener served
from them. Tests check the list against the package (every module with a handler class
has its unit here) and that no API is answered by two units; the front door checks at
start that every API served has an authorization rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from purgatory.kafka.handlers import (
    acls,
    client_quotas,
    configs,
    consumer_groups,
    coordinators,
    create_partitions,
    delete_groups,
    delete_records,
    describe_cluster,
    describe_producers,
    describe_quorum,
    describe_topic_partitions,
    elections,
    features,
    groups,
    log_dirs,
    log_offsets,
    membership,
    offsets,
    partitions,
    reassignments,
    sasl,
    share_groups,
    telemetry,
    topics,
    transactions,
)
from purgatory.kafka.handlers.units import Listener, ListenerUnit, Shared, SharedUnit, Unit
from purgatory.kafka.server import ApiTable, KafkaProtocolServer

#: every handler class the front door serves, by its module's unit
UNITS: Final[tuple[Unit, ...]] = (
    acls.UNIT,
    client_quotas.UNIT,
    configs.UNIT,
    consumer_groups.UNIT,
    coordinators.UNIT,
    create_partitions.UNIT,
    delete_groups.UNIT,
    delete_records.UNIT,
    describe_cluster.UNIT,
    describe_producers.UNIT,
    describe_quorum.UNIT,
    describe_topic_partitions.UNIT,
    elections.UNIT,
    features.UNIT,
    groups.UNIT,
    log_dirs.UNIT,
    log_offsets.UNIT,
    membership.UNIT,
    offsets.UNIT,
    partitions.UNIT,
    reassignments.UNIT,
    sasl.UNIT,
    share_groups.UNIT,
    telemetry.UNIT,
    topics.UNIT,
    transactions.UNIT,
)


def shared_tables(shared: Shared) -> list[ApiTable]:
    """The tables of the shared units, built once from shared."""
    return [unit.build(shared).apis() for unit in UNITS if isinstance(unit, SharedUnit)]


def serve(server: KafkaProtocolServer, listener: Listener, shared: Iterable[ApiTable]) -> None:
    """Register with server every API: the listener units' handlers, built now for
    listener, and the shared tables."""
    for unit in UNITS:
        if isinstance(unit, ListenerUnit):
            when = None if unit.when is None else unit.when(listener.shared)
            server.register_all(unit.build(listener).apis(), when=when)
    for table in shared:
        server.register_all(table)
