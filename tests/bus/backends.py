"""The four backends behind one face, for the contract suite (``test_bus_contract.py``).

A :class:`Backend` makes buses that hear each other (one channel, or topic, per test), and
plays what the contract needs of a server: cut it (``kill -9``, or a stopped hub) and bring
it back, drop every subscription while it stays up, send a message no bus wrote, and point
a bus at a server that refuses connections. What differs between backends, and is asserted
as such, is declared here as data: ``max_message_bytes`` (documented in docs/bus.md),
``flood_checks_at_most``, ``crosses_processes``.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any, ClassVar

import purgatory.bus
from purgatory.bus import Bus, MemoryBus, MemoryHub
from purgatory.bus.testing import (
    KafkaServer,
    LocalServer,
    PostgresServer,
    RedisServer,
    free_port,
)


def _bus_class(kind: str) -> Any:
    """RedisBus, PostgresBus, KafkaBus: imported on first use, so that a missing client
    library is the fixture's clear skip (or failure under CI=true), not an import error."""
    return getattr(purgatory.bus, kind)


def refused_port() -> int:
    """A loopback port nobody listens on: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class Backend:
    kind: str
    #: the largest message, in UTF-8 bytes (docs/bus.md, "Limits")
    max_message_bytes: int
    #: how many checks 1,000 triggers of one key may cost: the in-process hub delivers
    #: them inside ``publish``, so they meet a pending check and merge; over a server they
    #: arrive one read at a time, so fewer merge (docs/performance.md, "Coalescing")
    flood_checks_at_most: int = 1000
    #: waiter processes can share its server (MemoryHub lives in one process)
    crosses_processes: bool = True
    #: the cause ``start`` names when the server refuses connections
    refused_cause: str = ""
    #: short backoffs (and pings) so that reconnects take milliseconds
    fast: ClassVar[dict[str, Any]]
    #: the backend's own liveness probe made too slow to notice anything in a test: what
    #: is noticed is then noticed by the connection ending
    no_probe: ClassVar[dict[str, Any]] = {}
    server: LocalServer | None = None

    def bus(self, name: str = "bus", **options: Any) -> Bus:
        raise NotImplementedError

    def unreachable_bus(self, secret: str, port: int | None = None, **options: Any) -> Bus:
        """A bus whose server refuses connections (or, given ``port``, a server there);
        its address holds ``secret`` as the password where the backend takes one."""
        raise NotImplementedError

    def spec(self, name: str, **options: Any) -> dict[str, Any]:
        """The bus for ``waiters.py`` (another process)."""
        raise NotImplementedError

    async def cut(self) -> None:
        """The server is gone (``kill -9``): returns once its port is free."""
        assert self.server is not None
        await asyncio.to_thread(self.server.kill)

    def restart(self) -> None:
        """The server back on the same port: returns once it answers."""
        assert self.server is not None
        self.server.start()

    async def restore(self) -> None:
        await asyncio.to_thread(self.restart)

    async def drop_subscriptions(self) -> None:
        """End every bus's subscription; the server is up again when this returns."""
        raise NotImplementedError

    async def assert_resubscribed(self, bus: Bus) -> None:
        """What the backend can show of a new subscription after a drop."""

    async def send_foreign(self) -> int:
        """Send messages no bus wrote on the channel; how many."""
        raise NotImplementedError

    def recover(self) -> None:
        """After the test: the server up again, whatever the test left it in."""
        if self.server is not None and (
            self.server.process is None or self.server.process.poll() is not None
        ):
            self.server.start()


class Memory(Backend):
    kind = "memory"
    max_message_bytes = 1 << 20
    flood_checks_at_most = 2
    crosses_processes = False
    fast: ClassVar[dict[str, Any]] = {"backoff_initial_s": 0.01, "backoff_max_s": 0.2}

    def __init__(self) -> None:
        self.hub = MemoryHub()

    def bus(self, name: str = "bus", **options: Any) -> Bus:
        return MemoryBus(self.hub, name=name, **{**self.fast, **options})

    refused_cause = "the memory hub is stopped"

    def unreachable_bus(self, secret: str, port: int | None = None, **options: Any) -> Bus:
        hub = MemoryHub()
        hub.stop()
        return MemoryBus(hub, name="cut-off", **{**self.fast, **options})

    async def cut(self) -> None:
        self.hub.stop()

    async def restore(self) -> None:
        self.hub.start()

    async def drop_subscriptions(self) -> None:
        self.hub.stop()  # a blip: the subscriptions end, the hub is back at once
        self.hub.start()

    async def send_foreign(self) -> int:
        self.hub._send("garbage from another app")
        return 1

    def recover(self) -> None:
        self.hub.start()


class Redis(Backend):
    kind = "redis"
    max_message_bytes = 1 << 20
    fast: ClassVar[dict[str, Any]] = {
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.2,
        "connect_timeout_s": 5.0,
    }

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.channel = f"test-{uuid.uuid4().hex}"

    def bus(self, name: str = "bus", **options: Any) -> Bus:
        assert isinstance(self.server, RedisServer)
        return _bus_class("RedisBus")(
            self.server.url, channel=self.channel, name=name, **self.fast | options
        )

    no_probe: ClassVar[dict[str, Any]] = {"health_check_interval_s": 60.0}

    def unreachable_bus(self, secret: str, port: int | None = None, **options: Any) -> Bus:
        url = f"redis://:{secret}@127.0.0.1:{port or refused_port()}/0"
        return _bus_class("RedisBus")(url, channel=self.channel, **self.fast | options)

    def spec(self, name: str, **options: Any) -> dict[str, Any]:
        assert isinstance(self.server, RedisServer)
        where = {"kind": "RedisBus", "url": self.server.url, "channel": self.channel}
        return where | {"name": name} | self.fast | options

    async def drop_subscriptions(self) -> None:
        assert isinstance(self.server, RedisServer)
        killed = await asyncio.to_thread(self.server.command, "CLIENT", "KILL", "TYPE", "pubsub")
        assert killed.startswith(":")
        assert int(killed[1:]) >= 1

    async def send_foreign(self) -> int:
        assert isinstance(self.server, RedisServer)
        await asyncio.to_thread(self.server.command, "PUBLISH", self.channel, "\xff not json")
        return 1


class Postgres(Backend):
    kind = "postgres"
    max_message_bytes = 7999  # NOTIFY refuses payloads of 8000 bytes or more
    fast: ClassVar[dict[str, Any]] = {
        "backoff_initial_s": 0.02,
        "backoff_max_s": 0.2,
        "ping_interval_s": 1.0,
    }

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.channel = f"t-{uuid.uuid4().hex[:12]}"
        self._terminated: set[int] = set()

    def bus(self, name: str = "bus", **options: Any) -> Bus:
        assert isinstance(self.server, PostgresServer)
        return _bus_class("PostgresBus")(
            self.server.dsn,
            channel=self.channel,
            name=f"{name}-{self.channel}",
            **self.fast | options,
        )

    no_probe: ClassVar[dict[str, Any]] = {"ping_interval_s": 60.0}

    def unreachable_bus(self, secret: str, port: int | None = None, **options: Any) -> Bus:
        dsn = f"postgresql://u:{secret}@127.0.0.1:{port or refused_port()}/db"
        return _bus_class("PostgresBus")(dsn, channel=self.channel, **self.fast | options)

    def spec(self, name: str, **options: Any) -> dict[str, Any]:
        assert isinstance(self.server, PostgresServer)
        where = {"kind": "PostgresBus", "dsn": self.server.dsn, "channel": self.channel}
        return where | {"name": f"{name}-{self.channel}"} | self.fast | options

    async def _admin(self) -> Any:
        import asyncpg

        assert isinstance(self.server, PostgresServer)
        return await asyncpg.connect(self.server.dsn)

    async def listening_pids(self) -> set[int]:
        """The listening connections of this test's buses (their names end in the channel)."""
        connection = await self._admin()
        try:
            rows = await connection.fetch(
                "SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1",
                f"purgatory-bus %-{self.channel}",
            )
        finally:
            await connection.close()
        return {row["pid"] for row in rows}

    async def drop_subscriptions(self) -> None:
        # With a timeout, pg_terminate_backend returns once the backends have exited.
        pids = await self.listening_pids()
        connection = await self._admin()
        try:
            for pid in pids:
                assert await connection.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
        finally:
            await connection.close()
        assert pids
        self._terminated |= pids

    async def assert_resubscribed(self, bus: Bus) -> None:
        assert isinstance(bus, _bus_class("PostgresBus"))
        connection = await self._admin()
        try:
            pids = await connection.fetch(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                bus.application_name,
            )
        finally:
            await connection.close()
        assert len(pids) == 1, pids
        assert pids[0]["pid"] not in self._terminated  # a new listening connection

    async def send_foreign(self) -> int:
        connection = await self._admin()
        try:
            await connection.execute("SELECT pg_notify($1, 'not json')", self.channel)
        finally:
            await connection.close()
        return 1


class Kafka(Backend):
    kind = "kafka"
    # Kafka's default message.max.bytes and aiokafka's max_request_size (1 MiB), less the
    # record batch's own bytes
    max_message_bytes = 1_048_448
    fast: ClassVar[dict[str, Any]] = {
        "connect_timeout_s": 3.0,
        "publish_timeout_s": 2.0,
        "backoff_initial_s": 0.05,
        "backoff_max_s": 0.5,
        "watchdog_interval_s": 0.5,
    }

    def __init__(self, server: KafkaServer) -> None:
        self.server = server

    def bus(self, name: str = "bus", **options: Any) -> Bus:
        assert isinstance(self.server, KafkaServer)
        return _bus_class("KafkaBus")(
            self.server.bootstrap_servers, name=name, **self.fast | options
        )

    no_probe: ClassVar[dict[str, Any]] = {"watchdog_interval_s": 60.0}

    def unreachable_bus(self, secret: str, port: int | None = None, **options: Any) -> Bus:
        # Kafka addresses carry no password
        address = f"127.0.0.1:{port or free_port()}"
        return _bus_class("KafkaBus")(address, **self.fast | options)

    def restart(self) -> None:
        # Back empty, as a broker that lost its log: the topic is created again after it.
        assert isinstance(self.server, KafkaServer)
        self.server.start(topic=False)
        self.server.create_topic()

    def spec(self, name: str, **options: Any) -> dict[str, Any]:
        assert isinstance(self.server, KafkaServer)
        where = {"kind": "KafkaBus", "bootstrap_servers": self.server.bootstrap_servers}
        return where | {"name": name} | self.fast | options

    async def drop_subscriptions(self) -> None:
        # Nothing ends a Kafka consumer's connections from outside but the broker going:
        # a restart (its log comes back empty, the topic created again).
        await self.cut()
        await self.restore()

    async def send_foreign(self) -> int:
        from aiokafka import AIOKafkaProducer

        assert isinstance(self.server, KafkaServer)
        producer = AIOKafkaProducer(bootstrap_servers=self.server.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait(self.server.topic, b"not json")
            await producer.send_and_wait(self.server.topic, None, key=b"k")  # a tombstone
        finally:
            await producer.stop()
        return 2
