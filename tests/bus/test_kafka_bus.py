"""KafkaBus against a real broker (``purgatory serve --kafka-port``): triggers cross
processes, every gap aiokafka would hide (a broker killed, restarted, hung) ends the
subscription and is followed by a full re-check, bad input is refused clearly."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from outage import collect, set_versions, waiter_processes
from waits import Purgatory, waiter

from purgatory.bus import BusUnavailable
from purgatory.bus.testing import KafkaServer, free_port

# Without aiokafka or aiohttp, the kafka_client fixture skips every test here (or fails it
# under CI=true) before any of them needs these.
pytestmark = pytest.mark.usefixtures("kafka_client")
with contextlib.suppress(ImportError):
    from aiokafka import AIOKafkaProducer

    from purgatory.bus import KafkaBus


# Short timeouts and backoffs: the whole file must stay quick.
FAST = {
    "connect_timeout_s": 3.0,
    "publish_timeout_s": 2.0,
    "backoff_initial_s": 0.05,
    "backoff_max_s": 0.5,
    "watchdog_interval_s": 0.5,
}


async def eventually(condition: Callable[[], bool], within_s: float) -> float:
    """Wait until ``condition()``; the seconds it took; fail after ``within_s``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > within_s:
            raise AssertionError(f"not true within {within_s} s")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


@pytest.mark.asyncio
async def test_a_key_published_in_one_process_wakes_waiters_in_another(
    kafka_server: KafkaServer,
) -> None:
    state: dict[str, int] = {}
    async with Purgatory("a") as pa, Purgatory("b") as pb:
        async with (
            KafkaBus(kafka_server.bootstrap_servers, name="a", **FAST) as bus_a,
            KafkaBus(kafka_server.bootstrap_servers, name="b", **FAST) as bus_b,
        ):
            bus_a.attach(pa)
            bus_b.attach(pb)
            there, other = waiter(pb, state, "job-1"), waiter(pb, state, "job-2")
            await asyncio.sleep(0.05)
            state["job-1"] = state["job-2"] = 1
            await bus_a.publish("job-1")
            async with asyncio.timeout(5):
                assert await there is True
            assert not other.done()  # job-2 was not published
            other.cancel()
            sa, sb = bus_a.statistics(), bus_b.statistics()
            assert (sa.published, sa.messages_sent, sa.publish_errors) == (1, 1, 0)
            assert (sb.messages_received, sb.received) == (1, 1)
            assert sa.messages_received == 0  # its own message is skipped
            assert sb.connected
            assert sb.reconnects == 0


@pytest.mark.asyncio
async def test_keys_over_one_message_are_split_and_all_arrive(kafka_server: KafkaServer) -> None:
    # three keys of 400 kB do not fit in one 1 MiB record: two records, no key lost
    keys = [c * 400_000 for c in "xyz"]
    async with (
        KafkaBus(kafka_server.bootstrap_servers, name="a", **FAST) as bus_a,
        KafkaBus(kafka_server.bootstrap_servers, name="b", **FAST) as bus_b,
    ):
        await bus_a.publish(*keys)
        assert bus_a.statistics().messages_sent == 2
        await eventually(lambda: bus_b.statistics().received == 3, 10)
        assert bus_b.statistics().messages_received == 2


@pytest.mark.asyncio
async def test_the_largest_key_goes_through_and_a_larger_one_is_refused(
    kafka_server: KafkaServer,
) -> None:
    async with (
        KafkaBus(kafka_server.bootstrap_servers, name="a", **FAST) as bus_a,
        KafkaBus(kafka_server.bootstrap_servers, name="b", **FAST) as bus_b,
    ):
        room = KafkaBus.max_message_bytes - len(f'["{bus_a.sender_id}",""]')
        await bus_a.publish("k" * room)  # Kafka and aiokafka take the largest message
        await eventually(lambda: bus_b.statistics().received == 1, 10)
        with pytest.raises(ValueError, match="does not fit in one message"):
            await bus_a.publish("k" * (room + 1))
        assert bus_a.statistics().messages_sent == 1


@pytest.mark.asyncio
async def test_non_str_keys_are_refused(kafka_server: KafkaServer) -> None:
    async with KafkaBus(kafka_server.bootstrap_servers, **FAST) as bus:
        with pytest.raises(TypeError, match="keys on a bus are str"):
            await bus.publish(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="bytes"):
            await bus.publish(b"job")  # type: ignore[arg-type]
        assert bus.statistics().published == 0


@pytest.mark.asyncio
async def test_a_record_the_bus_did_not_write_is_answered_by_a_full_recheck(
    kafka_server: KafkaServer,
) -> None:
    async with Purgatory("p") as p, KafkaBus(kafka_server.bootstrap_servers, **FAST) as bus:
        bus.attach(p)
        rechecks = bus.statistics().rechecks
        producer = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait(kafka_server.topic, b"not json")
            await producer.send_and_wait(kafka_server.topic, None, key=b"k")  # a tombstone
        finally:
            await producer.stop()
        await eventually(lambda: bus.statistics().malformed == 2, 10)
        await eventually(lambda: bus.statistics().rechecks > rechecks, 5)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="host:port"):
        KafkaBus("localhost")
    with pytest.raises(ValueError, match="host:port"):
        KafkaBus("")
    with pytest.raises(ValueError, match="host:port"):
        KafkaBus(["127.0.0.1:9092", "127.0.0.1:x"])
    with pytest.raises(TypeError, match="topic"):
        KafkaBus("127.0.0.1:9092", topic="")
    with pytest.raises(ValueError, match="watchdog_interval_s"):
        KafkaBus("127.0.0.1:9092", watchdog_interval_s=0)
    bus = KafkaBus(" 127.0.0.1:9092 ,127.0.0.1:9093")
    assert bus.bootstrap_servers == ["127.0.0.1:9092", "127.0.0.1:9093"]


@pytest.mark.asyncio
async def test_an_unreachable_broker_at_start_fails_within_connect_timeout() -> None:
    bus = KafkaBus(f"127.0.0.1:{free_port()}", **{**FAST, "connect_timeout_s": 1.0})
    started = time.monotonic()
    with pytest.raises(BusUnavailable, match="could not connect"):
        await bus.start()
    assert time.monotonic() - started < 2.0


@pytest.mark.asyncio
async def test_a_missing_topic_fails_at_start_and_says_so(kafka_server: KafkaServer) -> None:
    bus = KafkaBus(
        kafka_server.bootstrap_servers, topic="absent", **{**FAST, "connect_timeout_s": 1.0}
    )
    started = time.monotonic()
    with pytest.raises(BusUnavailable, match="topic 'absent' does not exist"):
        await bus.start()
    assert time.monotonic() - started < 2.0


@pytest.mark.asyncio
async def test_publish_while_the_broker_is_down_raises_within_publish_timeout(
    own_kafka: KafkaServer,
) -> None:
    async with KafkaBus(own_kafka.bootstrap_servers, **{**FAST, "publish_timeout_s": 1.0}) as bus:
        own_kafka.kill()
        started = time.monotonic()
        with pytest.raises(BusUnavailable):
            await bus.publish("job-1")
        assert time.monotonic() - started < 1.5
        assert bus.statistics().publish_errors == 1


@pytest.mark.asyncio
async def test_a_restart_hidden_by_new_records_is_noticed_and_followed_by_a_recheck(
    own_kafka: KafkaServer,
) -> None:
    """The broker comes back with an empty log that others refill past the bus's old
    positions at once, so offsets show no gap; the closed connection does. The probe
    interval is long, so the notice comes from the connection, not the probe."""
    state: dict[str, int] = {}
    options = {**FAST, "watchdog_interval_s": 60.0, "recheck_interval_s": 60.0}
    async with (
        Purgatory("p") as p,
        KafkaBus(own_kafka.bootstrap_servers, name="sub", **options) as bus,
    ):
        bus.attach(p)
        async with KafkaBus(own_kafka.bootstrap_servers, name="pub", **FAST) as publisher:
            await publisher.publish(*(f"warm-{i}" for i in range(5)))
        await eventually(lambda: bus.statistics().received == 5, 10)
        parked = waiter(p, state, "job")
        await asyncio.sleep(0.05)
        rechecks = bus.statistics().rechecks
        own_kafka.kill()
        state["job"] = 1  # the trigger is lost with the broker
        own_kafka.start()
        producer = AIOKafkaProducer(bootstrap_servers=own_kafka.bootstrap_servers)
        await producer.start()
        try:
            for _ in range(20):  # the new log passes every old position
                await producer.send_and_wait(own_kafka.topic, b'["someone","other"]')
        finally:
            await producer.stop()
        async with asyncio.timeout(10):
            assert await parked is True
        stats = bus.statistics()
        assert stats.reconnects == 1
        assert stats.rechecks > rechecks


@pytest.mark.asyncio
async def test_a_hung_broker_is_noticed_by_the_probe(own_kafka: KafkaServer) -> None:
    """SIGSTOP keeps every connection open but nothing answers: the probe times out."""
    assert own_kafka.process is not None
    options = {**FAST, "connect_timeout_s": 0.5, "watchdog_interval_s": 0.2}
    async with KafkaBus(own_kafka.bootstrap_servers, **options) as bus:
        own_kafka.process.send_signal(signal.SIGSTOP)
        try:
            lost_after = await eventually(lambda: not bus.connected, 5)
        finally:
            own_kafka.process.send_signal(signal.SIGCONT)
        assert lost_after < 2.0  # one interval (0.2 s) and one probe timeout (0.5 s), with slack
        await eventually(lambda: bus.connected, 10)
        assert bus.statistics().reconnects == 1


LOOPS = ["asyncio", "uvloop"]


@pytest.mark.parametrize("loop", LOOPS)
def test_outage_every_waiter_in_three_processes_is_answered_after_a_restart(
    own_kafka: KafkaServer, tmp_path: Path, loop: str
) -> None:
    """Waiters parked in three processes; kill -9 the broker; change every key's state and
    publish (which fails); restart the broker (empty, topic created again): every waiter is
    answered by the re-check that follows the reconnect. The outage re-check interval is
    longer than the test, so nothing else can answer them."""
    bus = {"kind": "KafkaBus", "bootstrap_servers": own_kafka.bootstrap_servers, "name": "waiter"}
    bus |= {**FAST, "recheck_interval_s": 600.0}
    keys = [[f"p{i}-job-{j}" for j in range(20)] for i in range(3)]
    every_key = [key for process_keys in keys for key in process_keys]
    with waiter_processes(bus, tmp_path, keys, timeout_ms=120_000, loop=loop) as procs:

        async def publish_while_down() -> None:
            options = {**FAST, "publish_timeout_s": 1.0}
            async with KafkaBus(own_kafka.bootstrap_servers, name="publisher", **options) as pub:
                own_kafka.kill()
                set_versions(tmp_path, every_key)
                with pytest.raises(BusUnavailable):
                    await pub.publish(*every_key)

        asyncio.run(publish_while_down())
        restarted = time.monotonic()
        own_kafka.start(topic=False)
        own_kafka.create_topic()
        collect(procs, within_s=30)
        recovery = time.monotonic() - restarted
    print(f"\nKafkaBus outage ({loop}): restart -> last of 60 waiters answered {recovery:.2f} s")
    for process in procs:
        assert process.statistics is not None
        assert process.statistics["reconnects"] >= 1
        assert process.statistics["rechecks"] >= 2
