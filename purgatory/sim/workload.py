"""Open-loop clients: producers and consumers that send at a configured rate, whatever the
cluster's response time (Poisson arrivals), so a slow cluster piles up parked requests
instead of slowing the load down.

Producers retry retriable errors (leadership moved, not enough replicas) against the
current leader, like a Kafka producer; records acknowledged to acks=all producers are
remembered so a run can check that none is lost. Consumers long-poll each partition from
the furthest offset consumed so far.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, final

from purgatory.sim.cluster import Cluster
from purgatory.sim.errors import ErrorCode
from purgatory.sim.validate import check_int

_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)


ARRIVAL_TICK_S = 0.001


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """Rates are requests per second of simulated time, over all partitions."""

    topic: str = "events"
    produce_rate: float = 2_000.0
    records_per_request: int = 4
    record_bytes: int = 100
    acks: int = -1
    produce_timeout_ms: int = 5_000
    retries: int = 5
    retry_backoff_ms: int = 100
    fetch_rate: float = 2_000.0
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 16 << 10
    fetch_max_wait_ms: int = 500

    def __post_init__(self) -> None:
        for name in ("produce_rate", "fetch_rate"):
            rate = getattr(self, name)
            if not isinstance(rate, int | float) or not 0 <= rate < float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {rate!r}")
        check_int("records_per_request", self.records_per_request, 1)
        check_int("record_bytes", self.record_bytes, 12)  # room for the sequence number
        check_int("produce_timeout_ms", self.produce_timeout_ms, 0)
        check_int("retries", self.retries, 0)
        check_int("retry_backoff_ms", self.retry_backoff_ms, 0)
        check_int("fetch_min_bytes", self.fetch_min_bytes, 0)
        check_int("fetch_max_bytes", self.fetch_max_bytes, 1)
        check_int("fetch_max_wait_ms", self.fetch_max_wait_ms, 0)
        if self.acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1, 0 or 1, got {self.acks!r}")


# (partition index, base offset, the (key, value) pairs): a batch acked with acks=all
AckedBatch = tuple[int, int, list[tuple[bytes | None, bytes]]]


@final
class Workload:
    """Producers and consumers for one topic, with counters the summary reports."""

    def __init__(self, cluster: Cluster, config: WorkloadConfig, rng: random.Random) -> None:
        self.cluster = cluster
        self.config = config
        self.rng = rng
        self.partitions = len(cluster.topics[config.topic])
        self.positions = [0] * self.partitions  # consumer position per partition
        self.acked: list[AckedBatch] = []
        self.counts: dict[str, int] = dict.fromkeys(
            (
                "produce_requests",
                "produce_ok",
                "produce_failed",
                "produce_retries",
                "fetch_requests",
                "fetch_errors",
                "records_consumed",
            ),
            0,
        )
        self.errors: dict[str, int] = {}
        self._seq = 0
        self._pad = b"x" * (config.record_bytes - 12)
        self._inflight: set[asyncio.Task[None]] = set()
        self._arrivals: list[asyncio.Task[None]] = []
        self._stopping = False

    @property
    def acked_records(self) -> int:
        return sum(len(entries) for _p, _base, entries in self.acked)

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.config.produce_rate > 0:
            self._arrivals.append(loop.create_task(self._arrive(self.config.produce_rate, True)))
        if self.config.fetch_rate > 0:
            self._arrivals.append(loop.create_task(self._arrive(self.config.fetch_rate, False)))

    async def stop(self) -> None:
        """Stop new arrivals and wait for every request in flight to be answered."""
        self._stopping = True
        for task in self._arrivals:
            task.cancel()
        await asyncio.gather(*self._arrivals, return_exceptions=True)
        while self._inflight:
            await asyncio.gather(*list(self._inflight))

    async def _arrive(self, rate: float, produce: bool) -> None:
        loop = asyncio.get_running_loop()
        rng = self.rng
        spawn = self._spawn
        next_at = loop.time() + rng.expovariate(rate)
        while not self._stopping:
            now = loop.time()
            while next_at <= now:
                spawn(self._produce() if produce else self._fetch())
                next_at += rng.expovariate(rate)
            # Arrivals due within the same millisecond go out together: one timer per ms
            # instead of one per request, as a client's send loop would batch them.
            await asyncio.sleep(max(next_at - now, ARRIVAL_TICK_S))

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    def _error(self, code: ErrorCode) -> None:
        self.errors[code.value] = self.errors.get(code.value, 0) + 1

    async def _produce(self) -> None:
        config = self.config
        counts = self.counts
        partition = self.rng.randrange(self.partitions)
        entries: list[tuple[bytes | None, bytes]] = []
        for _ in range(config.records_per_request):
            self._seq += 1
            entries.append((None, b"%012d" % self._seq + self._pad))
        counts["produce_requests"] += 1
        for attempt in range(config.retries + 1):
            result = await self.cluster.produce(
                config.topic, partition, entries, config.acks, config.produce_timeout_ms
            )
            if result.error is ErrorCode.NONE:
                counts["produce_ok"] += 1
                if config.acks == -1:
                    self.acked.append((partition, result.base_offset, entries))
                return
            self._error(result.error)
            if result.error not in _RETRIABLE or attempt == config.retries:
                break
            counts["produce_retries"] += 1
            await asyncio.sleep(config.retry_backoff_ms / 1000.0)
        counts["produce_failed"] += 1

    async def _fetch(self) -> None:
        config = self.config
        partition = self.rng.randrange(self.partitions)
        offset = self.positions[partition]
        self.counts["fetch_requests"] += 1
        result = await self.cluster.fetch(
            config.topic,
            partition,
            offset,
            config.fetch_min_bytes,
            config.fetch_max_bytes,
            config.fetch_max_wait_ms,
        )
        if result.error is ErrorCode.OFFSET_OUT_OF_RANGE and result.log_start_offset >= 0:
            self.positions[partition] = max(self.positions[partition], result.log_start_offset)
        if result.error is not ErrorCode.NONE:
            self.counts["fetch_errors"] += 1
            self._error(result.error)
            return
        if result.records:
            self.counts["records_consumed"] += len(result.records)
            end = result.records[-1].offset + 1
            if end > self.positions[partition]:
                self.positions[partition] = end

    def lost_records(self) -> int:
        """Acked records missing from the current leader's log (deleted ones excepted)."""
        lost = 0
        parts = self.cluster.topics[self.config.topic]
        for index, base, entries in self.acked:
            p = parts[index]
            if p.leader is None:
                lost += len(entries)
                continue
            log = p.leader_log
            for i, (key, value) in enumerate(entries):
                offset = base + i
                if offset < log.log_start_offset:
                    continue
                record = log.record_at(offset)
                if record is None or record.value != value or record.key != key:
                    lost += 1
        return lost
