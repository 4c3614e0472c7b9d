"""What only KafkaBus has, against a real broker (``purgatory serve --kafka-port``; the bus
contract every backend honours is in test_bus_contract.py): its addresses and topic, a
missing topic, a restart that new records hide from the offsets, and the metadata probe
that finds a hung broker."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import time

import pytest
from waits import Purgatory, parked, until, waiter

from purgatory.bus import BusUnavailable
from purgatory.bus.testing import KafkaServer

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
async def test_a_missing_topic_fails_at_start_and_says_so(kafka_server: KafkaServer) -> None:
    bus = KafkaBus(
        kafka_server.bootstrap_servers, topic="absent", **{**FAST, "connect_timeout_s": 1.0}
    )
    started = time.monotonic()
    with pytest.raises(BusUnavailable, match="topic 'absent' does not exist"):
        await bus.start()
    assert time.monotonic() - started < 2.0


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
        await until(lambda: bus.statistics().received == 5, 10)
        wait = waiter(p, state, "job")
        await parked(p, 1)
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
            assert await wait is True
        stats = bus.statistics()
        assert stats.reconnects == 1
        assert stats.rechecks > rechecks


@pytest.mark.asyncio
async def test_a_hung_broker_is_noticed_by_the_probe(own_kafka: KafkaServer) -> None:
    """SIGSTOP keeps every connection open but nothing answers: the probe times out."""
    assert own_kafka.process is not None
    options = {**FAST, "watchdog_interval_s": 0.2}
    async with KafkaBus(own_kafka.bootstrap_servers, **options) as bus:
        # The probe times out after connect_timeout_s, read when it probes. Connecting takes
        # FAST's 3 s (aiokafka's start on a loaded machine, e.g. beside another pytest-xdist
        # worker, can take more than 0.5 s); probing the hung broker takes 0.5 s.
        bus.connect_timeout_s = 0.5
        own_kafka.process.send_signal(signal.SIGSTOP)
        try:
            lost_after = await until(lambda: not bus.connected, 5)
        finally:
            bus.connect_timeout_s = FAST["connect_timeout_s"]  # for the reconnection
            own_kafka.process.send_signal(signal.SIGCONT)
        assert lost_after < 2.0  # one interval (0.2 s) and one probe timeout (0.5 s), with slack
        await until(lambda: bus.connected, 10)
        assert bus.statistics().reconnects == 1


LOOPS = ["asyncio", "uvloop"]


def _open_kafka_connections() -> list[object]:
    from aiokafka.conn import AIOKafkaConnection

    gc.collect()
    return [
        conn
        for conn in gc.get_objects()
        if isinstance(conn, AIOKafkaConnection) and conn.connected()
    ]


@pytest.mark.asyncio
async def test_a_connect_timed_out_inside_the_clients_start_leaves_no_connection_open() -> None:
    """The broker answers the bus's own probe but never the consumer's bootstrap Metadata:
    the connect times out inside aiokafka's start. aiokafka drops a bootstrap connection
    cancelled there without closing it; the bus lets the start finish and stops the
    client, so nothing is left open (nor found unclosed, later, by the collector)."""
    from purgatory.kafka import AsyncEmbeddedKafka

    async with AsyncEmbeddedKafka(brokers=1, topics={"purgatory": 1}) as kafka:
        kafka.faults.add("Metadata", drop=True, client_id="purgatory-bus-b", times=None)
        bus = KafkaBus(kafka.bootstrap_servers, name="b", **{**FAST, "connect_timeout_s": 0.5})
        with pytest.raises(BusUnavailable):
            await bus.start()
        await bus.close()
        assert _open_kafka_connections() == []
