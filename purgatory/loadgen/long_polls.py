"""The long-poll load of ``purgatory load``: fetchers park long polls on a topic's
partitions while an open-loop producer appends at a fixed rate; each woken fetch measures
its wake-up latency from the send time its first record carries."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Final, TypedDict, cast

from purgatory.errors import ErrorCode
from purgatory.json_types import Json, JsonObject
from purgatory.percentiles import percentile

if TYPE_CHECKING:
    import aiohttp


@dataclass
class Stats:
    ok: int = 0
    failed: int = 0
    broker_errors: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    wakeups: list[float] = field(default_factory=list)  # seconds
    fetches: int = 0
    produces: int = 0
    produce_latency: list[float] = field(default_factory=list)

    def fail(self, why: str) -> None:
        self.failed += 1
        self.failures[why] = self.failures.get(why, 0) + 1

    def broker_error(self, code: str) -> None:
        self.broker_errors[code] = self.broker_errors.get(code, 0) + 1


class _Record(TypedDict):
    offset: int
    value: str


class FetchAnswer(TypedDict):
    """What ``POST /v1/fetch`` answers with 200 (the fields the fetchers read)."""

    error: str | None
    log_start_offset: int
    records: list[_Record]


#: a JSON object as the server answers it
Answer = Mapping[str, Json]


@dataclass(frozen=True, slots=True)
class LongPollSummary:
    """What a long-poll load did, in the order ``--json`` prints it (:meth:`to_dict`)."""

    fetchers: int
    parked_before_producing: int
    partitions: int
    duration_s: float
    produce_requests: int
    #: produce requests per second
    produce_rate: float
    fetch_responses: int
    requests_per_s: float
    ok_requests: int
    failed_requests: int
    #: failed requests by why (``http_503``, a transport error's name)
    failures: dict[str, int]
    #: answered requests by the error code they carried
    broker_errors: dict[str, int]
    wakeups: int
    #: p50, p90, p99, max (NaN without wake-ups)
    wakeup_latency_ms: dict[str, float]
    #: p50, p99 (NaN without answers)
    produce_latency_ms: dict[str, float]

    @property
    def ok(self) -> bool:
        """No request failed."""
        return self.failed_requests == 0

    def to_dict(self) -> JsonObject:
        return asdict(self)


def _percentile_ms(samples: list[float], q: float) -> float:
    """Nearest-rank percentile of latencies in seconds, in ms; NaN if there are none."""
    return round(percentile(sorted(samples), q) * 1000, 3) if samples else float("nan")


#: how long a fetcher waits after a failure the server gave no Retry-After for
FAILURE_BACKOFF_S: Final = 0.1


async def _post(
    session: aiohttp.ClientSession, url: str, body: JsonObject, stats: Stats
) -> tuple[Answer | None, float]:
    """The JSON answer (None if the request failed) and how long to wait before the next
    try: the server's ``Retry-After`` on a refusal that has one, a short back-off on other
    failures, 0 on success."""
    import aiohttp

    try:
        async with session.post(url, json=body) as response:
            if response.status != 200:
                stats.fail(f"http_{response.status}")
                await response.read()
                retry_after = response.headers.get("Retry-After", "")
                return None, float(retry_after) if retry_after.isdigit() else FAILURE_BACKOFF_S
            data: Answer = await response.json()
    except (aiohttp.ClientError, TimeoutError) as exc:
        stats.fail(type(exc).__name__)
        return None, FAILURE_BACKOFF_S
    stats.ok += 1
    if data.get("error") is not None:
        stats.broker_error(str(data["error"]))
    return data, 0.0


async def _fetcher(
    session: aiohttp.ClientSession,
    args: argparse.Namespace,
    partition: int,
    offset: int,
    stop: asyncio.Event,
    stats: Stats,
) -> None:
    url = f"{args.url}/v1/fetch"
    while not stop.is_set():
        body = {
            "topic": args.topic,
            "partition": partition,
            "offset": offset,
            "min_bytes": 1,
            "max_wait_ms": args.max_wait_ms,
        }
        answer, wait_s = await _post(session, url, body, stats)
        now = time.monotonic()
        stats.fetches += 1
        if answer is None:  # refused or failed: as the server asks, or a short back-off
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait_s)
            continue
        data = cast(FetchAnswer, answer)
        if data["error"] == ErrorCode.OFFSET_OUT_OF_RANGE:  # retention moved the log start
            offset = data["log_start_offset"]
            continue
        if data["error"] is not None:
            await asyncio.sleep(FAILURE_BACKOFF_S)  # instead of spinning on a failing partition
            continue
        records = data["records"]
        if records:
            sent = float(records[0]["value"].split(" ", 1)[0])
            stats.wakeups.append(now - sent)
            offset = records[-1]["offset"] + 1


async def _producer(
    session: aiohttp.ClientSession, args: argparse.Namespace, stop: asyncio.Event, stats: Stats
) -> None:
    url = f"{args.url}/v1/produce"
    interval = 1.0 / args.produce_rate
    pad = "x" * max(0, args.value_bytes - 20)
    in_flight: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    next_at = loop.time()
    partition = 0

    async def one(body: JsonObject, started: float) -> None:
        if (await _post(session, url, body, stats))[0] is not None:
            stats.produce_latency.append(time.monotonic() - started)
        stats.produces += 1

    while not stop.is_set():
        started = time.monotonic()
        value = f"{started:.6f} {pad}"
        body = {
            "topic": args.topic,
            "partition": partition,
            "records": [{"key": None, "value": value}] * args.records,
            "acks": args.acks,
            "timeout_ms": 30_000,
        }
        partition = (partition + 1) % args.partitions
        task = asyncio.create_task(one(body, started))  # open loop: never wait for answers
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
        next_at += interval
        await asyncio.sleep(max(0.0, next_at - loop.time()))
    if in_flight:
        await asyncio.wait(in_flight)


async def _ensure_topic(session: aiohttp.ClientSession, args: argparse.Namespace) -> list[int]:
    """Create the topic if needed; return each partition's high watermark."""
    body = {
        "name": args.topic,
        "partitions": args.partitions,
        "replication_factor": args.replication_factor,
    }
    async with session.post(f"{args.url}/v1/topics", json=body) as response:
        if response.status not in (201, 409):
            raise RuntimeError(f"cannot create topic: {response.status} {await response.text()}")
    async with session.get(f"{args.url}/v1/metadata") as response:
        response.raise_for_status()
        meta = await response.json()
    for topic in meta["topics"]:
        if topic["name"] == args.topic:
            hws = {p["partition"]: p["high_watermark"] for p in topic["partitions"]}
            if len(hws) < args.partitions:
                raise RuntimeError(f"topic {args.topic!r} has only {len(hws)} partitions")
            return [hws[i] for i in range(args.partitions)]
    raise RuntimeError(f"topic {args.topic!r} missing from metadata")


async def _parked(session: aiohttp.ClientSession, url: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    async with session.get(f"{url}/metrics") as response:
        response.raise_for_status()
        text = await response.text()
    for family in text_string_to_metric_families(text):
        if family.name == "purgatory_http_parked_requests":
            return family.samples[0].value
    raise RuntimeError("the server exports no purgatory_http_parked_requests gauge")


#: how long the parked count may stay put before the load starts anyway (the server may
#: park fewer than --fetchers: its --max-pending)
SETTLE_S: Final = 2.0


async def _wait_parked(session: aiohttp.ClientSession, args: argparse.Namespace) -> float:
    """Before producing, wait (up to 30 s) until the server reports every fetcher parked,
    or the count stops growing for SETTLE_S, so the measurement really runs with that many
    parked long polls; return the count."""
    deadline = time.monotonic() + 30
    parked = await _parked(session, args.url)
    grew_at = time.monotonic()
    while parked < args.fetchers and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        now_parked = await _parked(session, args.url)
        if now_parked > parked:
            grew_at = time.monotonic()
        elif time.monotonic() - grew_at >= SETTLE_S:
            return now_parked
        parked = now_parked
    return parked


async def drive(args: argparse.Namespace) -> LongPollSummary:
    """Run the load; return the summary."""
    import aiohttp

    stats = Stats()
    timeout = aiohttp.ClientTimeout(total=args.max_wait_ms / 1000 + 30)
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        hws = await _ensure_topic(session, args)
        stop = asyncio.Event()
        fetchers = []
        for i in range(args.fetchers):
            partition = i % args.partitions
            task = _fetcher(session, args, partition, hws[partition], stop, stats)
            fetchers.append(asyncio.create_task(task))
            if args.ramp > 0 and i % 100 == 99:  # open connections gradually (listen backlog)
                await asyncio.sleep(args.ramp * 100 / args.fetchers)
        parked = await _wait_parked(session, args)
        stats.wakeups.clear()
        started = time.monotonic()
        producer = asyncio.create_task(_producer(session, args, stop, stats))
        await asyncio.sleep(args.duration)
        stop.set()
        await producer
        elapsed = time.monotonic() - started
        await asyncio.gather(*fetchers)  # each returns after at most max_wait_ms
    wake = stats.wakeups
    return LongPollSummary(
        fetchers=args.fetchers,
        parked_before_producing=int(parked),
        partitions=args.partitions,
        duration_s=round(elapsed, 3),
        produce_requests=stats.produces,
        produce_rate=round(stats.produces / elapsed, 1),
        fetch_responses=stats.fetches,
        requests_per_s=round((stats.ok + stats.failed) / elapsed, 1),
        ok_requests=stats.ok,
        failed_requests=stats.failed,
        failures=stats.failures,
        broker_errors=stats.broker_errors,
        wakeups=len(wake),
        wakeup_latency_ms={
            name: _percentile_ms(wake, q)
            for name, q in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))
        },
        produce_latency_ms={
            name: _percentile_ms(stats.produce_latency, q) for name, q in (("p50", 50), ("p99", 99))
        },
    )
