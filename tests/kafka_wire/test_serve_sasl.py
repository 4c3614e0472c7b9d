"""``purgatory serve --kafka-sasl-port P --kafka-user NAME:PASSWORD``: SASL_PLAINTEXT
listeners beside (or instead of) the plaintext ones, in the ready file and on a line of
their own; failed logins on ``/metrics``; and a plaintext Kafka listener only on loopback
unless ``--kafka-allow-anonymous``."""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import urllib.request

import pytest
from kafka import KafkaProducer

from purgatory.service.cli import add_arguments, settings_from_args
from purgatory.testing import ServeProcess


def _settings(*argv: str) -> object:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return settings_from_args(parser.parse_args(list(argv)))


def _produce(bootstrap: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password=password,
        max_block_ms=3000,
    )
    try:
        producer.send("events", b"over sasl").get(10)
    finally:
        producer.close()


def _refused(bootstrap: str) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "wrong",
            "error_cb": errors.append,
        }
    )
    producer.produce("events", b"never")
    for _ in range(20):
        if errors:
            break
        producer.poll(0.5)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_serve_has_sasl_listeners_in_the_ready_file_and_counts_failed_logins() -> None:
    with ServeProcess(
        "--kafka-port", "0", "--kafka-sasl-port", "0", "--kafka-user", "alice:wonder:land",
        "--topic", "events:1:3",
    ) as server:  # fmt: skip
        sasl = server.addresses.document["kafka_sasl"]
        assert sasl["security_protocol"] == "SASL_PLAINTEXT"
        assert sasl["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert [b["id"] for b in sasl["brokers"]] == [0, 1, 2]
        bootstrap = sasl["bootstrap_servers"]
        assert bootstrap == ",".join(f"{b['host']}:{b['port']}" for b in sasl["brokers"])
        assert set(bootstrap.split(",")).isdisjoint(server.bootstrap_servers.split(","))
        _produce(bootstrap, "wonder:land")  # the password is everything after the first colon
        _refused(bootstrap)
        with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
            metrics = response.read().decode()
        failed = re.search(
            r'^purgatory_kafka_authentication_failures_total\{mechanism="SCRAM-SHA-512"\} (\S+)$',
            metrics,
            re.M,
        )
        assert failed is not None
        assert float(failed.group(1)) >= 1
        server.stop()
        log = server.log()
    sasl_lines = [line for line in log.splitlines() if "sasl" in line]
    assert sasl_lines == [f"kafka sasl bootstrap.servers={bootstrap}"]


@pytest.mark.asyncio
async def test_serve_with_only_sasl_listeners() -> None:
    from aiokafka import AIOKafkaProducer

    with ServeProcess("--kafka-sasl-port", "0", "--kafka-user", "alice:pw") as server:
        document = server.addresses.document
        assert document["kafka"] is None
        producer = AIOKafkaProducer(
            bootstrap_servers=document["kafka_sasl"]["bootstrap_servers"],
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password="pw",
        )
        await producer.start()
        try:
            async with asyncio.timeout(20):
                metadata = await producer.client.fetch_all_metadata()
            assert len(metadata.brokers()) == 3
        finally:
            await producer.stop()


def test_serve_offers_oauthbearer_when_sasl_enabled_mechanisms_names_it() -> None:
    from confluent_kafka import Producer

    with ServeProcess(
        "--kafka-sasl-port", "0", "--kafka-user", "alice:pw", "--brokers", "1",
        "--topic", "events:1:1",
        "--kafka-config", "sasl.enabled.mechanisms=OAUTHBEARER,SCRAM-SHA-256",
    ) as server:  # fmt: skip
        sasl = server.addresses.document["kafka_sasl"]
        assert sasl["mechanisms"] == ["OAUTHBEARER", "SCRAM-SHA-256"]
        producer = Producer(
            {
                "bootstrap.servers": sasl["bootstrap_servers"],
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": "principal=alice",
            }
        )
        producer.produce("events", b"with a token")
        assert producer.flush(10) == 0
        _produce(sasl["bootstrap_servers"], "pw", "SCRAM-SHA-256")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--kafka-user", "alice:pw"], "--kafka-sasl-port"),
        (["--kafka-sasl-port", "0", "--kafka-user", "alice"], "NAME:PASSWORD"),
        (["--kafka-sasl-port", "0", "--kafka-user", ":pw"], "NAME:PASSWORD"),
        (["--kafka-sasl-port", "0", "--kafka-user", "a:1", "--kafka-user", "a:2"], "twice"),
        (["--kafka-sasl-port", "65535"], "--kafka-sasl-port"),
        (["--kafka-port", "9092", "--kafka-sasl-port", "9094"], "overlap"),
        (["--kafka-config", "authorizer.class.name=com.example.Mine"], "authorizer.class.name"),
        (["--kafka-config", "sasl.enabled.mechanisms=GSSAPI"], "GSSAPI (Kerberos)"),
        (
            ["--kafka-config", "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=x;"],
            "OAuthBearerLoginModule",
        ),
    ],
)
def test_bad_sasl_flags_are_refused_naming_them(argv: list[str], named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        _settings(*argv)


def test_a_plaintext_kafka_listener_off_loopback_needs_allow_anonymous() -> None:
    with pytest.raises(ValueError, match="--kafka-allow-anonymous"):
        _settings("--host", "0.0.0.0", "--kafka-port", "0")
    # SASL listeners authenticate their clients: fine anywhere
    _settings("--host", "0.0.0.0", "--kafka-sasl-port", "0", "--kafka-user", "a:b")
    _settings("--host", "0.0.0.0", "--kafka-port", "0", "--kafka-allow-anonymous")
    _settings("--host", "127.0.0.1", "--kafka-port", "0")
    _settings("--host", "::1", "--kafka-port", "0")
    _settings("--host", "0.0.0.0")  # the Docker image's command: HTTP only


def test_serve_exits_2_naming_the_flag_for_plaintext_kafka_off_loopback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "purgatory", "serve", "--host", "0.0.0.0", "--kafka-port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--kafka-allow-anonymous" in result.stderr
