"""``purgatory serve --kafka-ssl-port P`` (and ``--kafka-sasl-ssl-port P``): SSL listeners
whose certificates the server makes, named with their files in the ready file and on a
line of their own, the files removed at shutdown; an anonymous SSL listener only on
loopback unless ``--kafka-allow-anonymous`` or ``ssl.client.auth=required``."""

from __future__ import annotations

import argparse
import os
import re

import pytest

from purgatory.service.cli import add_arguments, settings_from_args
from purgatory.testing import ServeProcess


def _settings(*argv: str) -> object:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return settings_from_args(parser.parse_args(list(argv)))


def test_serve_has_ssl_listeners_with_their_certificates_in_the_ready_file() -> None:
    from confluent_kafka import Consumer, Producer

    with ServeProcess(
        "--kafka-ssl-port", "0", "--kafka-sasl-ssl-port", "0", "--kafka-user", "alice:pw",
        "--kafka-config", "ssl.client.auth=required", "--topic", "events:1:3",
    ) as server:  # fmt: skip
        document = server.addresses.document
        assert document["kafka"] is None
        tls = document["kafka_ssl"]
        assert tls["security_protocol"] == "SSL"
        assert [b["id"] for b in tls["brokers"]] == [0, 1, 2]
        files = [tls["ca_file"], tls["client_cert_file"], tls["client_key_file"]]
        assert all(os.path.isfile(path) for path in files)
        sasl_tls = document["kafka_sasl_ssl"]
        assert sasl_tls["security_protocol"] == "SASL_SSL"
        assert sasl_tls["ca_file"] == tls["ca_file"]
        assert set(sasl_tls["bootstrap_servers"].split(",")).isdisjoint(
            tls["bootstrap_servers"].split(",")
        )
        config = {
            "bootstrap.servers": tls["bootstrap_servers"],
            "security.protocol": "SSL",
            "ssl.ca.location": tls["ca_file"],
            "ssl.certificate.location": tls["client_cert_file"],
            "ssl.key.location": tls["client_key_file"],
        }
        producer = Producer(config)
        producer.produce("events", b"over tls")
        assert producer.flush(10) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": sasl_tls["bootstrap_servers"],
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": sasl_tls["ca_file"],
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice",
                "sasl.password": "pw",
                "group.id": "g",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe(["events"])
            values = []
            for _ in range(30):
                message = consumer.poll(1)
                if message is not None and message.error() is None:
                    values.append(message.value())
                    break
            assert values == [b"over tls"]
        finally:
            consumer.close()
        server.stop()
        log = server.log()
    assert not any(os.path.exists(path) for path in files)  # removed at shutdown
    lines = [line for line in log.splitlines() if "ssl bootstrap" in line]
    assert lines == [
        f"kafka ssl bootstrap.servers={tls['bootstrap_servers']}",
        f"kafka sasl_ssl bootstrap.servers={sasl_tls['bootstrap_servers']}",
    ]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--kafka-ssl-port", "65535"], "--kafka-ssl-port"),
        (["--kafka-port", "9092", "--kafka-ssl-port", "9093"], "overlap"),
        (["--kafka-sasl-port", "9192", "--kafka-sasl-ssl-port", "9190"], "overlap"),
        (["--kafka-ssl-port", "0", "--kafka-config", "ssl.client.auth=maybe"], "ssl.client.auth"),
        (
            ["--kafka-ssl-port", "0", "--kafka-config", "ssl.principal.mapping.rules=RULE:x"],
            "ssl.principal.mapping.rules",
        ),
        (["--kafka-ssl-port", "0", "--kafka-user", "a:b"], "--kafka-sasl-ssl-port"),
    ],
)
def test_bad_ssl_flags_are_refused_naming_them(argv: list[str], named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        _settings(*argv)


def test_an_anonymous_ssl_listener_off_loopback_needs_allow_anonymous() -> None:
    with pytest.raises(ValueError, match="--kafka-allow-anonymous"):
        _settings("--host", "0.0.0.0", "--kafka-ssl-port", "0")
    _settings(
        "--host", "0.0.0.0", "--kafka-ssl-port", "0", "--kafka-config", "ssl.client.auth=required"
    )
    _settings("--host", "0.0.0.0", "--kafka-ssl-port", "0", "--kafka-allow-anonymous")
    _settings("--host", "0.0.0.0", "--kafka-sasl-ssl-port", "0", "--kafka-user", "a:b")
