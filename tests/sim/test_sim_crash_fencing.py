"""A crash the controller hears of fences the broker: it leaves every ISR at once (Kafka's
KRaft controller, on a broker whose session ended). A broker that stops answering
unheard is fenced only after ``broker_session_timeout_ms``. Virtual time: exact."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster, ProduceRequest
from purgatory.testing import run_virtual

Body = Callable[[Cluster, asyncio.AbstractEventLoop], Awaitable[Any]]

# broker 0 leads t-0 and follows t-1; broker 1 leads t-1; broker 2 follows both
ASSIGNMENT = [[0, 1, 2], [1, 0, 2]]


def _run(body: Body, **options: Any) -> Any:
    async def main() -> Any:
        async with Cluster(3, seed=7, **options) as cluster:
            await cluster.create_topic("t", 2, 3, assignment=ASSIGNMENT)
            # every replica caught up, so the ISR is all three
            await cluster.produce(ProduceRequest("t", 0, [(None, b"w")], acks=-1))
            await cluster.produce(ProduceRequest("t", 1, [(None, b"w")], acks=-1))
            return await body(cluster, asyncio.get_running_loop())

    return run_virtual(main())


def _isrs(c: Cluster) -> list[set[int]]:
    return [set(p.isr) for p in c.partitions()]


def test_a_crashed_broker_leaves_every_isr_at_once() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        assert _isrs(c) == [{0, 1, 2}, {0, 1, 2}]
        await c.crash_broker(0)
        assert _isrs(c) == [{1, 2}, {1, 2}]  # the one it led and the one it followed
        assert [p.leader for p in c.partitions()] == [1, 1]

    _run(body)


def test_acks_all_to_a_partition_the_crashed_broker_followed_does_not_wait() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.crash_broker(0)  # the leader of t-0, a follower of t-1
        start = loop.time()
        r = await c.produce(ProduceRequest("t", 1, [(None, b"a")], acks=-1, timeout_ms=30_000))
        assert r.error is ErrorCode.NONE
        assert loop.time() - start < 0.1  # a replication round trip, not the lag timeout

    _run(body)


def test_a_parked_acks_all_produce_completes_when_its_follower_crashes() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        c.set_replication_latency(2, None)
        c.brokers[2].replica_manager.stop_fetchers()  # broker 2 stops replicating
        parked = loop.create_task(
            c.produce(ProduceRequest("t", 1, [(None, b"a")], acks=-1, timeout_ms=30_000))
        )
        await asyncio.sleep(0.5)
        assert not parked.done()  # waits for broker 2, still in the ISR
        start = loop.time()
        await c.crash_broker(2)
        r = await parked
        assert r.error is ErrorCode.NONE
        assert loop.time() - start < 0.01  # the fencing advanced the HW at once

    _run(body)


def test_the_last_in_sync_replica_stays_in_the_isr() -> None:
    # Kafka keeps the last ISR member (the partition goes offline and waits for it)
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.crash_broker(1)
        await c.crash_broker(2)
        assert _isrs(c) == [{0}, {0}]
        await c.crash_broker(0)
        assert _isrs(c) == [{0}, {0}]
        assert [p.leader for p in c.partitions()] == [None, None]
        await c.restart_broker(0)
        assert [p.leader for p in c.partitions()] == [0, 0]

    _run(body)


def test_a_restarted_broker_rejoins_the_isr_once_caught_up() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.crash_broker(2)
        for i in range(5):
            await c.produce(ProduceRequest("t", 0, [(None, b"%d" % i)], acks=-1))
        await c.restart_broker(2)
        await asyncio.sleep(0.1)
        assert _isrs(c) == [{0, 1, 2}, {0, 1, 2}]

    _run(body)


def test_an_unfenced_crash_keeps_the_broker_until_its_session_times_out() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        start = loop.time()
        await c.crash_broker_unfenced(0)
        # the controller has not heard: broker 0 still leads t-0 and is in both ISRs
        assert [p.leader for p in c.partitions()] == [0, 1]
        assert _isrs(c) == [{0, 1, 2}, {0, 1, 2}]
        r = await c.produce(ProduceRequest("t", 0, [(None, b"a")], acks=1))
        assert r.error is ErrorCode.BROKER_NOT_AVAILABLE  # its leader does not answer
        # acks=all to t-1 waits for broker 0 until it is fenced, 3 s after the crash
        r = await c.produce(ProduceRequest("t", 1, [(None, b"a")], acks=-1, timeout_ms=30_000))
        assert r.error is ErrorCode.NONE
        assert 3.0 <= loop.time() - start < 3.1
        assert [p.leader for p in c.partitions()] == [1, 1]
        assert _isrs(c) == [{1, 2}, {1, 2}]
        assert not c.is_alive(0)

    _run(body, broker_session_timeout_ms=3_000)


def test_an_unfenced_crash_may_be_dropped_by_the_lag_check_first() -> None:
    # replica_lag_time_max_ms below the session timeout: the leader's check drops it
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        start = loop.time()
        await c.crash_broker_unfenced(2)
        r = await c.produce(ProduceRequest("t", 1, [(None, b"a")], acks=-1, timeout_ms=30_000))
        assert r.error is ErrorCode.NONE
        waited = loop.time() - start
        assert 1.0 <= waited < 2.0
        assert c.is_alive(2)  # not fenced yet
        await asyncio.sleep(9)
        assert not c.is_alive(2)

    _run(body, replica_lag_time_max_ms=1_000)


def test_restarting_an_unfenced_broker_fences_it_first() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.crash_broker_unfenced(0)
        await c.restart_broker(0)
        assert c.is_alive(0)
        assert [p.leader for p in c.partitions()] == [1, 1]  # moved when it was fenced
        await asyncio.sleep(0.1)
        assert _isrs(c) == [{0, 1, 2}, {0, 1, 2}]
        r = await c.produce(ProduceRequest("t", 0, [(None, b"a")], acks=-1))
        assert r.error is ErrorCode.NONE
        await asyncio.sleep(20)  # the cancelled session timeout does not fence it again
        assert c.is_alive(0)

    _run(body)


def test_broker_session_timeout_is_checked() -> None:
    with pytest.raises(ValueError, match="broker_session_timeout_ms"):
        Cluster(3, broker_session_timeout_ms=0)
