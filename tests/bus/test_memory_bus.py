"""The bus's guarantees, through MemoryBus: triggers cross "processes" (buses on one hub),
nothing is lost across an outage, floods are coalesced and bounded, bad input is refused.

Outage tests run on the virtual-time loop: backoff and re-check intervals pass instantly
and in order, so they assert exact behaviour, not timings."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry
from waits import Purgatory, waiter

from purgatory.bus import BusClosed, BusUnavailable, MemoryBus, MemoryHub
from purgatory.bus.metrics import BusMetrics


@pytest.fixture
def hub() -> MemoryHub:
    return MemoryHub()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_a_key_published_in_one_process_wakes_waiters_in_another(hub: MemoryHub) -> None:
    state: dict[str, int] = {}
    async with Purgatory("a") as pa, Purgatory("b") as pb:
        async with MemoryBus(hub, name="a") as bus_a, MemoryBus(hub, name="b") as bus_b:
            bus_a.attach(pa)
            bus_b.attach(pb)
            here, there = waiter(pa, state, "job-1"), waiter(pb, state, "job-1")
            other = waiter(pb, state, "job-2")
            await settle()
            state["job-1"] = state["job-2"] = 1
            await bus_a.publish("job-1")
            assert await here is True
            assert await there is True
            assert not other.done()  # job-2 was not published
            other.cancel()
            sa, sb = bus_a.statistics(), bus_b.statistics()
            assert (sa.published, sa.messages_sent, sa.messages_received) == (1, 1, 0)
            assert (sb.received, sb.messages_received) == (1, 1)


@pytest.mark.asyncio
async def test_several_purgatories_attach_and_detach(hub: MemoryHub) -> None:
    state: dict[str, int] = {}
    async with Purgatory("one") as p1, Purgatory("two") as p2, MemoryBus(hub) as bus:
        bus.attach(p1)
        bus.attach(p2)
        bus.detach(p2)
        w1, w2 = waiter(p1, state, "k"), waiter(p2, state, "k")
        await settle()
        state["k"] = 1
        await bus.publish("k")
        assert await w1 is True
        await settle()
        assert not w2.done()  # detached: the bus no longer triggers it
        w2.cancel()
        with pytest.raises(ValueError, match="not attached"):
            bus.detach(p2)
        with pytest.raises(ValueError, match="already attached"):
            bus.attach(p1)


@pytest.mark.asyncio
async def test_bad_input_is_refused_before_anything_is_sent(hub: MemoryHub) -> None:
    async with MemoryBus(hub, name="x") as bus:
        with pytest.raises(TypeError, match=r"keys on a bus are str.*bytes"):
            await bus.publish(b"job")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="got int 42"):
            await bus.publish("ok", 42)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="at least one key"):
            await bus.publish()
        with pytest.raises(ValueError, match="does not fit in one message"):
            await bus.publish("k" * (bus.max_message_bytes + 1))
        with pytest.raises(ValueError, match="not encodable as UTF-8"):
            await bus.publish("\ud800")
        with pytest.raises(TypeError, match="DelayedOperationPurgatory"):
            bus.attach("not a purgatory")  # type: ignore[arg-type]
        assert bus.statistics().messages_sent == 0
    with pytest.raises(BusClosed, match="closed"):
        bus.attach(Purgatory("late"))
    with pytest.raises(BusClosed, match="closed"):
        await bus.publish("k")


@pytest.mark.parametrize(
    ("option", "value", "error"),
    [
        ("recheck_interval_s", 0, ValueError),
        ("publish_timeout_s", float("inf"), ValueError),
        ("connect_timeout_s", "1", TypeError),
        ("backoff_initial_s", -1.0, ValueError),
        ("max_pending_keys", 0, ValueError),
    ],
)
def test_bad_options_are_refused(option: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=option):
        MemoryBus(**{option: value})  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_backoff_max_below_initial_is_refused() -> None:
    with pytest.raises(ValueError, match="backoff_max_s"):
        MemoryBus(backoff_initial_s=2.0, backoff_max_s=1.0)


@pytest.mark.virtual_time
@pytest.mark.asyncio
async def test_an_unreachable_server_at_start_is_a_clear_error_in_bounded_time(
    hub: MemoryHub,
) -> None:
    hub.stop()
    loop = asyncio.get_running_loop()
    started = loop.time()
    bus = MemoryBus(hub, name="cut-off", connect_timeout_s=3.0)
    with pytest.raises(BusUnavailable, match=r"could not connect .* within 3.0 s: .*stopped"):
        await bus.start()
    assert loop.time() - started == pytest.approx(3.0, abs=0.01)
    with pytest.raises(BusClosed):
        bus.attach(Purgatory("p"))


@pytest.mark.virtual_time
@pytest.mark.asyncio
async def test_an_outage_loses_no_wake_up(hub: MemoryHub) -> None:
    """Waiters parked in two other processes; the server dies; every key changes and is
    published (which fails); the server comes back: every waiter is answered, by the
    re-check after the reconnect, long before its timeout."""
    state: dict[str, int] = {}
    options = {"recheck_interval_s": 1000.0, "backoff_max_s": 0.5}
    async with Purgatory("w1") as p1, Purgatory("w2") as p2:
        async with (
            MemoryBus(hub, name="w1", **options) as b1,  # type: ignore[arg-type]
            MemoryBus(hub, name="w2", **options) as b2,  # type: ignore[arg-type]
            MemoryBus(hub, name="pub", publish_timeout_s=1.0) as publisher,
        ):
            b1.attach(p1)
            b2.attach(p2)
            keys = [f"job-{i}" for i in range(20)]
            waits = [waiter(p, state, k) for k in keys for p in (p1, p2)]
            await settle()
            hub.stop()
            await settle()
            assert not b1.connected
            assert not b1.statistics().connected
            for key in keys:
                state[key] = 1
            with pytest.raises(BusUnavailable, match=r"within 1\.0 s"):
                await publisher.publish(*keys)
            assert publisher.statistics().publish_errors == 1
            assert not any(w.done() for w in waits)  # nothing could reach them
            loop = asyncio.get_running_loop()
            restarted = loop.time()
            hub.start()
            assert all(await asyncio.gather(*waits))
            assert loop.time() - restarted <= 0.5  # one backoff at most, then the re-check
            for bus in (b1, b2):
                stats = bus.statistics()
                assert stats.connected
                assert stats.reconnects == 1
                assert stats.rechecks == 2  # the first connect, the reconnect
                assert stats.rechecked_keys == 20


@pytest.mark.virtual_time
@pytest.mark.asyncio
async def test_while_disconnected_watched_keys_are_rechecked_periodically(
    hub: MemoryHub,
) -> None:
    state: dict[str, int] = {}
    async with Purgatory("w") as p, MemoryBus(hub, recheck_interval_s=2.0) as bus:
        bus.attach(p)
        wait = waiter(p, state, "k")
        await settle()
        loop = asyncio.get_running_loop()
        hub.stop()
        stopped = loop.time()
        state["k"] = 1  # readable although nobody can publish
        assert await wait is True
        assert loop.time() - stopped == pytest.approx(2.0, abs=0.01)
        assert not bus.connected


@pytest.mark.asyncio
async def test_a_subscription_that_ends_is_reconnected_and_rechecked(hub: MemoryHub) -> None:
    state: dict[str, int] = {}
    async with Purgatory("w") as p, MemoryBus(hub, backoff_initial_s=0.001) as bus:
        bus.attach(p)
        wait = waiter(p, state, "k")
        await settle()
        state["k"] = 1
        hub.stop()  # a blip: the subscription ends, the server is back at once
        hub.start()
        assert await asyncio.wait_for(wait, 5) is True
        assert bus.statistics().reconnects == 1


@pytest.mark.asyncio
async def test_a_flood_of_one_key_costs_few_checks(hub: MemoryHub) -> None:
    state: dict[str, int] = {}
    async with (
        Purgatory("w") as p,
        MemoryBus(hub, name="w") as receiver,
        MemoryBus(hub, name="pub") as publisher,
    ):
        receiver.attach(p)
        wait = waiter(p, state, "hot")
        await settle()
        for version in range(1, 1001):
            state["hot"] = version
            await publisher.publish("hot")
        assert await wait is True
        stats = receiver.statistics()
        assert stats.received == 1000
        assert stats.checks + stats.coalesced == 1000
        assert stats.checks <= 2


@pytest.mark.asyncio
async def test_a_flood_of_distinct_keys_stays_bounded_and_loses_nothing(
    hub: MemoryHub,
) -> None:
    state: dict[str, int] = {}
    async with (
        Purgatory("w") as p,
        MemoryBus(hub, name="w", max_pending_keys=10) as receiver,
        MemoryBus(hub, name="pub") as publisher,
    ):
        receiver.attach(p)
        await settle()  # the first connect's re-check is done
        keys = [f"k{i}" for i in range(100)]
        waits = [waiter(p, state, k) for k in keys[::7]]
        await settle()
        state.update(dict.fromkeys(keys, 1))
        await publisher.publish(*keys)
        assert receiver.statistics().pending_keys <= 10
        assert all(await asyncio.gather(*waits))
        assert receiver.statistics().overflows == 1


@pytest.mark.asyncio
async def test_a_message_too_large_for_the_backend_is_split_not_truncated(
    hub: MemoryHub,
) -> None:
    state: dict[str, int] = {}
    async with (
        Purgatory("w") as p,
        MemoryBus(hub, name="w") as receiver,
        MemoryBus(hub, name="pub") as publisher,
    ):
        publisher.max_message_bytes = 200  # as small as NOTIFY's limit is, relatively
        receiver.attach(p)
        keys = [f"key-{i:04d}-\u00e9" for i in range(300)]
        waits = [waiter(p, state, k) for k in keys]
        await settle()
        state.update(dict.fromkeys(keys, 1))
        await publisher.publish(*keys)
        assert all(await asyncio.gather(*waits))
        sent = publisher.statistics().messages_sent
        assert sent == receiver.statistics().messages_received > 1
        assert receiver.statistics().received == 300


@pytest.mark.asyncio
async def test_a_message_the_bus_did_not_write_triggers_a_full_recheck(hub: MemoryHub) -> None:
    state: dict[str, int] = {}
    async with Purgatory("w") as p, MemoryBus(hub) as bus:
        bus.attach(p)
        wait = waiter(p, state, "k")
        await settle()
        state["k"] = 1
        hub._send("garbage from another app")
        assert await asyncio.wait_for(wait, 5) is True
        assert bus.statistics().malformed == 1


@pytest.mark.asyncio
async def test_a_bus_belongs_to_one_loop(hub: MemoryHub) -> None:
    async with MemoryBus(hub) as bus:
        with pytest.raises(RuntimeError, match="different event loop"):
            await asyncio.to_thread(asyncio.run, bus.publish("k"))


@pytest.mark.asyncio
async def test_metrics_show_a_bus_cut_off_and_back(hub: MemoryHub) -> None:
    registry = CollectorRegistry()
    async with MemoryBus(hub, name="jobs", backoff_initial_s=0.001) as bus:
        BusMetrics(registry).track(bus)
        assert registry.get_sample_value("purgatory_bus_connected", {"bus": "jobs"}) == 1
        hub.stop()
        await settle()
        assert registry.get_sample_value("purgatory_bus_connected", {"bus": "jobs"}) == 0
        hub.start()
        await asyncio.wait_for(bus._connected.wait(), 5)
        await bus.publish("a", "b")
        assert registry.get_sample_value("purgatory_bus_connected", {"bus": "jobs"}) == 1
        assert registry.get_sample_value("purgatory_bus_reconnects_total", {"bus": "jobs"}) == 1
        assert registry.get_sample_value("purgatory_bus_published_keys_total", {"bus": "jobs"}) == 2


@pytest.mark.asyncio
async def test_publishing_on_a_bus_never_started_says_so_at_once(hub: MemoryHub) -> None:
    bus = MemoryBus(hub, publish_timeout_s=30.0)
    with pytest.raises(RuntimeError, match="not started"):
        await asyncio.wait_for(bus.publish("k"), 1)
