"""SASL_PLAINTEXT listeners: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 as a Kafka broker's
SaslServerAuthenticator answers them (handshake v0 with raw tokens, v1 with
SaslAuthenticate v0-2), what a connection may send before it authenticates, wrong
passwords (SASL_AUTHENTICATION_FAILED, counted), session lifetime and re-authentication
(KIP-368); over a socket with kio, and with kafka-python, aiokafka and confluent-kafka."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_frame, read_response, request_frame

from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.metrics import ProtocolCollector
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.sasl import (
    SCRAM_SHA_256,
    Credentials,
    SaslListener,
    SaslSession,
    scram_credential,
)
from purgatory.kafka.schemas import build, request_type, versions

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(
        brokers=2, topics={"t": (1, 2)}, users=USERS, sasl_port=0
    ) as cluster:
        yield cluster


class Wire:
    """One connection, requests written and answers read one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    @classmethod
    async def to(cls, address: tuple[str, int]) -> Wire:
        return cls(*await asyncio.open_connection(*address))

    async def ask(self, key: ApiKey, version: int, **fields: Any) -> Any:
        self.correlation_id += 1
        request = build(request_type(key, version), fields)
        self.writer.write(request_frame(request, correlation_id=self.correlation_id, client_id="t"))
        async with asyncio.timeout(10):
            frame = await read_frame(self.reader)
        response = read_response(frame, key, version)
        assert response.header.correlation_id == self.correlation_id
        return response.body

    async def raw(self, token: bytes) -> bytes:
        self.writer.write(len(token).to_bytes(4, "big") + token)
        async with asyncio.timeout(10):
            return await read_frame(self.reader)

    async def send(self, key: ApiKey, version: int, **fields: Any) -> None:
        self.correlation_id += 1
        request = build(request_type(key, version), fields)
        self.writer.write(request_frame(request, correlation_id=self.correlation_id, client_id="t"))

    async def closed(self) -> bool:
        """True once the server closed the connection with nothing more to read."""
        async with asyncio.timeout(10):
            return await self.reader.read(1) == b""

    def close(self) -> None:
        self.writer.close()


class ScramClient:
    """The client side of RFC 5802, written from the RFC for these tests."""

    def __init__(
        self, mechanism: str, user: str, password: str, nonce: str = "fyko+d2lbbFgONRv9qkxdawL"
    ) -> None:
        self.hash = HASHES[mechanism]
        self.user, self.password, self.nonce = user, password, nonce
        self.first_bare = f"n={user},r={nonce}"
        self.auth_message = b""
        self.salted = b""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
        assert fields["r"].startswith(self.nonce)
        self.salted = hashlib.pbkdf2_hmac(
            self.hash, self.password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
        )
        without_proof = f"c=biws,r={fields['r']}"
        self.auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac.new(self.salted, b"Client Key", self.hash).digest()
        stored = hashlib.new(self.hash, client_key).digest()
        signature = hmac.new(stored, self.auth_message, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        server_key = hmac.new(self.salted, b"Server Key", self.hash).digest()
        expected = hmac.new(server_key, self.auth_message, self.hash).digest()
        assert server_final == b"v=" + base64.b64encode(expected)


def test_scram_sha_256_matches_rfc_7677s_example(monkeypatch: pytest.MonkeyPatch) -> None:
    # RFC 7677 section 3: user "user", password "pencil", its nonces, salt and messages
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credentials = Credentials()
    credentials.upsert("user", SCRAM_SHA_256, scram_credential(SCRAM_SHA_256, "pencil", salt=salt))
    monkeypatch.setattr("secrets.token_urlsafe", lambda n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    session = SaslSession(SaslListener(credentials))
    assert session.handshake(SCRAM_SHA_256, 1)
    server_first, _ = session.authenticate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert server_first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    server_final, lifetime = session.authenticate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert (session.authenticated, session.principal, lifetime) == (True, "User:user", 0)


async def _login(wire: Wire, mechanism: str, user: str, password: str, version: int = 2) -> Any:
    """Handshake v1 and SaslAuthenticate ``version``: the last SaslAuthenticate answer."""
    handshake = await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism=mechanism)
    assert handshake.error_code == KioError.none
    assert list(handshake.mechanisms) == MECHANISMS
    if mechanism == "PLAIN":
        return await wire.ask(
            ApiKey.SASL_AUTHENTICATE, version, auth_bytes=f"\0{user}\0{password}".encode()
        )
    client = ScramClient(mechanism, user, password)
    first = await wire.ask(ApiKey.SASL_AUTHENTICATE, version, auth_bytes=client.first())
    assert first.error_code == KioError.none, first.error_message
    final = await wire.ask(
        ApiKey.SASL_AUTHENTICATE, version, auth_bytes=client.final(first.auth_bytes)
    )
    if final.error_code == KioError.none:
        client.verify(final.auth_bytes)
    return final


async def _metadata_works(wire: Wire) -> None:
    metadata = await wire.ask(ApiKey.METADATA, 12, topics=None)
    assert [t.name for t in metadata.topics] == ["t"]


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("version", range(versions(ApiKey.SASL_AUTHENTICATE)[1] + 1))
async def test_a_client_logs_in_with_each_mechanism_and_version_then_is_served(
    kafka: AsyncEmbeddedKafka, mechanism: str, version: int
) -> None:
    door = kafka.front_door
    wire = await Wire.to(door.sasl_addresses[0])
    try:
        api_versions = await wire.ask(
            ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1"
        )
        keys = {k.api_key for k in api_versions.api_keys}
        assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= keys
        answer = await _login(wire, mechanism, "alice", USERS["alice"], version)
        assert answer.error_code == KioError.none
        await _metadata_works(wire)
        # Metadata on the SASL listener names the SASL listeners
        metadata = await wire.ask(ApiKey.METADATA, 12, topics=None)
        assert {(b.host, b.port) for b in metadata.brokers} == set(door.sasl_addresses.values())
    finally:
        wire.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_a_v0_handshake_takes_the_tokens_as_raw_frames(
    kafka: AsyncEmbeddedKafka, mechanism: str
) -> None:
    wire = await Wire.to(kafka.front_door.sasl_addresses[1])
    try:
        handshake = await wire.ask(ApiKey.SASL_HANDSHAKE, 0, mechanism=mechanism)
        assert handshake.error_code == KioError.none
        if mechanism == "PLAIN":
            assert await wire.raw(b"\0bob\0bob-secret") == b""
        else:
            client = ScramClient(mechanism, "bob", USERS["bob"])
            client.verify(await wire.raw(client.final(await wire.raw(client.first()))))
        await _metadata_works(wire)
    finally:
        wire.close()


@pytest.mark.asyncio
async def test_a_raw_token_with_a_wrong_password_closes_the_connection(
    kafka: AsyncEmbeddedKafka,
) -> None:
    wire = await Wire.to(kafka.front_door.sasl_addresses[0])
    try:
        await wire.ask(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN")
        wire.writer.write(b"\0\0\0\x0a\0bob\0wrong")
        assert await wire.closed()
    finally:
        wire.close()
    assert kafka.front_door.stats.authentication_failures["PLAIN"] == 1


def _failures(door: KafkaFrontDoor) -> dict[str, float]:
    (family,) = [
        m
        for m in ProtocolCollector(door.stats).collect()
        if m.name.endswith("authentication_failures")
    ]
    return {s.labels["mechanism"]: s.value for s in family.samples if s.name.endswith("_total")}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("mechanism", "user", "message"),
    [
        ("PLAIN", "alice", "Authentication failed: Invalid username or password"),
        ("PLAIN", "nobody", "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-256",
            "alice",
            "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-256",
        ),
        (
            "SCRAM-SHA-512",
            "nobody",
            "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512",
        ),
    ],
)
async def test_a_wrong_password_is_refused_with_kafkas_message_counted_and_closed(
    kafka: AsyncEmbeddedKafka, mechanism: str, user: str, message: str
) -> None:
    door = kafka.front_door
    assert _failures(door) == dict.fromkeys([*MECHANISMS, "OAUTHBEARER"], 0)
    wire = await Wire.to(door.sasl_addresses[0])
    try:
        if mechanism == "PLAIN" or user == "nobody":
            handshake = await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism=mechanism)
            assert handshake.error_code == KioError.none
        if mechanism == "PLAIN":
            answer = await wire.ask(
                ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=f"\0{user}\0wrong".encode()
            )
        elif user == "nobody":  # refused at the first message: no such user
            answer = await wire.ask(
                ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=ScramClient(mechanism, user, "x").first()
            )
        else:
            answer = await _login(wire, mechanism, user, "wrong")
        assert answer.error_code == KioError.sasl_authentication_failed
        assert answer.error_message == message
        assert await wire.closed()
    finally:
        wire.close()
    assert _failures(door) == {m: int(m == mechanism) for m in [*MECHANISMS, "OAUTHBEARER"]}


@pytest.mark.asyncio
async def test_an_unknown_mechanism_is_answered_with_the_enabled_ones_then_closed(
    kafka: AsyncEmbeddedKafka,
) -> None:
    wire = await Wire.to(kafka.front_door.sasl_addresses[0])
    try:
        answer = await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="GSSAPI")
        assert answer.error_code == KioError.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == MECHANISMS
        assert await wire.closed()
    finally:
        wire.close()


@pytest.mark.asyncio
async def test_before_authentication_only_api_versions_and_sasl_are_answered(
    kafka: AsyncEmbeddedKafka,
) -> None:
    door = kafka.front_door
    # before the handshake: the connection closes unanswered, as Kafka's does
    wire = await Wire.to(door.sasl_addresses[0])
    try:
        await wire.send(ApiKey.METADATA, 12, topics=None)
        assert await wire.closed()
    finally:
        wire.close()
    # after a v1 handshake: answered ILLEGAL_SASL_STATE, then closed
    wire = await Wire.to(door.sasl_addresses[0])
    try:
        await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        answer = await wire.ask(ApiKey.METADATA, 12, topics=[{"name": "t"}])
        assert [t.error_code for t in answer.topics] == [KioError.illegal_sasl_state]
        assert await wire.closed()
    finally:
        wire.close()


@pytest.mark.asyncio
async def test_sasl_requests_where_no_authentication_is_under_way_are_illegal(
    kafka: AsyncEmbeddedKafka,
) -> None:
    door = kafka.front_door
    plain = await Wire.to(door.addresses[0])  # the plaintext listener
    try:
        answer = await plain.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        assert answer.error_code == KioError.illegal_sasl_state
        await _metadata_works(plain)  # still served
    finally:
        plain.close()
    wire = await Wire.to(door.sasl_addresses[0])
    try:
        await _login(wire, "PLAIN", "alice", USERS["alice"])
        again = await wire.ask(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\0alice\0alice-secret")
        assert again.error_code == KioError.illegal_sasl_state
        assert (
            again.error_message
            == "SaslAuthenticate request received after successful authentication"
        )
        # no session lifetime: a second handshake is no re-authentication
        handshake = await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        assert handshake.error_code == KioError.illegal_sasl_state
        await _metadata_works(wire)
    finally:
        wire.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.asyncio
async def test_a_session_lasts_connections_max_reauth_ms_and_may_be_renewed() -> None:
    async with AsyncEmbeddedKafka(
        brokers=1,
        topics={"t": 1},
        users=USERS,
        sasl_port=0,
        configs={"connections.max.reauth.ms": 60_000},
    ) as kafka:
        door = kafka.front_door
        clock = Clock()
        door.sasl.clock = clock
        wire = await Wire.to(door.sasl_addresses[0])
        try:
            answer = await _login(wire, "SCRAM-SHA-512", "alice", USERS["alice"], version=1)
            assert answer.session_lifetime.total_seconds() == 60
            # re-authentication (KIP-368) on the same connection, before the session ends
            clock.now += 59
            answer = await _login(wire, "SCRAM-SHA-512", "alice", USERS["alice"], version=1)
            assert answer.session_lifetime.total_seconds() == 60
            clock.now += 59
            await _metadata_works(wire)  # the renewed session runs from its renewal
            clock.now += 2
            await wire.send(ApiKey.METADATA, 12, topics=None)
            assert await wire.closed()  # expired: closed at the next request
        finally:
            wire.close()
        assert door.stats.closed["session_expired"] == 1

        wire = await Wire.to(door.sasl_addresses[0])
        try:
            await _login(wire, "PLAIN", "alice", USERS["alice"])
            # at most one re-authentication a second
            clock.now += 1
            await _login(wire, "PLAIN", "alice", USERS["alice"])
            handshake = await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
            assert handshake.error_code == KioError.illegal_sasl_state
            clock.now += 1
            # another user: refused, as Kafka refuses to change principals
            answer = await _login(wire, "PLAIN", "bob", USERS["bob"])
            assert answer.error_code == KioError.sasl_authentication_failed
            assert answer.error_message == (
                "Cannot change principals during re-authentication from User.alice: User.bob"
            )
            assert await wire.closed()
        finally:
            wire.close()

        wire = await Wire.to(door.sasl_addresses[0])
        try:
            await _login(wire, "PLAIN", "alice", USERS["alice"])
            clock.now += 1
            # another mechanism: the handshake is answered, the token refused
            handshake = await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
            assert handshake.error_code == KioError.none
            client = ScramClient("SCRAM-SHA-256", "alice", USERS["alice"])
            answer = await wire.ask(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=client.first())
            assert answer.error_code == KioError.sasl_authentication_failed
            assert answer.error_message == (
                "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
                "re-authentication of mechanism 'PLAIN'"
            )
        finally:
            wire.close()


# -- real clients --------------------------------------------------------------------------


def _kafka_python_round_trip(bootstrap: str, mechanism: str, password: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    security = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "alice",
        "sasl_plain_password": password,
    }
    producer = KafkaProducer(bootstrap_servers=bootstrap, **security)
    try:
        producer.send("t", mechanism.encode()).get(10)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        "t",
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        **security,
    )
    try:
        return [message.value for message in consumer]
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_produces_and_consumes_with_each_mechanism(mechanism: str) -> None:
    with EmbeddedKafka(brokers=2, topics={"t": 1}, users=USERS, sasl_port=0) as cluster:
        values = _kafka_python_round_trip(cluster.sasl_bootstrap_servers, mechanism, USERS["alice"])
        assert values == [mechanism.encode()]


def test_kafka_python_with_a_wrong_password_is_refused() -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    with EmbeddedKafka(brokers=1, users=USERS, sasl_port=0) as cluster:
        with pytest.raises(KafkaError):
            KafkaAdminClient(
                bootstrap_servers=cluster.sasl_bootstrap_servers,
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username="alice",
                sasl_plain_password="wrong",
                request_timeout_ms=3000,
                # kafka-python 3 retries a failed login until its bootstrap times out (30 s
                # by default) and then raises: the count below proves the refusal was seen
                bootstrap_timeout_ms=3000,
            )
        assert cluster._async.front_door.stats.authentication_failures["SCRAM-SHA-256"] >= 1


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_aiokafka_produces_and_consumes_with_each_mechanism(
    kafka: AsyncEmbeddedKafka, mechanism: str
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    security = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "bob",
        "sasl_plain_password": USERS["bob"],
    }
    producer = AIOKafkaProducer(bootstrap_servers=kafka.sasl_bootstrap_servers, **security)
    await producer.start()
    try:
        await producer.send_and_wait("t", b"from aiokafka")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        "t",
        bootstrap_servers=kafka.sasl_bootstrap_servers,
        auto_offset_reset="earliest",
        **security,
    )
    await consumer.start()
    try:
        async with asyncio.timeout(10):
            message = await consumer.getone()
        assert message.value == b"from aiokafka"
    finally:
        await consumer.stop()


@pytest.mark.asyncio
async def test_aiokafka_with_a_wrong_password_is_refused(kafka: AsyncEmbeddedKafka) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    producer = AIOKafkaProducer(
        bootstrap_servers=kafka.sasl_bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="bob",
        sasl_plain_password="wrong",
    )
    with pytest.raises(KafkaError):
        await producer.start()
    await producer.stop()
    assert kafka.front_door.stats.authentication_failures["SCRAM-SHA-512"] >= 1


def _confluent(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_and_consumes_with_each_mechanism(mechanism: str) -> None:
    from confluent_kafka import Consumer, Producer

    with EmbeddedKafka(brokers=2, topics={"t": 1}, users=USERS, sasl_port=0) as cluster:
        config = _confluent(cluster.sasl_bootstrap_servers, mechanism, "alice", USERS["alice"])
        producer = Producer(config)
        producer.produce("t", b"from confluent")
        assert producer.flush(10) == 0
        consumer = Consumer({**config, "group.id": "g", "auto.offset.reset": "earliest"})
        try:
            assert _first_value(consumer, "t") == b"from confluent"
        finally:
            consumer.close()


def test_confluent_kafka_with_a_wrong_password_is_refused() -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    with EmbeddedKafka(brokers=1, topics={"t": 1}, users=USERS, sasl_port=0) as cluster:
        config = _confluent(cluster.sasl_bootstrap_servers, "PLAIN", "alice", "wrong")
        producer = Producer({**config, "error_cb": errors.append})
        producer.produce("t", b"never")
        producer.flush(3)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        assert len(cluster.records("t", 0)) == 0


def test_confluent_kafka_re_authenticates_within_the_session_lifetime() -> None:
    from confluent_kafka import Producer

    with EmbeddedKafka(
        brokers=1,
        topics={"t": 1},
        users=USERS,
        sasl_port=0,
        configs={"connections.max.reauth.ms": 2000},
    ) as cluster:
        config = _confluent(
            cluster.sasl_bootstrap_servers, "SCRAM-SHA-256", "alice", USERS["alice"]
        )
        producer = Producer(config)
        for i in range(5):  # librdkafka re-authenticates before each 2 s session ends
            producer.produce("t", str(i).encode())
            assert producer.flush(10) == 0
            time.sleep(1)  # wall-clock: librdkafka's own timer drives it
        stats = cluster._async.front_door.stats
        assert stats.requests_of("SASL_HANDSHAKE") >= 3  # the login, then renewals
        assert stats.closed["session_expired"] == 0
        assert len(cluster.records("t", 0)) == 5


@pytest.mark.kafka_cluster(brokers=1, topics={"t": 1}, users={"app": "app-secret"}, sasl_port=0)
def test_the_kafka_cluster_marker_takes_users_and_a_sasl_port(kafka_cluster: EmbeddedKafka) -> None:
    from kafka import KafkaProducer

    assert kafka_cluster.sasl_bootstrap_servers
    assert kafka_cluster.sasl_bootstrap_servers != kafka_cluster.bootstrap_servers
    producer = KafkaProducer(
        bootstrap_servers=kafka_cluster.sasl_bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="app",
        sasl_plain_password="app-secret",
    )
    try:
        producer.send("t", b"marked").get(10)
    finally:
        producer.close()
    assert [r.value for r in kafka_cluster.records("t", 0)] == [b"marked"]


@pytest.mark.parametrize(
    ("users", "sasl_port"), [({"": "x"}, 0), ({"a": ""}, 0), ({"a": "b"}, 70000)]
)
def test_embedded_kafka_refuses_a_bad_user_or_sasl_port(
    users: dict[str, str], sasl_port: int
) -> None:
    with pytest.raises(ValueError, match=r"user|sasl_port"):
        EmbeddedKafka(brokers=1, users=users, sasl_port=sasl_port)


@pytest.mark.asyncio
async def test_a_crashed_broker_closes_its_sasl_listener_and_restarts_it_on_the_same_port(
    kafka: AsyncEmbeddedKafka,
) -> None:
    door = kafka.front_door
    address = door.sasl_addresses[1]
    await kafka.crash_broker(1)
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection(*address)
    await kafka.restart_broker(1)
    assert door.sasl_addresses[1] == address
    wire = await Wire.to(address)
    try:
        answer = await _login(wire, "SCRAM-SHA-256", "bob", USERS["bob"])
        assert answer.error_code == KioError.none
    finally:
        wire.close()


@pytest.mark.asyncio
async def test_a_failed_login_closes_after_connection_failed_authentication_delay_ms() -> None:
    async with AsyncEmbeddedKafka(
        brokers=1,
        users=USERS,
        sasl_port=0,
        configs={"connection.failed.authentication.delay.ms": 400},
    ) as kafka:
        wire = await Wire.to(kafka.front_door.sasl_addresses[0])
        loop = asyncio.get_running_loop()
        try:
            answer = await _login(wire, "PLAIN", "alice", "wrong")
            answered = loop.time()
            assert answer.error_code == KioError.sasl_authentication_failed
            assert await wire.closed()
            assert loop.time() - answered >= 0.3  # answered at once, closed after the delay
        finally:
            wire.close()


@pytest.mark.asyncio
async def test_find_coordinator_names_each_key_types_coordinator_at_the_listeners_addresses(
    kafka: AsyncEmbeddedKafka,
) -> None:
    """Groups (key type 0) through __consumer_offsets, transactional ids (key type 1)
    through __transaction_state: the same broker from either listener, each at its own."""
    door = kafka.front_door
    found: dict[str, dict[tuple[int, str], tuple[int, str, int]]] = {}
    for name, addresses in (("plaintext", door.addresses), ("sasl", door.sasl_addresses)):
        wire = await Wire.to(addresses[0])
        try:
            if name == "sasl":
                assert (await _login(wire, "PLAIN", "alice", USERS["alice"])).error_code == 0
            answers = {}
            for key_type, key in ((0, "g"), (1, "tx")):
                answer = await wire.ask(
                    ApiKey.FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=[key]
                )
                (coordinator,) = answer.coordinators
                assert coordinator.error_code == KioError.none, (key_type, coordinator)
                assert (coordinator.host, coordinator.port) == addresses[coordinator.node_id]
                answers[key_type, key] = (coordinator.node_id, coordinator.host, coordinator.port)
            found[name] = answers
        finally:
            wire.close()
    assert {k: v[0] for k, v in found["plaintext"].items()} == {
        k: v[0] for k, v in found["sasl"].items()
    }
    assert {"__consumer_offsets", "__transaction_state"} <= set(door.cluster.topics)


def test_confluent_kafka_commits_a_transaction_over_sasl() -> None:
    from confluent_kafka import Consumer, Producer

    with EmbeddedKafka(brokers=2, topics={"t": 1}, users=USERS, sasl_port=0) as cluster:
        config = _confluent(cluster.sasl_bootstrap_servers, "PLAIN", "alice", USERS["alice"])
        producer = Producer({**config, "transactional.id": "sasl-tx"})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce("t", b"committed over sasl")
        producer.commit_transaction(15)
        consumer = Consumer(
            {
                **config,
                "group.id": "g",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        try:
            assert _first_value(consumer, "t") == b"committed over sasl"
        finally:
            consumer.close()


def _first_value(consumer: Any, topic: str) -> bytes | None:
    """The value of the first record a librdkafka ``consumer`` of ``topic`` reads within
    30 polls of a second (None: none came)."""
    consumer.subscribe([topic])
    for _ in range(30):
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            value: bytes | None = message.value()
            return value
    return None
