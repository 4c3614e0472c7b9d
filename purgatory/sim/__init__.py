"""Broker simulation: a replicated log with DelayedProduce, DelayedFetch and
DelayedDeleteRecords parked in each broker's purgatories, with faults.

The public API is :class:`Cluster` and the request types it takes; see
:mod:`purgatory.sim.cluster`.
"""

from purgatory.sim.cluster import Broker, Cluster
from purgatory.sim.controller import Controller
from purgatory.sim.errors import ErrorCode, SimulationError
from purgatory.sim.faults import Latency
from purgatory.sim.log import Record
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
    ProduceRequest,
    ProduceResult,
    TopicMetadata,
)
from purgatory.sim.operations import (
    DelayedDeleteRecords,
    DelayedElectLeader,
    DelayedFetch,
    DelayedProduce,
    DelayedReplicaFetch,
)
from purgatory.sim.replica_manager import ReplicaManager

__all__ = [
    "Broker",
    "BrokerMetadata",
    "Cluster",
    "ClusterMetadata",
    "Controller",
    "DelayedDeleteRecords",
    "DelayedElectLeader",
    "DelayedFetch",
    "DelayedProduce",
    "DelayedReplicaFetch",
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
    "ProduceRequest",
    "ProduceResult",
    "Record",
    "ReplicaManager",
    "SimulationError",
    "TopicMetadata",
]
