"""Racks and fetching from followers (KIP-392) over the Kafka protocol: Metadata and
DescribeCluster name each broker's rack at every version that can; with
replica.selector.class = RackAwareReplicaSelector a Fetch v11+ that gives its rack is told
the in-sync follower in it (and gets no records), a follower serves such fetches up to its
high watermark, and sends a consumer back to the leader when the selector would; Fetch
before v11 is never redirected nor served by a follower. Through the handlers at every
version, and over a socket with kio."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio_wire import read_response, round_trip

from purgatory.errors import ErrorCode
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.handlers.describe_cluster import DescribeClusterHandlers
from purgatory.kafka.handlers.partitions import PartitionHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.schemas import build, request_type, versions
from purgatory.sim import ProduceRequest
from purgatory.sim.replica_selector import RACK_AWARE_REPLICA_SELECTOR

RACKS = ["a", "b", "c"]
FETCH_LOW, FETCH_HIGH = versions(ApiKey.FETCH)
META_LOW, META_HIGH = versions(ApiKey.METADATA)
DESCRIBE_LOW, DESCRIBE_HIGH = versions(ApiKey.DESCRIBE_CLUSTER)


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    configs = {"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR}
    async with AsyncEmbeddedKafka(brokers=3, seed=1, racks=RACKS, configs=configs) as kafka:
        # broker 0 (rack a) leads r-0; 1 (b) and 2 (c) follow
        await kafka.cluster.create_topic("r", 1, 3, assignment=[[0, 1, 2]])
        for i in range(3):
            result = await kafka.cluster.produce(ProduceRequest("r", 0, [(None, b"v%d" % i)]))
            assert result.error is ErrorCode.NONE
        await _followers_learn_the_hw(kafka, 3)
        yield kafka


async def _followers_learn_the_hw(kafka: AsyncEmbeddedKafka, hw: int) -> None:
    p = kafka.cluster.partition("r", 0)
    assert p is not None
    for _ in range(200):
        if all(v == hw for v in p.hws.values()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the followers did not learn HW {hw}: {p.hws}")


def _handlers(kafka: AsyncEmbeddedKafka, broker: int) -> PartitionHandlers:
    return PartitionHandlers(kafka.cluster, broker, kafka.addresses, ProtocolStats())


def _fetch_values(kafka: AsyncEmbeddedKafka, rack: str, offset: int = 0) -> dict[str, Any]:
    partition = {
        "partition": 0,
        "fetch_offset": offset,
        "partition_max_bytes": 1 << 20,
        "log_start_offset": -1,
    }
    return {
        "replica_id": -1,
        "max_wait": 0,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "rack_id": rack,
        "topics": [
            {"topic": "r", "topic_id": kafka.cluster.topic_id("r"), "partitions": [partition]}
        ],
    }


async def _fetch(
    kafka: AsyncEmbeddedKafka, broker: int, version: int, rack: str, offset: int = 0
) -> Any:
    request = build(request_type(ApiKey.FETCH, version), _fetch_values(kafka, rack, offset))
    header = RequestHeader(ApiKey.FETCH, version, 1, "c")
    answer = await _handlers(kafka, broker).fetch(header, request)
    [topic] = answer.responses
    [partition] = topic.partitions
    return partition


# -- where the racks show ---------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(META_LOW, META_HIGH + 1))
async def test_metadata_names_each_brokers_rack_from_v1(
    kafka: AsyncEmbeddedKafka, version: int
) -> None:
    request = build(request_type(ApiKey.METADATA, version), {"topics": [{"name": "r"}]})
    answer = _handlers(kafka, 0).metadata(RequestHeader(ApiKey.METADATA, version, 1, "c"), request)
    brokers = sorted(answer.brokers, key=lambda b: b.node_id)
    if version >= 1:
        assert [b.rack for b in brokers] == RACKS
    else:  # v0 has no rack
        assert not hasattr(brokers[0], "rack")


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(DESCRIBE_LOW, DESCRIBE_HIGH + 1))
async def test_describe_cluster_names_each_brokers_rack(
    kafka: AsyncEmbeddedKafka, version: int
) -> None:
    handler = DescribeClusterHandlers(kafka.cluster, kafka.addresses).apis()[
        ApiKey.DESCRIBE_CLUSTER
    ][2]
    request = build(
        request_type(ApiKey.DESCRIBE_CLUSTER, version),
        {"include_cluster_authorized_operations": False},
    )
    answer = handler(RequestHeader(ApiKey.DESCRIBE_CLUSTER, version, 1, "c"), request)
    assert [(b.broker_id, b.rack) for b in answer.brokers] == [(0, "a"), (1, "b"), (2, "c")]


@pytest.mark.asyncio
async def test_without_racks_metadata_and_describe_cluster_say_null() -> None:
    async with AsyncEmbeddedKafka(brokers=2, seed=1) as kafka:
        request = build(request_type(ApiKey.METADATA, META_HIGH), {"topics": None})
        header = RequestHeader(ApiKey.METADATA, META_HIGH, 1, "c")
        answer = _handlers(kafka, 0).metadata(header, request)
        assert [b.rack for b in answer.brokers] == [None, None]


def test_racks_must_match_the_brokers() -> None:
    with pytest.raises(ValueError, match="one rack per broker"):
        AsyncEmbeddedKafka(brokers=3, racks=["a", "b"])
    with pytest.raises(ValueError, match=r"replica\.selector\.class"):
        AsyncEmbeddedKafka(brokers=3, configs={"replica.selector.class": "com.example.Mine"})


# -- the leader's answer ----------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(FETCH_LOW, FETCH_HIGH + 1))
async def test_the_leader_names_the_follower_in_the_consumers_rack_from_v11(
    kafka: AsyncEmbeddedKafka, version: int
) -> None:
    partition = await _fetch(kafka, 0, version, "b")
    assert int(partition.error_code) == 0
    assert partition.high_watermark == 3
    if version >= 11:
        assert partition.preferred_read_replica == 1
        assert not partition.records  # Kafka returns none when it redirects
    else:  # no client metadata before v11: the leader serves, names no replica
        assert not hasattr(partition, "preferred_read_replica")
        assert partition.records


@pytest.mark.asyncio
@pytest.mark.parametrize("rack", ["a", "", "elsewhere"])
async def test_the_leader_serves_its_own_rack_and_consumers_without_one(
    kafka: AsyncEmbeddedKafka, rack: str
) -> None:
    partition = await _fetch(kafka, 0, FETCH_HIGH, rack)
    assert partition.preferred_read_replica == -1
    assert partition.records


@pytest.mark.asyncio
async def test_without_a_selector_the_leader_serves_every_rack() -> None:
    async with AsyncEmbeddedKafka(brokers=3, seed=1, racks=RACKS, topics={"r": (1, 3)}) as kafka:
        partition = await _fetch(kafka, 0, FETCH_HIGH, "b")
        assert partition.preferred_read_replica == -1


# -- the follower's answer --------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(FETCH_LOW, FETCH_HIGH + 1))
async def test_the_follower_serves_fetches_with_client_metadata_only(
    kafka: AsyncEmbeddedKafka, version: int
) -> None:
    partition = await _fetch(kafka, 1, version, "b", offset=1)
    if version >= 11:
        assert int(partition.error_code) == 0
        assert partition.preferred_read_replica == -1
        assert partition.high_watermark == 3
        assert partition.records  # v1 and v2, from the follower's log
    else:
        assert int(partition.error_code) == ErrorCode.NOT_LEADER_OR_FOLLOWER.number


@pytest.mark.asyncio
async def test_a_follower_sends_a_consumer_the_selector_would_not_give_it_to_the_leader(
    kafka: AsyncEmbeddedKafka,
) -> None:
    # a consumer of rack c at broker 1 (rack b): the selector picks broker 2
    partition = await _fetch(kafka, 1, FETCH_HIGH, "c")
    assert partition.preferred_read_replica == 2
    assert not partition.records
    # broker 1 out of the ISR: its own rack's consumer goes back to the leader
    p = kafka.cluster.partition("r", 0)
    assert p is not None
    p.isr.discard(1)
    partition = await _fetch(kafka, 1, FETCH_HIGH, "b")
    assert partition.preferred_read_replica == 0
    assert not partition.records
    partition = await _fetch(kafka, 0, FETCH_HIGH, "b")
    assert partition.preferred_read_replica == -1
    assert partition.records


@pytest.mark.asyncio
async def test_a_fetch_past_the_followers_log_end_is_sent_back_to_the_leader(
    kafka: AsyncEmbeddedKafka,
) -> None:
    kafka.cluster.brokers[1].replica_manager.stop_fetchers()
    await kafka.cluster.produce(ProduceRequest("r", 0, [(None, b"v3")], acks=1))
    # the leader knows broker 1's log ends at 3: it is not preferred for offset 4
    partition = await _fetch(kafka, 0, FETCH_HIGH, "b", offset=4)
    assert partition.preferred_read_replica == -1
    partition = await _fetch(kafka, 1, FETCH_HIGH, "b", offset=4)
    assert partition.preferred_read_replica == 0


@pytest.mark.asyncio
async def test_over_a_socket_the_leader_redirects_and_the_follower_serves(
    kafka: AsyncEmbeddedKafka,
) -> None:
    values = _fetch_values(kafka, "b")
    request = build(request_type(ApiKey.FETCH, FETCH_HIGH), values)
    frame = await round_trip(kafka.addresses[0], request)
    [topic] = read_response(frame, ApiKey.FETCH, FETCH_HIGH).body.responses
    [partition] = topic.partitions
    assert partition.preferred_read_replica == 1
    assert not partition.records
    frame = await round_trip(kafka.addresses[1], request)
    [topic] = read_response(frame, ApiKey.FETCH, FETCH_HIGH).body.responses
    [partition] = topic.partitions
    assert int(partition.error_code) == 0
    assert partition.records
    stats = kafka.front_door.stats
    assert stats.requests_to(0, "FETCH") == 1
    assert stats.requests_to(1, "FETCH") == 1
