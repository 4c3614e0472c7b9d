"""Client requests as the cluster receives them: argument checks, the leader lookup, then
the leader's handler (:mod:`purgatory.sim.handlers`).

:class:`~purgatory.sim.cluster.Cluster` offers each request in two forms built on these:
``await cluster.produce(...)`` and the callback form ``cluster.send_produce(..., reply)``
that the simulated clients use (no task or future per request). Bad arguments raise
``TypeError``/``ValueError`` at once; the common, valid case costs no extra call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from purgatory.sim import handlers
from purgatory.sim.errors import ErrorCode, SimulationError
from purgatory.sim.messages import FetchResult, ProduceResult
from purgatory.sim.operations import DelayedFetch, DelayedProduce
from purgatory.sim.partition import Partition
from purgatory.sim.validate import check_int, check_records

if TYPE_CHECKING:
    from purgatory.sim.cluster import Cluster

Entries = Sequence[tuple[bytes | None, bytes]]


def leader_partition(cluster: Cluster, topic: str, partition: int) -> Partition | ErrorCode:
    """The partition if a live leader can take the request, else the error to answer."""
    if cluster.closed:
        return ErrorCode.BROKER_NOT_AVAILABLE
    parts = cluster.topics.get(topic)  # cluster.partition(), inlined: every request asks
    if parts is None or partition.__class__ is not int or not 0 <= partition < len(parts):
        if parts is None or cluster.partition(topic, partition) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    p = parts[partition]
    if p.leader is None or not cluster.brokers[p.leader].alive:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return p


def produce(
    cluster: Cluster,
    topic: str,
    partition: int,
    records: Entries,
    acks: int,
    timeout_ms: int,
    reply: Callable[[ProduceResult], None] | None,
) -> ProduceResult | DelayedProduce:
    """A produce request: the answer now, or the parked DelayedProduce."""
    if acks.__class__ is not int or acks not in (-1, 0, 1):
        if acks not in (-1, 0, 1) or isinstance(acks, bool):
            raise SimulationError(ErrorCode.INVALID_REQUIRED_ACKS, "acks must be -1, 0 or 1")
    if timeout_ms.__class__ is not int or timeout_ms < 0:
        check_int("timeout_ms", timeout_ms, 0)
    entries = check_records(records)
    p = leader_partition(cluster, topic, partition)
    if isinstance(p, ErrorCode):
        return ProduceResult(p)
    return handlers.produce(cluster, p, entries, acks, timeout_ms, reply)


def fetch(
    cluster: Cluster,
    topic: str,
    partition: int,
    offset: int,
    min_bytes: int,
    max_bytes: int,
    max_wait_ms: int,
    reply: Callable[[FetchResult], None] | None,
) -> FetchResult | DelayedFetch:
    """A consumer fetch request: the answer now, or the parked DelayedFetch."""
    if not (  # the common case without four calls; check_int names the culprit
        offset.__class__ is int
        and min_bytes.__class__ is int
        and max_bytes.__class__ is int
        and max_wait_ms.__class__ is int
        and offset >= 0
        and min_bytes >= 0
        and max_bytes >= 1
        and max_wait_ms >= 0
    ):
        check_int("offset", offset, 0)
        check_int("min_bytes", min_bytes, 0)
        check_int("max_bytes", max_bytes, 1)
        check_int("max_wait_ms", max_wait_ms, 0)
    p = leader_partition(cluster, topic, partition)
    if isinstance(p, ErrorCode):
        return FetchResult(p)
    return handlers.fetch(cluster, p, offset, min_bytes, max_bytes, max_wait_ms, reply)
