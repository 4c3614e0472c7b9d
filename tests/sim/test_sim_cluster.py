"""The Cluster API and each delayed operation, on virtual time (exact and instant)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster, DeleteRecordsRequest, FetchRequest, Latency, ProduceRequest
from purgatory.sim.errors import SimulationError
from purgatory.testing import run_virtual

Body = Callable[[Cluster, asyncio.AbstractEventLoop], Awaitable[Any]]


def _run(body: Body, **options: Any) -> Any:
    async def main() -> Any:
        async with Cluster(3, seed=7, **options) as cluster:
            await cluster.create_topic("t", 2, 3, assignment=[[0, 1, 2], [1, 0, 2]])
            return await body(cluster, asyncio.get_running_loop())

    return run_virtual(main())


def test_acks_all_waits_for_replication_acks_1_does_not() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        c.set_replication_latency(1, Latency(40.0))
        c.set_replication_latency(2, Latency(40.0))
        start = loop.time()
        r = await c.produce(ProduceRequest("t", 0, [(None, b"a")], acks=1))
        assert (r.error, r.base_offset) == (ErrorCode.NONE, 0)
        assert loop.time() == start  # the leader append is enough
        r = await c.produce(ProduceRequest("t", 0, [(None, b"b")], acks=-1, timeout_ms=5000))
        assert (r.error, r.base_offset) == (ErrorCode.NONE, 1)
        assert loop.time() - start >= 0.040  # at least one slowed replication round
        assert c.partition("t", 0).hw >= 2  # type: ignore[union-attr]
        assert c.brokers[0].replica_manager.produce_purgatory.statistics().completed == 1

    _run(body)


def test_produce_times_out_when_followers_are_down_and_isr_has_not_shrunk() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.crash_broker_unfenced(1)
        await c.crash_broker_unfenced(2)
        start = loop.time()
        r = await c.produce(ProduceRequest("t", 0, [(None, b"a")], acks=-1, timeout_ms=300))
        assert r.error is ErrorCode.REQUEST_TIMED_OUT
        assert loop.time() - start >= 0.3
        stats = c.brokers[0].replica_manager.produce_purgatory.statistics()
        assert stats.expired == 1

    _run(body, replica_lag_time_max_ms=10_000)


def test_isr_shrink_lets_produce_complete_without_crashed_follower() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.crash_broker_unfenced(2)
        start = loop.time()
        r = await c.produce(ProduceRequest("t", 0, [(None, b"a")], acks=-1, timeout_ms=5000))
        assert r.error is ErrorCode.NONE
        waited = loop.time() - start
        assert 1.0 <= waited < 5.0  # completed once the ISR shrank, not before
        assert c.partition("t", 0).isr == {0, 1}  # type: ignore[union-attr]

    _run(body, replica_lag_time_max_ms=1_000)


def test_leader_crash_answers_parked_produce_with_not_leader_and_retry_succeeds() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        c.set_replication_latency(1, Latency(1000.0))
        c.set_replication_latency(2, Latency(1000.0))
        await c.produce(ProduceRequest("t", 0, [(None, b"warm")], acks=-1, timeout_ms=5000))
        parked = loop.create_task(
            c.produce(ProduceRequest("t", 0, [(None, b"a")], acks=-1, timeout_ms=5000))
        )
        await asyncio.sleep(0.01)
        await c.crash_broker(0)
        r = await parked
        assert r.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        p = c.partition("t", 0)
        assert p is not None
        assert (p.leader, p.leader_epoch) == (1, 1)
        c.set_replication_latency(2, None)
        r = await c.produce(ProduceRequest("t", 0, [(None, b"a")], acks=-1, timeout_ms=5000))
        assert r.error is ErrorCode.NONE

    _run(body)


def test_fetch_waits_for_min_bytes_and_wakes_on_hw_advance() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        start = loop.time()
        fetch = loop.create_task(c.fetch(FetchRequest("t", 0, 0, min_bytes=1, max_wait_ms=5000)))
        await asyncio.sleep(1.0)
        assert not fetch.done()
        await c.produce(ProduceRequest("t", 0, [(b"k", b"v")], acks=1))
        result = await fetch
        assert result.error is ErrorCode.NONE
        assert [(r.offset, r.key, r.value) for r in result.records] == [(0, b"k", b"v")]
        assert 1.0 <= loop.time() - start < 1.1  # woke on replication, not on timeout

    _run(body)


def test_fetch_expires_with_what_is_there() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.produce(ProduceRequest("t", 0, [(None, b"x")], acks=-1))
        start = loop.time()
        result = await c.fetch(FetchRequest("t", 0, 0, min_bytes=10_000, max_wait_ms=250))
        assert loop.time() - start >= 0.25
        assert result.error is ErrorCode.NONE
        assert len(result.records) == 1
        assert c.brokers[0].replica_manager.fetch_purgatory.statistics().expired >= 1

    _run(body)


def test_fetch_errors_and_out_of_range() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        assert (
            await c.fetch(FetchRequest("nope", 0, 0))
        ).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (
            await c.fetch(FetchRequest("t", 9, 0))
        ).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (await c.fetch(FetchRequest("t", 0, 5))).error is ErrorCode.OFFSET_OUT_OF_RANGE
        parked = loop.create_task(c.fetch(FetchRequest("t", 0, 0, max_wait_ms=5000)))
        await asyncio.sleep(0.01)
        await c.fail_over("t", 0)
        assert (await parked).error is ErrorCode.NOT_LEADER_OR_FOLLOWER

    _run(body)


def test_delete_records_waits_for_every_live_replica() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        for _ in range(5):
            await c.produce(ProduceRequest("t", 0, [(None, b"x")], acks=-1))
        c.set_replication_latency(2, Latency(300.0))
        start = loop.time()
        r = await c.delete_records(DeleteRecordsRequest("t", 0, 3, timeout_ms=5000))
        assert (r.error, r.low_watermark) == (ErrorCode.NONE, 3)
        assert loop.time() - start >= 0.3  # waited for the slow follower's next fetch
        p = c.partition("t", 0)
        assert p is not None
        assert all(log.log_start_offset == 3 for log in p.logs.values())
        assert (await c.fetch(FetchRequest("t", 0, 1))).error is ErrorCode.OFFSET_OUT_OF_RANGE
        beyond = await c.delete_records(DeleteRecordsRequest("t", 0, 99))
        assert beyond.error is ErrorCode.OFFSET_OUT_OF_RANGE

    _run(body)


def test_restarted_follower_truncates_catches_up_and_rejoins_isr() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.crash_broker(2)
        for i in range(20):
            await c.produce(ProduceRequest("t", 0, [(None, b"%d" % i)], acks=-1, timeout_ms=5000))
        p = c.partition("t", 0)
        assert p is not None
        assert 2 not in p.isr
        await c.restart_broker(2)
        await asyncio.sleep(1.0)
        assert 2 in p.isr
        assert p.logs[2].leo == p.leo == 20

    _run(body, replica_lag_time_max_ms=500)


def test_close_answers_parked_requests() -> None:
    async def main() -> tuple[Any, Any]:
        cluster = Cluster(3)
        await cluster.start()
        await cluster.create_topic("t", 1, 3)
        await cluster.crash_broker_unfenced(1)
        await cluster.crash_broker_unfenced(2)
        loop = asyncio.get_running_loop()
        produce = loop.create_task(
            cluster.produce(ProduceRequest("t", 0, [(None, b"a")], timeout_ms=60_000))
        )
        fetch = loop.create_task(cluster.fetch(FetchRequest("t", 0, 0, max_wait_ms=60_000)))
        await asyncio.sleep(0.01)
        await cluster.close()
        return await produce, await fetch

    produce, fetch = run_virtual(main())
    assert produce.error is ErrorCode.BROKER_NOT_AVAILABLE
    assert fetch.error is ErrorCode.BROKER_NOT_AVAILABLE


class _NoWire:
    """Stands for a client's batch: a request that also has records is refused first."""

    buf = bytearray()
    record_count = producer_id = producer_epoch = base_sequence = 0
    transactional = False

    def assign(self, base_offset: int, leader_epoch: int) -> None:
        raise AssertionError("never stored")

    def key_values(self) -> list[tuple[bytes | None, bytes]]:
        raise AssertionError("never read")


def test_bad_arguments_raise_clear_errors() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        with pytest.raises(ValueError, match="acks"):
            await c.produce(ProduceRequest("t", 0, [(None, b"a")], acks=2))
        with pytest.raises(ValueError, match="empty"):
            await c.produce(ProduceRequest("t", 0, []))
        with pytest.raises(TypeError, match="bytes"):
            await c.produce(ProduceRequest("t", 0, [(None, "text")]))  # type: ignore[list-item]
        with pytest.raises(ValueError, match="max_wait_ms"):
            await c.fetch(FetchRequest("t", 0, 0, max_wait_ms=-1))
        with pytest.raises(TypeError, match="offset"):
            await c.fetch(FetchRequest("t", 0, 1.5))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="as_batches"):
            await c.fetch(FetchRequest("t", 0, 0, as_batches=1))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="not both"):
            await c.produce(ProduceRequest("t", 0, [(None, b"a")], wire=_NoWire()))
        with pytest.raises(ValueError, match="TOPIC_ALREADY_EXISTS"):
            await c.create_topic("t", 1, 1)
        with pytest.raises(ValueError, match="INVALID_REPLICATION_FACTOR"):
            await c.create_topic("u", 1, 4)
        with pytest.raises(ValueError, match="no broker"):
            await c.crash_broker(9)
        with pytest.raises(ValueError, match="not a live in-sync"):
            await c.fail_over("t", 0, new_leader=0)

    _run(body)


@pytest.mark.asyncio
async def test_real_loop_smoke() -> None:
    """The same API on asyncio and uvloop in real time."""
    async with Cluster(3) as cluster:
        await cluster.create_topic("t", 1, 3)
        result = await cluster.produce(
            ProduceRequest("t", 0, [(None, b"a")], acks=-1, timeout_ms=5000)
        )
        assert result.error is ErrorCode.NONE
        fetched = await cluster.fetch(FetchRequest("t", 0, 0, max_wait_ms=1000))
        assert [r.value for r in fetched.records] == [b"a"]
        meta = cluster.metadata().to_dict()
        assert meta["topics"][0]["partitions"][0]["high_watermark"] == 1


def test_cancelled_request_abandons_its_operation() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        fetch = loop.create_task(c.fetch(FetchRequest("t", 0, 0, max_wait_ms=60_000)))
        await asyncio.sleep(0.01)
        assert c.brokers[0].replica_manager.fetch_purgatory.num_delayed >= 1
        before = c.brokers[0].replica_manager.fetch_purgatory.statistics().cancelled
        fetch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fetch
        assert c.brokers[0].replica_manager.fetch_purgatory.statistics().cancelled == before + 1

    _run(body)


def test_min_insync_replicas_rejects_acks_all_once_the_isr_is_too_small() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.crash_broker_unfenced(1)
        await c.crash_broker_unfenced(2)
        late = await c.produce(ProduceRequest("t", 0, [(None, b"a")], acks=-1, timeout_ms=5000))
        assert late.error is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND  # ISR shrank meanwhile
        r = await c.produce(ProduceRequest("t", 0, [(None, b"b")], acks=-1, timeout_ms=5000))
        assert r.error is ErrorCode.NOT_ENOUGH_REPLICAS
        assert (
            await c.produce(ProduceRequest("t", 0, [(None, b"c")], acks=1))
        ).error is ErrorCode.NONE

    _run(body, replica_lag_time_max_ms=500, min_insync_replicas=2)


@pytest.mark.asyncio
async def test_refusals_carry_the_kafka_error_code_as_a_value() -> None:
    async with Cluster(brokers=1) as c:
        await c.create_topic("t", 1, 1)
        with pytest.raises(SimulationError) as exists:
            await c.create_topic("t", 1, 1)
        assert exists.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
        assert exists.value.message == "topic 't' exists"
        with pytest.raises(SimulationError) as factor:
            await c.create_topic("u", 1, 2)
        assert factor.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
        with pytest.raises(SimulationError) as acks:
            await c.produce(ProduceRequest("t", 0, [(None, b"v")], acks=2))
        assert acks.value.code is ErrorCode.INVALID_REQUIRED_ACKS
        with pytest.raises(SimulationError) as unknown:
            await c.fail_over("nope", 0)
        assert unknown.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(SimulationError) as nobody:
            await c.fail_over("t", 0)
        assert nobody.value.code is ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        with pytest.raises(SimulationError) as assignment:
            await c.create_topic("v", 1, 1, assignment=[[5]])
        assert assignment.value.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_each_broker_parks_requests_for_the_partitions_it_leads() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        managers = [c.brokers[b].replica_manager for b in range(3)]
        produce = [rm.purgatories["Produce"] for rm in managers]
        assert len({id(p) for rm in managers for p in rm.purgatories.values()}) == 12
        assert [p.labels["broker"] for p in produce] == ["0", "1", "2"]
        c.set_replication_latency(0, Latency(100.0))
        c.set_replication_latency(2, Latency(100.0))
        parked = loop.create_task(  # t-1 is led by broker 1
            c.produce(ProduceRequest("t", 1, [(None, b"a")], acks=-1, timeout_ms=5000))
        )
        await asyncio.sleep(0.01)
        assert [p.num_delayed for p in produce] == [0, 1, 0]
        assert (await parked).error is ErrorCode.NONE
        assert [p.statistics().completed for p in produce] == [0, 1, 0]

    _run(body)


def test_a_crashed_broker_answers_its_own_parked_requests_and_nobody_elses() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        for broker in range(3):
            c.set_replication_latency(broker, Latency(100.0))
        led_by_0, led_by_1 = (
            loop.create_task(
                c.produce(ProduceRequest("t", i, [(None, b"a")], acks=-1, timeout_ms=5000))
            )
            for i in (0, 1)
        )
        await asyncio.sleep(0.01)
        start = loop.time()
        await c.crash_broker(0)
        assert (await led_by_0).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert loop.time() == start  # answered by the crash, not by a timeout
        assert c.brokers[0].replica_manager.purgatories["Produce"].num_delayed == 0
        assert not led_by_1.done()
        assert c.brokers[1].replica_manager.purgatories["Produce"].num_delayed == 1
        # broker 1 keeps waiting for its ISR, which drops broker 0 once it lags too long
        assert (await led_by_1).error is ErrorCode.NONE

    _run(body, replica_lag_time_max_ms=300)


def test_delete_topic_answers_parked_requests_frees_memory_and_allows_the_name_again() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        c.set_replication_latency(1, Latency(50.0))
        c.set_replication_latency(2, Latency(50.0))
        parked = asyncio.ensure_future(c.produce(ProduceRequest("t", 0, [(None, b"x" * 100)])))
        fetch = asyncio.ensure_future(c.fetch(FetchRequest("t", 1, 0, max_wait_ms=10_000)))
        await asyncio.sleep(0.001)
        assert not parked.done()
        assert c.log_space.used > 0
        await c.delete_topic("t")
        assert (await parked).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (await fetch).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert "t" not in c.topics
        assert c.log_space.used == 0
        later = await c.produce(ProduceRequest("t", 0, [(None, b"y")]))
        assert later.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(SimulationError) as gone:
            await c.delete_topic("t")
        assert gone.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await c.create_topic("t", 1, 3)  # the name is free again, and the log empty
        again = await c.produce(ProduceRequest("t", 0, [(None, b"z")]))
        assert (again.error, again.base_offset) == (ErrorCode.NONE, 0)
        await asyncio.sleep(1)  # replication of the new topic is not disturbed
        assert c.partition("t", 0).hw == 1

    _run(body)
