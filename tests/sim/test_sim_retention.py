"""Bounded memory: each log's retention (by size and by age, below the HW only), the
memory the logs of a cluster hold (each shared batch counted once) and the cap on it."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from purgatory.errors import ErrorCode
from purgatory.sim import (
    Cluster,
    DeleteRecordsRequest,
    FetchRequest,
    ProduceRequest,
    SimulationError,
)
from purgatory.sim.batches import BATCH_MEMORY, RECORD_MEMORY
from purgatory.sim.log import Log, LogConfig, LogSpace
from purgatory.testing import run_virtual

Body = Callable[[Cluster, asyncio.AbstractEventLoop], Awaitable[Any]]


def batch_memory(entries: list[tuple[bytes | None, bytes]], wire: bytearray | None) -> int:
    """The documented estimate: keys and values, RECORD_MEMORY a record, BATCH_MEMORY a
    batch, and the client's wire bytes."""
    records = sum(RECORD_MEMORY + len(v) + len(k or b"") for k, v in entries)
    return BATCH_MEMORY + records + (0 if wire is None else len(wire))


def _fill(log: Log, batches: int, per_batch: int = 1, value: bytes = b"12", t0: float = 0) -> None:
    for i in range(batches):
        log.append([(None, value)] * per_batch, 0, now_ms=t0 + i)


# -- one log -----------------------------------------------------------------------------


def test_size_retention_keeps_at_least_retention_bytes_below_the_hw() -> None:
    log = Log(LogConfig(retention_bytes=25))  # each batch: one record of 10 bytes
    _fill(log, 6)
    assert not log.apply_retention(high_watermark=0, now_ms=0)  # nothing below the HW
    assert log.apply_retention(high_watermark=6, now_ms=0)
    # Kafka's rule: a batch goes only if the log stays >= retention_bytes without it
    assert (log.log_start_offset, log.size_bytes) == (3, 30)
    assert not log.apply_retention(high_watermark=6, now_ms=0)


def test_size_retention_never_passes_the_hw() -> None:
    log = Log(LogConfig(retention_bytes=0))
    _fill(log, 6)
    assert log.apply_retention(high_watermark=3, now_ms=0)
    assert log.log_start_offset == 3
    assert log.record_at(2) is None
    assert log.record_at(3) is not None


def test_time_retention_drops_batches_appended_too_long_ago() -> None:
    log = Log(LogConfig(retention_ms=100))
    _fill(log, 5, t0=1000)  # appended at 1000..1004
    assert not log.apply_retention(high_watermark=5, now_ms=1100)  # 1000 is exactly 100 old
    assert log.apply_retention(high_watermark=5, now_ms=1102.5)
    assert log.log_start_offset == 3
    assert log.apply_retention(high_watermark=5, now_ms=10_000)
    assert (log.log_start_offset, log.leo, log.batches, log.size_bytes) == (5, 5, 0, 0)


def test_no_retention_keeps_everything() -> None:
    log = Log()
    _fill(log, 3)
    assert not log.config.retains
    assert not log.apply_retention(high_watermark=3, now_ms=1e12)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("retention_bytes", -2, ValueError),
        ("retention_ms", 1.5, TypeError),
        ("retention_ms", True, TypeError),
    ],
)
def test_bad_retention_is_refused(field: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=field):
        LogConfig(**{field: value})  # type: ignore[arg-type]


def test_space_counts_a_shared_batch_once_and_frees_it_with_its_last_holder() -> None:
    space = LogSpace()
    leader, follower = Log(space=space), Log(space=space)
    batch = leader.append([(b"k", b"value")], 0)
    follower.append_batch(batch)
    assert space.used == batch.memory == batch_memory([(b"k", b"value")], None)
    leader.delete_before(1)
    assert space.used == batch.memory  # the follower still holds it
    follower.truncate_to(0)
    assert space.used == 0


def test_space_follows_truncation_splits_and_resets() -> None:
    space = LogSpace()
    log = Log(space=space)
    log.append([(None, b"a")] * 4, 0)
    log.truncate_to(2)  # the batch is split: the kept half is a new batch
    assert space.used == batch_memory([(None, b"a")] * 2, None)
    log.reset_to(10)
    assert space.used == 0


class _Wire:
    """A client's batch as the log sees it: its bytes and header fields."""

    def __init__(self, size: int, count: int) -> None:
        self.buf = bytearray(size)
        self.record_count = count
        self.producer_id, self.producer_epoch, self.base_sequence = -1, -1, -1
        self.transactional = False

    def assign(self, base_offset: int, leader_epoch: int) -> None:
        pass

    def key_values(self) -> list[tuple[bytes | None, bytes]]:
        return [(None, b"v")] * self.record_count


def test_a_client_batch_costs_its_bytes_not_decoded_records() -> None:
    log = Log()
    batch = log.append((), 0, _Wire(1000, 50))
    assert (batch.size, batch.memory) == (1000, 1000 + BATCH_MEMORY)
    assert log.space.used == batch.memory
    assert len(log.read_records(0, 50, 1 << 20)) == 50  # decoded when read, not kept
    assert log.space.used == batch.memory


def test_space_admits_up_to_its_limit_and_says_why_it_refuses() -> None:
    entries = [(None, b"x" * 100)]
    space = LogSpace(limit=2 * batch_memory(entries, None))
    log = Log(space=space)
    for _ in range(2):
        log.append(entries, 0)
    with pytest.raises(SimulationError, match="would pass the cap") as caught:
        log.append(entries, 0)
    assert caught.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert (log.leo, log.batches, space.used) == (2, 2, space.limit)  # nothing of it kept
    with pytest.raises(ValueError, match="max_stored_bytes"):
        LogSpace(0)


@pytest.mark.parametrize(
    ("per_batch", "value_len", "keyed"),
    [(1, 10, False), (1, 10, True), (100, 10, True), (100, 1000, False), (1000, 1, False)],
)
def test_the_memory_estimate_covers_what_the_log_really_allocates(
    per_batch: int, value_len: int, keyed: bool
) -> None:
    """The cap bounds memory only if the estimate is not below the truth (tracemalloc), and
    it is not worth much if it is far above it."""
    batches = 20_000 // per_batch
    log = Log()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for b in range(batches):
            # fresh bytes objects, as a decoded request makes them
            entries = [
                (
                    bytes(bytearray(b"k%05d" % (b + i))) if keyed else None,
                    bytes(bytearray(value_len)),
                )
                for i in range(per_batch)
            ]
            log.append(entries, 0)
        del entries
        gc.collect()
        allocated = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert allocated <= log.space.used <= 1.6 * allocated


# -- a cluster ---------------------------------------------------------------------------


def _run(body: Body, **options: Any) -> Any:
    async def main() -> Any:
        async with Cluster(3, seed=1, **options) as cluster:
            return await body(cluster, asyncio.get_running_loop())

    return run_virtual(main())


def _produce(topic: str, value: bytes = b"v" * 100, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(topic, 0, [(None, value)], acks)


def test_size_retention_advances_every_replica_log_start_and_old_offsets_go_out_of_range() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.create_topic("t", 1, 3, retention_bytes=500)
        for _ in range(20):
            assert (await c.produce(_produce("t"))).error is ErrorCode.NONE
        await asyncio.sleep(1)  # the followers fetch again and learn the new log start
        p = c.partition("t", 0)
        assert p is not None
        starts = {b: log.log_start_offset for b, log in p.logs.items()}
        assert set(starts.values()) == {15}  # 5 batches of 108 bytes: 540 >= 500 > 432
        old = await c.fetch(FetchRequest("t", 0, 0))
        assert (old.error, old.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, 15)
        kept = await c.fetch(FetchRequest("t", 0, 15))
        assert [r.offset for r in kept.records] == [15, 16, 17, 18, 19]

    _run(body)


def test_time_retention_runs_without_traffic_and_topics_override_the_default() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.create_topic("short", 1, 3)  # the cluster's default: 2 s
        await c.create_topic("kept", 1, 3, retention_ms=-1)
        for topic in ("short", "kept"):
            for _ in range(3):
                await c.produce(_produce(topic))
        await asyncio.sleep(3.5)  # no produce: only the periodic check can act
        short, kept = c.partition("short", 0), c.partition("kept", 0)
        assert short is not None
        assert kept is not None
        assert short.leader_log.log_start_offset == 3
        assert short.leader_log.batches == 0
        assert kept.leader_log.log_start_offset == 0

    _run(body, log_retention_ms=2000)


def test_the_stored_bytes_cap_refuses_a_produce_and_keeps_nothing_of_it() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.create_topic("t", 1, 3)
        accepted = 4  # 4 x 1,448 bytes fit under the cap of 6,000, a fifth does not
        for _ in range(accepted):
            assert (await c.produce(_produce("t", b"v" * 1000))).error is ErrorCode.NONE
        with pytest.raises(SimulationError, match="would pass the cap") as caught:
            await c.produce(_produce("t", b"v" * 1000))
        assert caught.value.code is ErrorCode.KAFKA_STORAGE_ERROR
        p = c.partition("t", 0)
        assert p is not None
        assert p.leo == accepted  # the refused produce appended nothing
        assert c.log_space.used <= 6000
        # deleting records frees the space once every replica let them go
        deleted = await c.delete_records(DeleteRecordsRequest("t", 0, -1))
        assert (deleted.error, deleted.low_watermark) == (ErrorCode.NONE, accepted)
        assert c.log_space.used == 0
        assert (await c.produce(_produce("t", b"v" * 1000))).error is ErrorCode.NONE

    _run(body, max_stored_bytes=6000)


def test_a_cluster_counts_each_batch_once_across_its_replicas() -> None:
    async def body(c: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        await c.create_topic("t", 1, 3)
        for _ in range(10):
            await c.produce(_produce("t"))
        p = c.partition("t", 0)
        assert p is not None
        assert all(log.leo == 10 for log in p.logs.values())  # replicated (acks=-1)
        assert c.log_space.used == 10 * batch_memory([(None, b"v" * 100)], None)

    _run(body)
