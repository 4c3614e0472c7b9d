"""The cluster's metadata as every broker sees it: topics, partitions, live brokers.

The controller changes it (topics, leaders, liveness) and bumps :attr:`version`; the replica
managers and their fetchers read it and wait for changes. In Kafka this is the metadata
the controller publishes and each broker's ``MetadataCache`` serves; in one process both
are this object.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import final

from purgatory.errors import ErrorCode
from purgatory.sim.latency import Latency
from purgatory.sim.messages import (
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from purgatory.sim.partition import HighWatermarkListener, Partition


@final
class MetadataCache:
    """Topics (name -> partitions), broker liveness, and a version bumped on every change
    of leadership or liveness."""

    def __init__(
        self,
        brokers: Iterable[int],
        seed: int = 0,
        racks: Mapping[int, str | None] | None = None,
    ) -> None:
        self.topics: dict[str, list[Partition]] = {}
        #: each topic's id (Kafka 4 names topics by id too: Fetch v13+, Metadata v10+),
        #: new for every creation, so a topic deleted and created again is another topic
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        #: topics the cluster runs for itself (Kafka's __consumer_offsets): Metadata
        #: marks them internal
        self.internal_topics: set[str] = set()
        self._ids = random.Random(seed)  # seeded: a simulation stays the same for a seed
        self.alive = dict.fromkeys(brokers, True)
        #: each broker's rack (Kafka's broker.rack; None: not set)
        self.racks: dict[int, str | None] = {b: (racks or {}).get(b) for b in self.alive}
        #: told about every change of a leader's high watermark (the invariant checker)
        self.hw_listeners: list[HighWatermarkListener] = []
        #: told about every partition whose ISR a leader expanded (Kafka's AlterPartition
        #: reaching the controller: the controller's reassignments)
        self.isr_listeners: list[Callable[[Partition], None]] = []
        self.version = 0
        self._event = asyncio.Event()
        self._callbacks: list[Callable[[], None]] = []

    def is_alive(self, broker: int) -> bool:
        return self.alive[broker]

    def placement_order(self) -> list[int]:
        """The brokers in the order replicas are placed round-robin: by id, or with racks
        set, alternating between the racks (Kafka's rack-aware assignment: the first
        broker of each rack, by rack name, then the second of each...), so consecutive
        replicas of a partition land in different racks. A broker without a rack counts
        as one more rack of its own."""
        brokers = sorted(self.alive)
        if all(self.racks[b] is None for b in brokers):
            return brokers
        by_rack: dict[str, list[int]] = {}
        for b in brokers:
            rack = self.racks[b]
            by_rack.setdefault(f"\x00{b}" if rack is None else rack, []).append(b)
        columns = [by_rack[rack] for rack in sorted(by_rack)]
        return [c[i] for i in range(max(map(len, columns))) for c in columns if i < len(c)]

    def partition(self, topic: str, partition: int) -> Partition | None:
        parts = self.topics.get(topic)
        if parts is None or partition.__class__ is not int or not 0 <= partition < len(parts):
            return None
        return parts[partition]

    def add_topic(self, name: str, partitions: list[Partition], *, internal: bool = False) -> None:
        topic_id = uuid.UUID(int=self._ids.getrandbits(128), version=4)
        self.topics[name] = partitions
        if internal:
            self.internal_topics.add(name)
        self.topic_ids[name] = topic_id
        self.topic_names[topic_id] = name

    def remove_topic(self, name: str) -> list[Partition] | None:
        self.internal_topics.discard(name)
        topic_id = self.topic_ids.pop(name, None)
        if topic_id is not None:
            del self.topic_names[topic_id]
        return self.topics.pop(name, None)

    def partitions(self) -> Iterator[Partition]:
        for parts in self.topics.values():
            yield from parts

    def lookup(self, topic: str, partition: int) -> Partition | ErrorCode:
        """The partition if it has a live leader, else the error a client gets."""
        p = self.partition(topic, partition)
        if p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if p.leader is None or not self.alive[p.leader]:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return p

    def describe(self, latencies: Mapping[int, Latency]) -> ClusterMetadata:
        """Brokers (with the replication latency injected into each, if any), and per
        partition: leader, epoch, replicas, ISR, HW, log offsets."""
        brokers = []
        for broker, alive in self.alive.items():
            latency = latencies.get(broker)
            brokers.append(
                BrokerMetadata(
                    broker,
                    alive,
                    None if latency is None else latency.median_ms,
                    self.racks[broker],
                )
            )
        topics = [
            TopicMetadata(name, [describe_partition(p) for p in parts])
            for name, parts in self.topics.items()
        ]
        return ClusterMetadata(brokers, topics)

    def bump(self) -> None:
        """Leadership or liveness changed: wake whoever waits for it."""
        self.version += 1
        event, self._event = self._event, asyncio.Event()
        event.set()
        callbacks, self._callbacks = self._callbacks, []
        if callbacks:
            loop = asyncio.get_running_loop()
            for callback in callbacks:
                loop.call_soon(callback)

    def call_on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once, soon after the next change."""
        self._callbacks.append(callback)

    async def changed(self) -> None:
        """Wait for the next change."""
        await self._event.wait()


def describe_partition(p: Partition) -> PartitionMetadata:
    """A partition's leader, epoch, replicas, ISR, HW and its leader's log offsets (-1
    while it has no leader)."""
    log = p.logs[p.leader] if p.leader is not None else None
    return PartitionMetadata(
        p.index,
        p.leader,
        p.leader_epoch,
        list(p.replicas),
        sorted(p.isr),
        p.hw,
        -1 if log is None else log.log_start_offset,
        -1 if log is None else log.leo,
    )
