"""Broker simulation: a replicated log with DelayedProduce, DelayedFetch and
DelayedDeleteRecords parked in each broker's purgatories, with faults.

The public API is :class:`Cluster`, the requests it takes and the results and metadata it
answers with, :class:`Latency` (injected round trips), :class:`Record`, and its refusals
(:class:`SimulationError`, carrying an :class:`ErrorCode`), and the transaction markers
its coordinator writes (:class:`TxnMarker`, :meth:`Cluster.write_txn_markers`) and the
transactions a read_committed fetch names (:class:`CompletedTxn`); see
:mod:`purgatory.sim.cluster`. The parts inside (the controller, each broker's replica
manager, the delayed operations) stay importable from their modules
(:mod:`purgatory.sim.controller`, :mod:`purgatory.sim.replica_manager`,
:mod:`purgatory.sim.operations`), but are not the API.
"""

from purgatory.errors import ErrorCode
from purgatory.sim.batches import Record
from purgatory.sim.cluster import Broker, Cluster
from purgatory.sim.cluster_options import ClusterOptions
from purgatory.sim.errors import SimulationError
from purgatory.sim.latency import Latency
from purgatory.sim.messages import (
    BrokerMetadata,
    ClusterMetadata,
    DeleteRecordsRequest,
    DeleteRecordsResult,
    ElectLeadersRequest,
    ElectLeadersResult,
    FetchRequest,
    FetchResult,
    PartitionElection,
    PartitionMetadata,
    PartitionReassignment,
    ProduceRequest,
    ProduceResult,
    TopicMetadata,
    TxnMarker,
)
from purgatory.sim.producers import CompletedTxn

__all__ = [
    "Broker",
    "BrokerMetadata",
    "Cluster",
    "ClusterMetadata",
    "ClusterOptions",
    "CompletedTxn",
    "DeleteRecordsRequest",
    "DeleteRecordsResult",
    "ElectLeadersRequest",
    "ElectLeadersResult",
    "ErrorCode",
    "FetchRequest",
    "FetchResult",
    "Latency",
    "PartitionElection",
    "PartitionMetadata",
    "PartitionReassignment",
    "ProduceRequest",
    "ProduceResult",
    "Record",
    "SimulationError",
    "TopicMetadata",
    "TxnMarker",
]
