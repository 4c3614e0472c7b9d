"""Share groups' durable state (KIP-932): a share-partition's state written to
``__share_group_state`` on every acknowledgement and acquisition (records that Kafka's
schemas decode), and loaded by the partition's next leader: the leader crashed
(``crash_broker``) over the wire with kio, its state dropped from memory, the share
coordinator crashed, and the leader crashed under confluent-kafka's ShareConsumer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio_wire import Wire
from test_share_log import TOPIC, decode

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.offsets_topic import partition_for
from purgatory.kafka.coordinator.share_log import (
    SHARE_GROUP_STATE_TOPIC,
    ShareKey,
    ShareState,
    value_bytes,
)
from purgatory.kafka.coordinator.share_state import LoadedShard
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.sim.messages import ProduceRequest

ACCEPT, RELEASE, REJECT = 1, 2, 3

# -- over the wire: the leader crashed --------------------------------------------------


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(
        brokers=3,
        seed=1,
        topics={"t": (1, 3)},
        configs={
            "share.auto.offset.reset": "earliest",
            "share.coordinator.state.topic.num.partitions": 3,
        },
    ) as k:
        yield k


async def _wire(kafka: AsyncEmbeddedKafka, broker: int) -> Wire:
    reader, writer = await asyncio.open_connection(*kafka.front_door.addresses[broker])
    return Wire(reader, writer)


async def _close(wire: Wire) -> None:
    wire.writer.close()
    await wire.writer.wait_closed()


async def _fetch(
    wire: Wire, kafka: AsyncEmbeddedKafka, epoch: int, acks: tuple[tuple[int, int, int], ...] = ()
) -> Any:
    return await wire.kio(
        ApiKey.SHARE_FETCH,
        1,
        group_id="g",
        member_id="a",
        share_session_epoch=epoch,
        max_wait=0,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=100,
        batch_size=100,
        topics=[
            {
                "topic_id": kafka.front_door.cluster.topic_id("t"),
                "partitions": [
                    {
                        "partition_index": 0,
                        "acknowledgement_batches": [
                            {"first_offset": f, "last_offset": last, "acknowledge_types": [k]}
                            for f, last, k in acks
                        ],
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
    )


async def _acknowledge(
    wire: Wire, kafka: AsyncEmbeddedKafka, epoch: int, first: int, types: list[int]
) -> list[int]:
    answer = await wire.kio(
        ApiKey.SHARE_ACKNOWLEDGE,
        1,
        group_id="g",
        member_id="a",
        share_session_epoch=epoch,
        topics=[
            {
                "topic_id": kafka.front_door.cluster.topic_id("t"),
                "partitions": [
                    {
                        "partition_index": 0,
                        "acknowledgement_batches": [
                            {
                                "first_offset": first,
                                "last_offset": first + len(types) - 1,
                                "acknowledge_types": types,
                            }
                        ],
                    }
                ],
            }
        ],
    )
    return [int(p.error_code) for t in answer.responses for p in t.partitions]


def _acquired(answer: Any) -> list[tuple[int, int, int]]:
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in answer.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def _state_records(kafka: AsyncEmbeddedKafka) -> list[tuple[str, dict[str, Any]]]:
    """Every record of ``__share_group_state`` for (g, t, 0), decoded by Kafka's schemas."""
    key = ShareKey("g", kafka.front_door.cluster.topic_id("t") or TOPIC, 0)
    index = partition_for(key.coordinator_key(), 3)
    out = []
    for record in kafka.records(SHARE_GROUP_STATE_TOPIC, index):
        assert record.key is not None
        assert record.value is not None
        version, decoded_key = decode("ShareSnapshotKey", record.key)
        assert decoded_key == {"GroupId": "g", "TopicId": key.topic_id, "Partition": 0}
        kind = "ShareSnapshotValue" if version == 0 else "ShareUpdateValue"
        out.append((kind, decode(kind, record.value)[1]))
    return out


async def _start(kafka: AsyncEmbeddedKafka) -> tuple[int, Wire]:
    """Six records on t-0, member a in group g; a wire to t-0's leader."""
    await kafka.cluster.produce(
        ProduceRequest("t", 0, [(None, f"v{i}".encode()) for i in range(6)], acks=-1)
    )
    leader = kafka.leader("t", 0)
    assert leader is not None
    wire = await _wire(kafka, leader)
    beat = await wire.kio(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        group_id="g",
        member_id="a",
        member_epoch=0,
        subscribed_topic_names=["t"],
    )
    assert beat.error_code == 0
    return leader, wire


@pytest.mark.asyncio
async def test_the_leader_crashed_loses_no_acknowledgement_and_redelivers_the_rest(
    kafka: AsyncEmbeddedKafka,
) -> None:
    leader, wire = await _start(kafka)
    try:
        assert _acquired(await _fetch(wire, kafka, 0)) == [(0, 5, 1)]
        # accept 0 and 1, reject 2, release 3; 4 and 5 stay acquired
        assert await _acknowledge(wire, kafka, 1, 0, [ACCEPT, ACCEPT, REJECT, RELEASE]) == [0]
    finally:
        await _close(wire)
    # the leader's state went to __share_group_state, in Kafka's format
    written = _state_records(kafka)
    assert [kind for kind, _ in written] == ["ShareSnapshotValue", "ShareUpdateValue"]
    last = written[-1][1]
    assert last["StartOffset"] == 3
    assert [
        (b["FirstOffset"], b["LastOffset"], b["DeliveryState"], b["DeliveryCount"])
        for b in last["StateBatches"]
    ] == [(3, 5, 0, 1)]  # Available, delivered once (4 and 5 Available should it crash)
    before = kafka.front_door.shares.partitions[("g", "t", 0)]
    assert before.leader == leader

    await kafka.crash_broker(leader)
    successor = kafka.leader("t", 0)
    assert successor is not None
    assert successor != leader
    # the crashed leader's memory is gone: the successor loaded the state
    after = kafka.front_door.shares.partitions[("g", "t", 0)]
    assert after is not before
    assert (after.leader, after.start, after.end) == (successor, 3, 6)
    wire = await _wire(kafka, successor)
    try:
        # nothing acknowledged comes again; 3 (released), 4 and 5 (acquired by the dead
        # leader) do, each delivered once before
        again = await _fetch(wire, kafka, 0)
        assert _acquired(again) == [(3, 5, 2)]
        # what the member acquired from the dead leader is not its to acknowledge now
        done = await _fetch(wire, kafka, 1, acks=((3, 5, ACCEPT),))
        assert [int(p.acknowledge_error_code) for t in done.responses for p in t.partitions] == [0]
        assert _acquired(await _fetch(wire, kafka, 2)) == []
    finally:
        await _close(wire)
    assert kafka.front_door.shares.partitions[("g", "t", 0)].start == 6


@pytest.mark.asyncio
async def test_a_state_dropped_from_memory_is_reloaded_from_the_topic(
    kafka: AsyncEmbeddedKafka,
) -> None:
    _, wire = await _start(kafka)
    try:
        assert _acquired(await _fetch(wire, kafka, 0)) == [(0, 5, 1)]
        assert await _acknowledge(wire, kafka, 1, 0, [ACCEPT, REJECT]) == [0]
        shares = kafka.front_door.shares
        shares.partitions.clear()  # as if the leader had restarted
        assert shares.initialized("g") == [("t", 0)]  # read from __share_group_state
        assert shares.start_and_lag("g", "t", 0) == (2, 4)
        # 2..5 were acquired: Available again, delivered once before
        assert _acquired(await _fetch(wire, kafka, 2)) == [(2, 5, 2)]
    finally:
        await _close(wire)


@pytest.mark.asyncio
async def test_the_share_coordinator_crashed_its_successor_loads_the_state(
    kafka: AsyncEmbeddedKafka,
) -> None:
    _, wire = await _start(kafka)
    key = ShareKey("g", kafka.front_door.cluster.topic_id("t") or TOPIC, 0)
    index = partition_for(key.coordinator_key(), 3)
    try:
        assert _acquired(await _fetch(wire, kafka, 0)) == [(0, 5, 1)]
        assert await _acknowledge(wire, kafka, 1, 0, [ACCEPT, ACCEPT]) == [0]
    finally:
        await _close(wire)
    coordinator = kafka.leader(SHARE_GROUP_STATE_TOPIC, index)
    assert coordinator is not None
    await kafka.crash_broker(coordinator)
    # t-0's leadership moves too (or was the crashed broker's): its next leader reads the
    # state from the next coordinator, which loaded it from its replica of the log
    if kafka.leader("t", 0) not in (None, coordinator):
        await kafka.move_leader("t", 0)
    successor = kafka.leader("t", 0)
    assert successor is not None
    assert successor != coordinator
    assert kafka.leader(SHARE_GROUP_STATE_TOPIC, index) not in (None, coordinator)
    wire = await _wire(kafka, successor)
    try:
        assert _acquired(await _fetch(wire, kafka, 0)) == [(2, 5, 2)]
    finally:
        await _close(wire)


@pytest.mark.asyncio
async def test_altered_and_deleted_offsets_are_durable_across_a_crash(
    kafka: AsyncEmbeddedKafka,
) -> None:
    leader, wire = await _start(kafka)
    try:
        assert _acquired(await _fetch(wire, kafka, 0)) == [(0, 5, 1)]
        assert await _acknowledge(wire, kafka, 1, 0, [ACCEPT]) == [0]
        left = await wire.kio(
            ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id="g", member_id="a", member_epoch=-1
        )
        assert left.error_code == 0
        altered = await wire.kio(
            ApiKey.ALTER_SHARE_GROUP_OFFSETS,
            0,
            group_id="g",
            topics=[{"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 4}]}],
        )
        assert altered.error_code == 0
        assert [int(p.error_code) for t in altered.responses for p in t.partitions] == [0]
        assert await kafka.front_door.shares.written("g", [("t", 0)]) == {("t", 0): ErrorCode.NONE}
    finally:
        await _close(wire)
    # a new state epoch: a ShareSnapshot at the new start, nothing in flight
    kind, last = _state_records(kafka)[-1]
    assert (kind, last["StateEpoch"], last["StartOffset"], last["StateBatches"]) == (
        "ShareSnapshotValue",
        1,
        4,
        [],
    )
    await kafka.crash_broker(leader)
    successor = kafka.leader("t", 0)
    assert successor is not None
    wire = await _wire(kafka, successor)
    try:
        described = await wire.kio(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, groups=[{"group_id": "g", "topics": None}]
        )
        assert [
            (p.partition_index, p.start_offset)
            for t in described.groups[0].topics
            for p in t.partitions
        ] == [(0, 4)]
        deleted = await wire.kio(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, group_id="g", topics=[{"topic_name": "t"}]
        )
        assert [int(t.error_code) for t in deleted.responses] == [0]
    finally:
        await _close(wire)
    for _ in range(100):  # the tombstone is written in the background
        if not kafka.front_door.share_coordinators.keys("g"):
            break
        await asyncio.sleep(0.01)
    assert kafka.front_door.share_coordinators.keys("g") == []
    assert kafka.front_door.shares.initialized("g") == []


@pytest.mark.asyncio
async def test_an_acknowledgement_not_written_is_an_error_and_the_next_write_carries_it() -> None:
    async with AsyncEmbeddedKafka(
        brokers=3,
        seed=1,
        topics={"t": (1, 3)},
        configs={
            "share.auto.offset.reset": "earliest",
            "share.coordinator.state.topic.num.partitions": 3,
            "share.coordinator.state.topic.replication.factor": 1,
        },
    ) as kafka:
        leader, wire = await _start(kafka)
        key = ShareKey("g", kafka.front_door.cluster.topic_id("t") or TOPIC, 0)
        index = partition_for(key.coordinator_key(), 3)
        try:
            assert _acquired(await _fetch(wire, kafka, 0)) == [(0, 5, 1)]
            coordinator = kafka.leader(SHARE_GROUP_STATE_TOPIC, index)
            assert coordinator is not None
            assert coordinator != leader  # (seed 1) t-0 stays led: only the coordinator goes
            # the share coordinator's only replica dies: the write cannot be made
            await kafka.crash_broker(coordinator)
            assert kafka.leader(SHARE_GROUP_STATE_TOPIC, index) is None
            errors = await _acknowledge(wire, kafka, 1, 0, [ACCEPT, ACCEPT])
            assert errors == [ErrorCode.COORDINATOR_NOT_AVAILABLE.number]
            # it comes back; the next write carries the whole state, the acceptance with it
            await kafka.restart_broker(coordinator)
            assert kafka.leader(SHARE_GROUP_STATE_TOPIC, index) == coordinator
            assert await _acknowledge(wire, kafka, 2, 2, [RELEASE]) == [0]
        finally:
            await _close(wire)
        await kafka.crash_broker(leader)
        successor = kafka.leader("t", 0)
        assert successor is not None
        wire = await _wire(kafka, successor)
        try:
            assert [a[:2] for a in _acquired(await _fetch(wire, kafka, 0))] == [(2, 5)]
        finally:
            await _close(wire)


@pytest.mark.asyncio
@pytest.mark.parametrize("pruned", [False, True], ids=["whole", "pruned"])
async def test_a_snapshot_every_so_many_updates_and_the_log_replays_them_all(
    pruned: bool,
) -> None:
    """Snapshots and updates as configured; the next leader replays the log, whole or
    pruned below the latest snapshot (as Kafka's share coordinator prunes it)."""
    async with AsyncEmbeddedKafka(
        brokers=3,
        seed=1,
        topics={"t": (1, 3)},
        configs={
            "share.auto.offset.reset": "earliest",
            "share.coordinator.state.topic.num.partitions": 3,
            "share.coordinator.snapshot.update.records.per.snapshot": 2,
        },
    ) as kafka:
        leader, wire = await _start(kafka)
        try:
            assert _acquired(await _fetch(wire, kafka, 0)) == [(0, 5, 1)]
            for epoch, offset in enumerate(range(4), start=1):
                assert await _acknowledge(wire, kafka, epoch, offset, [ACCEPT]) == [0]
        finally:
            await _close(wire)
        written = [
            ("Snapshot", 0),  # the acquisition
            ("Update", 0),
            ("Update", 0),
            ("Snapshot", 1),
            ("Update", 1),
        ]
        key = ShareKey("g", kafka.front_door.cluster.topic_id("t") or TOPIC, 0)
        state = kafka.cluster.partition(
            SHARE_GROUP_STATE_TOPIC, partition_for(key.coordinator_key(), 3)
        )
        assert state is not None
        if pruned:
            coordinators = kafka.front_door.share_coordinators
            assert await coordinators.prune() == 3
            assert await coordinators.prune() == 0  # nothing more is superseded
            written = written[3:]
        assert {log.log_start_offset for log in state.logs.values()} == {5 - len(written)}
        records = _state_records(kafka)
        assert [(kind[5:-5], value["SnapshotEpoch"]) for kind, value in records] == written
        assert records[-1][1]["StartOffset"] == 4
        # the share-partition's leader and the state's leader crash: the log loads
        await kafka.crash_broker(leader)
        if state.leader is not None and state.leader != kafka.leader("t", 0):
            await kafka.crash_broker(state.leader)
        successor = kafka.leader("t", 0)
        assert successor is not None
        wire = await _wire(kafka, successor)
        try:
            assert _acquired(await _fetch(wire, kafka, 0)) == [(4, 5, 2)]
        finally:
            await _close(wire)


def test_the_redundant_offset_is_the_oldest_latest_snapshot() -> None:
    """Kafka's example: key 1 snapshotted at 1 only, keys 2 and 3 at 2, 4, 6 and 3, 5, 7:
    nothing below 1 can go until key 1 writes again; a tombstone lets its key go."""
    shard = LoadedShard(0, 0)
    keys = [ShareKey("g", TOPIC, i) for i in range(3)]
    value = _snapshot_value()
    for offset, k in [(1, 0), (2, 1), (3, 2), (4, 1), (5, 2), (6, 1), (7, 2)]:
        shard.replay(keys[k], False, value, offset)
    assert shard.redundant == 1
    shard.replay(keys[0], False, None, 8)  # key 0 deleted
    assert shard.redundant == 6
    shard.replay(keys[2], False, value, 9)
    shard.replay(keys[1], False, value, 10)
    assert shard.redundant == 9


def _snapshot_value() -> bytes:
    return value_bytes(ShareState(0, 0, 0, 0, ()), update=False)


@pytest.mark.asyncio
async def test_a_parked_fetch_whose_partition_moved_acquires_nothing(
    kafka: AsyncEmbeddedKafka,
) -> None:
    _, wire = await _start(kafka)
    try:
        assert _acquired(await _fetch(wire, kafka, 0)) == [(0, 5, 1)]
        assert await _acknowledge(wire, kafka, 1, 0, [ACCEPT] * 6) == [0]
        parked = asyncio.ensure_future(
            wire.kio(
                ApiKey.SHARE_FETCH,
                1,
                group_id="g",
                member_id="a",
                share_session_epoch=2,
                max_wait=60_000,
                min_bytes=1,
                max_bytes=1 << 20,
                max_records=100,
                batch_size=100,
                topics=[],
                forgotten_topics_data=[],
            )
        )
        purgatory = kafka.front_door.purgatories["ShareFetch"]
        for _ in range(200):
            if purgatory.num_delayed:
                break
            await asyncio.sleep(0.005)
        assert purgatory.num_delayed == 1
        successor = await kafka.move_leader("t", 0)
        await kafka.cluster.produce(ProduceRequest("t", 0, [(None, b"x"), (None, b"y")], acks=-1))
        answer = await asyncio.wait_for(parked, 10)
        assert _acquired(answer) == []
        assert [int(p.error_code) for t in answer.responses for p in t.partitions] == [
            ErrorCode.NOT_LEADER_OR_FOLLOWER.number
        ]
    finally:
        await _close(wire)
    wire = await _wire(kafka, successor)
    try:  # the new leader has them Available: nobody acquired them for the old one
        assert _acquired(await _fetch(wire, kafka, 0)) == [(6, 7, 1)]
    finally:
        await _close(wire)


@pytest.mark.asyncio
async def test_a_record_delivered_as_often_as_allowed_before_the_crash_is_archived() -> None:
    async with AsyncEmbeddedKafka(
        brokers=3,
        seed=1,
        topics={"t": (1, 3)},
        configs={
            "share.auto.offset.reset": "earliest",
            "share.coordinator.state.topic.num.partitions": 3,
            "group.share.delivery.count.limit": 2,
        },
    ) as kafka:
        leader, wire = await _start(kafka)
        try:
            assert _acquired(await _fetch(wire, kafka, 0)) == [(0, 5, 1)]
            assert await _acknowledge(wire, kafka, 1, 0, [ACCEPT, ACCEPT, RELEASE]) == [0]
            # 2 comes again (its second delivery, the last allowed), 3-5 stay held
            assert _acquired(await _fetch(wire, kafka, 2)) == [(2, 2, 2)]
        finally:
            await _close(wire)
        await kafka.crash_broker(leader)
        successor = kafka.leader("t", 0)
        assert successor is not None
        wire = await _wire(kafka, successor)
        try:  # 2 was delivered twice: archived; 3-5 once: delivered again
            assert _acquired(await _fetch(wire, kafka, 0)) == [(3, 5, 2)]
        finally:
            await _close(wire)
        sp = kafka.front_door.shares.partitions[("g", "t", 0)]
        assert sp.start == 3


# -- confluent-kafka's ShareConsumer ------------------------------------------------------


def test_a_share_consumer_loses_nothing_acknowledged_when_the_leader_crashes() -> None:
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

    # the locks outlast the test: a record acquired when the leader died comes again only
    # because its successor loaded the share-partition from __share_group_state
    with EmbeddedKafka(
        brokers=3,
        topics={"t": (1, 3)},
        configs={
            "share.auto.offset.reset": "earliest",
            "share.coordinator.state.topic.num.partitions": 3,
            "group.share.record.lock.duration.ms": 60_000,
        },
    ) as kafka:
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
        for i in range(20):
            producer.produce("t", value=f"v{i}".encode(), partition=0)
        assert producer.flush(10) == 0

        def consumer(**extra: Any) -> Any:
            made = ShareConsumer(
                {"bootstrap.servers": kafka.bootstrap_servers, "group.id": "q", **extra}
            )
            made.subscribe(["t"])
            return made

        first = consumer(**{"share.acknowledgement.mode": "explicit"})
        second = None
        held: list[Any] = []
        again: list[tuple[int, int]] = []
        try:
            deadline = time.monotonic() + 20
            while len(held) < 20 and time.monotonic() < deadline:
                held += [m for m in first.poll(0.2) or [] if m.error() is None]
            assert len(held) == 20
            acknowledged = [m.offset() for m in held[::2]]
            for m in held[::2]:
                first.acknowledge(m, AcknowledgeType.ACCEPT)
            first.commit_sync(10)
            # the first consumer goes silent with ten records acquired; the leader dies
            leader = kafka.leader("t", 0)
            assert leader is not None
            kafka.crash_broker(leader)
            second = consumer()
            deadline = time.monotonic() + 20
            while len(again) < 10 and time.monotonic() < deadline:
                again += [
                    (m.offset(), m.delivery_count())
                    for m in second.poll(0.2) or []
                    if m.error() is None
                ]
            for _ in range(3):  # nothing else comes
                again += [(m.offset(), 0) for m in second.poll(0.2) or [] if m.error() is None]
            second.commit_sync(10)
        finally:
            if second is not None:
                second.close()
            first.close()
        # nothing acknowledged came again; every record acquired when the leader died did,
        # its delivery counted
        assert sorted(again) == [(m.offset(), 2) for m in held[1::2]]
        assert sorted(acknowledged + [o for o, _ in again]) == list(range(20))
