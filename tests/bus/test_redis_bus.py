"""What only RedisBus has, against a real redis-server (the bus contract every backend
honours is in test_bus_contract.py): the URL and its options, the password, the pool of
publishing connections and its fairness, the pub/sub output-buffer limit that cuts a slow
subscriber off, and the PING that finds a server that stopped answering."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
import redis
from waits import Purgatory, parked, until, waiter

from purgatory.bus import BusUnavailable, RedisBus
from purgatory.bus._envelope import encode
from purgatory.bus.testing import RedisServer

# Short backoffs so reconnects take milliseconds in the tests.
FAST = {"backoff_initial_s": 0.01, "backoff_max_s": 0.2, "connect_timeout_s": 5.0}


@pytest.fixture
def channel() -> str:
    return f"test-{uuid.uuid4().hex}"


async def one_trigger_crosses(url: str, channel: str) -> None:
    """A key published on one bus wakes a waiter attached to another, once."""
    state: dict[str, int] = {}
    async with (
        Purgatory("w") as p,
        RedisBus(url, channel=channel) as receiver,
        RedisBus(url, channel=channel) as publisher,
    ):
        receiver.attach(p)
        wait = waiter(p, state, "k")
        await parked(p, 1)
        state["k"] = 1
        await publisher.publish("k")
        assert await asyncio.wait_for(wait, 5) is True
        assert receiver.statistics().received == 1


@pytest.mark.asyncio
async def test_options_in_the_url_query_cannot_change_what_the_bus_relies_on(
    redis_server: RedisServer, channel: str
) -> None:
    """Replies decoded to str, RESP3 or redis-py retries would break the subscription's
    reading or hide its gaps: the bus overrides them."""
    query = "decode_responses=True&protocol=3&retry_on_timeout=yes&max_connections=2"
    await one_trigger_crosses(f"{redis_server.url}?{query}", channel)


async def read_command(reader: asyncio.StreamReader) -> list[bytes]:
    """One RESP command (an array of bulk strings), as a client sends it."""
    line = await reader.readline()
    if not line:
        raise asyncio.IncompleteReadError(b"", None)  # the client went away
    count = int(line[1:])
    parts = []
    for _ in range(count):
        size = int((await reader.readline())[1:])
        parts.append((await reader.readexactly(size + 2))[:-2])
    return parts


@pytest.mark.asyncio
async def test_a_message_slower_than_the_health_check_interval_arrives_intact() -> None:
    """The subscription reads with the health-check interval as its timeout: a message cut
    by that timeout must be taken up where it was, not lost or misparsed (a fake server
    sends one in two halves, 1.5 intervals apart, and answers the PING after it)."""
    interval = 0.4
    state: dict[str, int] = {}
    message = encode("another-process", ["k"], 1 << 20)[0].encode()
    pushed = b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$%d\r\n%s\r\n" % (len(message), message)
    pings = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal pings
        while True:
            try:
                command = await read_command(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()
                return
            if command[0].upper() == b"SUBSCRIBE":
                writer.write(b"*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n")
                writer.write(pushed[:20])
                await writer.drain()
                await asyncio.sleep(interval * 1.5)
                writer.write(pushed[20:])
            elif command[0].upper() == b"PING":
                pings += 1
                writer.write(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")
            else:  # the handshake's CLIENT SETINFO
                writer.write(b"+OK\r\n")
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        bus = RedisBus(f"redis://127.0.0.1:{port}", channel="c", health_check_interval_s=interval)
        async with Purgatory("w") as p, bus:
            bus.attach(p)
            await until(lambda: bus.statistics().rechecks == 1, 2)  # the connect's own
            wait = waiter(p, state, "k")
            await parked(p, 1)
            state["k"] = 1
            assert await asyncio.wait_for(wait, 5) is True
            stats = bus.statistics()
            assert (stats.received, stats.malformed, stats.reconnects) == (1, 0, 0)
            assert pings >= 1  # sent after one silent interval, answered in time
            assert stats.rechecks == 1  # woken by the message, not by a re-check
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.asyncio
async def test_concurrent_publish_calls_share_a_bounded_pool_of_connections(
    redis_server: RedisServer, channel: str
) -> None:
    """Publish calls beyond the pool's size (the URL's max_connections) wait their turn
    instead of opening a connection each."""
    with redis.Redis(port=redis_server.port) as admin:
        url = f"{redis_server.url}?max_connections=2"
        async with RedisBus(url, channel=channel) as bus:
            before = admin.info("clients")["connected_clients"]
            await asyncio.gather(*(bus.publish(f"k{i}") for i in range(50)))
            opened = admin.info("clients")["connected_clients"] - before
            assert bus.statistics().messages_sent == 50
            assert 1 <= opened <= 2


def test_the_url_and_options_are_checked_and_the_password_is_never_shown() -> None:
    with pytest.raises(ValueError, match=r"not a Redis URL \(scheme 'http'\).*redis://") as bad:
        RedisBus("http://user:s3cret@x")
    assert "s3cret" not in str(bad.value)
    with pytest.raises(ValueError, match=r"unsupported option in the Redis URL .*'nonsense'"):
        RedisBus("redis://x/0?nonsense=1")
    with pytest.raises(TypeError, match="url must be a str"):
        RedisBus(b"redis://x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="channel must be a non-empty str"):
        RedisBus("redis://x", channel="")
    with pytest.raises(ValueError, match="health_check_interval_s"):
        RedisBus("redis://x", health_check_interval_s=0)
    bus = RedisBus("redis://user:s3cret@example.org:6380/2", channel="jobs")
    assert "s3cret" not in repr(bus)
    assert repr(bus) == (
        "<RedisBus 'redis' redis://example.org:6380/2 channel 'jobs' disconnected>"
    )
    assert "rediss://h:6379/0" in repr(RedisBus("rediss://h"))


@pytest.mark.asyncio
async def test_the_password_in_the_url_is_used_and_a_wrong_one_is_a_clear_error(
    start_redis: Callable[..., AbstractContextManager[RedisServer]], channel: str
) -> None:
    with start_redis("--requirepass", "s3cret") as server:
        await one_trigger_crosses(f"redis://:s3cret@127.0.0.1:{server.port}/3", channel)
        wrong = RedisBus(f"redis://:wrong@127.0.0.1:{server.port}", connect_timeout_s=0.3)
        with pytest.raises(BusUnavailable, match="invalid username-password") as raised:
            await wrong.start()
        assert "wrong" not in str(raised.value)  # the password is not shown


@pytest.mark.asyncio
async def test_a_subscriber_cut_off_by_the_output_buffer_limit_reconnects_and_rechecks(
    own_redis: RedisServer, channel: str
) -> None:
    """Redis disconnects a subscriber that reads too slowly (client-output-buffer-limit
    pubsub); what was published after that is lost to it. Here the loop is blocked while
    32 MB are published, with a limit of 1 MB: the key published last is lost, and the
    re-check after the reconnect answers its waiter."""
    own_redis.command("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 0 0")
    state: dict[str, int] = {}
    filler = encode("another-process", ["filler-" + "x" * (512 << 10)], 1 << 20)[0]
    async with Purgatory("w") as p, RedisBus(own_redis.url, channel=channel, **FAST) as bus:
        bus.attach(p)
        wait = waiter(p, state, "k")
        await parked(p, 1)
        state["k"] = 1
        # Synchronous, on the loop's thread: the bus cannot read while this runs.
        with redis.Redis(port=own_redis.port) as flooder:
            flooding = flooder.pipeline(transaction=False)
            for _ in range(64):
                flooding.publish(channel, filler)
            flooding.publish(channel, encode("another-process", ["k"], 1 << 20)[0])
            flooding.execute()
        assert await asyncio.wait_for(wait, 5) is True
        stats = bus.statistics()
        assert stats.reconnects >= 1  # the server cut it off
        assert stats.received < 65  # so it missed the end of the flood, "k" included
        assert stats.rechecks >= 2


@pytest.mark.asyncio
async def test_a_server_that_stops_answering_is_noticed_by_the_health_check(
    own_redis: RedisServer, channel: str
) -> None:
    """A frozen server (or a dead network path) sends no reset: only the PING notices."""
    state: dict[str, int] = {}
    async with (
        Purgatory("w") as p,
        RedisBus(own_redis.url, channel=channel, health_check_interval_s=0.2, **FAST) as bus,
    ):
        bus.attach(p)
        wait = waiter(p, state, "k")
        await parked(p, 1)
        assert own_redis.process is not None
        pid = own_redis.process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            noticed = await until(lambda: not bus.connected, 3)
            state["k"] = 1
        finally:
            os.kill(pid, signal.SIGCONT)
        assert noticed <= 0.2 * 2 + 0.3  # silence, then no answer to the PING
        assert await asyncio.wait_for(wait, 5) is True
        assert bus.statistics().reconnects >= 1


@pytest.mark.asyncio
async def test_concurrent_publishers_take_turns_at_the_publishing_connections(
    redis_server: RedisServer, channel: str
) -> None:
    """More concurrent publish calls than publishing connections: each waits its turn,
    first come first served. (redis-py's blocking pool is not fair: a caller that gives a
    connection back and asks again at once got it before the callers already waiting, so
    they starved until publish_timeout_s and raised BusUnavailable with the server fine.)"""
    url = f"{redis_server.url}?max_connections=2"
    async with RedisBus(url, channel=channel, publish_timeout_s=30.0) as bus:
        done: list[str] = []

        async def publisher(name: str) -> None:
            for i in range(50):
                await bus.publish(f"{name}-{i}")
                done.append(name)

        await asyncio.gather(*(publisher(name) for name in "abcd"))
        # every publisher had its first publish done before any had done ten
        firsts = [done.index(name) for name in "abcd"]
        tenths = [i for i, name in enumerate(done) if done[: i + 1].count(name) == 10]
        assert max(firsts) < min(tenths), done[:40]
