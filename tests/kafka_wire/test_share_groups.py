"""Share groups (KIP-932): ShareGroupHeartbeat's assignment, epochs and the one group map
(ListGroups, DescribeGroups, commits, DeleteGroups), ShareGroupDescribe; ShareFetch and
ShareAcknowledge over the wire with kio: share sessions and their errors, acquisition,
ACCEPT/RELEASE/REJECT, delivery counts, expired locks, the delivery limit, long polls
woken by a produce; then confluent-kafka's ShareConsumer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio_wire import Wire

from purgatory.errors import ErrorCode
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.sim.messages import ProduceRequest

ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(
        brokers=1,
        seed=1,
        topics={"t": (2, 1), "u": (1, 1)},
        configs={"share.auto.offset.reset": "earliest", "group.share.delivery.count.limit": 3},
    ) as k:
        yield k


@pytest_asyncio.fixture
async def wire(kafka: AsyncEmbeddedKafka) -> AsyncIterator[Wire]:
    reader, writer = await asyncio.open_connection(*kafka.front_door.addresses[0])
    try:
        yield Wire(reader, writer)
    finally:
        writer.close()
        await writer.wait_closed()


async def _beat(wire: Wire, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    return await wire.kio(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        group_id="g",
        member_id=member,
        member_epoch=epoch,
        subscribed_topic_names=topics,
    )


def _assigned(answer: Any, kafka: AsyncEmbeddedKafka) -> set[tuple[str, int]]:
    cluster = kafka.front_door.cluster
    return {
        (cluster.topic_name(tp.topic_id) or "?", p)
        for tp in answer.assignment.topic_partitions
        for p in tp.partitions
    }


@pytest.mark.asyncio
async def test_members_share_partitions_and_are_fenced_by_epoch(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    a = await _beat(wire, "a", 0, ["t"])
    assert a.error_code == 0
    assert a.member_epoch == 1
    assert _assigned(a, kafka) == {("t", 0), ("t", 1)}
    b = await _beat(wire, "b", 0, ["t"])
    c = await _beat(wire, "c", 0, ["t"])
    a = await _beat(wire, "a", 1)
    # more members than partitions: every member one partition, a partition to several
    owned = [_assigned(x, kafka) for x in (a, b, c)]
    assert all(len(o) == 1 for o in owned)
    assert set().union(*owned) == {("t", 0), ("t", 1)}
    assert (await _beat(wire, "a", 1)).error_code == ErrorCode.FENCED_MEMBER_EPOCH.number
    assert (await _beat(wire, "x", 5)).error_code == ErrorCode.UNKNOWN_MEMBER_ID.number
    assert (await _beat(wire, "", 0, ["t"])).error_code == ErrorCode.INVALID_REQUEST.number
    assert (await _beat(wire, "d", 0)).error_code == ErrorCode.INVALID_REQUEST.number
    described = await wire.kio(ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=["g", "nope"])
    group, missing = described.groups
    assert group.group_state == "Stable"
    assert group.assignor_name == "simple"
    assert sorted(m.member_id for m in group.members) == ["a", "b", "c"]
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND.number
    left = await _beat(wire, "c", -1)
    assert left.error_code == 0
    assert left.member_epoch == -1


@pytest.mark.asyncio
async def test_a_share_group_is_one_of_the_group_map(kafka: AsyncEmbeddedKafka, wire: Wire) -> None:
    await _beat(wire, "a", 0, ["t"])
    listed = await wire.kio(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["share"])
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [
        ("g", "share", "Stable")
    ]
    none = await wire.kio(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["consumer"])
    assert none.groups == ()
    described = await wire.kio(ApiKey.DESCRIBE_GROUPS, 6, groups=["g"])
    assert described.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND.number
    commit = await wire.kio(
        ApiKey.OFFSET_COMMIT,
        9,
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
    )
    assert commit.topics[0].partitions[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND.number
    joined = await wire.kio(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        group_id="g",
        member_id="m",
        member_epoch=0,
        rebalance_timeout=5000,
        subscribed_topic_names=["t"],
        topic_partitions=[],
    )
    assert joined.error_code == ErrorCode.GROUP_ID_NOT_FOUND.number
    deleted = await wire.kio(ApiKey.DELETE_GROUPS, 2, groups_names=["g"])
    assert deleted.results[0].error_code == ErrorCode.NON_EMPTY_GROUP.number
    await _beat(wire, "a", -1)
    deleted = await wire.kio(ApiKey.DELETE_GROUPS, 2, groups_names=["g"])
    assert deleted.results[0].error_code == 0
    assert "g" not in kafka.front_door.coordinator.groups


async def _set_group_configs(wire: Wire, configs: dict[str, str]) -> None:
    """Group g's own configs SET (IncrementalAlterConfigs on its GROUP resource)."""
    altered = await wire.kio(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[
            {
                "resource_type": 32,  # GROUP
                "resource_name": "g",
                "configs": [
                    {"name": name, "config_operation": 0, "value": value}
                    for name, value in configs.items()
                ],
            }
        ],
        validate_only=False,
    )
    assert [int(r.error_code) for r in altered.responses] == [0]


async def _produce(kafka: AsyncEmbeddedKafka, partition: int, n: int) -> None:
    await kafka.cluster.produce(
        ProduceRequest("t", partition, [(None, f"v{i}".encode()) for i in range(n)])
    )


async def _fetch(
    wire: Wire,
    kafka: AsyncEmbeddedKafka,
    member: str,
    epoch: int,
    *,
    acks: list[tuple[int, int, int]] = (),  # type: ignore[assignment]
    wait_ms: int = 0,
    version: int = 1,
    partition: int = 0,
) -> Any:
    topic_id = kafka.front_door.cluster.topic_id("t")
    return await wire.kio(
        ApiKey.SHARE_FETCH,
        version,
        group_id="g",
        member_id=member,
        share_session_epoch=epoch,
        max_wait=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=100,
        batch_size=100,
        topics=[
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": partition,
                        "acknowledgement_batches": [
                            {"first_offset": f, "last_offset": last, "acknowledge_types": [t]}
                            for f, last, t in acks
                        ],
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
    )


def _acquired(answer: Any) -> list[tuple[int, int, int]]:
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in answer.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def _ack_errors(answer: Any) -> list[int]:
    return [int(p.acknowledge_error_code) for t in answer.responses for p in t.partitions]


@pytest.mark.asyncio
async def test_records_are_acquired_acknowledged_released_and_redelivered(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    await _beat(wire, "a", 0, ["t"])
    await _produce(kafka, 0, 4)
    missing = await _fetch(wire, kafka, "a", 3)
    assert missing.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND.number
    first = await _fetch(wire, kafka, "a", 0)
    assert first.error_code == 0
    assert first.acquisition_lock_timeout.total_seconds() == 30
    assert _acquired(first) == [(0, 3, 1)]
    assert first.responses[0].partitions[0].records  # the batch itself
    bad = await _fetch(wire, kafka, "a", 7)
    assert bad.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH.number
    # accept 0, release 1, reject 2; 3 stays acquired: only 1 comes again, delivery 2
    topic_id = kafka.front_door.cluster.topic_id("t")
    acked = await wire.kio(
        ApiKey.SHARE_ACKNOWLEDGE,
        1,
        group_id="g",
        member_id="a",
        share_session_epoch=1,
        topics=[
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": 0,
                        "acknowledgement_batches": [
                            {"first_offset": 0, "last_offset": 2,
                             "acknowledge_types": [ACCEPT, RELEASE, REJECT]},
                        ],
                    }
                ],
            }
        ],
    )  # fmt: skip
    assert [int(p.error_code) for t in acked.responses for p in t.partitions] == [0]
    again = await _fetch(wire, kafka, "a", 2)
    assert _acquired(again) == [(1, 1, 2)]
    # acknowledging what it does not hold (0 was accepted) is INVALID_RECORD_STATE
    wrong = await _fetch(wire, kafka, "a", 3, acks=[(0, 0, ACCEPT)])
    assert _ack_errors(wrong) == [ErrorCode.INVALID_RECORD_STATE.number]
    # the lock expires: 1 and 3 are redelivered, delivery counts kept and counted on
    assert kafka.expire_share_locks() == 2
    redelivered = await _fetch(wire, kafka, "a", 4)
    assert _acquired(redelivered) == [(1, 1, 3), (3, 3, 2)]
    sp = kafka.front_door.shares.partitions[("g", "t", 0)]
    assert sp.start == 1
    assert sp.end == 4
    # 1 was delivered 3 times (the limit): expired again, it is archived, 3 comes back
    kafka.expire_share_locks()
    last = await _fetch(wire, kafka, "a", 5)
    assert _acquired(last) == [(3, 3, 3)]
    await _fetch(wire, kafka, "a", 6, acks=[(3, 3, ACCEPT)])
    assert sp.start == 4
    assert not sp.records


@pytest.mark.asyncio
async def test_a_long_poll_parks_and_a_produce_completes_it(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    await _beat(wire, "a", 0, ["t"])
    assert _acquired(await _fetch(wire, kafka, "a", 0)) == []
    purgatory = kafka.front_door.purgatories["ShareFetch"]
    assert purgatory.labels == {"broker": "all"}
    parked = asyncio.ensure_future(_fetch(wire, kafka, "a", 1, wait_ms=60_000))
    for _ in range(200):
        if purgatory.num_delayed:
            break
        await asyncio.sleep(0)
    assert purgatory.num_delayed == 1
    assert not parked.done()
    await _produce(kafka, 0, 2)
    answer = await asyncio.wait_for(parked, 10)
    assert _acquired(answer) == [(0, 1, 1)]
    # a released record wakes another member's long poll
    reader, writer = await asyncio.open_connection(*kafka.front_door.addresses[0])
    other = Wire(reader, writer)
    try:
        await _beat(other, "b", 0, ["t"])
        assert _acquired(await _fetch(other, kafka, "b", 0)) == []
        waiting = asyncio.ensure_future(_fetch(other, kafka, "b", 1, wait_ms=60_000))
        for _ in range(200):
            if purgatory.num_delayed:
                break
            await asyncio.sleep(0)
        assert not waiting.done()
        await _fetch(wire, kafka, "a", 2, acks=[(0, 1, RELEASE)])
        assert _acquired(await asyncio.wait_for(waiting, 10)) == [(0, 1, 2)]
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.mark.asyncio
async def test_a_closed_session_releases_its_records(kafka: AsyncEmbeddedKafka, wire: Wire) -> None:
    await _beat(wire, "a", 0, ["t"])
    await _produce(kafka, 0, 3)
    assert _acquired(await _fetch(wire, kafka, "a", 0)) == [(0, 2, 1)]
    closing = await wire.kio(
        ApiKey.SHARE_ACKNOWLEDGE,
        2,
        group_id="g",
        member_id="a",
        share_session_epoch=-1,
        topics=[],
    )
    assert closing.error_code == 0
    assert (0, "g", "a") not in kafka.front_door.shares.sessions
    opened = await wire.kio(
        ApiKey.SHARE_ACKNOWLEDGE, 1, group_id="g", member_id="a", share_session_epoch=0, topics=[]
    )
    assert opened.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH.number
    assert _acquired(await _fetch(wire, kafka, "a", 0, version=2)) == [(0, 2, 2)]


# -- confluent-kafka's ShareConsumer -------------------------------------------------------


def _share_consumer(kafka: EmbeddedKafka, **extra: Any) -> Any:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": "q", **extra}
    )
    consumer.subscribe(["t"])
    return consumer


def _produce_sync(kafka: EmbeddedKafka, n: int, partitions: int = 2) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for i in range(n):
        producer.produce("t", value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(10) == 0


def _poll(consumer: Any) -> list[Any]:
    got = consumer.poll(0.2)
    return [] if got is None else [m for m in got if m.error() is None]


def test_three_share_consumers_get_every_record_exactly_once() -> None:
    with EmbeddedKafka(
        brokers=1, topics={"t": 2}, configs={"share.auto.offset.reset": "earliest"}
    ) as kafka:
        _produce_sync(kafka, 30)
        consumers = [_share_consumer(kafka) for _ in range(3)]
        seen: list[tuple[int, int]] = []
        try:
            deadline = time.monotonic() + 30
            while len(seen) < 30 and time.monotonic() < deadline:
                for consumer in consumers:
                    seen += [(m.partition(), m.offset()) for m in _poll(consumer)]
        finally:
            for consumer in consumers:
                # librdkafka 2.16's close() sends its last ShareAcknowledge without the
                # implicit acceptance of the last poll's records: commit it first
                consumer.commit_sync(10)
                consumer.close()
        assert sorted(seen) == sorted({(i % 2, i // 2) for i in range(30)})
        shares = kafka._async.front_door.shares
        assert all(not sp.records and sp.start == 15 for sp in shares.partitions.values())


def test_a_killed_share_consumers_records_are_redelivered_and_a_rejected_one_never() -> None:
    from confluent_kafka import AcknowledgeType

    # one partition: both members are assigned it (the first still heartbeats: its
    # librdkafka thread runs on, only the application stopped polling)
    with EmbeddedKafka(
        brokers=1,
        topics={"t": 1},
        configs={
            "share.auto.offset.reset": "earliest",
            "group.share.record.lock.duration.ms": 1_000,
        },
    ) as kafka:
        _produce_sync(kafka, 4, partitions=1)
        first = _share_consumer(kafka, **{"share.acknowledgement.mode": "explicit"})
        held: list[Any] = []
        deadline = time.monotonic() + 20
        while len(held) < 4 and time.monotonic() < deadline:
            held += _poll(first)
        assert len(held) == 4
        rejected = held[0]
        first.acknowledge(rejected, AcknowledgeType.REJECT)
        first.commit_sync()
        # the first consumer goes silent with three records in flight (killed: not closed)
        second = _share_consumer(kafka)
        again: list[Any] = []
        try:
            deadline = time.monotonic() + 20
            while len(again) < 3 and time.monotonic() < deadline:
                again += _poll(second)
            for _ in range(5):  # nothing else comes: the rejected record is archived
                again += _poll(second)
        finally:
            second.close()
            first.close()
        key = (rejected.partition(), rejected.offset())
        assert sorted((m.partition(), m.offset()) for m in again) == sorted(
            (m.partition(), m.offset()) for m in held if (m.partition(), m.offset()) != key
        )
        assert {m.delivery_count() for m in again} == {2}


@pytest.mark.asyncio
async def test_a_share_groups_own_configs_decide_where_it_starts_and_its_delivery_limit(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    # the broker says earliest and 3 deliveries; group g's own configs say latest and 2
    await _set_group_configs(
        wire, {"share.auto.offset.reset": "latest", "share.delivery.count.limit": "2"}
    )
    await _produce(kafka, 0, 4)  # before the group reads: not for it (latest)
    await _beat(wire, "a", 0, ["t"])
    first = await _fetch(wire, kafka, "a", 0)
    assert _acquired(first) == []
    await _produce(kafka, 0, 1)
    assert _acquired(await _fetch(wire, kafka, "a", 1)) == [(4, 4, 1)]
    released = await _fetch(wire, kafka, "a", 2, acks=[(4, 4, 2)])  # RELEASE
    assert _acquired(released) == [(4, 4, 2)]  # delivered again: its second time
    gone = await _fetch(wire, kafka, "a", 3, acks=[(4, 4, 2)])
    assert _acquired(gone) == []  # the group's limit (2) archived it; the broker's is 3


# -- the admin's offsets: DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets


async def _offsets(wire: Wire, version: int, topics: list[dict[str, Any]] | None) -> Any:
    answer = await wire.kio(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version, groups=[{"group_id": "g", "topics": topics}]
    )
    assert answer.groups[0].error_code == 0
    return answer.groups[0]


def _starts(group: Any) -> dict[tuple[str, int], tuple[int, int]]:
    return {
        (t.topic_name, p.partition_index): (p.start_offset, p.lag)
        for t in group.topics
        for p in t.partitions
    }


@pytest.mark.asyncio
async def test_describe_share_group_offsets_after_acknowledgements(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    await _beat(wire, "a", 0, ["t"])
    await _produce(kafka, 0, 5)
    assert _acquired(await _fetch(wire, kafka, "a", 0)) == [(0, 4, 1)]
    acked = await _fetch(wire, kafka, "a", 1, acks=[(0, 2, ACCEPT)])
    assert _ack_errors(acked) == [0]
    # every partition the group has state for: t-0 starts at 3, 3 and 4 still in flight
    group = await _offsets(wire, 1, None)
    assert _starts(group) == {("t", 0): (3, 2)}
    assert group.topics[0].topic_id == kafka.front_door.cluster.topic_id("t")
    assert group.topics[0].partitions[0].leader_epoch == 0
    await _produce(kafka, 0, 4)  # not yet looked at: in the lag
    asked = [{"topic_name": "t", "partitions": [0, 1]}, {"topic_name": "nope", "partitions": [0]}]
    group = await _offsets(wire, 1, asked)
    assert _starts(group) == {("t", 0): (3, 6), ("t", 1): (-1, -1), ("nope", 0): (-1, -1)}
    assert group.topics[1].topic_id is None
    old = await _offsets(wire, 0, asked)  # v0: no lag
    assert [p.start_offset for t in old.topics for p in t.partitions] == [3, -1, -1]
    # Kafka's coordinator reads the share state without looking the group up
    other = await wire.kio(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        1,
        groups=[{"group_id": "x", "topics": None}, {"group_id": "x", "topics": asked[:1]}],
    )
    assert [g.error_code for g in other.groups] == [0, 0]
    assert other.groups[0].topics == ()
    assert _starts(other.groups[1]) == {("t", 0): (-1, -1), ("t", 1): (-1, -1)}


async def _alter(wire: Wire, group: str, topics: list[dict[str, Any]]) -> Any:
    return await wire.kio(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, group_id=group, topics=topics)


@pytest.mark.asyncio
async def test_alter_share_group_offsets_in_an_empty_group_then_fetch_from_the_new_start(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    await _beat(wire, "a", 0, ["t"])
    await _produce(kafka, 0, 5)
    assert _acquired(await _fetch(wire, kafka, "a", 0)) == [(0, 4, 1)]
    t0 = [{"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 1}]}]
    refused = await _alter(wire, "g", t0)
    assert refused.error_code == ErrorCode.NON_EMPTY_GROUP.number
    assert refused.responses == ()
    await _beat(wire, "a", -1)  # the group is empty; a's records stay acquired
    missing = await _alter(wire, "x", t0)
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND.number
    altered = await _alter(
        wire,
        "g",
        [
            {
                "topic_name": "t",
                "partitions": [
                    {"partition_index": 0, "start_offset": 1},
                    {"partition_index": 5, "start_offset": 0},
                ],
            },
            {"topic_name": "nope", "partitions": [{"partition_index": 0, "start_offset": 0}]},
        ],
    )
    assert altered.error_code == 0
    assert [
        (t.topic_name, p.partition_index, p.error_code)
        for t in altered.responses
        for p in t.partitions
    ] == [
        ("t", 0, 0),
        ("t", 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.number),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.number),
    ]
    assert altered.responses[0].topic_id == kafka.front_door.cluster.topic_id("t")
    # what a held is dropped: the group starts at 1, offsets 1-4 never delivered
    assert _starts(await _offsets(wire, 1, None)) == {("t", 0): (1, 4)}
    await _beat(wire, "b", 0, ["t"])
    assert _acquired(await _fetch(wire, kafka, "b", 0)) == [(1, 4, 1)]


@pytest.mark.asyncio
async def test_delete_share_group_offsets_then_fetch_as_auto_offset_reset_says(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    await _beat(wire, "a", 0, ["t"])
    await _produce(kafka, 0, 3)
    assert _acquired(await _fetch(wire, kafka, "a", 0)) == [(0, 2, 1)]
    await _fetch(wire, kafka, "a", 1, acks=[(0, 2, ACCEPT)])
    topics = [{"topic_name": "t"}, {"topic_name": "u"}, {"topic_name": "nope"}]
    refused = await wire.kio(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, group_id="g", topics=topics)
    assert refused.error_code == ErrorCode.NON_EMPTY_GROUP.number
    await _beat(wire, "a", -1)
    deleted = await wire.kio(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, group_id="g", topics=topics)
    assert deleted.error_code == 0
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        ("t", 0),
        ("u", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.number),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.number),
    ]
    assert deleted.responses[0].topic_id == kafka.front_door.cluster.topic_id("t")
    assert deleted.responses[1].error_message == "There is no offset information to delete."
    assert (await _offsets(wire, 1, None)).topics == ()
    # share.auto.offset.reset=earliest: everything again, as new
    await _beat(wire, "b", 0, ["t"])
    assert _acquired(await _fetch(wire, kafka, "b", 0)) == [(0, 2, 1)]
    for group, message in (("x", "Group x not found."), ("c", "Group c is not a share group.")):
        if group == "c":
            await wire.kio(
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                0,
                group_id="c",
                member_id="m",
                member_epoch=0,
                rebalance_timeout=5000,
                subscribed_topic_names=["t"],
                topic_partitions=[],
            )
        answer = await wire.kio(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, group_id=group, topics=topics)
        assert answer.error_code == ErrorCode.GROUP_ID_NOT_FOUND.number
        assert answer.error_message == message
        assert answer.responses == ()


@pytest.mark.asyncio
@pytest.mark.parametrize("consecutive_ports", [False, True])
async def test_share_locks_expire_however_the_listeners_were_started(
    consecutive_ports: bool,
) -> None:
    # `purgatory serve --kafka-port 0` starts its listeners on consecutive free ports; that
    # path once left the share locks' timer (and offset expiry) unstarted: a lock never
    # expired, and a record a silent member held was never redelivered
    from purgatory.kafka.broker_configs import BrokerConfigs
    from purgatory.kafka.coordinator.share_records import RecordState
    from purgatory.kafka.front_door import KafkaFrontDoor
    from purgatory.service.cluster import new_cluster

    cluster = await new_cluster(1)
    await cluster.create_topic("t", 1, 1)
    configs = {"group.share.record.lock.duration.ms": 1000, "share.auto.offset.reset": "earliest"}
    door = KafkaFrontDoor(cluster, "127.0.0.1", 0, configs=BrokerConfigs(configs))
    await door.start(consecutive_ports=consecutive_ports)
    try:
        await cluster.produce(ProduceRequest("t", 0, [(None, b"r")]))
        door.shares.acquire("g", "m", [("t", 0)], 10)
        record = door.shares.partitions[("g", "t", 0)].records[0]
        assert record.state is RecordState.ACQUIRED
        # the lock runs on the loop's clock, which the listeners' sockets need real: polled,
        # bounded (its one second, with room)
        async with asyncio.timeout(5):
            while record.state is RecordState.ACQUIRED:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert record.state is RecordState.AVAILABLE
    finally:
        await door.close()
        await cluster.close()


@pytest.mark.asyncio
async def test_the_record_locks_cap_cuts_a_batch(kafka: AsyncEmbeddedKafka, wire: Wire) -> None:
    await _set_group_configs(wire, {"share.partition.max.record.locks": "100"})
    await _produce(kafka, 0, 150)  # one batch of 150
    await _beat(wire, "a", 0, ["t"])
    first = await _fetch(wire, kafka, "a", 0)
    assert _acquired(first) == [(0, 99, 1)]  # at most 100 in flight, though the batch has 150
    rest = await _fetch(wire, kafka, "a", 1, acks=[(0, 99, 1)])  # ACCEPT the first 100
    assert _acquired(rest) == [(100, 149, 1)]


@pytest.mark.asyncio
async def test_a_topic_made_again_under_its_name_starts_its_share_state_afresh(
    kafka: AsyncEmbeddedKafka, wire: Wire
) -> None:
    await _produce(kafka, 0, 2)
    await _beat(wire, "a", 0, ["t"])
    assert _acquired(await _fetch(wire, kafka, "a", 0)) == [(0, 1, 1)]
    released = await _fetch(wire, kafka, "a", 1, acks=[(0, 1, 2)])  # RELEASE: count 2 next
    assert _acquired(released) == [(0, 1, 2)]
    old_id = kafka.front_door.cluster.topic_id("t")
    await kafka.delete_topic("t")
    await kafka.create_topic("t", 2, 1)
    await _produce(kafka, 0, 2)
    # the session named the old topic: it is told so, and acquires nothing of the new one
    stale = await wire.kio(
        ApiKey.SHARE_FETCH, 1, group_id="g", member_id="a", share_session_epoch=2,
        max_wait=0, min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
        topics=[], forgotten_topics_data=[],
    )  # fmt: skip
    assert [
        (t.topic_id, int(p.error_code), len(p.acquired_records))
        for t in stale.responses
        for p in t.partitions
    ] == [(old_id, ErrorCode.UNKNOWN_TOPIC_ID.number, 0)]
    # the new topic's offsets 0-1 are new records: delivered for the first time
    again = await _fetch(wire, kafka, "a", 3)  # the new topic id, in the same session
    assert _acquired(again) == [(0, 1, 1)]


@pytest.mark.asyncio
async def test_each_broker_keeps_its_own_share_session_of_a_member() -> None:
    """A member fetching from two leaders has a session with each, each with its own epochs
    (Kafka's ShareSessionCache is per broker): opening one with the second broker neither
    moves the first's epoch nor releases what the member holds through the first."""
    async with AsyncEmbeddedKafka(
        brokers=2,
        seed=1,
        topics={"t": (2, 1)},
        configs={"share.auto.offset.reset": "earliest"},
    ) as kafka:
        leaders = [kafka.leader("t", p) for p in (0, 1)]
        assert sorted(b for b in leaders if b is not None) == [0, 1]
        await _produce(kafka, 0, 2)
        await _produce(kafka, 1, 2)
        wires: dict[int, Wire] = {}
        try:
            for broker in (0, 1):
                reader, writer = await asyncio.open_connection(*kafka.front_door.addresses[broker])
                wires[broker] = Wire(reader, writer)
            await _beat(wires[0], "a", 0, ["t"])

            async def fetch(broker: int, epoch: int, member: str = "a") -> Any:
                partition = leaders.index(broker)
                answer = await _fetch(wires[broker], kafka, member, epoch, partition=partition)
                assert answer.error_code == 0, (broker, epoch, answer.error_code)
                return answer

            assert _acquired(await fetch(0, 0)) == [(0, 1, 1)]
            assert _acquired(await fetch(1, 0)) == [(0, 1, 1)]
            await fetch(0, 1)
            await fetch(1, 1)
            await fetch(0, 2)
            # what "a" acquired through broker 0 is still its own: "b" gets nothing there
            await _beat(wires[0], "b", 0, ["t"])
            assert _acquired(await fetch(0, 0, member="b")) == []
            assert {(b, g, m) for b, g, m in kafka.front_door.shares.sessions} == {
                (0, "g", "a"),
                (1, "g", "a"),
                (0, "g", "b"),
            }
        finally:
            for w in wires.values():
                w.writer.close()
