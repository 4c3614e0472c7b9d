"""SSL and SASL_SSL listeners: the certificates the cluster makes, confluent-kafka,
aiokafka and kafka-python over TLS, mutual TLS (``ssl.client.auth``) with the principal
a client certificate stands for (``ssl.principal.mapping.rules``) and ACLs on it, the
listeners each advertising their own addresses, and bad peers on a TLS port (plaintext,
garbage, a handshake cut off or too slow) on the default loop and uvloop."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

import pytest
from kio_wire import read_frame, read_response, request_frame

from purgatory.event_loops import available_loops, loop_factory
from purgatory.kafka.acls import Acl, Operation, PatternType, Permission, ResourceType
from purgatory.kafka.broker_config_table import STANDARD_AUTHORIZER
from purgatory.kafka.broker_configs import broker_configs
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import build, request_type
from purgatory.kafka.tls import CLIENT_SUBJECT, NoMatchingRule, PrincipalMapper

USERS = {"alice": "alice-secret"}
CLIENT = f"User:{CLIENT_SUBJECT}"
LOOPS = [name for name in ("asyncio", "uvloop") if name in available_loops()]


# -- the principal mapper ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "subject", "name"),
    [
        ("DEFAULT", "CN=a,OU=b,O=c", "CN=a,OU=b,O=c"),
        ("RULE:^CN=(.*?),.*$/$1/L,DEFAULT", "CN=Alice,OU=b", "alice"),
        ("RULE:^CN=(.*?),.*$/$1/U,DEFAULT", "CN=Alice,OU=b", "ALICE"),
        ("RULE:^CN=(.*?),OU=(.*?)$/$2-$1/,DEFAULT", "CN=a,OU=b", "b-a"),
        ("RULE:^OU=x,.*$/nobody/, DEFAULT", "CN=a,OU=b", "CN=a,OU=b"),
        # $2 with one group is literal (Kafka's escapeLiteralBackReferences)
        ("RULE:^CN=(.*)$/$1$2/", "CN=a", "a$2"),
        ("RULE:^CN=(.*)$/\\$1/", "CN=a", "$1"),
        ("  RULE:^CN=(.*)$/$1/L  ,  DEFAULT  ", "CN=A", "a"),
    ],
)
def test_the_mapping_rules_map_a_subject_as_kafkas_ssl_principal_mapper(
    rules: str, subject: str, name: str
) -> None:
    assert PrincipalMapper(rules).name(subject) == name


def test_a_subject_no_rule_maps_and_a_rule_that_does_not_parse_are_refused() -> None:
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=a"):
        PrincipalMapper("RULE:^OU=(.*)$/$1/").name("CN=a")
    for bad in ("RULE:^CN=(.*)$/$1/X", "RULE:^CN=(.*$/$1/", "NOPE"):
        with pytest.raises(ValueError, match=r"ssl\.principal\.mapping\.rules"):
            broker_configs({"ssl.principal.mapping.rules": bad})
    with pytest.raises(ValueError, match=r"ssl\.client\.auth"):
        broker_configs({"ssl.client.auth": "maybe"})
    with pytest.raises(ValueError, match=r"ssl\.enabled\.protocols"):
        broker_configs({"ssl.enabled.protocols": "TLSv1.1"})


# -- real clients over SSL -----------------------------------------------------------------


def _confluent_ssl(cluster: EmbeddedKafka, certificate: bool = False) -> dict[str, Any]:
    config = {
        "bootstrap.servers": cluster.ssl_bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": cluster.ca_file,
    }
    if certificate:
        config["ssl.certificate.location"] = cluster.client_cert_file
        config["ssl.key.location"] = cluster.client_key_file
    return config


def _first_value(consumer: Any, topic: str) -> bytes | None:
    consumer.subscribe([topic])
    for _ in range(30):
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            value: bytes | None = message.value()
            return value
    return None


def _confluent_round_trip(config: dict[str, Any], value: bytes) -> bytes | None:
    from confluent_kafka import Consumer, Producer

    producer = Producer(config)
    producer.produce("t", value)
    assert producer.flush(10) == 0
    consumer = Consumer({**config, "group.id": "g", "auto.offset.reset": "earliest"})
    try:
        return _first_value(consumer, "t")
    finally:
        consumer.close()


@pytest.mark.parametrize("loop", LOOPS)
def test_confluent_kafka_produces_and_consumes_over_ssl(loop: str) -> None:
    with EmbeddedKafka(
        brokers=2, topics={"t": 1}, ssl=True, loop_factory=loop_factory(loop)
    ) as cluster:
        assert cluster.ssl_bootstrap_servers != cluster.bootstrap_servers
        assert _confluent_round_trip(_confluent_ssl(cluster), b"over tls") == b"over tls"


@pytest.mark.asyncio
async def test_aiokafka_produces_and_consumes_over_ssl_with_an_ssl_context() -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async with AsyncEmbeddedKafka(brokers=2, topics={"t": 1}, ssl_port=0) as kafka:
        security = {
            "bootstrap_servers": kafka.ssl_bootstrap_servers,
            "security_protocol": "SSL",
            "ssl_context": kafka.client_ssl_context(),
        }
        producer = AIOKafkaProducer(**security)
        await producer.start()
        try:
            await producer.send_and_wait("t", b"from aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("t", auto_offset_reset="earliest", **security)
        await consumer.start()
        try:
            async with asyncio.timeout(10):
                message = await consumer.getone()
            assert message.value == b"from aiokafka"
        finally:
            await consumer.stop()


def _kafka_python_round_trip(security: dict[str, Any]) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(**security)
    try:
        producer.send("t", b"from kafka-python").get(10)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        "t", auto_offset_reset="earliest", consumer_timeout_ms=5000, **security
    )
    try:
        return [message.value for message in consumer]
    finally:
        consumer.close()


def test_kafka_python_produces_and_consumes_over_ssl_with_a_ca_file() -> None:
    with EmbeddedKafka(brokers=2, topics={"t": 1}, ssl=True) as cluster:
        security = {
            "bootstrap_servers": cluster.ssl_bootstrap_servers,
            "security_protocol": "SSL",
            "ssl_cafile": cluster.ca_file,
        }
        assert _kafka_python_round_trip(security) == [b"from kafka-python"]


# -- SASL_SSL ------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_logs_in_with_scram_over_sasl_ssl(mechanism: str) -> None:
    with EmbeddedKafka(brokers=2, topics={"t": 1}, users=USERS, sasl_ssl_port=0) as cluster:
        config = {
            "bootstrap.servers": cluster.sasl_ssl_bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": cluster.ca_file,
            "sasl.mechanism": mechanism,
            "sasl.username": "alice",
            "sasl.password": USERS["alice"],
        }
        assert _confluent_round_trip(config, b"sasl over tls") == b"sasl over tls"


def test_kafka_python_logs_in_with_scram_over_sasl_ssl() -> None:
    with EmbeddedKafka(brokers=2, topics={"t": 1}, users=USERS, sasl_ssl_port=0) as cluster:
        security = {
            "bootstrap_servers": cluster.sasl_ssl_bootstrap_servers,
            "security_protocol": "SASL_SSL",
            "ssl_cafile": cluster.ca_file,
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": "alice",
            "sasl_plain_password": USERS["alice"],
        }
        assert _kafka_python_round_trip(security) == [b"from kafka-python"]


@pytest.mark.asyncio
async def test_aiokafka_logs_in_with_scram_over_sasl_ssl() -> None:
    from aiokafka import AIOKafkaProducer

    async with AsyncEmbeddedKafka(
        brokers=1, topics={"t": 1}, users=USERS, sasl_ssl_port=0
    ) as kafka:
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka.sasl_ssl_bootstrap_servers,
            security_protocol="SASL_SSL",
            ssl_context=kafka.client_ssl_context(certificate=False),
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="alice",
            sasl_plain_password=USERS["alice"],
        )
        await producer.start()
        try:
            await producer.send_and_wait("t", b"x")
        finally:
            await producer.stop()
        assert [r.value for r in kafka.records("t", 0)] == [b"x"]


# -- mutual TLS, principals and ACLs -------------------------------------------------------


def _write_acl(principal: str) -> Acl:
    return Acl(
        ResourceType.TOPIC,
        "t",
        PatternType.LITERAL,
        principal,
        "*",
        Operation.WRITE,
        Permission.ALLOW,
    )


def _produce_error(config: dict[str, Any]) -> Any:
    """The delivery error of one record librdkafka produces to ``t`` (None: delivered)."""
    from confluent_kafka import Producer

    reports: list[Any] = []
    producer = Producer({**config, "message.timeout.ms": 5000})
    producer.produce("t", b"v", on_delivery=lambda error, _message: reports.append(error))
    producer.flush(10)
    assert len(reports) == 1
    return reports[0]


def _wait_for(predicate: Callable[[], bool], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_mutual_tls_refuses_a_client_without_a_certificate_and_acls_apply_to_its_subject() -> None:
    from confluent_kafka import KafkaError, Producer

    configs = {"ssl.client.auth": "required", "authorizer.class.name": STANDARD_AUTHORIZER}
    with EmbeddedKafka(brokers=1, topics={"t": 1}, ssl=True, configs=configs) as cluster:
        stats = cluster._async.front_door.stats
        errors: list[Any] = []
        producer = Producer({**_confluent_ssl(cluster), "error_cb": errors.append})
        producer.produce("t", b"v")
        producer.flush(3)
        assert any(
            e.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
            for e in errors
        )
        _wait_for(lambda: stats.authentication_failures["SSL"] >= 1)
        # with the certificate: User:CN=...; no ACL names it, so the produce is refused
        assert CLIENT == "User:CN=purgatory-client,OU=clients,O=purgatory"
        error = _produce_error(_confluent_ssl(cluster, certificate=True))
        assert error is not None
        assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        cluster._get(lambda k: k.front_door.acls.add(_write_acl(CLIENT)))
        assert _produce_error(_confluent_ssl(cluster, certificate=True)) is None
        assert [r.value for r in cluster.records("t", 0)] == [b"v"]


def test_the_mapping_rules_make_the_certificates_principal() -> None:
    configs = {
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/L,DEFAULT",
        "authorizer.class.name": STANDARD_AUTHORIZER,
    }
    with EmbeddedKafka(brokers=1, topics={"t": 1}, ssl=True, configs=configs) as cluster:
        cluster._get(lambda k: k.front_door.acls.add(_write_acl(CLIENT)))
        assert _produce_error(_confluent_ssl(cluster, certificate=True)) is not None
        cluster._get(lambda k: k.front_door.acls.add(_write_acl("User:purgatory-client")))
        assert _produce_error(_confluent_ssl(cluster, certificate=True)) is None


def test_a_client_without_a_certificate_where_one_is_requested_is_anonymous() -> None:
    configs = {"ssl.client.auth": "requested", "authorizer.class.name": STANDARD_AUTHORIZER}
    with EmbeddedKafka(brokers=1, topics={"t": 1}, ssl=True, configs=configs) as cluster:
        cluster._get(lambda k: k.front_door.acls.add(_write_acl(CLIENT)))
        assert _produce_error(_confluent_ssl(cluster)) is not None
        assert _produce_error(_confluent_ssl(cluster, certificate=True)) is None
        cluster._get(lambda k: k.front_door.acls.add(_write_acl("User:ANONYMOUS")))
        assert _produce_error(_confluent_ssl(cluster)) is None


# -- what each listener advertises ---------------------------------------------------------


async def _ask_tls(
    address: tuple[str, int], context: ssl.SSLContext, api: ApiKey, version: int, **fields: Any
) -> Any:
    reader, writer = await asyncio.open_connection(*address, ssl=context)
    try:
        request = build(request_type(api, version), fields)
        writer.write(request_frame(request, correlation_id=1, client_id="t"))
        async with asyncio.timeout(10):
            frame = await read_frame(reader)
        return read_response(frame, api, version).body
    finally:
        writer.close()
        with contextlib_suppress():
            await writer.wait_closed()


def contextlib_suppress() -> Any:
    import contextlib

    return contextlib.suppress(ConnectionError, ssl.SSLError)


@pytest.mark.asyncio
async def test_each_listener_advertises_its_own_protocols_addresses() -> None:
    async with AsyncEmbeddedKafka(
        brokers=2, topics={"t": 1}, users=USERS, sasl_port=0, ssl_port=0, sasl_ssl_port=0
    ) as kafka:
        door = kafka.front_door
        ssl_ports = {b: port for b, (_, port) in door.ssl_addresses.items()}
        assert len({*ssl_ports.values(), *(p for _, p in door.addresses.values())}) == 4
        context = kafka.client_ssl_context()
        metadata = await _ask_tls(door.ssl_addresses[0], context, ApiKey.METADATA, 12, topics=None)
        assert {b.node_id: b.port for b in metadata.brokers} == ssl_ports
        cluster = await _ask_tls(
            door.ssl_addresses[1],
            context,
            ApiKey.DESCRIBE_CLUSTER,
            0,
            include_cluster_authorized_operations=False,
        )
        assert {b.broker_id: b.port for b in cluster.brokers} == ssl_ports
        found = await _ask_tls(
            door.ssl_addresses[0], context, ApiKey.FIND_COORDINATOR, 3, key="g", key_type=0
        )
        assert found.port == ssl_ports[found.node_id]


def test_the_certificates_are_files_of_a_directory_removed_at_close() -> None:
    with EmbeddedKafka(brokers=2, ssl=True) as cluster:
        directory = os.path.dirname(cluster.ca_file)
        assert sorted(os.listdir(directory)) == [
            "broker-0.key",
            "broker-0.pem",
            "broker-1.key",
            "broker-1.pem",
            "ca.pem",
            "client.key",
            "client.pem",
        ]
        assert os.stat(cluster.client_key_file).st_mode & 0o077 == 0
        assert {cluster.client_cert_file, cluster.client_key_file} <= {
            os.path.join(directory, name) for name in os.listdir(directory)
        }
    assert not os.path.exists(directory)


# -- bad peers -----------------------------------------------------------------------------


def _client_hello(context: ssl.SSLContext) -> bytes:
    """The first bytes a TLS client sends: its ClientHello."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def _closed_after(address: tuple[str, int], data: bytes) -> bool:
    """Sends ``data``, stops writing, and says whether the server closed the connection
    (within 10 s) with nothing but a TLS alert, if that, to read."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
        return len(received) < 64  # at most an alert record, never a Kafka answer


def _api_versions_over_tls(address: tuple[str, int], context: ssl.SSLContext) -> int:
    with socket.create_connection(address, timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            request = build(request_type(ApiKey.API_VERSIONS, 3), {})
            sock.sendall(request_frame(request, correlation_id=7, client_id="t"))
            size = int.from_bytes(_recv_exactly(sock, 4), "big")
            body = _recv_exactly(sock, size)
            return int.from_bytes(body[:4], "big")  # the correlation id


def _recv_exactly(sock: ssl.SSLSocket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "closed"
        data += chunk
    return data


@pytest.mark.parametrize("loop", LOOPS)
def test_bad_peers_on_a_tls_port_are_closed_counted_and_logged_once(
    loop: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="purgatory.kafka.server")
    with EmbeddedKafka(brokers=1, ssl=True, loop_factory=loop_factory(loop)) as cluster:
        stats = cluster._async.front_door.stats
        address = cluster._async.front_door.ssl_addresses[0]
        context = cluster.client_ssl_context()
        plaintext = request_frame(
            build(request_type(ApiKey.API_VERSIONS, 3), {}), correlation_id=1, client_id="t"
        )
        hello = _client_hello(context)
        peers = [plaintext, os.urandom(64), b"\x16\x03\x01\xff\xff" + b"\x00" * 32]
        peers.append(hello[: len(hello) // 2])  # a handshake cut off
        for count, data in enumerate(peers, 1):
            assert _closed_after(address, data)
            _wait_for(lambda n=count: stats.bad_input["tls handshake"] == n)  # type: ignore[misc]
            assert _api_versions_over_tls(address, context) == 7  # still serving
        _wait_for(lambda: stats.connections == 0)
    lines = [r for r in caplog.records if "tls handshake" in r.getMessage()]
    assert len(lines) == 1  # rate-limited: one line for the kind
    assert not lines[0].exc_info  # no traceback
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.asyncio
async def test_a_stalled_handshake_is_closed_after_the_handshake_timeout() -> None:
    kafka = AsyncEmbeddedKafka(brokers=1, ssl=True)
    door = kafka.front_door
    assert door.tls_settings is not None
    door.tls_settings = dataclasses.replace(door.tls_settings, handshake_timeout_s=0.3)
    async with kafka:
        context = kafka.client_ssl_context()
        reader, writer = await asyncio.open_connection(*door.ssl_addresses[0])
        writer.write(_client_hello(context)[:20])
        started = time.monotonic()
        async with asyncio.timeout(5):
            while await reader.read(4096):
                pass
        assert 0.2 < time.monotonic() - started < 3
        writer.close()
        assert door.stats.bad_input["tls handshake"] == 1
        assert door.stats.connections == 0
        # a good client next
        metadata = await _ask_tls(door.ssl_addresses[0], context, ApiKey.METADATA, 12, topics=None)
        assert [b.node_id for b in metadata.brokers] == [0]


@pytest.mark.kafka_cluster(brokers=1, topics={"t": 1}, ssl=True)
def test_the_kafka_cluster_marker_takes_ssl(kafka_cluster: EmbeddedKafka) -> None:
    config = _confluent_ssl(kafka_cluster, certificate=True)
    assert _confluent_round_trip(config, b"marked") == b"marked"


@pytest.mark.asyncio
async def test_ssl_enabled_protocols_bounds_the_tls_versions() -> None:
    configs = {"ssl.enabled.protocols": "TLSv1.2"}
    async with AsyncEmbeddedKafka(brokers=1, ssl=True, configs=configs) as kafka:
        address = kafka.front_door.ssl_addresses[0]
        context = kafka.client_ssl_context()
        _, writer = await asyncio.open_connection(*address, ssl=context)
        assert writer.get_extra_info("ssl_object").version() == "TLSv1.2"
        writer.close()
        await writer.wait_closed()
        newest = kafka.client_ssl_context()
        newest.minimum_version = ssl.TLSVersion.TLSv1_3
        with pytest.raises((ssl.SSLError, ConnectionResetError)):  # by the loop
            await asyncio.open_connection(*address, ssl=newest)
        async with asyncio.timeout(5):
            while kafka.front_door.stats.bad_input["tls handshake"] != 1:  # noqa: ASYNC110
                await asyncio.sleep(0.01)


@pytest.mark.asyncio
async def test_a_crashed_broker_closes_its_tls_listeners_and_restarts_them_on_their_ports() -> None:
    async with AsyncEmbeddedKafka(
        brokers=2, topics={"t": (1, 2)}, users=USERS, ssl_port=0, sasl_ssl_port=0
    ) as kafka:
        door = kafka.front_door
        before = (dict(door.ssl_addresses), dict(door.sasl_ssl_addresses))
        await kafka.crash_broker(1)
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection(*door.ssl_addresses[1])
        await kafka.restart_broker(1)
        assert (door.ssl_addresses, door.sasl_ssl_addresses) == before
        context = kafka.client_ssl_context()
        metadata = await _ask_tls(door.ssl_addresses[1], context, ApiKey.METADATA, 12, topics=None)
        assert {b.node_id: b.port for b in metadata.brokers} == {
            b: port for b, (_, port) in before[0].items()
        }


@pytest.mark.asyncio
async def test_closing_a_tls_listener_closes_connections_mid_handshake_and_served() -> None:
    kafka = AsyncEmbeddedKafka(brokers=1, ssl=True)
    await kafka.start()
    door = kafka.front_door
    address = door.ssl_addresses[0]
    context = kafka.client_ssl_context()
    _, stalled = await asyncio.open_connection(*address)
    stalled.write(_client_hello(context)[:20])
    reader, served = await asyncio.open_connection(*address, ssl=context)
    served.write(
        request_frame(
            build(request_type(ApiKey.API_VERSIONS, 3), {}), correlation_id=1, client_id="t"
        )
    )
    async with asyncio.timeout(5):
        await read_frame(reader)
        while door.stats.connections != 2:  # noqa: ASYNC110 (no event)
            await asyncio.sleep(0.01)
        await kafka.close()
    assert door.stats.connections == 0
    assert door.tls is None
    for writer in (stalled, served):
        writer.close()
