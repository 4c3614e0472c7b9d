"""Follower replication: one fetcher per (follower broker, leader broker) pair.

Like Kafka's ReplicaFetcherThread, a fetcher sends one fetch for every partition it
follows on that leader, from its log end offset. The leader's replica manager parks the
fetch in its ``Fetch`` purgatory until there are new bytes (or
``replica_fetch_wait_max_ms`` passes), and learns the follower's LEO from the offset it
fetched at, which is what moves the HW. The answer reaches the follower one network round
trip later (plus a sampled latency for a slow follower), and the next fetch goes out at
once: an idle cluster costs one round per fetcher per max wait, a busy one batches every
append of a round trip.

The fetcher is a chain of loop callbacks (send, reply, apply, send...), not a task: a
round costs no coroutine, future or task switch.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Protocol, final

from purgatory.errors import ErrorCode
from purgatory.sim.latency import Latency
from purgatory.sim.metadata import MetadataCache
from purgatory.sim.operations import DelayedReplicaFetch, FollowerResponse
from purgatory.sim.partition import Partition

# (partition, leader epoch, fetch offset, follower's log start): one partition of a
# replica fetch
ReplicaFetchRequest = tuple[Partition, int, int, int]


class FetchLeader(Protocol):
    """The leader side of replication (a broker's replica manager)."""

    def replica_fetch(
        self,
        follower: int,
        requests: list[ReplicaFetchRequest],
        reply: Callable[[list[FollowerResponse]], None],
    ) -> list[FollowerResponse] | DelayedReplicaFetch: ...


@final
class Network:
    """The replication network: a round trip (None: instant) plus, per broker, an injected
    extra latency (a slow follower), sampled from one seeded generator."""

    def __init__(self, rtt: Latency | None, rng: random.Random) -> None:
        self.rtt = rtt
        self.rng = rng
        self.extra: dict[int, Latency] = {}

    def set_latency(self, broker: int, latency: Latency | None) -> None:
        if latency is None:
            self.extra.pop(broker, None)
        else:
            self.extra[broker] = latency

    def sample_ms(self, latency: Latency | None) -> float:
        """A sample of ``latency`` (0 for None) from the network's generator."""
        return 0.0 if latency is None else latency.sample_ms(self.rng)

    def round_trip_ms(self, follower: int) -> float:
        """One replication round trip of ``follower``: the network's, plus its own."""
        return self.sample_ms(self.rtt) + self.sample_ms(self.extra.get(follower))


@final
class ReplicaFetcher:
    """Replicates every partition that ``follower`` follows on ``leader``."""

    def __init__(
        self,
        follower: int,
        leader: int,
        leader_side: FetchLeader,
        metadata: MetadataCache,
        network: Network,
        on_high_watermark: Callable[[Partition], None] | None = None,
    ) -> None:
        """``on_high_watermark(partition)``: the follower's HW of ``partition`` moved
        (consumer fetches it serves may be done)."""
        self.follower = follower
        self._on_high_watermark = on_high_watermark
        self.leader = leader
        self._leader_side = leader_side
        self._metadata = metadata
        self._network = network
        self.rounds = 0
        self._running = False
        self._generation = 0  # a callback from before a stop/start finds a newer one
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.Handle | None = None
        self._parked: DelayedReplicaFetch | None = None
        self._version = -1
        self._targets: list[Partition] = []

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Start fetching (soon, from the running loop); no-op if running."""
        if self._running:
            return
        self._running = True
        self._generation += 1
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_soon(self._send)

    def stop(self) -> None:
        """Stop at once: a pending answer is dropped, a parked fetch cancelled."""
        if not self._running:
            return
        self._running = False
        self._generation += 1
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        parked, self._parked = self._parked, None
        if parked is not None:
            parked.cancel()

    def _current_targets(self) -> list[Partition]:
        metadata = self._metadata
        if metadata.version != self._version:
            self._version = metadata.version
            self._targets = [
                p
                for p in metadata.partitions()
                if p.leader == self.leader and self.follower in p.followers
            ]
        return self._targets

    def _send(self) -> None:
        """Send the next fetch, or wait for a metadata change if there is nothing to do."""
        self._handle = None
        if not self._running:
            return
        metadata = self._metadata
        targets = self._targets if metadata.version == self._version else self._current_targets()
        if not targets or not metadata.alive[self.leader]:
            generation = self._generation
            metadata.call_on_change(lambda: self._resume(generation))
            return
        follower = self.follower
        requests = []
        for p in targets:
            log = p.logs[follower]
            requests.append((p, p.leader_epoch, log.leo, log.log_start_offset))
        answer = self._leader_side.replica_fetch(follower, requests, self._on_response)
        if isinstance(answer, list):
            self._on_response(answer)
        elif not answer.is_done:
            self._parked = answer

    def _resume(self, generation: int) -> None:
        if self._running and generation == self._generation and self._handle is None:
            self._send()

    def _on_response(self, responses: list[FollowerResponse]) -> None:
        """The leader answered: deliver it after the round trip."""
        self._parked = None
        if not self._running:
            return
        self.rounds += 1
        delay_ms = self._network.round_trip_ms(self.follower)
        loop = self._loop
        assert loop is not None
        if delay_ms > 0:
            self._handle = loop.call_at(loop.time() + delay_ms / 1000.0, self._apply, responses)
        else:
            self._handle = loop.call_soon(self._apply, responses)

    def _apply(self, responses: list[FollowerResponse]) -> None:
        self._handle = None
        if not self._running:
            return
        follower = self.follower
        for partition, epoch, error, batches, hw, lso in responses:
            if partition.leader_epoch != epoch:
                continue  # leadership moved while in flight; the controller truncated us
            if error is ErrorCode.NONE:
                if partition.apply_fetch(follower, batches, hw, lso):
                    on_high_watermark = self._on_high_watermark
                    if on_high_watermark is not None:
                        on_high_watermark(partition)
            elif error is ErrorCode.OFFSET_OUT_OF_RANGE:
                log = partition.logs[follower]
                if log.leo > partition.leo:
                    partition.become_follower(follower)
                else:
                    log.reset_to(partition.leader_log.log_start_offset)
        self._send()

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return f"<ReplicaFetcher {self.follower} from {self.leader} {state} rounds={self.rounds}>"
