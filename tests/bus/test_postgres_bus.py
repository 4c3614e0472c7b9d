"""What only PostgresBus has, against a real PostgreSQL server (the bus contract every
backend honours is in test_bus_contract.py): NOTIFY's 8000-byte limit, the quoted channel
and the DSN, the publishing connection, the ping that finds a silently dead listening
connection, NOTIFY in the user's own transaction, and listening connections terminated
under waiters in three processes."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from outage import collect, set_versions, waiter_processes
from waits import Purgatory, parked, until, waiter

from purgatory.bus._envelope import encode
from purgatory.bus.postgres import PostgresBus
from purgatory.bus.testing import PostgresServer

# Short backoffs and pings: the tests wait for reconnects.
FAST = {"backoff_initial_s": 0.02, "backoff_max_s": 0.2, "ping_interval_s": 1.0}


@pytest.fixture
def channel() -> str:
    """A channel of its own per test: nothing published by another test is heard."""
    return f"t-{uuid.uuid4().hex[:12]}"


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
        # (the largest key that fits, and one byte more: test_bus_contract.py)


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
            await parked(p, 1)
            state["k"] = 1
            await publisher.publish("k")
            assert await asyncio.wait_for(wait, 5) is True
            # a notification on the other channel, sent after "k": once it has arrived,
            # so would "k" have, had it crossed channels (delivery is in commit order)
            async with admin(postgres_server) as connection:
                sentinel = encode("someone", ["sentinel"], 7999)[0]
                await connection.execute("SELECT pg_notify($1, $2)", channel.lower(), sentinel)
            await until(lambda: other.statistics().messages_received == 1)
            assert other.statistics().received == 1  # the sentinel only: another channel
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
async def test_a_terminated_publishing_connection_is_replaced(
    postgres_server: PostgresServer, channel: str
) -> None:
    async with (
        PostgresBus(postgres_server.dsn, channel=channel, name="pub") as publisher,
        PostgresBus(postgres_server.dsn, channel=channel, name="sub") as subscriber,
    ):
        async with admin(postgres_server) as connection:
            killed = await connection.fetchval(
                # with a timeout, it returns once the backend has exited
                "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                "WHERE application_name = $1",
                f"{publisher.application_name} (publish)",
            )
        assert killed == 1
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
        await parked(p, 1)
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
            PostgresBus(postgres_server.dsn, channel=channel, name="third") as third,
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
            await parked(p, 1)
            await parked(q, 1)
            async with connection.transaction():
                await connection.execute("UPDATE jobs SET v = 1 WHERE id = 'j'")
                for args in here.notify_arguments("j"):
                    await connection.execute("SELECT pg_notify($1, $2)", *args)
                # a key published after these NOTIFYs, committed before them: it arrives,
                # they do not until the commit
                await third.publish("early")
                await until(lambda: here.statistics().received == there.statistics().received == 1)
                assert not local.done()
                assert not remote.done()
                versions["j"] = 1  # what the waiters read once this commits
            assert await asyncio.wait_for(local, 5) is True
            assert await asyncio.wait_for(remote, 5) is True
            assert here.statistics().received == 2
            transaction = connection.transaction()
            await transaction.start()
            for args in here.notify_arguments("r"):
                await connection.execute("SELECT pg_notify($1, $2)", *args)
            await transaction.rollback()
            await there.publish("sentinel")
            await until(lambda: here.statistics().received == 3)
            assert there.statistics().received == 2  # "early" and "j": "r" was rolled back


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_listening_connections_terminated_under_waiters_in_three_processes_lose_nothing(
    postgres_server: PostgresServer, channel: str, tmp_path: Path, loop: str
) -> None:
    """Waiters parked in three processes; pg_terminate_backend on every listening
    connection while the server stays up and takes the publish: no notification can reach
    the terminated listeners, and the re-check after each reconnect answers every waiter,
    long before its timeout. (The server killed and restarted under them:
    test_bus_contract.py.)"""
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

        async def terminate_and_publish() -> None:
            async with PostgresBus(
                postgres_server.dsn, channel=channel, name="publisher", publish_timeout_s=1.0
            ) as publisher:
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

        if loop == "uvloop":
            import uvloop

            uvloop.run(terminate_and_publish())
        else:
            asyncio.run(terminate_and_publish())
        back = time.monotonic()
        collect(processes, within_s=15.0)
        recovered = time.monotonic() - back
        print(
            f"\nPostgresBus outage (terminate, {loop}): last waiter answered "
            f"{recovered:.3f} s after the listeners were terminated"
        )
        for process in processes:
            assert process.statistics is not None
            assert process.statistics["reconnects"] >= 1
            assert process.statistics["rechecks"] >= 2
