"""Every request decoder, fed garbage bodies, raises DecodeError or answers: nothing else."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from purgatory.kafka import apis, coordination
from purgatory.kafka.apis import BrokerApis
from purgatory.kafka.codec import DecodeError, Reader
from purgatory.kafka.coordination import GroupOffsets
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.sim import Cluster


@pytest.mark.asyncio
async def test_garbage_bodies_raise_only_decode_error() -> None:
    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=3)
        broker = BrokerApis(cluster, 0, {0: ("h", 1), 1: ("h", 2), 2: ("h", 3)})
        groups = GroupOffsets()
        handlers = {
            ApiKey.METADATA: broker.metadata,
            ApiKey.PRODUCE: broker.produce,
            ApiKey.FETCH: broker.fetch,
            ApiKey.LIST_OFFSETS: broker.list_offsets,
            ApiKey.OFFSET_COMMIT: groups.offset_commit,
            ApiKey.OFFSET_FETCH: groups.offset_fetch,
            ApiKey.INIT_PRODUCER_ID: groups.init_producer_id,
        }
        versions = {**apis.VERSIONS, **coordination.VERSIONS}

        @settings(
            max_examples=400,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture],
        )
        @given(st.sampled_from(sorted(handlers)), st.data(), st.binary(max_size=120))
        def check(key: ApiKey, data: st.DataObject, body: bytes) -> None:
            low, high = versions[key]
            version = data.draw(st.integers(low, high))
            try:
                answer = handlers[key](RequestHeader(key, version, 1, "c"), Reader(body))
            except DecodeError:
                return
            if inspect.iscoroutine(answer):
                answer.close()  # decoding is done; what it would park on is not the point

        check()


@pytest.mark.asyncio
async def test_a_negative_fetch_offset_is_out_of_range_not_clamped() -> None:
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        await cluster.produce("t", 0, [(None, b"x")])
        broker = BrokerApis(cluster, 0, {0: ("h", 1)})
        request = FetchRequest[4](
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1000,
            isolation_level=0,
            topics=[("t", [(0, -1, 1000)])],
        )
        body = request.encode()
        answer = await broker.fetch(RequestHeader(ApiKey.FETCH, 4, 1, "c"), Reader(body))
    [topic] = FetchResponse[4].decode(bytes(answer)).responses
    [partition] = topic.partitions
    assert partition.error_code == 1  # OFFSET_OUT_OF_RANGE


@pytest.mark.asyncio
async def test_fetch_max_bytes_limits_the_whole_response() -> None:
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    from purgatory.kafka.records import split_batches

    async with Cluster(brokers=1, seed=1) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=1)
        for index in (0, 1):
            for _ in range(10):  # one batch each: reads are limited batch by batch
                await cluster.produce("t", index, [(None, b"v" * 100)])
        broker = BrokerApis(cluster, 0, {0: ("h", 1)})
        request = FetchRequest[4](
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=500,
            isolation_level=0,
            topics=[("t", [(0, 0, 100_000), (1, 0, 100_000)])],
        )
        answer = await broker.fetch(
            RequestHeader(ApiKey.FETCH, 4, 1, "c"), Reader(request.encode())
        )
    [topic] = FetchResponse[4].decode(bytes(answer)).responses
    counts = [
        sum(b.record_count for b in split_batches(p.records)) if p.records else 0
        for p in topic.partitions
    ]
    assert [p.error_code for p in topic.partitions] == [0, 0]
    assert [p.high_watermark for p in topic.partitions] == [10, 10]
    assert counts == [4, 0]  # 4 x 108 bytes fit in 500; nothing is left for partition 1
