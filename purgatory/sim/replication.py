"""Follower replication: one fetcher task per (follower broker, leader broker) pair.

Like Kafka's ReplicaFetcherThread, a fetcher sends one fetch for every partition it
follows on that leader, from its log end offset. The leader parks the fetch in the
``Fetch`` purgatory until there are new bytes (or ``replica_fetch_wait_max_ms`` passes),
and learns the follower's LEO from the offset it fetched at, which is what moves the HW.
A slow follower adds a sampled latency to each round trip.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, final

from purgatory.sim.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.sim.cluster import Cluster
    from purgatory.sim.partition import Partition


@final
class ReplicaFetcher:
    """Replicates every partition that ``follower`` follows on ``leader``."""

    def __init__(self, cluster: Cluster, follower: int, leader: int) -> None:
        self.cluster = cluster
        self.follower = follower
        self.leader = leader
        self.rounds = 0
        self._task: asyncio.Task[None] | None = None
        self._version = -1
        self._targets: list[Partition] = []

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"replica-fetcher-{self.follower}-from-{self.leader}"
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    def _current_targets(self) -> list[Partition]:
        cluster = self.cluster
        if cluster.metadata_version != self._version:
            self._version = cluster.metadata_version
            self._targets = [
                p
                for p in cluster.partitions()
                if p.leader == self.leader and self.follower in p.followers
            ]
        return self._targets

    async def _run(self) -> None:
        cluster = self.cluster
        follower = self.follower
        rng = cluster.rng
        while True:
            targets = self._current_targets()
            if not targets or not cluster.is_alive(self.leader):
                await cluster.metadata_changed()
                continue
            requests = [
                (p, p.leader_epoch, p.logs[follower].leo, p.logs[follower].log_start_offset)
                for p in targets
            ]
            responses = await cluster.handle_follower_fetch(follower, requests)
            self.rounds += 1
            delay_ms = 0.0 if cluster.replica_rtt is None else cluster.replica_rtt.sample_ms(rng)
            latency = cluster.brokers[follower].latency
            if latency is not None:
                delay_ms += latency.sample_ms(rng)
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000.0)
            for partition, epoch, error, batches, hw, lso in responses:
                if partition.leader_epoch != epoch:
                    continue  # leadership moved while in flight; the controller truncated us
                if error is ErrorCode.NONE:
                    partition.apply_fetch(follower, batches, hw, lso)
                elif error is ErrorCode.OFFSET_OUT_OF_RANGE:
                    log = partition.logs[follower]
                    if log.leo > partition.leo:
                        partition.become_follower(follower)
                    else:
                        log.reset_to(partition.leader_log.log_start_offset)
