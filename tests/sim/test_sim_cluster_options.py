"""ClusterOptions, the type scenarios and the embedded Kafka cluster pass Cluster's keywords
as, names every keyword of Cluster (but its broker count and seed) with the same type."""

from __future__ import annotations

import typing

from purgatory.sim import Cluster, ClusterOptions


def test_cluster_options_are_the_keywords_of_cluster() -> None:
    keywords = typing.get_type_hints(Cluster.__init__)
    for positional in ("brokers", "seed", "return"):
        keywords.pop(positional)
    assert typing.get_type_hints(ClusterOptions) == keywords
    assert ClusterOptions.__required_keys__ == frozenset()
