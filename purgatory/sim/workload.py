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
import math
import operator
import random
from dataclasses import dataclass
from typing import final

from purgatory.errors import ErrorCode
from purgatory.sim.cluster import Cluster
from purgatory.sim.controller import UncleanElection
from purgatory.sim.messages import FetchRequest, FetchResult, ProduceRequest, ProduceResult
from purgatory.sim.validate import check_int

_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)


ARRIVAL_TICK_S = 0.001

_KEY, _VALUE = operator.itemgetter(1), operator.itemgetter(2)  # of a Record
_ENTRY_KEY, _ENTRY_VALUE = operator.itemgetter(0), operator.itemgetter(1)  # of a (key, value)


@dataclass(frozen=True, slots=True)
class ClientWorkloadConfig:
    """What the simulated producers and consumers send. Rates are requests per second of
    simulated time, over all partitions."""

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

    def __init__(self, cluster: Cluster, config: ClientWorkloadConfig, rng: random.Random) -> None:
        self.cluster = cluster
        self.config = config
        self.rng = rng
        self.partitions = len(cluster.topics[config.topic])
        self.positions = [0] * self.partitions  # consumer position per partition
        self.acked: list[AckedBatch] = []
        # what each unclean election gave up, and how many batches were acked before it:
        # only those can have been lost to it
        self._unclean_losses: list[tuple[UncleanElection, int]] = []
        cluster.controller.unclean_listeners.append(self._unclean_election)
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
        self._acked_records = 0
        self._in_flight = 0  # requests sent and not answered yet
        self._drained: asyncio.Future[None] | None = None  # set when in-flight drops to 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._next_produce = math.inf  # loop time of the next arrival
        self._next_fetch = math.inf
        self._stopping = False

    @property
    def acked_records(self) -> int:
        return self._acked_records

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def start(self) -> None:
        """Start the arrivals: one loop timer per millisecond at most, no task."""
        loop = self._loop = asyncio.get_running_loop()
        now = loop.time()
        config = self.config
        rng = self.rng
        if config.produce_rate > 0:
            self._next_produce = now + rng.expovariate(config.produce_rate)
        if config.fetch_rate > 0:
            self._next_fetch = now + rng.expovariate(config.fetch_rate)
        self._arrive()

    async def stop(self) -> None:
        """Stop new arrivals and wait for every request in flight to be answered."""
        self._stopping = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._in_flight:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained

    def _arrive(self) -> None:
        """Send every request due by now, then sleep until the next one is due. Arrivals
        within the same millisecond go out together: one timer per ms instead of one per
        request, as a client's send loop would batch them."""
        self._timer = None
        if self._stopping:
            return
        loop = self._loop
        assert loop is not None
        now = loop.time()
        config = self.config
        expovariate = self.rng.expovariate
        while self._next_produce <= now:
            self._produce()
            self._next_produce += expovariate(config.produce_rate)
        while self._next_fetch <= now:
            self._fetch()
            self._next_fetch += expovariate(config.fetch_rate)
        next_at = min(self._next_produce, self._next_fetch)
        if next_at != math.inf:
            self._timer = loop.call_at(max(next_at, now + ARRIVAL_TICK_S), self._arrive)

    def _done(self) -> None:
        self._in_flight -= 1
        if not self._in_flight and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _error(self, code: ErrorCode) -> None:
        self.errors[code.value] = self.errors.get(code.value, 0) + 1

    def _produce(self) -> None:
        config = self.config
        seq = self._seq
        pad = self._pad
        n = config.records_per_request
        # a unique value per record (its sequence number), so that a loss shows
        entries: list[tuple[bytes | None, bytes]] = [
            (None, b"%012d%b" % (s, pad)) for s in range(seq + 1, seq + n + 1)
        ]
        self._seq = seq + n
        self.counts["produce_requests"] += 1
        self._in_flight += 1
        _ProduceRequest(self, self.rng.randrange(self.partitions), entries).send()

    def _fetch(self) -> None:
        config = self.config
        partition = self.rng.randrange(self.partitions)
        self.counts["fetch_requests"] += 1
        self._in_flight += 1
        request = FetchRequest(
            config.topic,
            partition,
            self.positions[partition],
            config.fetch_min_bytes,
            config.fetch_max_bytes,
            config.fetch_max_wait_ms,
        )
        self.cluster.send_fetch(request, lambda result: self._fetched(partition, result))

    def _fetched(self, partition: int, result: FetchResult) -> None:
        counts = self.counts
        if result.error is ErrorCode.OFFSET_OUT_OF_RANGE and result.log_start_offset >= 0:
            self.positions[partition] = max(self.positions[partition], result.log_start_offset)
        if result.error is not ErrorCode.NONE:
            counts["fetch_errors"] += 1
            self._error(result.error)
        elif result.records:
            counts["records_consumed"] += len(result.records)
            end = result.records[-1].offset + 1
            if end > self.positions[partition]:
                self.positions[partition] = end
        self._done()

    def lost_records(self) -> int:
        """Acked records missing from the current leader's log (deleted ones excepted),
        but for those an unclean election gave up (:meth:`lost_to_unclean_elections`)."""
        return self.losses()[0]

    def lost_to_unclean_elections(self) -> int:
        """Acked records missing because an unclean election, asked for after they were
        acknowledged, gave them up."""
        return self.losses()[1]

    def losses(self) -> tuple[int, int]:
        """(:meth:`lost_records`, :meth:`lost_to_unclean_elections`) from one read of the
        logs (it reads every acked batch back)."""
        missing = self._missing()
        given_up = sum(self._given_up(*m) for m in missing)
        return len(missing) - given_up, given_up

    def _unclean_election(self, loss: UncleanElection) -> None:
        self._unclean_losses.append((loss, len(self.acked)))

    def _given_up(self, batch: int, index: int, offset: int) -> bool:
        key = f"{self.config.topic}-{index}"
        return any(
            batch < acked_before and e.partition == key and e.lost_from <= offset < e.lost_to
            for e, acked_before in self._unclean_losses
        )

    def _missing(self) -> list[tuple[int, int, int]]:
        """(acked batch number, partition index, offset) of each acked record the leader's
        log lacks."""
        missing = []
        parts = self.cluster.topics[self.config.topic]
        for batch, (index, base, entries) in enumerate(self.acked):
            p = parts[index]
            if p.leader is None:
                missing += [(batch, index, base + i) for i in range(len(entries))]
                continue
            log = p.leader_log
            start = max(base, log.log_start_offset)
            end = base + len(entries)
            if start >= end:
                continue  # deleted by DeleteRecords
            # one read per acked batch: the log holds consecutive offsets from its start
            records = log.read_records(start, end, 1 << 62)
            expected = entries[start - base :]
            if (  # the usual answer, compared in C: every record there, in order
                len(records) == len(expected)
                and records[0].offset == start
                and list(map(_VALUE, records)) == list(map(_ENTRY_VALUE, expected))
                and list(map(_KEY, records)) == list(map(_ENTRY_KEY, expected))
            ):
                continue
            for i in range(end - start):
                key, value = entries[start - base + i]
                if i >= len(records):
                    missing.append((batch, index, start + i))
                    continue
                record = records[i]
                if record.offset != start + i or record.value != value or record.key != key:
                    missing.append((batch, index, start + i))
        return missing


@final
class _ProduceRequest:
    """One producer request and its retries: sent through the cluster's callback API,
    so that a request costs no task; a retry waits its backoff on a loop timer."""

    __slots__ = ("attempt", "entries", "partition", "request", "workload")

    def __init__(
        self, workload: Workload, partition: int, entries: list[tuple[bytes | None, bytes]]
    ) -> None:
        self.workload = workload
        self.partition = partition
        self.entries = entries
        self.attempt = 0
        config = workload.config
        # one request for every attempt: a retry sends the same records again
        self.request = ProduceRequest(
            config.topic, partition, entries, config.acks, config.produce_timeout_ms
        )

    def send(self) -> None:
        self.workload.cluster.send_produce(self.request, self.on_result)

    def on_result(self, result: ProduceResult) -> None:
        w = self.workload
        config = w.config
        counts = w.counts
        error = result.error
        if error is ErrorCode.NONE:
            counts["produce_ok"] += 1
            if config.acks == -1:
                w.acked.append((self.partition, result.base_offset, self.entries))
                w._acked_records += len(self.entries)
            w._done()
            return
        w._error(error)
        if error in _RETRIABLE and self.attempt < config.retries and not w.cluster.closed:
            self.attempt += 1
            counts["produce_retries"] += 1
            loop = asyncio.get_running_loop()
            loop.call_later(config.retry_backoff_ms / 1000.0, self.send)
            return
        counts["produce_failed"] += 1
        w._done()
