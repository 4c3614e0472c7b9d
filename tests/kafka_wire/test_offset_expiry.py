"""Committed offsets expire as Kafka's ``offsets.retention.minutes`` says: an Empty
group's a retention after it became Empty, offsets committed without a membership a
retention after the commit, a group with members (classic or KIP-848) keeps its offsets.
The rule on a manual clock; then a consumer group of aiokafka's through the front door,
its expiry pass run on the coordinator's clock moved past the retention."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from purgatory._clock import ManualClock
from purgatory.kafka.coordinator.consumer import ConsumerGroup, ConsumerMember
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import ClassicGroup, GroupState, Member
from purgatory.kafka.coordinator.offsets import NOTHING_COMMITTED, Committed, OffsetStore
from purgatory.kafka.embedded import AsyncEmbeddedKafka

RETENTION = 1000.0
AT = Committed(5, 0, "")


def test_offsets_expire_a_retention_after_the_group_became_empty_or_the_commit() -> None:
    clock = ManualClock(0)
    store = OffsetStore(clock)
    coordinator = GroupCoordinator()
    groups = coordinator.groups
    groups["stable"] = ClassicGroup("stable", GroupState.STABLE, members={"m": Member("m")})
    groups["emptied"] = ClassicGroup("emptied", GroupState.EMPTY, generation=2, empty_since_ms=500)
    for group in ("stable", "emptied", "standalone"):
        store.commit(group, "t", 0, AT)
    clock.advance(999)
    assert coordinator.expire_offsets(store, RETENTION) == 0
    clock.advance(1)  # 1000: a retention after the standalone commit
    assert coordinator.expire_offsets(store, RETENTION) == 1
    assert store.position("standalone", "t", 0) == NOTHING_COMMITTED
    assert store.position("emptied", "t", 0) == AT  # empty since 500 only
    clock.advance(499)
    assert coordinator.expire_offsets(store, RETENTION) == 0
    clock.advance(1)  # 1500: a retention after the group became Empty
    assert coordinator.expire_offsets(store, RETENTION) == 1
    assert store.position("emptied", "t", 0) == NOTHING_COMMITTED
    assert "emptied" not in groups  # an Empty group without offsets goes, as in Kafka
    clock.advance(10**9)
    assert coordinator.expire_offsets(store, RETENTION) == 0  # members keep the offsets
    assert store.position("stable", "t", 0) == AT
    assert store.groups() == ["stable"]


def test_an_empty_group_that_was_never_left_empty_counts_from_each_commit() -> None:
    clock = ManualClock(0)
    store = OffsetStore(clock)
    coordinator = GroupCoordinator()
    coordinator.groups["g"] = ClassicGroup("g", GroupState.EMPTY)  # never left Empty
    store.commit("g", "t", 0, AT)
    clock.advance(600)
    store.commit("g", "t", 1, AT)
    clock.advance(400)
    assert coordinator.expire_offsets(store, RETENTION) == 1  # partition 0 only
    assert store.partitions("g") == {"t": [1]}
    assert "g" in coordinator.groups  # it still has offsets


def test_a_kip848_group_with_members_keeps_its_offsets_an_empty_one_goes_with_them() -> None:
    """A consumer group (KIP-848) is a group too: its members keep its offsets, and once
    empty its offsets expire a retention after each commit (Kafka's commit timestamp),
    the group with the last of them (before, its offsets expired as if nobody knew the
    group, and the empty group stayed)."""
    clock = ManualClock(0)
    store = OffsetStore(clock)
    coordinator = GroupCoordinator()
    group = ConsumerGroup("k", members={"a": ConsumerMember("a", "c", 1000)})
    coordinator.groups["k"] = group
    store.commit("k", "t", 0, AT)
    clock.advance(10**6)
    assert coordinator.expire_offsets(store, RETENTION) == 0
    assert store.position("k", "t", 0) == AT
    group.members.clear()
    assert coordinator.expire_offsets(store, RETENTION) == 1
    assert "k" not in coordinator.groups


@pytest.mark.asyncio
async def test_a_consumer_groups_offsets_expire_after_it_left() -> None:
    configs = {"offsets.retention.minutes": 1}
    async with AsyncEmbeddedKafka(brokers=1, seed=1, topics={"t": (1, 1)}, configs=configs) as k:
        door = k.front_door
        consumer = AIOKafkaConsumer("t", bootstrap_servers=door.bootstrap, group_id="g")
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=200)
            await consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(0, "")})
        finally:
            await consumer.stop()  # leaves: the group rebalances to Empty
        group = door.coordinator.groups["g"]
        assert group.state is GroupState.EMPTY
        assert group.empty_since_ms is not None
        assert door.expire_offsets() == 0  # not yet
        now = door.offsets.clock()
        door.offsets.clock = lambda: now + 60_000  # the coordinator's clock, a minute on
        assert door.expire_offsets() == 1
        assert door.offsets.position("g", "t", 0) == NOTHING_COMMITTED
        assert "g" not in door.coordinator.groups
