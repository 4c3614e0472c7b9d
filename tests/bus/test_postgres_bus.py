"""PostgresBus against a real PostgreSQL server (initdb + postgres in a temp dir, per
session): triggers cross connections, large key sets are split under NOTIFY's 8000-byte
limit, a lost listening connection (terminated, crashed server, silently dead) is noticed,
reconnected and followed by a re-check of every watched key, and bad input is refused."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from outage import collect, set_versions, waiter_processes
from waits import Purgatory, waiter

from purgatory.bus import BusUnavailable
from purgatory.bus.postgres import PostgresBus
from purgatory.bus.testing import PostgresServer

# Short backoffs and pings: the tests wait for reconnects.
FAST = {"backoff_initial_s": 0.02, "backoff_max_s": 0.2, "ping_interval_s": 1.0}


@pytest.fixture
def channel() -> str:
    """A channel of its own per test: nothing published by another test is heard."""
    return f"t-{uuid.uuid4().hex[:12]}"


async def until(condition: Any, within_s: float = 10.0) -> float:
    """Poll ``condition()`` until true; the seconds it took. Fails past ``within_s``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > within_s:
            raise AssertionError(f"not true within {within_s} s")
        await asyncio.sleep(0.01)
    return time.monotonic() - started


@asynccontextmanager
async def admin(postgres_server: PostgresServer) -> AsyncIterator[Any]:
    connection = await asyncpg.connect(postgres_server.dsn)
    try:
        yield connection
    finally:
        await connection.close()


async def listener_pid(postgres_server: PostgresServer, bus: PostgresBus) -> int:
    async with admin(postgres_server) as connection:
        pids = await connection.fetch(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
            bus.application_name,
        )
    assert len(pids) == 1, pids
    pid: int = pids[0]["pid"]
    return pid


@pytest.mark.asyncio
async def test_a_key_published_on_one_connection_wakes_waiters_on_another(
    postgres_server: PostgresServer, channel: str
) -> None:
    state: dict[str, int] = {}
    async with Purgatory("a") as pa, Purgatory("b") as pb:
        async with (
            PostgresBus(postgres_server.dsn, channel=channel, name="a") as bus_a,
            PostgresBus(postgres_server.dsn, channel=channel, name="b") as bus_b,
        ):
            bus_a.attach(pa)
            bus_b.attach(pb)
            here, there = waiter(pa, state, "job-1"), waiter(pb, state, "job-1")
            other = waiter(pb, state, "job-2")
            await asyncio.sleep(0.05)
            state["job-1"] = state["job-2"] = 1
            await bus_a.publish("job-1")
            assert await asyncio.wait_for(here, 5) is True
            assert await asyncio.wait_for(there, 5) is True
            await asyncio.sleep(0.1)
            assert not other.done()  # job-2 was not published
            other.cancel()
            sa, sb = bus_a.statistics(), bus_b.statistics()
            assert (sa.published, sa.messages_sent, sa.messages_received) == (1, 1, 0)
            assert (sb.received, sb.messages_received) == (1, 1)
            assert sb.connected
            with pytest.raises(TypeError, match=r"keys on a bus are str.*got int 7"):
                await bus_a.publish("ok", 7)  # type: ignore[arg-type]
            assert bus_a.statistics().messages_sent == 1


@pytest.mark.asyncio
async def test_a_large_key_set_is_split_under_the_notify_limit_and_arrives_whole(
    postgres_server: PostgresServer, channel: str
) -> None:
    async with (
        PostgresBus(postgres_server.dsn, channel=channel, name="pub") as publisher,
        PostgresBus(postgres_server.dsn, channel=channel, name="sub") as subscriber,
    ):
        assert publisher.max_message_bytes == 7999
        keys = [f"job-{i:06d}-é\"\n'\\" for i in range(2000)]  # text NOTIFY must keep intact
        await publisher.publish(*keys)
        sent = publisher.statistics().messages_sent
        assert sent == 6  # 2000 keys of 24 bytes in JSON, under 8000 bytes a message
        await until(lambda: subscriber.statistics().received == 2000)
        assert subscriber.statistics().messages_received == sent
        # The largest key that fits still goes; one byte more is refused, clearly.
        overhead = len(f'["{publisher.sender_id}",""]')
        await publisher.publish("k" * (7999 - overhead))
        with pytest.raises(ValueError, match=r"does not fit in one message.*7999 bytes"):
            await publisher.publish("k" * (7999 - overhead + 1))
        await until(lambda: subscriber.statistics().received == 2001)


@pytest.mark.asyncio
async def test_the_channel_is_quoted_and_bad_arguments_are_refused(
    postgres_server: PostgresServer,
) -> None:
    channel = f'Odd "Chan" -{uuid.uuid4().hex[:6]}'  # case, quotes, spaces survive
    state: dict[str, int] = {}
    async with Purgatory("w") as p:
        async with (
            PostgresBus(postgres_server.dsn, channel=channel, name="w") as receiver,
            PostgresBus(postgres_server.dsn, channel=channel, name="pub") as publisher,
            PostgresBus(postgres_server.dsn, channel=channel.lower(), name="other") as other,
        ):
            receiver.attach(p)
            wait = waiter(p, state, "k")
            await asyncio.sleep(0.05)
            state["k"] = 1
            await publisher.publish("k")
            assert await asyncio.wait_for(wait, 5) is True
            await asyncio.sleep(0.1)
            assert other.statistics().messages_received == 0  # another channel
    with pytest.raises(ValueError, match="1 to 63 bytes"):
        PostgresBus(postgres_server.dsn, channel="")
    with pytest.raises(ValueError, match="1 to 63 bytes"):
        PostgresBus(postgres_server.dsn, channel="é" * 32)  # 64 bytes
    with pytest.raises(ValueError, match="no NUL"):
        PostgresBus(postgres_server.dsn, channel="a\x00b")
    with pytest.raises(TypeError, match="channel must be a str"):
        PostgresBus(postgres_server.dsn, channel=b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="postgresql:// URL") as refused:
        PostgresBus("mysql://root:secret@db/x")
    assert "secret" not in str(refused.value)
    with pytest.raises(ValueError, match="ping_interval_s"):
        PostgresBus(postgres_server.dsn, ping_interval_s=0)
    bus = PostgresBus("postgresql://u:secret@127.0.0.1:1/db?password=secret", channel="c")
    assert "secret" not in repr(bus)
    assert "postgresql://u@127.0.0.1:1/db channel 'c'" in repr(bus)


@pytest.mark.asyncio
async def test_an_unreachable_server_at_start_is_a_clear_error_in_bounded_time() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        refused = closed.getsockname()[1]
        bus = PostgresBus(f"postgresql://u:pw@127.0.0.1:{refused}/db", connect_timeout_s=1.0)
        started = time.monotonic()
        with pytest.raises(BusUnavailable, match=r"could not connect .*within 1\.0 s: ") as e:
            await bus.start()
        assert 1.0 <= time.monotonic() - started < 2.0
        assert "pw" not in str(e.value)
    # A server that accepts the TCP connection and never answers: still bounded.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        bus = PostgresBus(f"postgresql://u@127.0.0.1:{port}/db", connect_timeout_s=1.0)
        started = time.monotonic()
        with pytest.raises(BusUnavailable, match=r"within 1\.0 s"):
            await bus.start()
        assert time.monotonic() - started < 2.0


@pytest.mark.asyncio
async def test_a_terminated_listening_connection_is_reconnected_and_rechecked(
    postgres_server: PostgresServer, channel: str
) -> None:
    """pg_terminate_backend on the listening connection: the bus notices at once,
    listens again, and re-checks every watched key (a change nobody published, or whose
    message was lost, is found)."""
    state: dict[str, int] = {}
    options = {**FAST, "ping_interval_s": 60.0}  # noticed without waiting for a ping
    async with (
        Purgatory("w") as p,
        PostgresBus(postgres_server.dsn, channel=channel, **options) as bus,
    ):
        bus.attach(p)
        wait = waiter(p, state, "lost-message")
        await until(lambda: p.watched == 1)
        pid = await listener_pid(postgres_server, bus)
        state["lost-message"] = 1  # changed, never published
        await asyncio.sleep(0.1)
        assert not wait.done()
        async with admin(postgres_server) as connection:
            assert await connection.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
        assert await asyncio.wait_for(wait, 1) is True
        stats = bus.statistics()
        assert stats.reconnects == 1
        assert stats.rechecks == 2  # the first connect, the reconnect
        assert await listener_pid(postgres_server, bus) != pid
        # and it listens again: a published key arrives
        async with PostgresBus(postgres_server.dsn, channel=channel, name="pub") as publisher:
            again = waiter(p, state, "after", 1)
            await until(lambda: p.watched == 1)
            state["after"] = 1
            await publisher.publish("after")
            assert await asyncio.wait_for(again, 5) is True


@pytest.mark.asyncio
async def test_a_terminated_publishing_connection_is_replaced(
    postgres_server: PostgresServer, channel: str
) -> None:
    async with (
        PostgresBus(postgres_server.dsn, channel=channel, name="pub") as publisher,
        PostgresBus(postgres_server.dsn, channel=channel, name="sub") as subscriber,
    ):
        async with admin(postgres_server) as connection:
            killed = await connection.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = $1",
                f"{publisher.application_name} (publish)",
            )
        assert killed == 1
        await asyncio.sleep(0.05)
        await publisher.publish("k")
        await until(lambda: subscriber.statistics().received == 1)
        assert publisher.statistics().reconnects == 0  # the listening side never dropped


@pytest.mark.asyncio
async def test_a_silently_dead_listening_connection_is_found_by_its_ping(
    postgres_server: PostgresServer, channel: str
) -> None:
    """The listening backend stops answering (SIGSTOP: the TCP connection stays up and
    even answers keepalives): the ping times out, the bus reconnects within about two
    ping intervals and re-checks."""
    state: dict[str, int] = {}
    options = {**FAST, "ping_interval_s": 0.3}
    async with (
        Purgatory("w") as p,
        PostgresBus(postgres_server.dsn, channel=channel, **options) as bus,
    ):
        bus.attach(p)
        wait = waiter(p, state, "k")
        await until(lambda: p.watched == 1)
        pid = await listener_pid(postgres_server, bus)
        state["k"] = 1
        os.kill(pid, signal.SIGSTOP)
        try:
            took = await until(lambda: bus.statistics().reconnects == 1, within_s=5)
            assert took < 2 * 0.3 + 0.5
            assert await asyncio.wait_for(wait, 5) is True
        finally:
            os.kill(pid, signal.SIGCONT)  # it finds its client gone and exits


@pytest.mark.asyncio
async def test_notify_arguments_publish_inside_the_users_transaction(
    postgres_server: PostgresServer, channel: str
) -> None:
    """NOTIFY in the transaction that changes the state: delivered at commit (to this
    process too), never on rollback."""
    async with Purgatory("w") as p, Purgatory("v") as q:
        async with (
            PostgresBus(postgres_server.dsn, channel=channel, name="here") as here,
            PostgresBus(postgres_server.dsn, channel=channel, name="there") as there,
            admin(postgres_server) as connection,
        ):
            here.attach(p)
            there.attach(q)
            await connection.execute("CREATE TEMP TABLE jobs (id text PRIMARY KEY, v int)")
            await connection.execute("INSERT INTO jobs VALUES ('j', 0), ('r', 0)")
            versions: dict[str, int] = {}

            async def read() -> None:
                for row in await connection.fetch("SELECT id, v FROM jobs"):
                    versions[row["id"]] = row["v"]

            await read()
            local, remote = waiter(p, versions, "j"), waiter(q, versions, "j")
            await until(lambda: p.watched == q.watched == 1)
            async with connection.transaction():
                await connection.execute("UPDATE jobs SET v = 1 WHERE id = 'j'")
                for args in here.notify_arguments("j"):
                    await connection.execute("SELECT pg_notify($1, $2)", *args)
                await asyncio.sleep(0.1)
                assert here.statistics().received == there.statistics().received == 0
                versions["j"] = 1  # what the waiters read once this commits
            assert await asyncio.wait_for(local, 5) is True
            assert await asyncio.wait_for(remote, 5) is True
            assert here.statistics().received == 1
            transaction = connection.transaction()
            await transaction.start()
            for args in here.notify_arguments("r"):
                await connection.execute("SELECT pg_notify($1, $2)", *args)
            await transaction.rollback()
            await there.publish("sentinel")
            await until(lambda: here.statistics().received == 2)
            assert there.statistics().received == 1  # "j" only: "r" was rolled back


def _run(loop: str, coroutine: Any) -> Any:
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coroutine)
    return asyncio.run(coroutine)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("outage", ["terminate", "restart"])
def test_an_outage_loses_no_wake_up_across_three_processes(
    postgres_server: PostgresServer, channel: str, tmp_path: Path, loop: str, outage: str
) -> None:
    """Waiters parked in three processes. "terminate": pg_terminate_backend on every
    listening connection; "restart": kill -9 the server (all its processes). Meanwhile every
    key's state changes and is published (which fails while the server is down); then the
    server comes back: every waiter is answered by the re-check after the reconnect, long
    before its timeout."""
    keys_per_process = [[f"p{n}-job-{i}" for i in range(20)] for n in range(3)]
    all_keys = [key for keys in keys_per_process for key in keys]
    bus = {
        "kind": "PostgresBus",
        "dsn": postgres_server.dsn,
        "channel": channel,
        "name": f"waiters-{channel}",
        "recheck_interval_s": 60.0,  # answers must come from the reconnect's re-check
        "connect_timeout_s": 5.0,
        **FAST,
    }
    with waiter_processes(bus, tmp_path, keys_per_process, loop=loop) as processes:

        async def outage_and_publish() -> float:
            async with PostgresBus(
                postgres_server.dsn, channel=channel, name="publisher", publish_timeout_s=1.0
            ) as publisher:
                if outage == "terminate":
                    async with admin(postgres_server) as connection:
                        # with a timeout, it returns once the backends have exited: no
                        # notification can reach them after it
                        killed = await connection.fetchval(
                            "SELECT count(pg_terminate_backend(pid, 5000)) "
                            "FROM pg_stat_activity "
                            "WHERE application_name = $1",
                            f"purgatory-bus waiters-{channel}",
                        )
                    assert killed == 3
                    set_versions(tmp_path, all_keys)
                    await publisher.publish(*all_keys)  # heard, or found by the re-check
                    return time.monotonic()
                await asyncio.to_thread(postgres_server.kill)
                set_versions(tmp_path, all_keys)
                started = time.monotonic()
                with pytest.raises(BusUnavailable):
                    await publisher.publish(*all_keys)
                assert time.monotonic() - started < 1.0 + 0.5
                await asyncio.sleep(0.5)  # the waiters' buses are down, retrying
                await asyncio.to_thread(postgres_server.start)
                return time.monotonic()

        back = _run(loop, outage_and_publish())
        collect(processes, within_s=15.0)
        recovered = time.monotonic() - back
        print(
            f"\nPostgresBus outage ({outage}, {loop}): last waiter answered "
            f"{recovered:.3f} s after the server was back"
        )
        for process in processes:
            assert process.statistics is not None
            assert process.statistics["reconnects"] >= 1
            assert process.statistics["rechecks"] >= 2
