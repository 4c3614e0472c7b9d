"""The broker waits by threshold where its condition is one: an acks=all produce on the
partition's HW, a consumer fetch of one byte on the HW; leadership moves still answer
them; the other fetches stay on watcher lists."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster, FetchRequest, ProduceRequest
from purgatory.sim.messages import FetchResult, ProduceResult
from purgatory.sim.operations import DelayedFetch, DelayedProduce
from purgatory.sim.replica_manager import ReplicaManager
from purgatory.testing import run_virtual


def _run(body: Any) -> Any:
    async def main() -> Any:
        async with Cluster(3, seed=5) as cluster:
            await cluster.create_topic("t", 1, 3)
            await asyncio.sleep(0.1)
            return await body(cluster)

    return run_virtual(main())


def _held(c: Cluster) -> tuple[ReplicaManager, list[int]]:
    """The leader of t-0 and its followers, whose fetchers are stopped: the HW moves only
    when a test says a follower fetched."""
    p = c.partition("t", 0)
    assert p is not None
    assert p.leader is not None
    followers = [b for b in p.replicas if b != p.leader]
    for b in followers:
        c.brokers[b].replica_manager.stop_fetchers()
    return c.brokers[p.leader].replica_manager, followers


def _followers_fetched(c: Cluster, rm: ReplicaManager, followers: list[int], offset: int) -> None:
    """Each follower fetches t-0 at ``offset`` (the leader's side of a replica fetch)."""
    p = c.partition("t", 0)
    assert p is not None
    for b in followers:
        rm.replica_fetch(b, [(p, p.leader_epoch, offset, p.leader_log.log_start_offset)], None)


@pytest.fixture
def try_completes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ops whose try_complete ran (a re-check), by op id."""
    calls: list[str] = []
    for cls in (DelayedProduce, DelayedFetch):
        original = cls.try_complete

        def counting(op: Any, original: Any = original) -> bool:
            calls.append(op.op_id)
            return bool(original(op))

        monkeypatch.setattr(cls, "try_complete", counting)
    return calls


def test_acks_all_produces_park_on_the_hw_and_an_advance_completes_those_it_reaches(
    try_completes: list[str],
) -> None:
    async def body(c: Cluster) -> None:
        rm, followers = _held(c)
        await asyncio.sleep(1.0)  # the followers' last parked fetches expire
        replies: list[ProduceResult] = []
        for i in range(5):
            op = c.send_produce(
                ProduceRequest("t", 0, [(None, b"%d" % i)], -1, 5000), replies.append
            )
            assert isinstance(op, DelayedProduce)
        purgatory = rm.produce_purgatory
        assert purgatory.threshold_keys() == 1
        assert purgatory.watched_keys() == 0
        assert purgatory.statistics().threshold_keys == 1
        assert purgatory.value_of("t-0") == 0  # the HW
        assert len(purgatory.pending_operations()) == 5
        completed = purgatory.statistics().completed
        _followers_fetched(c, rm, followers, 3)  # the HW goes to 3: offsets 0, 1 and 2 are in
        assert purgatory.value_of("t-0") == 3
        assert [r.base_offset for r in replies] == [0, 1, 2]
        assert {r.error for r in replies} == {ErrorCode.NONE}
        assert purgatory.statistics().completed - completed == 3
        assert len(purgatory.pending_operations()) == 2
        _followers_fetched(c, rm, followers, 5)
        assert [r.base_offset for r in replies] == [0, 1, 2, 3, 4]
        assert purgatory.threshold_keys() == 0

    _run(body)
    assert not [op for op in try_completes if op.startswith("produce")]  # never re-checked


def test_a_leadership_change_answers_the_parked_produces_not_leader(
    try_completes: list[str],
) -> None:
    async def body(c: Cluster) -> None:
        rm, followers = _held(c)
        replies: list[ProduceResult] = []
        for i in range(3):
            c.send_produce(ProduceRequest("t", 0, [(None, b"%d" % i)], -1, 5000), replies.append)
        assert rm.produce_purgatory.threshold_keys() == 1
        await c.fail_over("t", 0, followers[0])
        assert replies == [ProduceResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)] * 3
        assert rm.produce_purgatory.threshold_keys() == 0
        assert rm.produce_purgatory.pending_operations() == []
        # the broker that led before takes new produces once it leads again, by threshold
        for b in followers:
            c.brokers[b].replica_manager.start_fetchers()
        rm_new = c.brokers[followers[0]].replica_manager
        rm_new.stop_fetchers()
        await c.fail_over("t", 0, rm.broker_id)
        rm.stop_fetchers()
        await asyncio.sleep(1.0)
        replies.clear()
        c.send_produce(ProduceRequest("t", 0, [(None, b"x")], -1, 5000), replies.append)
        assert rm.produce_purgatory.threshold_keys() == 1
        assert replies == []

    _run(body)
    assert not [op for op in try_completes if op.startswith("produce")]


def test_a_crashed_leader_answers_its_parked_produces_as_before() -> None:
    """The controller moves leadership off the crashed broker first: NOT_LEADER."""

    async def body(c: Cluster) -> None:
        rm, _followers = _held(c)
        replies: list[ProduceResult] = []
        c.send_produce(ProduceRequest("t", 0, [(None, b"a")], -1, 5000), replies.append)
        await c.crash_broker(rm.broker_id)
        assert replies == [ProduceResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)]
        assert rm.produce_purgatory.pending_operations() == []

    _run(body)


def test_a_produce_past_its_timeout_expires_from_the_threshold_wait() -> None:
    async def body(c: Cluster) -> None:
        rm, _followers = _held(c)
        replies: list[ProduceResult] = []
        c.send_produce(ProduceRequest("t", 0, [(None, b"a")], -1, 200), replies.append)
        await asyncio.sleep(0.3)
        assert replies == [ProduceResult(ErrorCode.REQUEST_TIMED_OUT)]
        assert rm.produce_purgatory.statistics().expired == 1

    _run(body)


def test_a_one_byte_consumer_fetch_waits_on_the_hw_and_the_others_on_watcher_lists(
    try_completes: list[str],
) -> None:
    async def body(c: Cluster) -> None:
        rm, followers = _held(c)
        await asyncio.sleep(1.0)
        answers: list[FetchResult] = []
        fetch = c.send_fetch(FetchRequest("t", 0, 0, max_wait_ms=5000), answers.append)
        assert isinstance(fetch, DelayedFetch)
        purgatory = rm.fetch_purgatory
        assert purgatory.threshold_keys() == 1
        committed = c.send_fetch(
            FetchRequest("t", 0, 0, max_wait_ms=5000, isolation_level=1), answers.append
        )
        bigger = c.send_fetch(
            FetchRequest("t", 0, 0, min_bytes=10_000, max_wait_ms=5000), answers.append
        )
        assert isinstance(committed, DelayedFetch)
        assert isinstance(bigger, DelayedFetch)
        assert purgatory.threshold_keys() == 1  # both on the watcher list of "t-0"
        c.send_produce(ProduceRequest("t", 0, [(None, b"a")], 1, 5000), lambda r: None)
        assert answers == []  # the HW has not moved
        _followers_fetched(c, rm, followers, 1)
        assert len(answers) == 2  # the one-byte fetch and the read_committed one
        assert fetch.is_completed
        assert committed.is_completed
        assert not bigger.is_completed
        assert [len(a.records) for a in answers] == [1, 1]

        return fetch.op_id, committed.op_id

    one_byte, committed = _run(body)
    assert one_byte not in try_completes  # never re-checked
    assert committed in try_completes


def test_a_leadership_change_answers_a_parked_one_byte_fetch_not_leader() -> None:
    async def body(c: Cluster) -> None:
        rm, followers = _held(c)
        answers: list[FetchResult] = []
        c.send_fetch(FetchRequest("t", 0, 0, max_wait_ms=5000), answers.append)
        assert rm.fetch_purgatory.threshold_keys() == 1
        await c.fail_over("t", 0, followers[0])
        assert [a.error for a in answers] == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
        assert rm.fetch_purgatory.threshold_keys() == 0

    _run(body)
