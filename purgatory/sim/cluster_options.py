"""The keywords :class:`~purgatory.sim.Cluster` takes beside its broker count and seed, as
one type (:class:`ClusterOptions`): what a scenario, the embedded Kafka cluster and its
pytest marker pass through to it, checked by mypy against the cluster's own signature (a
test checks the two name the same keywords with the same types)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from purgatory.sim.latency import Latency


class ClusterOptions(TypedDict, total=False):
    """:class:`~purgatory.sim.Cluster`'s keyword arguments (but ``seed``), each optional;
    what each does is the cluster's to say."""

    replica_lag_time_max_ms: int
    replica_fetch_wait_max_ms: int
    replica_fetch_min_bytes: int
    replica_fetch_max_bytes: int
    min_insync_replicas: int
    purge_interval: int
    replica_rtt: Latency | None
    election_rtt: Latency | None
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_ms: int
    leader_imbalance_per_broker_percentage: int
    log_retention_bytes: int
    log_retention_ms: int
    log_retention_check_interval_ms: int
    max_stored_bytes: int | None
    broker_session_timeout_ms: int
    producer_id_expiration_ms: int
    producer_id_expiration_check_interval_ms: int
    log_cleaner_backoff_ms: int
    racks: Sequence[str | None] | None
    replica_selector_class: str | None
