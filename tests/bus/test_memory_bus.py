"""What only MemoryBus allows: the Bus's schedule asserted exactly, on the virtual-time loop
(backoff, connect timeout and re-check intervals pass instantly and in order), which no
backend that waits on sockets can run on. The contract itself, on every backend and on
real loops, is test_bus_contract.py."""

from __future__ import annotations

import asyncio

import pytest
from waits import Purgatory, waiter

from purgatory.bus import BusClosed, BusUnavailable, MemoryBus, MemoryHub


@pytest.fixture
def hub() -> MemoryHub:
    return MemoryHub()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.virtual_time
@pytest.mark.asyncio
async def test_start_gives_up_exactly_at_connect_timeout(
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
async def test_after_an_outage_every_waiter_is_answered_within_one_backoff(hub: MemoryHub) -> None:
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
async def test_while_disconnected_the_recheck_comes_exactly_every_interval(
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
