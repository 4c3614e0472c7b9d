"""Moved: the cluster's configs are :mod:`purgatory.kafka.cluster_configs`. The configs and
topics handlers still import them from here until their imports move with the handlers'
new signatures."""

from purgatory.kafka.cluster_configs import (
    LISTENER_ADDRESSES,
    LISTENER_PREFIXED,
    ClusterConfigs,
    Config,
    Source,
)

__all__ = ["LISTENER_ADDRESSES", "LISTENER_PREFIXED", "ClusterConfigs", "Config", "Source"]
