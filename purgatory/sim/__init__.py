"""Broker simulation: a replicated log with DelayedProduce, DelayedFetch and
DelayedDeleteRecords parked in purgatories, with faults.

The public API is :class:`Cluster`; see :mod:`purgatory.sim.cluster`.
"""

from purgatory.sim.cluster import Broker, Cluster
from purgatory.sim.errors import ErrorCode, SimulationError
from purgatory.sim.faults import Latency
from purgatory.sim.log import Record
from purgatory.sim.messages import (
    BrokerMetadata,
    ClusterMetadata,
    DeleteRecordsResult,
    FetchResult,
    PartitionMetadata,
    ProduceResult,
    TopicMetadata,
)
from purgatory.sim.operations import (
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedProduce,
    DelayedReplicaFetch,
)

__all__ = [
    "Broker",
    "BrokerMetadata",
    "Cluster",
    "ClusterMetadata",
    "DelayedDeleteRecords",
    "DelayedFetch",
    "DelayedProduce",
    "DelayedReplicaFetch",
    "DeleteRecordsResult",
    "ErrorCode",
    "FetchResult",
    "Latency",
    "PartitionMetadata",
    "ProduceResult",
    "Record",
    "SimulationError",
    "TopicMetadata",
]
