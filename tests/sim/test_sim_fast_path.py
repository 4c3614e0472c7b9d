"""The callback request path, the operation observer, the idle cost of replication, the
tail read fast path, and the throughput fields of the summary."""

from __future__ import annotations

import asyncio
import gc
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from purgatory import OperationState
from purgatory.errors import ErrorCode
from purgatory.sim import Cluster, FetchRequest, Latency, ProduceRequest
from purgatory.sim.cli import fewer_collections
from purgatory.sim.invariants import InvariantChecker
from purgatory.sim.log import Log
from purgatory.sim.messages import FetchResult, ProduceResult
from purgatory.sim.operations import DelayedProduce
from purgatory.sim.partition import ReplicaFetchKey
from purgatory.sim.runner import run_scenario
from purgatory.sim.scenarios import SCENARIOS
from purgatory.sim.workload import ClientWorkloadConfig, Workload
from purgatory.testing import run_virtual
from purgatory.trace import TraceWriter


def _cluster_run(body: Any, **options: Any) -> Any:
    async def main() -> Any:
        async with Cluster(3, seed=5, **options) as cluster:
            await cluster.create_topic("t", 1, 3)
            return await body(cluster, asyncio.get_running_loop())

    return run_virtual(main())


def test_send_produce_replies_once_now_or_when_the_hw_covers_it() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        replies: list[ProduceResult] = []
        answered = asyncio.Event()

        def reply(result: ProduceResult) -> None:
            replies.append(result)
            answered.set()

        assert c.send_produce(ProduceRequest("t", 0, [(None, b"a")], 1, 1000), reply) is None
        assert replies == [ProduceResult(ErrorCode.NONE, 0)]  # acks=1: answered at once
        answered.clear()
        c.set_replication_latency(1, Latency(50.0))
        c.set_replication_latency(2, Latency(50.0))
        start = loop.time()
        parked = c.send_produce(ProduceRequest("t", 0, [(None, b"b")], -1, 5000), reply)
        assert isinstance(parked, DelayedProduce)
        assert len(replies) == 1  # parked: not answered yet
        await answered.wait()
        assert loop.time() - start >= 0.05
        assert replies[1] == ProduceResult(ErrorCode.NONE, 1)
        assert parked.result == replies[1]
        await asyncio.sleep(1.0)
        assert len(replies) == 2  # exactly once

    _cluster_run(body)


def test_send_fetch_answers_errors_at_once_and_parks_otherwise() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        replies: list[FetchResult] = []
        assert c.send_fetch(FetchRequest("nope", 0, 0, 1, 1 << 20, 500), replies.append) is None
        assert replies[0].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        parked = c.send_fetch(FetchRequest("t", 0, 0, 1, 1 << 20, 5000), replies.append)
        assert parked is not None
        assert not parked.is_done
        await c.produce(ProduceRequest("t", 0, [(b"k", b"v")], acks=-1))
        await asyncio.sleep(0)
        assert [(r.offset, r.value) for r in replies[1].records] == [(0, b"v")]
        with pytest.raises(TypeError, match="max_bytes"):
            c.send_fetch(FetchRequest("t", 0, 0, 1, None, 500), replies.append)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="acks"):
            c.send_produce(
                ProduceRequest("t", 0, [(None, b"a")], True, 500), print
            )  # bool is not an acks

    _cluster_run(body)


def test_close_answers_callback_clients_and_the_observer_sees_every_operation() -> None:
    async def main() -> tuple[list[Any], InvariantChecker, Cluster]:
        cluster = Cluster(3)
        checker = InvariantChecker(cluster)
        await cluster.start()
        await cluster.create_topic("t", 1, 3)
        await cluster.crash_broker_unfenced(1)
        await cluster.crash_broker_unfenced(2)
        replies: list[Any] = []
        cluster.send_produce(ProduceRequest("t", 0, [(None, b"a")], -1, 60_000), replies.append)
        cluster.send_fetch(FetchRequest("t", 0, 0, 1, 1 << 20, 60_000), replies.append)
        await asyncio.sleep(0.01)
        assert replies == []
        await cluster.close()
        return replies, checker, cluster

    replies, checker, cluster = run_virtual(main())
    assert [r.error for r in replies] == [ErrorCode.BROKER_NOT_AVAILABLE] * 2
    checker.check_accounting()
    assert checker.violations == []
    cancelled = sum(p.statistics().cancelled for p in cluster.all_purgatories())
    assert cancelled >= 2


def test_observer_sees_completion_before_the_reply_and_drops() -> None:
    seen: list[tuple[str, OperationState]] = []

    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        c.add_op_observer(lambda op, now: seen.append((op.kind, op.operation_state)))
        order: list[str] = []

        def observe(op: Any, now: float) -> None:
            if op.kind == "produce":
                order.append("observer")

        c.add_op_observer(observe)
        c.send_produce(
            ProduceRequest("t", 0, [(None, b"a")], -1, 5000), lambda r: order.append("reply")
        )
        await asyncio.sleep(0.1)
        assert order == ["observer", "reply"]
        task = loop.create_task(c.fetch(FetchRequest("t", 0, 1, max_wait_ms=60_000)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    _cluster_run(body)
    assert ("produce", OperationState.COMPLETED) in seen
    assert ("fetch-consumer", OperationState.CANCELLED) in seen


def _replication(cluster: Cluster) -> tuple[int, int, int]:
    """Fetcher rounds, and expired and completed fetches, over every broker."""
    rounds = expired = completed = 0
    for broker in cluster.brokers.values():
        rm = broker.replica_manager
        rounds += sum(f.rounds for f in rm.fetchers.values())
        stats = rm.fetch_purgatory.statistics()
        expired += stats.expired
        completed += stats.completed
    return rounds, expired, completed


def test_idle_cluster_replication_parks_for_the_max_wait() -> None:
    """Followers of an idle cluster wait in the Fetch purgatory for
    replica_fetch_wait_max_ms (500 ms): about two rounds a second per fetcher."""

    async def main() -> tuple[int, int, int]:
        async with Cluster(3) as cluster:
            await cluster.create_topic("t", 3, 3)
            await asyncio.sleep(0.1)
            rounds, expired, completed = _replication(cluster)
            await asyncio.sleep(10.0)
            after = _replication(cluster)
            return after[0] - rounds, after[1] - expired, after[2] - completed

    rounds, expired, completed = run_virtual(main())
    fetchers = 6  # 3 brokers: every (follower, leader) pair
    assert fetchers * 19 <= rounds <= fetchers * 21  # 10 s / (500 ms + 1 ms round trip)
    assert expired == rounds
    assert completed == 0


def test_replica_fetch_key_prints_as_the_partition_but_is_its_own_watch_list(
    tmp_path: Path,
) -> None:
    key = ReplicaFetchKey("t-0")
    assert str(key) == "t-0"
    assert key.tp == "t-0"
    assert key != "t-0"
    assert hash(key) == hash(ReplicaFetchKey("t-0"))
    assert repr(key) == "ReplicaFetchKey('t-0')"
    path = tmp_path / "ops.jsonl"
    trace = TraceWriter(str(path))

    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        for purgatory in c.all_purgatories():
            purgatory.add_listener(trace)
        await c.produce(ProduceRequest("t", 0, [(None, b"a")], acks=-1))
        await asyncio.sleep(1.0)

    _cluster_run(body)
    trace.close()
    events = [json.loads(line) for line in path.read_text().splitlines()]
    followers = [e for e in events if e["kind"] == "fetch-follower"]
    assert followers
    assert all(e["keys"] == ["t-0"] for e in followers)


def _reference_batches(log: Log, start: int, end: int, max_bytes: int) -> list[tuple[int, int]]:
    """Log.read_batches by a plain scan."""
    out: list[tuple[int, int]] = []
    total = 0
    for batch in log._batches:
        if batch.end_offset <= start or batch.base_offset >= end:
            continue
        if out and total + batch.size > max_bytes:
            break
        out.append((batch.base_offset, batch.end_offset))
        total += batch.size
    return out


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=0, max_size=12),
    deleted=st.integers(0, 30),
    start=st.integers(0, 40),
    length=st.integers(0, 40),
    max_bytes=st.integers(1, 200),
)
def test_read_batches_matches_a_plain_scan(
    sizes: list[int], deleted: int, start: int, length: int, max_bytes: int
) -> None:
    log = Log()
    for i, n in enumerate(sizes):
        log.append([(None, b"x" * i) for _ in range(n)], epoch=0)
    log.delete_before(min(deleted, log.leo))
    got = [
        (b.base_offset, b.end_offset) for b in log.read_batches(start, start + length, max_bytes)
    ]
    assert got == _reference_batches(log, start, start + length, max_bytes)


def test_fewer_collections_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    with fewer_collections(12_345):
        assert gc.get_threshold()[0] == 12_345
    assert gc.get_threshold() == before
    with pytest.raises(KeyError), fewer_collections():
        raise KeyError("restored on errors too")
    assert gc.get_threshold() == before


def test_summary_reports_produce_and_fetch_operations_per_wall_second() -> None:
    scenario = SCENARIOS["steady"].with_workload(produce_rate=300.0, fetch_rate=300.0)
    summary = run_virtual(run_scenario(scenario, 3.0, 2))
    purgatories = summary.purgatories
    ops = purgatories["Produce"].operations + purgatories["Fetch"].operations
    assert summary.produce_fetch_operations == ops > 0
    assert summary.produce_fetch_operations_per_wall_s == pytest.approx(
        ops / summary.wall_s, rel=0.01
    )
    every = sum(p.operations for p in purgatories.values())
    assert summary.purgatory_operations_per_wall_s == pytest.approx(
        every / summary.wall_s, rel=0.01
    )


def test_lost_records_counts_acked_records_missing_or_changed_on_the_leader() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> int:
        workload = Workload(c, ClientWorkloadConfig(topic="t"), random.Random(1))
        for i in range(3):
            entries: list[tuple[bytes | None, bytes]] = [(None, b"a%d" % i), (b"k", b"b%d" % i)]
            result = await c.produce(ProduceRequest("t", 0, entries, acks=-1))
            workload.acked.append((0, result.base_offset, entries))
        assert workload.lost_records() == 0
        p = c.partition("t", 0)
        assert p is not None
        log = p.leader_log
        log.truncate_to(5)  # the last record of the last batch is gone
        assert workload.lost_records() == 1
        workload.acked.append((0, 2, [(None, b"a1"), (b"other", b"b1")]))  # key differs
        return workload.lost_records()

    assert _cluster_run(body) == 2
