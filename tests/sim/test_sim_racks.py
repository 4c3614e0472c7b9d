"""Racks and fetching from followers (KIP-392) in the simulated cluster: rack-aware
replica placement, Kafka's RackAwareReplicaSelector on the leader (in-sync replicas only,
the consumer's rack, the leader first, the highest log end offset), and followers serving
consumers up to the high watermark they learn. Virtual time: exact."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster, FetchRequest, ProduceRequest
from purgatory.sim.partition import Partition
from purgatory.sim.replica_selector import RACK_AWARE_REPLICA_SELECTOR, select_read_replica
from purgatory.testing import run_virtual

Body = Callable[[Cluster, asyncio.AbstractEventLoop], Awaitable[Any]]
RACKS = ["a", "b", "c"]


def _run(body: Body, *, selector: bool = True, **options: Any) -> Any:
    async def main() -> Any:
        options.setdefault("racks", RACKS)
        if selector:
            options["replica_selector_class"] = RACK_AWARE_REPLICA_SELECTOR
        async with Cluster(3, seed=7, **options) as cluster:
            # broker 0 (rack a) leads, 1 (b) and 2 (c) follow
            await cluster.create_topic("t", 1, 3, assignment=[[0, 1, 2]])
            for i in range(4):
                r = await cluster.produce(ProduceRequest("t", 0, [(None, b"%d" % i)], acks=-1))
                assert r.error is ErrorCode.NONE
            await asyncio.sleep(1.0)  # the followers learn the HW in their next fetch
            return await body(cluster, asyncio.get_running_loop())

    return run_virtual(main())


def _fetch(offset: int = 0, rack: str | None = "b", wait: int = 0) -> FetchRequest:
    return FetchRequest("t", 0, offset, max_wait_ms=wait, client_rack=rack)


# -- placement and metadata -----------------------------------------------------------------


def test_replicas_are_placed_round_robin_across_racks() -> None:
    async def main() -> list[tuple[int, ...]]:
        async with Cluster(6, racks=["a", "a", "b", "b", "c", "c"]) as cluster:
            await cluster.create_topic("t", 6, 3)
            await cluster.create_partitions("t", 9)
            racks = cluster.racks
            for p in cluster.partitions():
                assert len({racks[b] for b in p.replicas}) == 3, p.replicas
            return [p.replicas for p in cluster.partitions()]

    replicas = run_virtual(main())
    assert replicas[0] == (0, 2, 4)  # a, b, c; then the next broker of each rack
    assert sorted(r[0] for r in replicas[:6]) == [0, 1, 2, 3, 4, 5]  # leaders spread


def test_without_racks_placement_is_by_broker_id_as_before() -> None:
    async def main() -> list[tuple[int, ...]]:
        async with Cluster(3) as cluster:
            await cluster.create_topic("t", 3, 2)
            assert cluster.racks == {0: None, 1: None, 2: None}
            assert [b.rack for b in cluster.metadata().brokers] == [None, None, None]
            return [p.replicas for p in cluster.partitions()]

    assert run_virtual(main()) == [(0, 1), (1, 2), (2, 0)]


def test_metadata_shows_each_brokers_rack() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        assert [(b.broker_id, b.rack) for b in c.metadata().brokers] == [
            (0, "a"),
            (1, "b"),
            (2, "c"),
        ]
        assert c.replica_selector_class == RACK_AWARE_REPLICA_SELECTOR

    _run(body)


@pytest.mark.parametrize(
    ("racks", "error"),
    [(["a", "b"], ValueError), ("abc", ValueError), (["a", "", "c"], TypeError)],
)
def test_racks_must_name_one_rack_per_broker(racks: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        Cluster(3, racks=racks)


def test_an_unknown_replica_selector_is_refused() -> None:
    with pytest.raises(ValueError, match=r"replica\.selector\.class"):
        Cluster(3, replica_selector_class="com.example.MySelector")


# -- the leader's selection -----------------------------------------------------------------


def test_the_leader_sends_a_consumer_to_the_in_sync_follower_in_its_rack() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        r = await c.fetch(_fetch(rack="b"))
        assert r.error is ErrorCode.NONE
        assert r.preferred_read_replica == 1
        assert r.records == []
        assert r.high_watermark == 4
        r = await c.fetch(_fetch(rack="c"))
        assert r.preferred_read_replica == 2

    _run(body)


@pytest.mark.parametrize("rack", ["a", "", "z", None])
def test_the_leader_serves_its_own_rack_no_rack_an_unknown_one_and_old_fetches(
    rack: str | None,
) -> None:
    # the leader's rack: the leader preferred; "" (no rack given), a rack without a
    # replica, or no client metadata at all (Fetch before v11): the leader, no preference
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        r = await c.fetch(_fetch(rack=rack))
        assert r.preferred_read_replica == -1
        assert [rec.value for rec in r.records] == [b"0", b"1", b"2", b"3"]

    _run(body)


def test_without_a_selector_the_leader_never_redirects() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        r = await c.fetch(_fetch(rack="b"))
        assert r.preferred_read_replica == -1
        assert len(r.records) == 4

    _run(body, selector=False)


def test_a_follower_out_of_the_isr_is_not_preferred() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        c.brokers[1].replica_manager.stop_fetchers()  # broker 1 stops replicating
        await c.produce(ProduceRequest("t", 0, [(None, b"4")], acks=1))
        assert c.partition("t", 0).isr == {0, 1, 2}  # type: ignore[union-attr]
        await asyncio.sleep(3.0)  # replica_lag_time_max_ms: the leader drops it
        assert c.partition("t", 0).isr == {0, 2}  # type: ignore[union-attr]
        r = await c.fetch(_fetch(rack="b"))
        assert r.preferred_read_replica == -1
        assert len(r.records) == 5
        # and the follower sends a consumer still reading from it back to the leader
        r = await c.fetch(_fetch(rack="b"), broker=1)
        assert r.error is ErrorCode.NONE
        assert r.preferred_read_replica == 0
        assert r.records == []

    _run(body, replica_lag_time_max_ms=1000)


def test_a_follower_behind_the_fetch_offset_is_not_preferred() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        p = c.partition("t", 0)
        assert p is not None
        assert select_read_replica(p, c.racks, "b", 4) == 1  # its log ends at 4
        assert select_read_replica(p, c.racks, "b", 5) is None  # past its log end

    _run(body)


def _partition(isr: set[int], leos: dict[int, int], caught_up: dict[int, float]) -> Partition:
    p = Partition("t", 0, [0, 1, 2, 3], 0.0)
    p.isr = isr
    for broker, leo in leos.items():
        p.followers[broker].leo = leo
        p.followers[broker].lso = 0
        p.followers[broker].last_caught_up_ms = caught_up.get(broker, 0.0)
    return p


def test_among_several_in_its_rack_the_highest_log_end_offset() -> None:
    racks = {0: "a", 1: "b", 2: "b", 3: "b"}
    p = _partition({0, 1, 2, 3}, {1: 7, 2: 9, 3: 8}, {})
    assert select_read_replica(p, racks, "b", 5) == 2
    # equal log ends: the one caught up most recently, then the lowest id
    p = _partition({0, 1, 2, 3}, {1: 9, 2: 9, 3: 9}, {1: 10.0, 2: 30.0, 3: 30.0})
    assert select_read_replica(p, racks, "b", 5) == 2
    # the best one out of the ISR: the next best in it
    p = _partition({0, 1, 3}, {1: 7, 2: 9, 3: 8}, {})
    assert select_read_replica(p, racks, "b", 5) == 3
    # none in sync in the rack: the leader
    p = _partition({0}, {1: 7, 2: 9, 3: 8}, {})
    assert select_read_replica(p, racks, "b", 5) is None
    # the leader in the consumer's rack wins over any follower there
    assert select_read_replica(p, {**racks, 0: "b"}, "b", 5) is None


# -- the follower serving ---------------------------------------------------------------------


def test_a_follower_serves_the_consumer_up_to_the_hw_it_learnt() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        p = c.partition("t", 0)
        assert p is not None
        assert p.hws == {0: 4, 1: 4, 2: 4}
        r = await c.fetch(_fetch(offset=1, rack="b"), broker=1)
        assert r.error is ErrorCode.NONE
        assert r.preferred_read_replica == -1
        assert [rec.value for rec in r.records] == [b"1", b"2", b"3"]
        assert r.high_watermark == 4

    _run(body)


def test_a_parked_follower_fetch_completes_when_the_follower_learns_a_higher_hw() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        start = loop.time()
        waiting = loop.create_task(c.fetch(_fetch(offset=4, rack="b", wait=5000), broker=1))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        await c.produce(ProduceRequest("t", 0, [(None, b"4")], acks=-1))
        r = await waiting
        assert [rec.value for rec in r.records] == [b"4"]
        assert loop.time() - start < 1.0  # a replication round or two, not the 5 s wait

    _run(body)


def test_a_follower_answers_offset_out_of_range_past_its_log_end() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        c.brokers[1].replica_manager.stop_fetchers()
        for i in range(3):
            await c.produce(ProduceRequest("t", 0, [(None, b"x%d" % i)], acks=1))
        r = await c.fetch(_fetch(offset=6, rack="b"), broker=1)  # its log ends at 4
        assert r.error is ErrorCode.OFFSET_OUT_OF_RANGE
        # between its HW and its log end: nothing yet (no wait asked)
        r = await c.fetch(_fetch(offset=4, rack="b"), broker=1)
        assert r.error is ErrorCode.NONE
        assert r.records == []

    _run(body, selector=False)


def test_a_follower_refuses_a_fetch_without_client_metadata() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        r = await c.fetch(_fetch(rack=None), broker=1)
        assert r.error is ErrorCode.NOT_LEADER_OR_FOLLOWER

    _run(body)


def test_a_crashed_follower_answers_nothing_and_the_leader_serves_the_rack() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.crash_broker(1)
        r = await c.fetch(_fetch(rack="b"), broker=1)
        assert r.error is ErrorCode.BROKER_NOT_AVAILABLE
        r = await c.fetch(_fetch(rack="b"))  # out of the ISR: the leader serves
        assert r.preferred_read_replica == -1
        assert len(r.records) == 4

    _run(body)


def test_a_leadership_change_answers_a_parked_follower_fetch() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        waiting = loop.create_task(c.fetch(_fetch(offset=4, rack="c", wait=5000), broker=2))
        await asyncio.sleep(0.01)
        await c.fail_over("t", 0, 1)
        r = await waiting
        assert r.error is ErrorCode.NOT_LEADER_OR_FOLLOWER

    _run(body)
