"""OAUTHBEARER on the SASL_PLAINTEXT listeners when ``sasl.enabled.mechanisms`` names it:
the handshake's list, a token's login over a socket (v0 raw tokens, v1 SaslAuthenticate),
a refused token's JSON error and the client's 0x01, re-authentication bounded by the
token; and with confluent-kafka (librdkafka's unsecured JWT), kafka-python and aiokafka,
with ACLs applied to the token's principal."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_frame, request_frame
from test_sasl import Wire

from purgatory.kafka.acls import Acl, Operation, PatternType, Permission, ResourceType
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import build, request_type

ENABLED = "OAUTHBEARER,SCRAM-SHA-256"
CONFIGS = {"sasl.enabled.mechanisms": ENABLED}
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def token(sub: str = "alice", lifetime_s: float = 3600, **claims: Any) -> str:
    """An unsecured JWS (alg none) written for these tests."""
    now = time.time()
    body = {"sub": sub, "iat": int(now), "exp": now + lifetime_s, **claims}

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(body)}."


def first(jws: str, extensions: str = "") -> bytes:
    return f"n,,\x01auth=Bearer {jws}\x01{extensions}\x01".encode()

    async def raw(self, data: bytes) -> bytes:
        self.writer.write(len(data).to_bytes(4, "big") + data)
        async with asyncio.timeout(10):
            return await read_frame(self.reader)

    async def closed(self) -> bool:
        async with asyncio.timeout(10):
            return await self.reader.read(1) == b""

    def close(self) -> None:
        self.writer.close()


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(
        brokers=1, topics={"t": 1}, users={"bob": "bob-secret"}, sasl_port=0, configs=CONFIGS
    ) as cluster:
        yield cluster


@pytest.mark.asyncio
async def test_the_handshake_lists_exactly_the_enabled_mechanisms(
    kafka: AsyncEmbeddedKafka,
) -> None:
    wire = await Wire.to(kafka.front_door.sasl_addresses[0])
    try:
        answer = await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        assert answer.error_code == KioError.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == ["OAUTHBEARER", "SCRAM-SHA-256"]
        assert await wire.closed()
    finally:
        wire.close()
    # by default: PLAIN and the SCRAMs, as before
    async with AsyncEmbeddedKafka(brokers=1, users={"a": "b"}, sasl_port=0) as default:
        wire = await Wire.to(default.front_door.sasl_addresses[0])
        try:
            answer = await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER")
            assert answer.error_code == KioError.unsupported_sasl_mechanism
            assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        finally:
            wire.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 1, 2])
async def test_a_token_logs_in_with_saslauthenticate_and_is_served(
    kafka: AsyncEmbeddedKafka, version: int
) -> None:
    wire = await Wire.to(kafka.front_door.sasl_addresses[0])
    try:
        handshake = await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER")
        assert handshake.error_code == KioError.none
        answer = await wire.ask(
            ApiKey.SASL_AUTHENTICATE, version, auth_bytes=first(token(), "traceId=x\x01")
        )
        assert (answer.error_code, answer.auth_bytes) == (KioError.none, b"")
        if version >= 1:  # the token's lifetime, connections.max.reauth.ms unset
            assert 3590 < answer.session_lifetime.total_seconds() <= 3600.001
        metadata = await wire.ask(ApiKey.METADATA, 12, topics=None)
        assert [t.name for t in metadata.topics] == ["t"]
    finally:
        wire.close()


@pytest.mark.asyncio
async def test_a_v0_handshake_takes_the_token_as_a_raw_frame(kafka: AsyncEmbeddedKafka) -> None:
    wire = await Wire.to(kafka.front_door.sasl_addresses[0])
    try:
        await wire.ask(ApiKey.SASL_HANDSHAKE, 0, mechanism="OAUTHBEARER")
        assert await wire.raw(first(token("carol"))) == b""
        metadata = await wire.ask(ApiKey.METADATA, 12, topics=None)
        assert [t.name for t in metadata.topics] == ["t"]
    finally:
        wire.close()
    # a refused token: the JSON error as a raw frame, then 0x01 closes the connection
    wire = await Wire.to(kafka.front_door.sasl_addresses[0])
    try:
        await wire.ask(ApiKey.SASL_HANDSHAKE, 0, mechanism="OAUTHBEARER")
        assert await wire.raw(first(token(lifetime_s=-60))) == b'{"status":"invalid_token"}'
        wire.writer.write(b"\0\0\0\x01\x01")
        assert await wire.closed()
    finally:
        wire.close()


@pytest.mark.asyncio
async def test_an_expired_token_gets_the_json_error_then_fails_on_0x01(
    kafka: AsyncEmbeddedKafka,
) -> None:
    door = kafka.front_door
    wire = await Wire.to(door.sasl_addresses[0])
    try:
        await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER")
        answer = await wire.ask(
            ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=first(token(lifetime_s=-60))
        )
        assert answer.error_code == KioError.none
        assert answer.auth_bytes == b'{"status":"invalid_token"}'
        failed = await wire.ask(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\x01")
        assert failed.error_code == KioError.sasl_authentication_failed
        assert failed.error_message == '{"status":"invalid_token"}'
        assert await wire.closed()
    finally:
        wire.close()
    assert door.stats.authentication_failures["OAUTHBEARER"] == 1


class Clock:
    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


@pytest.mark.asyncio
async def test_the_session_ends_with_the_token_and_re_authentication_renews_it() -> None:
    configs = {**CONFIGS, "connections.max.reauth.ms": 60_000}
    async with AsyncEmbeddedKafka(
        brokers=1, topics={"t": 1}, sasl_port=0, configs=configs
    ) as kafka:
        door = kafka.front_door
        clock = Clock()
        door.sasl.clock = door.sasl.wall_clock = clock
        wire = await Wire.to(door.sasl_addresses[0])

        def jws(lifetime_s: float, sub: str = "alice") -> str:
            claims = {"sub": sub, "exp": clock.now + lifetime_s}
            return token(**claims)

        async def login(lifetime_s: float, sub: str = "alice") -> Any:
            handshake = await wire.ask(ApiKey.SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER")
            assert handshake.error_code == KioError.none
            return await wire.ask(
                ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=first(jws(lifetime_s, sub))
            )

        try:
            # the token expires first: it bounds the session
            answer = await login(10)
            assert answer.session_lifetime.total_seconds() == 10
            clock.now += 9
            # connections.max.reauth.ms bounds a longer token's
            answer = await login(3600)
            assert answer.session_lifetime.total_seconds() == 60
            clock.now += 2
            # another principal is refused, as Kafka refuses it
            answer = await login(3600, sub="mallory")
            assert answer.error_code == KioError.sasl_authentication_failed
            assert answer.error_message == (
                "Cannot change principals during re-authentication from User.alice: User.mallory"
            )
            assert await wire.closed()
        finally:
            wire.close()
        wire = await Wire.to(door.sasl_addresses[0])
        try:
            await login(10)
            clock.now += 11
            wire.writer.write(
                request_frame(
                    build(request_type(ApiKey.METADATA, 12), {"topics": None}),
                    correlation_id=99,
                    client_id="t",
                )
            )
            assert await wire.closed()  # the token ran out: closed at the next request
        finally:
            wire.close()
        assert door.stats.closed["session_expired"] == 1


# -- real clients --------------------------------------------------------------------------


def _confluent(bootstrap: str, principal: str = "alice", **more: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": f"principal={principal} extension_traceId=abc",
        **more,
    }


def _first_value(consumer: Any, topic: str) -> bytes | None:
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            value: bytes | None = message.value()
            return value
    return None


def test_confluent_kafka_logs_in_with_an_unsecured_jwt_and_produces_and_consumes() -> None:
    from confluent_kafka import Consumer, Producer

    with EmbeddedKafka(brokers=2, topics={"t": 1}, sasl_port=0, configs=CONFIGS) as cluster:
        config = _confluent(cluster.sasl_bootstrap_servers)
        producer = Producer(config)
        producer.produce("t", b"from librdkafka")
        assert producer.flush(10) == 0
        consumer = Consumer({**config, "group.id": "g", "auto.offset.reset": "earliest"})
        try:
            assert _first_value(consumer, "t") == b"from librdkafka"
        finally:
            consumer.close()
        assert cluster._async.front_door.stats.authentication_failures["OAUTHBEARER"] == 0


def test_acls_apply_to_the_tokens_principal() -> None:
    from confluent_kafka import KafkaError, Producer

    configs = {**CONFIGS, "authorizer.class.name": STANDARD}
    with EmbeddedKafka(brokers=1, topics={"orders": 1}, sasl_port=0, configs=configs) as cluster:
        errors: list[Any] = []

        def produce(principal: str) -> None:
            producer = Producer(
                _confluent(
                    cluster.sasl_bootstrap_servers, principal, **{"message.timeout.ms": 3000}
                )
            )
            producer.produce(
                "orders", principal.encode(), on_delivery=lambda e, m: errors.append(e)
            )
            producer.flush(10)

        produce("alice")  # no ACL: refused
        assert errors[-1] is not None
        assert errors[-1].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors
        cluster._async.front_door.acls.add(
            Acl(
                ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                Operation.WRITE, Permission.ALLOW,
            )
        )  # fmt: skip
        produce("alice")
        assert errors[-1] is None
        produce("bob")  # the ACL names alice only
        assert errors[-1].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors
        assert [r.value for r in cluster.records("orders", 0)] == [b"alice"]


def test_the_jaas_configs_required_scope_refuses_a_token_without_it() -> None:
    from confluent_kafka import KafkaError, Producer

    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorRequiredScope="produce";'
    )
    configs = {**CONFIGS, "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas}
    with EmbeddedKafka(brokers=1, topics={"t": 1}, sasl_port=0, configs=configs) as cluster:
        bootstrap = cluster.sasl_bootstrap_servers
        errors: list[Any] = []
        refused = Producer({**_confluent(bootstrap), "error_cb": errors.append})
        refused.produce("t", b"never")
        refused.flush(3)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        assert any("insufficient_scope" in e.str() for e in errors), errors
        granted = Producer(
            _confluent(bootstrap, **{"sasl.oauthbearer.config": "principal=alice scope=produce"})
        )
        granted.produce("t", b"with scope")
        assert granted.flush(10) == 0
        assert [r.value for r in cluster.records("t", 0)] == [b"with scope"]


def test_confluent_kafka_re_authenticates_with_its_token() -> None:
    from confluent_kafka import Producer

    configs = {**CONFIGS, "connections.max.reauth.ms": 2000}
    with EmbeddedKafka(brokers=1, topics={"t": 1}, sasl_port=0, configs=configs) as cluster:
        producer = Producer(_confluent(cluster.sasl_bootstrap_servers))
        for i in range(5):  # librdkafka re-authenticates before each 2 s session ends
            producer.produce("t", str(i).encode())
            assert producer.flush(10) == 0
            time.sleep(1)  # wall-clock: librdkafka's own timer drives it
        stats = cluster._async.front_door.stats
        assert stats.requests_of("SASL_HANDSHAKE") >= 3
        assert stats.closed["session_expired"] == 0
        assert len(cluster.records("t", 0)) == 5


def _kafka_python_provider(jws: str) -> Any:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return jws

        def extensions(self) -> dict[str, str]:
            return {"traceId": "abc"}

    return Provider()


def test_kafka_python_logs_in_with_a_token_provider() -> None:
    from kafka import KafkaConsumer, KafkaProducer

    with EmbeddedKafka(brokers=1, topics={"t": 1}, sasl_port=0, configs=CONFIGS) as cluster:
        security = {
            "bootstrap_servers": cluster.sasl_bootstrap_servers,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_provider": _kafka_python_provider(token()),
        }
        producer = KafkaProducer(**security)
        try:
            producer.send("t", b"from kafka-python").get(10)
        finally:
            producer.close()
        consumer = KafkaConsumer(
            "t", auto_offset_reset="earliest", consumer_timeout_ms=5000, **security
        )
        try:
            assert [m.value for m in consumer] == [b"from kafka-python"]
        finally:
            consumer.close()


def test_kafka_python_with_an_expired_token_is_refused() -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    with EmbeddedKafka(brokers=1, topics={"t": 1}, sasl_port=0, configs=CONFIGS) as cluster:
        with pytest.raises(KafkaError):
            KafkaAdminClient(
                bootstrap_servers=cluster.sasl_bootstrap_servers,
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="OAUTHBEARER",
                sasl_oauth_token_provider=_kafka_python_provider(token(lifetime_s=-60)),
                request_timeout_ms=3000,
                bootstrap_timeout_ms=3000,
            )
        assert cluster._async.front_door.stats.authentication_failures["OAUTHBEARER"] >= 1


@pytest.mark.asyncio
async def test_aiokafka_logs_in_with_a_token_provider(kafka: AsyncEmbeddedKafka) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return token("dave")

    security: dict[str, Any] = {
        "bootstrap_servers": kafka.sasl_bootstrap_servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": Provider(),
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
        async with asyncio.timeout(20):
            message = await consumer.getone()
        assert message.value == b"from aiokafka"
    finally:
        await consumer.stop()
