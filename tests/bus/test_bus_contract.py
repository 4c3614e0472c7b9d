"""The bus contract (purgatory/bus/_bus.py, docs/bus.md), once, run on every backend:
MemoryBus, RedisBus, PostgresBus and KafkaBus, each under asyncio and uvloop.

``backend`` makes buses of one backend that hear each other, and plays its server's
outages (``backends.py``); the server tests share one server per session and any test that
cuts it leaves it up again. What a backend honours differently is declared there and
asserted here, never skipped:

- ``max_message_bytes``: 1 MiB (memory, Redis), 7999 (NOTIFY), 1,048,448 (Kafka);
- ``flood_checks_at_most``: the in-process hub delivers a flood of one key inside
  ``publish``, so 1,000 triggers cost at most 2 checks; over a server they arrive one read
  at a time and merge only with a check still pending;
- ``crosses_processes``: a MemoryHub lives in one process, so the three-process outage
  test runs on the three servers (the in-process outage test runs on all four);
- a server that accepts connections and never answers exists only for the servers.

What only one backend has (NOTIFY's 8000 bytes, Redis's PING and output-buffer limit,
Kafka's metadata probe and lost log, the virtual-time schedule of MemoryBus) is tested in
that backend's own file.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from backends import Backend, Kafka, Memory, Postgres, Redis
from outage import collect, set_versions, waiter_processes
from prometheus_client import CollectorRegistry
from waits import Purgatory, parked, until, waiter

from purgatory.bus import BusClosed, BusUnavailable
from purgatory.bus.metrics import BusMetrics

SERVERS = ["redis", "postgres", "kafka"]


def _backend(kind: str, request: pytest.FixtureRequest) -> Backend:
    if kind == "memory":
        return Memory()
    if kind == "redis":
        return Redis(request.getfixturevalue("redis_server"))
    if kind == "postgres":
        return Postgres(request.getfixturevalue("postgres_server"))
    request.getfixturevalue("kafka_client")  # aiokafka and aiohttp, or a clear skip / failure
    return Kafka(request.getfixturevalue("kafka_server"))


@pytest.fixture(params=["memory", *SERVERS])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    made = _backend(request.param, request)
    yield made
    made.recover()


@pytest.fixture(params=SERVERS)
def server_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    made = _backend(request.param, request)
    yield made
    made.recover()


# -- triggers cross processes ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_key_published_on_one_bus_wakes_waiters_on_another(backend: Backend) -> None:
    state: dict[str, int] = {}
    async with Purgatory("a") as pa, Purgatory("b") as pb:
        async with backend.bus("a") as bus_a, backend.bus("b") as bus_b:
            bus_a.attach(pa)
            bus_b.attach(pb)
            here, there = waiter(pa, state, "job-1"), waiter(pb, state, "job-1")
            other = waiter(pb, state, "job-2")
            await parked(pa, 1)
            await parked(pb, 2)
            await until(lambda: bus_b.statistics().rechecks == 1)  # the connect's own
            state["job-1"] = state["job-2"] = 1
            await bus_a.publish("job-1")
            assert await asyncio.wait_for(here, 5) is True
            assert await asyncio.wait_for(there, 5) is True
            sa, sb = bus_a.statistics(), bus_b.statistics()
            assert (sa.published, sa.messages_sent, sa.publish_errors) == (1, 1, 0)
            assert sa.messages_received == 0  # its own message is skipped
            assert (sb.received, sb.messages_received, sb.connected) == (1, 1, True)
            assert sb.reconnects == 0
            # job-2 was not published: it stays parked while later traffic arrives
            await bus_a.publish("sentinel")
            await until(lambda: bus_b.statistics().received == 2, 5)
            assert not other.done()
            assert bus_b.statistics().rechecks == 1
            other.cancel()
            with pytest.raises(TypeError, match=r"keys on a bus are str.*got int 7"):
                await bus_a.publish("ok", 7)  # type: ignore[arg-type]
            assert bus_a.statistics().messages_sent == 2


@pytest.mark.asyncio
async def test_several_purgatories_attach_and_detach(backend: Backend) -> None:
    state: dict[str, int] = {}
    async with Purgatory("one") as p1, Purgatory("two") as p2, Purgatory("three") as p3:
        async with backend.bus() as bus:
            bus.attach(p1)
            bus.attach(p2)
            bus.detach(p2)
            bus.attach(p3)  # checked after where p2 was
            w1, w2, w3 = (waiter(p, state, "k") for p in (p1, p2, p3))
            for p in (p1, p2, p3):
                await parked(p, 1)
            state["k"] = 1
            await bus.publish("k")
            assert await asyncio.wait_for(w1, 5) is True
            assert await asyncio.wait_for(w3, 5) is True
            assert not w2.done()  # detached: the bus no longer triggers it
            w2.cancel()
            with pytest.raises(ValueError, match="not attached"):
                bus.detach(p2)
            with pytest.raises(ValueError, match="already attached"):
                bus.attach(p1)


# -- values cross processes ----------------------------------------------------------------


def value_waiter(purgatory: Purgatory, key: str, threshold: int) -> asyncio.Task[bool]:
    """A parked wait for ``key``'s value to reach ``threshold``, timing out after 10 min."""
    return asyncio.create_task(purgatory.wait_for_value(key, threshold, 600_000))


async def parked_on_values(purgatory: Purgatory, keys: int) -> None:
    await until(lambda: purgatory.threshold_keys() >= keys, 5)


@pytest.mark.asyncio
async def test_a_value_published_on_one_bus_advances_it_on_another(backend: Backend) -> None:
    async with Purgatory("a") as pa, Purgatory("b") as pb:
        async with backend.bus("a") as bus_a, backend.bus("b") as bus_b:
            bus_a.attach(pa)
            bus_b.attach(pb)
            here, there, later = value_waiter(pa, "hw", 5), value_waiter(pb, "hw", 5), None
            later = value_waiter(pb, "hw", 9)
            await parked_on_values(pa, 1)
            await parked_on_values(pb, 1)
            await until(lambda: bus_b.statistics().rechecks == 1)  # the connect's own
            await bus_a.publish_value("hw", 7)
            assert pa.value_of("hw") == 7  # this process at once
            assert await asyncio.wait_for(here, 5) is True
            assert await asyncio.wait_for(there, 5) is True
            assert pb.value_of("hw") == 7
            assert not later.done()  # 7 does not reach 9
            # An advance that arrives after a higher one does not lower the value.
            await bus_a.publish_value("hw", 6)
            await bus_a.publish("sentinel")
            await until(lambda: bus_b.statistics().received == 1, 5)
            assert pb.value_of("hw") == 7
            await bus_a.publish_value("hw", 9)
            assert await asyncio.wait_for(later, 5) is True
            stats = bus_b.statistics()
            assert (stats.values_received, stats.received) == (3, 1)
            with pytest.raises(TypeError, match="value must be an int"):
                await bus_a.publish_value("hw", 1.5)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="keys on a bus are str"):
                await bus_a.publish_value(7, 1)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="values must be a function"):
                bus_a.attach(Purgatory("c"), values=3)  # type: ignore[arg-type]
            assert bus_a.statistics().messages_sent == 4


@pytest.mark.asyncio
async def test_an_outage_loses_no_advance(backend: Backend) -> None:
    """Threshold waiters behind a bus attached with a values reader; the server dies; the
    values advance and their publish fails; the server comes back: the reconnect's
    re-check reads every waited key's value and answers every waiter it reaches."""
    shared: dict[str, int] = {}
    options = {"recheck_interval_s": 1000.0, "backoff_max_s": 0.5}
    async with Purgatory("w") as p:
        async with (
            backend.bus("w", **options) as bus,
            backend.bus("pub", publish_timeout_s=1.0) as publisher,
        ):
            bus.attach(p, values=shared.get)
            keys = [f"offset-{i}" for i in range(10)]
            waits = [value_waiter(p, key, 3) for key in keys]
            unreached = value_waiter(p, keys[0], 4)
            await parked_on_values(p, len(keys))
            await until(lambda: bus.statistics().rechecks == 1)
            await backend.cut()
            await until(lambda: not (bus.connected or publisher.connected), 5)
            for key in keys:
                shared[key] = 3
            with pytest.raises(BusUnavailable, match=r"within 1\.0 s"):
                await publisher.publish_value(keys[0], 3)
            assert not any(w.done() for w in waits)  # nothing could reach them
            await backend.restore()
            assert all(await asyncio.wait_for(asyncio.gather(*waits), 10))
            assert not unreached.done()
            assert bus.statistics().reconnects == 1
            unreached.cancel()


# -- what a message carries ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_bad_input_is_refused_before_anything_is_sent(backend: Backend) -> None:
    async with backend.bus("x") as bus:
        assert bus.max_message_bytes == backend.max_message_bytes
        with pytest.raises(TypeError, match=r"keys on a bus are str.*bytes"):
            await bus.publish(b"job")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"keys on a bus are str.*got int 42"):
            await bus.publish("ok", 42)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="at least one key"):
            await bus.publish()
        too_long = rf"does not fit in one message .*\({bus.max_message_bytes} bytes"
        with pytest.raises(ValueError, match=too_long):
            await bus.publish("k" * (bus.max_message_bytes + 1))
        with pytest.raises(ValueError, match="not encodable as UTF-8"):
            await bus.publish("\ud800")
        with pytest.raises(TypeError, match="DelayedOperationPurgatory"):
            bus.attach("not a purgatory")  # type: ignore[arg-type]
        stats = bus.statistics()
        assert (stats.published, stats.messages_sent, stats.publish_errors) == (0, 0, 0)
    with pytest.raises(BusClosed, match="closed"):
        bus.attach(Purgatory("late"))
    with pytest.raises(BusClosed, match="closed"):
        await bus.publish("k")


@pytest.mark.asyncio
async def test_the_largest_key_that_fits_goes_and_one_byte_more_is_refused(
    backend: Backend,
) -> None:
    async with backend.bus("a") as bus_a, backend.bus("b") as bus_b:
        room = bus_a.max_message_bytes - len(f'["{bus_a.sender_id}",""]')
        await bus_a.publish("k" * room)  # the server and its client take the largest message
        await until(lambda: bus_b.statistics().received == 1, 10)
        with pytest.raises(ValueError, match="does not fit in one message"):
            await bus_a.publish("k" * (room + 1))
        assert bus_a.statistics().messages_sent == 1


@pytest.mark.asyncio
async def test_keys_beyond_one_message_are_split_not_truncated(backend: Backend) -> None:
    state: dict[str, int] = {}
    # three keys to a message, in text every backend must keep intact
    filler = "\u00e9" * (backend.max_message_bytes * 3 // 10 // 2)
    keys = [f"{i}-\"\n'\\-{filler}" for i in range(8)]
    async with (
        Purgatory("w") as p,
        backend.bus("w") as receiver,
        backend.bus("pub") as publisher,
    ):
        receiver.attach(p)
        waits = [waiter(p, state, k) for k in keys]
        await parked(p, len(keys))
        await until(lambda: receiver.statistics().rechecks == 1)  # the connect's own
        state.update(dict.fromkeys(keys, 1))
        await publisher.publish(*keys)
        assert all(await asyncio.wait_for(asyncio.gather(*waits), 10))
        assert publisher.statistics().messages_sent == 3  # 3 + 3 + 2
        await until(lambda: receiver.statistics().messages_received == 3, 5)
        stats = receiver.statistics()
        assert stats.received == len(keys)
        assert stats.rechecks == 1  # every waiter was woken by its key, intact


@pytest.mark.asyncio
async def test_a_message_no_bus_wrote_triggers_a_full_recheck(backend: Backend) -> None:
    state: dict[str, int] = {}
    async with Purgatory("w") as p, backend.bus() as bus:
        bus.attach(p)
        wait = waiter(p, state, "k")
        await parked(p, 1)
        await until(lambda: bus.statistics().rechecks == 1)  # the connect's own
        state["k"] = 1  # never published: only a re-check can see it
        sent = await backend.send_foreign()
        assert await asyncio.wait_for(wait, 5) is True
        await until(lambda: bus.statistics().malformed == sent, 10)
        assert bus.statistics().rechecks >= 2


# -- options, lifecycle --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"recheck_interval_s": 0}, ValueError, "recheck_interval_s"),
        ({"publish_timeout_s": float("inf")}, ValueError, "publish_timeout_s"),
        ({"connect_timeout_s": "1"}, TypeError, "connect_timeout_s"),
        ({"backoff_initial_s": -1.0}, ValueError, "backoff_initial_s"),
        ({"max_pending_keys": 0}, ValueError, "max_pending_keys"),
        ({"backoff_initial_s": 2.0, "backoff_max_s": 1.0}, ValueError, "backoff_max_s"),
    ],
)
def test_bad_options_are_refused(
    backend: Backend, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        backend.bus(**options)


@pytest.mark.asyncio
async def test_publishing_on_a_bus_never_started_says_so_at_once(backend: Backend) -> None:
    bus = backend.bus(publish_timeout_s=30.0)
    with pytest.raises(RuntimeError, match="not started"):
        await asyncio.wait_for(bus.publish("k"), 1)


@pytest.mark.asyncio
async def test_a_bus_belongs_to_one_loop(backend: Backend) -> None:
    async with backend.bus() as bus:
        with pytest.raises(RuntimeError, match="different event loop"):
            await asyncio.to_thread(asyncio.run, bus.publish("k"))


@pytest.mark.asyncio
async def test_an_unreachable_server_at_start_is_a_clear_error_within_connect_timeout(
    backend: Backend,
) -> None:
    bus = backend.unreachable_bus("s3cret", connect_timeout_s=1.0)
    expected = f"could not connect {bus._describe()} within 1.0 s: {backend.refused_cause}"
    started = time.monotonic()
    with pytest.raises(BusUnavailable, match=re.escape(expected)) as raised:
        await bus.start()
    # it retried until connect_timeout_s, as the loop's clock tells it (uvloop's clock
    # counts whole milliseconds: up to 1 ms less than time.monotonic() measures)
    assert 0.998 <= time.monotonic() - started < 2.0
    assert "s3cret" not in str(raised.value)  # the password is not shown
    with pytest.raises(BusClosed):
        bus.attach(Purgatory("p"))


@pytest.mark.asyncio
async def test_a_server_that_accepts_but_never_answers_is_a_clear_error_in_bounded_time(
    server_backend: Backend,
) -> None:
    with socket.socket() as silent:  # the TCP handshake succeeds, nothing ever answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        bus = server_backend.unreachable_bus("s3cret", port, connect_timeout_s=1.0)
        started = time.monotonic()
        with pytest.raises(BusUnavailable, match=r"within 1\.0 s") as raised:
            await bus.start()
        assert time.monotonic() - started < 2.0
        assert "s3cret" not in str(raised.value)


# -- gaps: nothing lost ----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_publish_while_the_server_is_down_raises_within_publish_timeout(
    backend: Backend,
) -> None:
    async with backend.bus(publish_timeout_s=1.0) as bus:
        await backend.cut()
        started = time.monotonic()
        # Refused by the server, or timed out waiting for the bus to reconnect: either way
        # an error, in bounded time.
        with pytest.raises(BusUnavailable, match=r"could not publish"):
            await bus.publish("k")
        assert time.monotonic() - started < 1.5
        await until(lambda: not bus.statistics().connected, 2)
        with pytest.raises(BusUnavailable, match=r"could not publish .* within 1\.0 s"):
            await bus.publish("k")
        assert time.monotonic() - started < 3
        assert bus.statistics().publish_errors == 2


@pytest.mark.asyncio
async def test_an_outage_loses_no_wake_up(backend: Backend) -> None:
    """Waiters parked behind two buses; the server dies; every key changes and is
    published (which fails); the server comes back: every waiter is answered, by the
    re-check after the reconnect, long before its timeout."""
    state: dict[str, int] = {}
    options = {"recheck_interval_s": 1000.0, "backoff_max_s": 0.5}
    async with Purgatory("w1") as p1, Purgatory("w2") as p2:
        async with (
            backend.bus("w1", **options) as b1,
            backend.bus("w2", **options) as b2,
            backend.bus("pub", publish_timeout_s=1.0) as publisher,
        ):
            b1.attach(p1)
            b2.attach(p2)
            keys = [f"job-{i}" for i in range(20)]
            waits = [waiter(p, state, k) for k in keys for p in (p1, p2)]
            await parked(p1, len(keys))
            await parked(p2, len(keys))
            await until(lambda: b1.statistics().rechecks == b2.statistics().rechecks == 1)
            await backend.cut()
            await until(lambda: not (b1.connected or b2.connected or publisher.connected), 5)
            assert not b1.statistics().connected
            for key in keys:
                state[key] = 1
            with pytest.raises(BusUnavailable, match=r"within 1\.0 s"):
                await publisher.publish(*keys)
            assert publisher.statistics().publish_errors == 1
            assert not any(w.done() for w in waits)  # nothing could reach them
            await backend.restore()
            restored = time.monotonic()
            assert all(await asyncio.wait_for(asyncio.gather(*waits), 10))
            # one backoff at most, then the reconnect and its re-check
            assert time.monotonic() - restored <= 0.5 + 1.0
            for bus in (b1, b2):
                stats = bus.statistics()
                assert stats.connected
                assert stats.reconnects == 1
                assert stats.rechecks == 2  # the first connect, the reconnect
                assert stats.rechecked_keys == 20


@pytest.mark.asyncio
async def test_while_disconnected_watched_keys_are_rechecked_periodically(
    backend: Backend,
) -> None:
    state: dict[str, int] = {}
    async with Purgatory("w") as p, backend.bus(recheck_interval_s=0.5) as bus:
        bus.attach(p)
        wait = waiter(p, state, "k")
        await parked(p, 1)
        await until(lambda: bus.statistics().rechecks == 1)  # the connect's own
        started = time.monotonic()
        await backend.cut()
        state["k"] = 1  # readable although nobody can publish
        assert await asyncio.wait_for(wait, 5) is True
        assert 0.5 <= time.monotonic() - started < 0.5 + 1.0
        assert not bus.connected
        assert bus.statistics().rechecks == 2


@pytest.mark.asyncio
async def test_a_subscription_that_ends_is_reconnected_and_every_watched_key_rechecked(
    backend: Backend,
) -> None:
    """The subscription ends while the server stays up or is back at once (a blip, CLIENT
    KILL, pg_terminate_backend, a broker restart): the bus notices without waiting for a
    probe, subscribes again, and re-checks every watched key (a change nobody published,
    or whose message was lost, is found)."""
    state: dict[str, int] = {}
    async with Purgatory("w") as p, backend.bus("w", **backend.no_probe) as bus:
        bus.attach(p)
        wait = waiter(p, state, "lost-message")
        await parked(p, 1)
        await until(lambda: bus.statistics().rechecks == 1)  # the connect's own
        state["lost-message"] = 1  # changed, never published
        async with backend.bus("pub") as publisher:
            await publisher.publish("unrelated")
            await until(lambda: bus.statistics().received == 1, 5)
        assert not wait.done()  # traffic flows, and only a re-check can answer it
        await backend.drop_subscriptions()
        dropped = time.monotonic()
        assert await asyncio.wait_for(wait, 5) is True
        assert time.monotonic() - dropped < 1.0
        stats = bus.statistics()
        assert stats.reconnects == 1
        assert stats.rechecks == 2  # the first connect, the reconnect
        assert stats.rechecked_keys == 1
        await backend.assert_resubscribed(bus)
        # and it is subscribed again: a published key arrives
        async with backend.bus("pub-again") as publisher:
            again = waiter(p, state, "after")
            await parked(p, 1)
            state["after"] = 1
            await publisher.publish("after")
            assert await asyncio.wait_for(again, 5) is True


# -- floods: bounded, coalesced --------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_flood_of_one_key_costs_few_checks(backend: Backend) -> None:
    state: dict[str, int] = {}
    async with (
        Purgatory("w") as p,
        backend.bus("w") as receiver,
        backend.bus("pub") as publisher,
    ):
        receiver.attach(p)
        wait = waiter(p, state, "hot")
        await parked(p, 1)
        for version in range(1, 1001):
            state["hot"] = version
            await publisher.publish("hot")
        assert await asyncio.wait_for(wait, 10) is True
        await until(lambda: receiver.statistics().received == 1000, 10)
        await until(lambda: receiver.statistics().pending_keys == 0, 5)
        stats = receiver.statistics()
        assert stats.checks + stats.coalesced == 1000
        assert stats.checks <= backend.flood_checks_at_most


@pytest.mark.asyncio
async def test_a_flood_of_distinct_keys_stays_bounded_and_loses_nothing(
    backend: Backend,
) -> None:
    state: dict[str, int] = {}
    async with (
        Purgatory("w") as p,
        backend.bus("w", max_pending_keys=10) as receiver,
        backend.bus("pub") as publisher,
    ):
        receiver.attach(p)
        await until(lambda: receiver.statistics().rechecks == 1)  # the connect's own
        keys = [f"k{i}" for i in range(100)]
        waits = [waiter(p, state, k) for k in keys[::7]]
        await parked(p, len(waits))
        state.update(dict.fromkeys(keys, 1))
        await publisher.publish(*keys)
        assert all(await asyncio.wait_for(asyncio.gather(*waits), 5))
        stats = receiver.statistics()
        assert stats.received == 100
        assert stats.pending_keys <= 10
        assert stats.overflows == 1


# -- what an operator sees -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_metrics_show_a_bus_cut_off_and_back(backend: Backend) -> None:
    registry = CollectorRegistry()
    async with backend.bus("jobs") as bus:
        BusMetrics(registry).track(bus)
        labels = {"bus": bus.name}

        def sample(name: str) -> float | None:
            return registry.get_sample_value(name, labels)

        assert sample("purgatory_bus_connected") == 1
        await backend.cut()
        await until(lambda: sample("purgatory_bus_connected") == 0, 5)
        await backend.restore()
        await until(lambda: bus.connected, 10)
        await bus.publish("a", "b")
        assert sample("purgatory_bus_connected") == 1
        assert sample("purgatory_bus_reconnects_total") == 1
        assert sample("purgatory_bus_published_keys_total") == 2


# -- across processes (the servers) ----------------------------------------------------------


def _run(loop: str, coroutine: Coroutine[Any, Any, None]) -> None:
    if loop == "uvloop":
        import uvloop

        uvloop.run(coroutine)
    else:
        asyncio.run(coroutine)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_an_outage_loses_no_wake_up_across_three_processes(
    server_backend: Backend, tmp_path: Path, loop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Waiters parked in three processes; kill -9 the server; every key changes and is
    published (which fails); the server restarts on the same port (Kafka's empty, its
    topic created again): every waiter is answered by the re-check after the reconnect,
    none times out. The periodic re-check is set far beyond the test's length."""
    assert server_backend.crosses_processes
    bus = server_backend.spec("waiters", recheck_interval_s=600.0)
    keys = [[f"p{n}-job-{i}" for i in range(50)] for n in range(3)]
    all_keys = [key for process_keys in keys for key in process_keys]

    async def kill_change_and_publish() -> None:
        async with server_backend.bus("publisher", publish_timeout_s=1.0) as publisher:
            await server_backend.cut()
            set_versions(tmp_path, all_keys)
            started = time.monotonic()
            with pytest.raises(BusUnavailable):
                await publisher.publish(*all_keys)
            assert time.monotonic() - started < 1.0 + 0.5

    with waiter_processes(bus, tmp_path, keys, timeout_ms=120_000, loop=loop) as processes:
        _run(loop, kill_change_and_publish())
        time.sleep(0.5)  # the outage lasts: the waiters are cut off, backing off
        restarted = time.monotonic()
        server_backend.restart()
        collect(processes, within_s=15)
        recovery = time.monotonic() - restarted
    with capsys.disabled():
        print(
            f"\n{server_backend.kind} outage ({loop}): restart -> last of 150 waiters "
            f"answered: {recovery:.3f} s"
        )
    assert recovery < 0.5 + 0.5 + 5  # the restart, one backoff, the re-check, slack
    for process in processes:
        assert process.statistics is not None
        assert process.statistics["reconnects"] >= 1
        assert process.statistics["rechecks"] >= 2
        assert process.statistics["received"] == 0  # nothing published reached them


def test_the_memory_hub_does_not_cross_processes() -> None:
    """The documented difference behind the three-process test's backends."""
    assert not Memory.crosses_processes
    assert all(kind.crosses_processes for kind in (Redis, Postgres, Kafka))
