"""``purgatory load``'s attack modes: hostile clients, to check that a server holds them.

* ``--slowloris N``: N sockets each sending a request head one byte per ``--trickle-s``,
  never finishing it. A server with a header timeout closes them.
* ``--idle N``: N sockets that connect and send nothing. A server closes them too.
* ``--slow-bodies N``: N sockets each sending a produce whose ``--slow-body-bytes`` body
  arrives but for its last byte. Each holds a read buffer on the server: a server bounds the
  bytes of bodies it reads at once, and closes them at its body timeout.
* ``--flood``: ``--flood-producers`` clients producing as fast as they are answered, with
  ``--records`` records of ``--value-bytes`` each, for ``--duration`` seconds: the server's
  memory must stay bounded (its RSS is read from ``/metrics`` every half second).

Meanwhile ``/healthz`` is asked every half second on a new connection: the report says how
often it answered 200, and how slowly. Attacks go to loopback addresses only, in bounded
numbers and time: they are for testing your own server.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from purgatory.json_types import JsonObject
from purgatory.loopback import is_loopback
from purgatory.percentiles import percentile

if TYPE_CHECKING:
    import aiohttp

#: the most sockets an attack opens (a loopback address has about 28,000 ephemeral ports)
MAX_SOCKETS: Final = 60_000
#: the longest an attack runs, in seconds
MAX_DURATION_S: Final = 600.0
#: how often /healthz and /metrics are asked during an attack
PROBE_INTERVAL_S: Final = 0.5


def loopback_target(url: str) -> tuple[str, int]:
    """``(host, port)`` of ``url``; ValueError unless the host is a loopback address."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None:
        raise ValueError(f"--url must be http://HOST:PORT, got {url!r}")
    if not is_loopback(parts.hostname):
        raise ValueError(
            f"attack modes target loopback only (127.0.0.1, ::1, localhost), got {parts.hostname!r}"
        )
    return parts.hostname, parts.port or 80


@dataclass(frozen=True, slots=True)
class SocketsSummary:
    """What became of one kind of attacking socket (``--json`` prints each field with the
    kind as its prefix: ``slowloris_opened``...)."""

    sockets: int
    opened: int
    #: connects that failed, by the error's name
    connect_failed: dict[str, int]
    closed_by_server: int
    still_open_at_end: int
    #: sockets the server answered before closing them, by HTTP status ("reset", "none")
    server_answers: dict[str, int]
    #: p50, p99, max of connect to close, over the closed sockets
    held_until_closed_ms: dict[str, float]
    attack_s: float


@dataclass(frozen=True, slots=True)
class RssMib:
    first: float
    max: float
    last: float


@dataclass(frozen=True, slots=True)
class StoredMib:
    max: float
    last: float


@dataclass(frozen=True, slots=True)
class ProbeSummary:
    """How the server held up: ``/healthz`` answers, and what its ``/metrics`` said (None:
    it exported no such figure, and ``--json`` leaves it out)."""

    healthz_ok: int
    #: failed probes by why (``http_503``, a transport error's name)
    healthz_failed: dict[str, int]
    healthz_latency_ms: dict[str, float]
    server_rss_mib: RssMib | None = None
    server_stored_mib: StoredMib | None = None
    server_open_fds_max: int | None = None

    def to_dict(self) -> JsonObject:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True, slots=True)
class SocketsAttackReport:
    """``--slowloris``, ``--idle``, ``--slow-bodies``: per kind of socket that was opened,
    what became of them, then the probe's figures."""

    kinds: dict[str, SocketsSummary]
    probe: ProbeSummary

    @property
    def ok(self) -> bool:
        """``/healthz`` never failed during the attack."""
        return not self.probe.healthz_failed

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"mode": "sockets"}
        for kind, summary in self.kinds.items():
            out.update({f"{kind}_{k}": v for k, v in asdict(summary).items()})
        return out | self.probe.to_dict()


@dataclass(frozen=True, slots=True)
class FloodReport:
    """``--flood``: what the producers got through, then the probe's figures."""

    producers: int
    duration_s: float
    produce_requests: int
    requests_per_s: float
    #: answers by HTTP status, or the transport error's name
    statuses: dict[str, int]
    #: 200 answers by the error code they carried
    broker_errors: dict[str, int]
    accepted_mib: float
    accepted_mib_per_s: float
    probe: ProbeSummary

    @property
    def ok(self) -> bool:
        """``/healthz`` never failed during the flood."""
        return not self.probe.healthz_failed

    def to_dict(self) -> JsonObject:
        out: JsonObject = {k: v for k, v in asdict(self).items() if k != "probe"}
        return {"mode": "produce_flood", **out} | self.probe.to_dict()


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        name: round(percentile(ordered, q) * 1000, 1) if ordered else float("nan")
        for name, q in (("p50", 50), ("p99", 99), ("max", 100))
    }


@dataclass
class SocketStats:
    """What became of the attacking sockets."""

    opened: int = 0
    connect_failed: Counter[str] = field(default_factory=Counter)
    closed_by_server: int = 0
    answers: Counter[str] = field(default_factory=Counter)  # status of the server's answer
    held_s: list[float] = field(default_factory=list)  # connect to close, closed ones

    def summary(self, total: int, duration_s: float) -> SocketsSummary:
        return SocketsSummary(
            sockets=total,
            opened=self.opened,
            connect_failed=dict(self.connect_failed),
            closed_by_server=self.closed_by_server,
            still_open_at_end=self.opened - self.closed_by_server,
            server_answers=dict(self.answers),
            held_until_closed_ms=_ms(self.held_s),
            attack_s=round(duration_s, 3),
        )


async def _hostile_socket(
    address: tuple[str, int],
    first: bytes,
    trickle: bytes,
    trickle_s: float,
    stop: asyncio.Event,
    stats: SocketStats,
) -> None:
    """Connect, send ``first``, then ``trickle`` one byte per ``trickle_s``, and hold the
    socket until the server closes it or ``stop`` is set."""
    try:
        reader, writer = await asyncio.open_connection(*address)
    except OSError as exc:
        stats.connect_failed[type(exc).__name__] += 1
        return
    stats.opened += 1
    started = time.monotonic()
    sent = 0
    read = asyncio.ensure_future(reader.read(65536))
    waiting = asyncio.ensure_future(stop.wait())
    try:
        writer.write(first)
        while not stop.is_set():
            if sent < len(trickle):
                writer.write(trickle[sent : sent + 1])
                sent += 1
            done, _ = await asyncio.wait(
                {read, waiting},
                timeout=trickle_s if sent < len(trickle) else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if read in done:
                answer = read.result() if read.exception() is None else b""
                status = answer.split(b" ", 2)[1].decode() if answer.count(b" ") >= 2 else "none"
                stats.answers[status] += 1
                stats.closed_by_server += 1
                stats.held_s.append(time.monotonic() - started)
                return
    except OSError:  # reset while writing: closed by the server too
        stats.answers["reset"] += 1
        stats.closed_by_server += 1
        stats.held_s.append(time.monotonic() - started)
    finally:
        read.cancel()
        waiting.cancel()
        writer.close()


@dataclass
class Probe:
    """``/healthz`` (on a new connection each time) and the server's RSS and stored bytes,
    sampled."""

    health_ok: int = 0
    health_failed: Counter[str] = field(default_factory=Counter)
    health_s: list[float] = field(default_factory=list)
    rss_bytes: list[float] = field(default_factory=list)
    open_fds: list[float] = field(default_factory=list)
    stored_bytes: list[float] = field(default_factory=list)

    async def run(self, url: str, stop: asyncio.Event) -> None:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=5)
        connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    async with session.get(f"{url}/healthz") as response:
                        await response.read()
                        if response.status == 200:
                            self.health_ok += 1
                            self.health_s.append(time.monotonic() - started)
                        else:
                            self.health_failed[f"http_{response.status}"] += 1
                    await self._sample(session, url)
                except (aiohttp.ClientError, TimeoutError) as exc:
                    self.health_failed[type(exc).__name__] += 1
                try:
                    await asyncio.wait_for(stop.wait(), PROBE_INTERVAL_S)
                except TimeoutError:
                    pass

    async def _sample(self, session: aiohttp.ClientSession, url: str) -> None:
        async with session.get(f"{url}/metrics") as response:
            if response.status != 200:
                return
            for line in (await response.text()).splitlines():
                if line.startswith("process_resident_memory_bytes "):
                    self.rss_bytes.append(float(line.split()[1]))
                elif line.startswith("process_open_fds "):
                    self.open_fds.append(float(line.split()[1]))
                elif line.startswith("purgatory_stored_bytes "):
                    self.stored_bytes.append(float(line.split()[1]))

    def summary(self) -> ProbeSummary:
        mib = 1 << 20
        rss, stored = self.rss_bytes, self.stored_bytes
        return ProbeSummary(
            healthz_ok=self.health_ok,
            healthz_failed=dict(self.health_failed),
            healthz_latency_ms=_ms(self.health_s),
            server_rss_mib=RssMib(
                first=round(rss[0] / mib, 1),
                max=round(max(rss) / mib, 1),
                last=round(rss[-1] / mib, 1),
            )
            if rss
            else None,
            server_stored_mib=StoredMib(
                max=round(max(stored) / mib, 1), last=round(stored[-1] / mib, 1)
            )
            if stored
            else None,
            server_open_fds_max=int(max(self.open_fds)) if self.open_fds else None,
        )


#: a slowloris' head: never finished
SLOW_HEAD: Final = b"POST /v1/fetch HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100_000


def slow_body(body_bytes: int) -> bytes:
    """A produce request with a ``body_bytes`` body, all but its last byte."""
    head = (
        "POST /v1/produce HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {body_bytes}\r\n\r\n"
    )
    return head.encode() + b" " * (body_bytes - 1)


async def sockets_attack(
    url: str,
    slowloris: int,
    idle: int,
    trickle_s: float,
    duration_s: float,
    slow_bodies: int = 0,
    slow_body_bytes: int = 1 << 20,
) -> SocketsAttackReport:
    """Open ``slowloris`` trickling, ``idle`` silent and ``slow_bodies`` unfinished-body
    sockets (ramped over about a second), hold them for ``duration_s``, and report what
    the server did with them."""
    address = loopback_target(url)
    stop = asyncio.Event()
    probe = Probe()
    prober = asyncio.create_task(probe.run(url, stop))
    # kind -> (sockets, sent at once, then trickled)
    kinds = {
        "slowloris": (slowloris, b"", SLOW_HEAD),
        "idle": (idle, b"", b""),
        "slow_body": (slow_bodies, slow_body(slow_body_bytes) if slow_bodies else b"", b""),
    }
    stats = {kind: SocketStats() for kind in kinds}
    tasks = []
    started = time.monotonic()
    for kind, (count, first, trickle) in kinds.items():
        for i in range(count):
            task = _hostile_socket(address, first, trickle, trickle_s, stop, stats[kind])
            tasks.append(asyncio.create_task(task))
            if i % 500 == 499:  # let the listen backlog drain
                await asyncio.sleep(0.05)
    await asyncio.sleep(max(0.0, duration_s - (time.monotonic() - started)))
    stop.set()
    await asyncio.gather(*tasks, prober)
    elapsed = time.monotonic() - started
    return SocketsAttackReport(
        kinds={
            kind: stats[kind].summary(count, elapsed)
            for kind, (count, _, _) in kinds.items()
            if count
        },
        probe=probe.summary(),
    )


async def produce_flood(
    url: str,
    topic: str,
    partitions: int,
    producers: int,
    records: int,
    value_bytes: int,
    acks: int,
    duration_s: float,
) -> FloodReport:
    """``producers`` closed-loop producers appending as fast as the server answers."""
    import aiohttp

    loopback_target(url)
    stop = asyncio.Event()
    probe = Probe()
    prober = asyncio.create_task(probe.run(url, stop))
    statuses: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    value = "x" * value_bytes
    sent_bytes = 0

    async def producer(session: aiohttp.ClientSession, first: int) -> None:
        nonlocal sent_bytes
        partition = first
        while not stop.is_set():
            body = {
                "topic": topic,
                "partition": partition,
                "records": [{"value": value}] * records,
                "acks": acks,
            }
            try:
                async with session.post(f"{url}/v1/produce", json=body) as response:
                    statuses[str(response.status)] += 1
                    answer = await response.json() if response.status == 200 else None
            except (aiohttp.ClientError, TimeoutError) as exc:
                statuses[type(exc).__name__] += 1
                await asyncio.sleep(0.1)
                continue
            if answer is None:  # refused: 507 once the stored-bytes cap is reached
                await asyncio.sleep(0.01)
            elif answer.get("error") is not None:
                errors[str(answer["error"])] += 1
            else:
                sent_bytes += records * value_bytes
            partition = (partition + 1) % partitions

    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        create = {"name": topic, "partitions": partitions, "replication_factor": 1}
        async with session.post(f"{url}/v1/topics", json=create) as response:
            if response.status not in (201, 409):
                raise RuntimeError(
                    f"cannot create topic: {response.status} {await response.text()}"
                )
        started = time.monotonic()
        tasks = [asyncio.create_task(producer(session, i % partitions)) for i in range(producers)]
        await asyncio.sleep(duration_s)
        stop.set()
        await asyncio.gather(*tasks, prober)
        elapsed = time.monotonic() - started
    requests = sum(statuses.values())
    return FloodReport(
        producers=producers,
        duration_s=round(elapsed, 3),
        produce_requests=requests,
        requests_per_s=round(requests / elapsed, 1),
        statuses=dict(statuses),
        broker_errors=dict(errors),
        accepted_mib=round(sent_bytes / (1 << 20), 1),
        accepted_mib_per_s=round(sent_bytes / (1 << 20) / elapsed, 2),
        probe=probe.summary(),
    )
