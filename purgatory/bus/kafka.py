"""KafkaBus: triggers as records of one Kafka topic that every process reads in full.

Every process reads every partition of the topic (a manual assignment, no consumer group)
from the end it finds when it connects; what came before is covered by the full re-check
after every connect. aiokafka repairs lost connections silently underneath, and a broker
whose log is lost (an in-memory broker restarted, a log truncated) can give back offsets
that no longer mean what they did, so the bus watches for gaps itself and ends the
subscription on any of them (the base class then reconnects and re-checks):

- a connection of its own to every broker of the cluster: its closing (a broker stopped,
  restarted, or unreachable) ends the subscription at once, however short the outage;
- a probe on each of them every ``watchdog_interval_s`` (a Metadata request for the topic,
  answered within ``connect_timeout_s``): a hung broker, a missing topic, another set of
  partitions or brokers end it too;
- the consumer never resets its offsets by itself (``auto_offset_reset="none"``): an
  offset out of range, or a record offset below the position, ends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Unpack

from purgatory.bus._bus import Bus, BusError, BusOptions, _positive
from purgatory.errors import ErrorCode

try:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.conn import AIOKafkaConnection, create_conn
    from aiokafka.protocol.metadata import MetadataRequest
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("KafkaBus needs aiokafka: pip install 'purgatory-aio[kafka]'") from exc


class _Gap(ConnectionError):
    """Something happened that may have lost records: the subscription must end."""


class _Consumer(AIOKafkaConsumer):  # type: ignore[misc]
    """aiokafka's consumer, with a stop that closes everything even after a lost broker.

    aiokafka 0.14's fetcher, closing, awaits each fetch it cancels; one sleeping its retry
    backoff after a connection error re-raises the cancellation, and the close stops there,
    leaving the other fetches and every connection open. Finish it."""

    async def stop(self) -> None:
        try:
            await super().stop()
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # a cancellation of our own
            fetches = list(self._fetcher._pending_tasks)
            for fetch in fetches:
                fetch.cancel()
            await asyncio.gather(*fetches, return_exceptions=True)
            await self._client.close()


class KafkaBus(Bus):
    """A bus over one Kafka topic, read in full by every process (see the module doc).

    ``bootstrap_servers``: ``"host:port"``, comma-separated or a list; ``topic`` must exist
    (its partitions are all read; records are spread over them); ``watchdog_interval_s``:
    how often each broker is probed while connected."""

    # Kafka's default message.max.bytes (1 MiB + 12) bounds a record batch, and aiokafka's
    # max_request_size (1 MiB) the record estimated with its batch header (61 bytes) and
    # the largest record overhead (21 bytes, and a few for the value's length): a message
    # of this size is one record in one batch under both limits.
    max_message_bytes = (1 << 20) - 128

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        topic: str = "purgatory",
        name: str = "kafka",
        watchdog_interval_s: float = 1.0,
        **options: Unpack[BusOptions],
    ) -> None:
        super().__init__(name=name, **options)
        self.bootstrap_servers = _servers(bootstrap_servers)
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"topic must be a non-empty str, got {topic!r}")
        self.topic = topic
        self.watchdog_interval_s = _positive("watchdog_interval_s", watchdog_interval_s)
        self._consumer: _Consumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._watched: dict[int, AIOKafkaConnection] = {}
        self._brokers: set[tuple[int, str, int]] = set()
        self._positions: dict[Any, int] = {}  # TopicPartition -> next offset expected
        self._lost: asyncio.Future[None] | None = None
        self._stopping: list[asyncio.Future[None]] = []

    # -- the backend ------------------------------------------------------------------------

    async def _connect(self) -> None:
        self._lost = asyncio.get_running_loop().create_future()
        # Watch first: a broker lost after this point ends the subscription, even one lost
        # while the positions below are being fixed.
        brokers, partitions = await self._watch_brokers()
        client = {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": f"purgatory-bus-{self.name}",
            "request_timeout_ms": self._request_timeout_ms(),
        }
        self._consumer = _Consumer(enable_auto_commit=False, auto_offset_reset="none", **client)
        await self._start(self._consumer)
        assigned = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        self._consumer.assign(assigned)
        await self._consumer.seek_to_end(*assigned)
        # position() waits for the end offsets the broker gives: once every one is fixed,
        # a record produced afterwards is at or past it, so it will be fetched.
        self._positions = {tp: await self._consumer.position(tp) for tp in assigned}
        self._producer = AIOKafkaProducer(acks="all", linger_ms=0, **client)
        await self._start(self._producer)
        self._brokers = brokers
        if self._lost.done():
            self._lost.result()  # a broker was lost while connecting: raise it

    async def _start(self, client: _Consumer | AIOKafkaProducer) -> None:
        """Start ``client`` (the consumer or the producer just made), never cancelling the
        start itself: aiokafka 0.14 drops a bootstrap connection whose Metadata request is
        cancelled without closing it, and the socket stays open until the collector finds
        it. When this wait is cancelled (the connect timed out, the bus closes), the start
        goes on, bounded by the request timeout, and the client is stopped after it by
        :meth:`_disconnect`, which waits for what is stopping."""
        start = asyncio.ensure_future(client.start())
        try:
            await asyncio.shield(start)
        except asyncio.CancelledError:
            if client is self._consumer:
                self._consumer = None
            elif client is self._producer:
                self._producer = None
            self._stopping.append(asyncio.ensure_future(_stop_after(start, client)))
            raise

    async def _receive(self) -> None:
        tasks = [
            asyncio.ensure_future(self._consume()),
            asyncio.ensure_future(self._watchdog()),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            task.result()

    async def _send(self, message: str) -> None:
        if self._producer is None:
            raise ConnectionError("not connected")
        await self._producer.send_and_wait(self.topic, message.encode())

    async def _disconnect(self) -> None:
        lost, self._lost = self._lost, None
        if lost is not None and not lost.done():
            lost.cancel()
        watched, self._watched = self._watched, {}
        for conn in watched.values():
            conn.close()
        clients = [c for c in (self._consumer, self._producer) if c is not None]
        self._consumer = self._producer = None
        self._stopping += [asyncio.ensure_future(client.stop()) for client in clients]
        # Shielded: when a close cancels a disconnect in progress, the close's own
        # disconnect waits for the clients still stopping (a producer flushing a batch
        # for at most its request timeout).
        stopping, self._stopping = self._stopping, []
        try:
            await asyncio.shield(asyncio.gather(*stopping, return_exceptions=True))
        except asyncio.CancelledError:
            self._stopping = [task for task in stopping if not task.done()]
            raise

    def _describe(self) -> str:
        return f"kafka {','.join(self.bootstrap_servers)} topic {self.topic!r}"

    # -- receiving --------------------------------------------------------------------------

    async def _consume(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while True:
            # Raises OffsetOutOfRangeError when the log no longer has our position.
            batches = await consumer.getmany(timeout_ms=1000)
            for tp, records in batches.items():
                expected = self._positions[tp]
                for record in records:
                    if record.offset < expected:
                        raise _Gap(
                            f"{tp.topic}[{tp.partition}] went back from offset {expected} "
                            f"to {record.offset}: its log was replaced"
                        )
                    expected = record.offset + 1
                    self._deliver(record.value if record.value is not None else b"")
                self._positions[tp] = expected

    async def _watchdog(self) -> None:
        lost = self._lost
        assert lost is not None
        while True:
            await asyncio.wait([lost], timeout=self.watchdog_interval_s)
            if lost.done():
                lost.result()
            await asyncio.gather(*(self._check_broker(conn) for conn in self._watched.values()))

    async def _check_broker(self, conn: AIOKafkaConnection) -> None:
        """Raise _Gap unless ``conn``'s broker sees the cluster as it was at connect."""
        brokers, partitions = await self._probe(conn)
        where = f"the broker at {conn.host}:{conn.port}"
        if brokers != self._brokers:
            raise _Gap(f"{where} lists other brokers: {sorted(brokers)}")
        assigned = {tp.partition for tp in self._positions}
        if partitions != assigned:
            raise _Gap(
                f"{where} gives topic {self.topic!r} partitions {sorted(partitions)}, "
                f"not {sorted(assigned)}"
            )

    # -- watching the brokers -----------------------------------------------------------------

    async def _watch_brokers(self) -> tuple[set[tuple[int, str, int]], set[int]]:
        """Open a watched connection to every broker; return the brokers and the topic's
        partitions. A bootstrap server that does not answer is skipped for the next."""
        errors = []
        for server in self.bootstrap_servers:
            host, port = _host_port(server)
            try:
                conn = await self._open(host, port)
            except Exception as exc:
                errors.append(f"{server}: {exc or type(exc).__name__}")
                continue
            try:
                brokers, partitions = await self._probe(conn)
            finally:
                conn.close()
            for node_id, host, port in brokers:
                self._watched[node_id] = await self._open(host, port)
            return brokers, partitions
        raise ConnectionError("no bootstrap server answered: " + "; ".join(errors))

    async def _open(self, host: str, port: int) -> AIOKafkaConnection:
        return await create_conn(
            host,
            port,
            client_id=f"purgatory-bus-{self.name}-watchdog",
            request_timeout_ms=self._request_timeout_ms(),
            on_close=self._on_watched_closed,
        )

    def _on_watched_closed(self, conn: AIOKafkaConnection, reason: object) -> None:
        lost = self._lost
        if lost is not None and not lost.done() and any(c is conn for c in self._watched.values()):
            lost.set_exception(
                _Gap(f"the connection to the broker at {conn.host}:{conn.port} closed")
            )

    async def _probe(self, conn: AIOKafkaConnection) -> tuple[set[tuple[int, str, int]], set[int]]:
        """The brokers and the topic's partitions, as ``conn``'s broker sees them."""
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                answer = await conn.send(
                    MetadataRequest([self.topic], allow_auto_topic_creation=False)
                )
        except TimeoutError:
            raise _Gap(
                f"the broker at {conn.host}:{conn.port} did not answer within "
                f"{self.connect_timeout_s} s"
            ) from None
        brokers = {(b[0], b[1], b[2]) for b in answer.brokers}
        for error_code, topic, _internal, partitions, *_ in answer.topics:
            if topic != self.topic:
                continue
            if error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.number:
                raise BusError(
                    f"topic {self.topic!r} does not exist on {conn.host}:{conn.port}: create "
                    f"it (e.g. kafka-topics.sh --create, or `purgatory serve --topic "
                    f"{self.topic}:PARTITIONS:RF`, or POST /v1/topics)"
                )
            if error_code != 0:
                raise _Gap(f"metadata of topic {self.topic!r}: Kafka error code {error_code}")
            return brokers, {p[1] for p in partitions}
        raise _Gap(f"the broker at {conn.host}:{conn.port} did not describe {self.topic!r}")

    def _request_timeout_ms(self) -> int:
        return max(1, round(min(self.connect_timeout_s, self.publish_timeout_s) * 1000))


async def _stop_after(start: asyncio.Future[None], client: _Consumer | AIOKafkaProducer) -> None:
    await asyncio.gather(start, return_exceptions=True)
    await client.stop()


def _servers(bootstrap_servers: str | Sequence[str]) -> list[str]:
    servers = (
        bootstrap_servers.split(",")
        if isinstance(bootstrap_servers, str)
        else list(bootstrap_servers)
    )
    servers = [s.strip() if isinstance(s, str) else s for s in servers]
    if not servers or not all(isinstance(s, str) and s for s in servers):
        raise ValueError(
            f"bootstrap_servers must be 'host:port', comma-separated or a list of them, "
            f"got {bootstrap_servers!r}"
        )
    for server in servers:
        _host_port(server)
    return servers


def _host_port(server: str) -> tuple[str, int]:
    host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bootstrap server must be 'host:port', got {server!r}")
    return host.strip("[]"), int(port)
