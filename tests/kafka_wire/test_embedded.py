"""The embedded cluster as a test would use it: synchronous clients against the
background-thread cluster, aiokafka against the in-loop one, a leader crash under a
producer, crashed brokers refusing connections, and the pytest fixture."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from purgatory.errors import ErrorCode
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.sim import SimulationError

ROOT = Path(__file__).resolve().parents[2]


def _refused(address: tuple[str, int]) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        try:
            sock.connect(address)
        except ConnectionRefusedError:
            return True
    return False


def test_kafka_python_produces_and_a_group_consumer_reads_back() -> None:
    from kafka import KafkaConsumer, KafkaProducer

    with EmbeddedKafka(brokers=3, topics={"orders": 2}) as kafka:
        assert kafka.topics() == {"orders": 2}
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
        try:
            for i in range(20):
                producer.send("orders", f"o{i}".encode(), partition=i % 2)
            producer.flush(10)
        finally:
            producer.close(timeout=5)
        consumer = KafkaConsumer(
            "orders",
            bootstrap_servers=kafka.bootstrap_servers,
            group_id="billing",
            auto_offset_reset="earliest",
        )
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 20
            while len(got) < 20 and time.monotonic() < deadline:
                for messages in consumer.poll(timeout_ms=500).values():
                    got += [m.value for m in messages]
        finally:
            consumer.close()
        stored = [r.value for p in (0, 1) for r in kafka.records("orders", p)]
        assert kafka.describe("orders", 0).high_watermark == 10
    assert sorted(got) == sorted(f"o{i}".encode() for i in range(20))
    assert sorted(stored) == sorted(got)


def test_confluent_producer_rides_out_a_leader_crash_with_acks_all() -> None:
    from confluent_kafka import Producer

    with EmbeddedKafka(brokers=3, topics={"t": 1}, min_insync_replicas=2) as kafka:
        old = kafka.leader("t", 0)
        assert old is not None
        producer = Producer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "acks": "all",
                "linger.ms": 2,
                "retry.backoff.ms": 20,
            }
        )
        delivered: list[bytes] = []
        failed: list[object] = []

        def report(error: object, message: object) -> None:
            if error is None:
                delivered.append(message.value())  # type: ignore[attr-defined]
            else:
                failed.append(error)

        for i in range(200):
            producer.produce("t", b"r%d" % i, partition=0, on_delivery=report)
            if i == 100:
                producer.flush(10)
                kafka.crash_broker(old)  # the leader dies with the producer connected
            producer.poll(0)
        assert producer.flush(30) == 0
        producer.close()  # no reconnect racing the cluster's close
        new = kafka.leader("t", 0)
        stored = {r.value for r in kafka.records("t", 0)}
        kafka.restart_broker(old)
    assert new not in (None, old)
    assert failed == []
    assert len(delivered) == 200
    assert stored >= set(delivered)  # every acknowledged record survived the crash


def test_a_crashed_broker_refuses_connections_at_once_and_restarts_on_its_port() -> None:
    with EmbeddedKafka(brokers=2, topics={"t": (1, 2)}) as kafka:
        address = kafka.addresses[1]
        kafka.crash_broker(1)
        started = time.monotonic()
        assert _refused(address)
        assert time.monotonic() - started < 1.0  # refused, not a stalled connect
        assert kafka.addresses[1] == address
        kafka.restart_broker(1)
        assert not _refused(address)
        assert 1 in kafka.describe("t", 0).replicas


def test_topic_helpers_and_faults_refuse_bad_input() -> None:
    with EmbeddedKafka(brokers=1) as kafka:
        kafka.create_topic("a", partitions=3)
        assert kafka.topics() == {"a": 3}
        assert kafka.describe("a", 2).replicas == [0]  # replication factor min(3, brokers)
        with pytest.raises(SimulationError) as exists:
            kafka.create_topic("a")
        assert exists.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
        with pytest.raises(KeyError):
            kafka.records("a", 3)
        with pytest.raises(ValueError, match="no broker 5"):
            kafka.crash_broker(5)
    with pytest.raises(RuntimeError, match="not running"):
        kafka.topics()


def test_delete_topic_is_seen_by_a_client_and_the_name_can_be_created_again() -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient

    with EmbeddedKafka(brokers=3, topics={"t": 2, "kept": 1}) as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        try:
            producer.send("t", b"old", partition=1).get(timeout=10)
            assert set(admin.list_topics()) == {"t", "kept"}
            kafka.delete_topic("t")
            assert kafka.topics() == {"kept": 1}
            assert set(admin.list_topics()) == {"kept"}  # Metadata no longer lists it
            with pytest.raises(SimulationError) as unknown:
                kafka.delete_topic("t")
            assert unknown.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            kafka.create_topic("t", partitions=1)
            assert kafka.records("t", 0) == []  # a new topic: nothing of the old one
            producer.send("t", b"new", partition=0).get(timeout=10)
        finally:
            producer.close(timeout=5)
            admin.close()
        assert [r.value for r in kafka.records("t", 0)] == [b"new"]


def test_elections_and_a_slow_follower_through_the_sync_surface() -> None:
    with EmbeddedKafka(brokers=3, topics={"t": 1}) as kafka:
        assert kafka.leader("t", 0) == 0
        assert kafka.move_leader("t", 0, to=2) == 2
        result = kafka.elect_leaders([("t", 0)])
        assert [(p.error, p.leader) for p in result.partitions] == [(ErrorCode.NONE, 0)]
        kafka.slow_follower(1, 50.0)
        assert kafka.cluster.brokers[1].latency is not None
        kafka.slow_follower(1, None)
        # An offline partition whose in-sync replicas are gone: only an unclean
        # election gives it a leader again.
        kafka.crash_broker(0)
        kafka.crash_broker(1)
        kafka.crash_broker(2)
        kafka.restart_broker(1)  # out of the ISR when broker 2 was left alone in it
        assert kafka.leader("t", 0) is None
        unclean = kafka.elect_leaders([("t", 0)], unclean=True)
        assert [(p.error, p.leader) for p in unclean.partitions] == [(ErrorCode.NONE, 1)]
        assert kafka.leader("t", 0) == 1


@pytest.mark.asyncio
async def test_aiokafka_against_the_in_loop_cluster() -> None:
    async with AsyncEmbeddedKafka(brokers=3, topics={"t": 2}) as kafka:
        async with asyncio.timeout(30):
            producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
            await producer.start()
            try:
                for i in range(10):
                    await producer.send_and_wait("t", b"a%d" % i, partition=1)
                await kafka.crash_broker(kafka.leader("t", 1))  # type: ignore[arg-type]
                for i in range(10, 20):
                    await producer.send_and_wait("t", b"a%d" % i, partition=1)
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(
                "t",
                bootstrap_servers=kafka.bootstrap_servers,
                group_id="g",
                auto_offset_reset="earliest",
            )
            await consumer.start()
            got: list[bytes] = []
            try:
                while len(got) < 20:
                    batches = await consumer.getmany(timeout_ms=500)
                    got += [m.value for messages in batches.values() for m in messages]
            finally:
                await consumer.stop()
    assert sorted(got) == sorted(b"a%d" % i for i in range(20))


def _pytest(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(source))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )


def test_the_fixture_in_a_user_test_suite(tmp_path: Path) -> None:
    run = _pytest(
        tmp_path,
        """
        import pytest
        from kafka import KafkaProducer

        def test_default(kafka_cluster):
            assert len(kafka_cluster.addresses) == 3

        @pytest.mark.kafka_cluster(brokers=1, topics={"t": 2})
        def test_marked(kafka_cluster):
            producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers)
            producer.send("t", b"x", partition=1).get(timeout=10)
            producer.close()
            assert [r.value for r in kafka_cluster.records("t", 1)] == [b"x"]
            assert len(kafka_cluster.addresses) == 1

        @pytest.mark.kafka_cluster(2, seed=3)
        def test_brokers_positional(kafka_cluster):
            assert len(kafka_cluster.addresses) == 2
        """,
        "-p",
        "purgatory.kafka.pytest_plugin",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout


def test_loading_the_plugin_imports_no_broker() -> None:
    code = (
        "import sys, purgatory.kafka.pytest_plugin; "
        "print(sorted(m for m in sys.modules if m.startswith(('purgatory.sim', "
        "'purgatory.kafka.embedded', 'purgatory.kafka.front_door', 'aiohttp'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_the_fixture_imports_the_kafka_wire_unrewritten_by_pytest(tmp_path: Path) -> None:
    """pytest rewrites the asserts of every module of a plugin's distribution (a wheel
    install names them all; the conftest below marks two, as that does): the fixture
    imports the Kafka wire past that, which would parse and compile each module from
    source in every run where pytest cannot cache them (0.35-0.4 s)."""
    (tmp_path / "conftest.py").write_text(
        'import pytest\npytest.register_assert_rewrite("purgatory.sim", '
        '"purgatory.kafka.front_door")\n'
    )
    run = _pytest(
        tmp_path,
        """
        import sys

        def test_unrewritten(kafka_cluster):
            for name in ("purgatory.sim.cluster", "purgatory.kafka.front_door"):
                loader = type(sys.modules[name].__loader__).__name__
                assert loader != "AssertionRewritingHook", name

        def test_rewritten():
            assert type(sys.modules[__name__].__loader__).__name__ == "AssertionRewritingHook"
        """,
        "-p",
        "purgatory.kafka.pytest_plugin",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
