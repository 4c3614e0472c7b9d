"""librdkafka fetching from a follower (KIP-392): a consumer with ``client.rack`` reads
from the in-sync follower in its rack, and when that follower crashes goes back to the
leader and reads on, no record lost or read twice. ``purgatory serve --kafka-racks``
gives its brokers racks, as librdkafka's admin client sees them."""

from __future__ import annotations

import argparse
import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from purgatory.kafka.embedded import EmbeddedKafka
from purgatory.service.cli import add_arguments, settings_from_args
from purgatory.sim.replica_selector import RACK_AWARE_REPLICA_SELECTOR
from purgatory.testing import ServeProcess

RACKS = ["a", "b", "c"]
DEADLINE_S = 60.0


def _produce(kafka: EmbeddedKafka, values: range) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "acks": "all", "linger.ms": 2}
    )
    failed: list[object] = []

    def report(error: object, message: object) -> None:
        if error is not None:
            failed.append(error)

    for i in values:
        producer.produce("f", b"r%d" % i, partition=0, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    producer.close()
    assert failed == []


def _consume_until(consumer: Any, got: list[bytes], count: int, deadline: float) -> None:
    while len(got) < count:
        assert time.monotonic() < deadline, f"{len(got)} of {count} records consumed"
        message = consumer.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        got.append(message.value())


def test_a_consumer_reads_from_its_racks_follower_then_the_leader_when_it_crashes() -> None:
    from confluent_kafka import Consumer, TopicPartition

    configs = {"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR}
    with EmbeddedKafka(brokers=3, racks=RACKS, configs=configs, topics={"f": (1, 3)}) as kafka:
        leader = kafka.leader("f", 0)
        replicas = kafka.describe("f", 0).replicas
        [follower] = [b for b in replicas if RACKS[b] == "b"]
        assert leader is not None
        assert RACKS[leader] != "b"
        stats = kafka._get(lambda k: k.front_door.stats)
        deadline = time.monotonic() + DEADLINE_S
        consumer = Consumer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "group.id": "rack-b",
                "client.rack": "b",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "fetch.error.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        got: list[bytes] = []
        try:
            consumer.assign([TopicPartition("f", 0, 0)])
            for start in (0, 100, 200):  # records arriving while it reads
                _produce(kafka, range(start, start + 100))
                _consume_until(consumer, got, start + 100, deadline)
            # the leader answered the first fetch with the follower in rack b, which
            # served the rest
            assert stats.requests_to(follower, "FETCH") >= 3
            leader_before = stats.requests_to(leader, "FETCH")
            assert leader_before <= 2
            kafka.crash_broker(follower)  # mid-consumption
            _produce(kafka, range(300, 600))
            _consume_until(consumer, got, 600, deadline)
            from_leader = stats.requests_to(leader, "FETCH") - leader_before
            # nothing more arrives: none read twice
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                message = consumer.poll(0.1)
                assert message is None or message.error() is not None
        finally:
            consumer.close()
        kafka.restart_broker(follower)
    assert got == [b"r%d" % i for i in range(600)]  # in order, none lost, none twice
    assert from_leader > 0


def test_serve_kafka_racks_names_each_brokers_rack() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = settings_from_args(parser.parse_args(["--kafka-racks", "a,,c"]))
    assert settings.kafka_racks == ("a", None, "c")
    with pytest.raises(ValueError, match="one per broker"):
        settings_from_args(parser.parse_args(["--kafka-racks", "a,b"]))
    selector = f"replica.selector.class={RACK_AWARE_REPLICA_SELECTOR}"
    with ServeProcess(
        "--kafka-port", "0", "--kafka-racks", "a,b,c", "--kafka-config", selector,
    ) as server:  # fmt: skip
        admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
        described = admin.describe_cluster(request_timeout=10).result(timeout=20)
        assert sorted((n.id, n.rack) for n in described.nodes) == [(0, "a"), (1, "b"), (2, "c")]
