"""CreateTopics, DeleteTopics and Metadata's auto-creation: asked directly with requests
that kafka-python's own schemas encode, and through the three real admin clients."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from purgatory.kafka.codec import Reader
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.partitions import PartitionHandlers
from purgatory.kafka.handlers.topics import TopicDefaults, TopicHandlers
from purgatory.kafka.protocol import RequestHeader
from purgatory.kafka.server import ApiTable, ProtocolStats
from purgatory.sim import Cluster, ProduceRequest

TIMEOUT = 30.0


async def ask(apis: ApiTable, request: Any, response_class: Any) -> Any:
    """Send ``request`` (kafka-python's) to the handler ``apis`` has for its key and
    version, and decode the answer with ``response_class`` (kafka-python's)."""
    version = request.API_VERSION
    low, high, handler = apis[request.API_KEY]
    assert low <= version <= high, f"{type(request).__name__} v{version} not served"
    answer = handler(RequestHeader(request.API_KEY, version, 1, "c"), Reader(request.encode()))
    if inspect.isawaitable(answer):
        answer = await answer
    return response_class[version].decode(bytes(answer))


def _create(version: int, *topics: tuple[Any, ...], validate_only: bool = False) -> Any:
    fields: dict[str, Any] = {"topics": list(topics), "timeout_ms": 1000}
    if version >= 1:
        fields["validate_only"] = validate_only
    return CreateTopicsRequest[version](**fields)


def _answers(response: Any) -> dict[str, tuple[int, str | None]]:
    return {t.name: (t.error_code, getattr(t, "error_message", None)) for t in response.topics}


@pytest.mark.asyncio
async def test_create_topics_answers_each_bad_entry_with_kafkas_code() -> None:
    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("exists", 1, 1)
        apis = TopicHandlers(cluster, TopicDefaults(num_partitions=2)).apis()
        request = _create(
            4,
            ("ok", 3, 2, [], [("retention.ms", "60000"), ("cleanup.policy", "delete")]),
            ("twice", 1, 1, [], []),
            ("twice", 2, 1, [], []),
            ("bad name!", 1, 1, [], []),
            ("exists", 1, 1, [], []),
            ("zero-partitions", 0, 1, [], []),
            ("minus-two", -2, 1, [], []),
            ("rf-zero", 1, 0, [], []),
            ("rf-above-brokers", 1, 4, [], []),
            ("both", 2, 1, [(0, [0]), (1, [1])], []),
            ("gap", -1, -1, [(0, [0]), (2, [1])], []),
            ("repeated-broker", -1, -1, [(0, [1, 1])], []),
            ("unknown-broker", -1, -1, [(0, [7])], []),
            ("compacted", 1, 1, [], [("cleanup.policy", "compact")]),
            ("not-a-number", 1, 1, [], [("retention.ms", "soon")]),
            ("unknown-config", 1, 1, [], [("segment.bytes", "1000")]),
            ("defaults", -1, -1, [], []),
            ("assigned", -1, -1, [(1, [2, 0]), (0, [1, 2])], []),
        )
        answers = _answers(await ask(apis, request, CreateTopicsResponse))
        assert {name: code for name, (code, _) in answers.items()} == {
            "ok": 0,
            "twice": 42,  # INVALID_REQUEST, answered once
            "bad name!": 17,  # INVALID_TOPIC_EXCEPTION
            "exists": 36,  # TOPIC_ALREADY_EXISTS
            "zero-partitions": 37,  # INVALID_PARTITIONS
            "minus-two": 37,
            "rf-zero": 38,  # INVALID_REPLICATION_FACTOR
            "rf-above-brokers": 38,
            "both": 42,
            "gap": 39,  # INVALID_REPLICA_ASSIGNMENT
            "repeated-broker": 39,
            "unknown-broker": 39,
            "compacted": 40,  # INVALID_CONFIG
            "not-a-number": 40,
            "unknown-config": 40,
            "defaults": 0,
            "assigned": 0,
        }
        assert answers["ok"][1] is None
        assert "compaction" in (answers["compacted"][1] or "")
        # what was created is what was asked, and nothing else
        assert sorted(cluster.topics) == ["assigned", "defaults", "exists", "ok"]
        assert [p.replicas for p in cluster.topics["ok"]] == [(1, 2), (2, 0), (0, 1)]
        assert cluster.topic_config("ok").retention_ms == 60_000
        assert [len(p.replicas) for p in cluster.topics["defaults"]] == [1, 1]  # the defaults
        assert [p.replicas for p in cluster.topics["assigned"]] == [(1, 2), (2, 0)]


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_every_create_topics_version_creates_and_validate_only_does_not(
    version: int,
) -> None:
    async with Cluster(brokers=1, seed=1) as cluster:
        apis = TopicHandlers(cluster).apis()
        created = await ask(apis, _create(version, ("a", 2, 1, [], [])), CreateTopicsResponse)
        assert [(t.name, t.error_code) for t in created.topics] == [("a", 0)]
        if version >= 1:
            checked = _create(version, ("b", 1, 1, [], []), validate_only=True)
            answer = await ask(apis, checked, CreateTopicsResponse)
            assert [(t.name, t.error_code) for t in answer.topics] == [("b", 0)]
        assert sorted(cluster.topics) == ["a"]


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_delete_topics_deletes_and_answers_unknown_and_repeated_names(version: int) -> None:
    async with Cluster(brokers=3, seed=1) as cluster:
        for name in ("a", "b"):
            await cluster.create_topic(name, 2, 3)
        await cluster.produce(ProduceRequest("a", 0, [(None, b"x")]))
        apis = TopicHandlers(cluster).apis()
        request = DeleteTopicsRequest[version](topic_names=["a", "nope", "b", "b"], timeout_ms=1000)
        response = await ask(apis, request, DeleteTopicsResponse)
        assert {r.name: r.error_code for r in response.responses} == {"a": 0, "nope": 3, "b": 42}
        assert sorted(cluster.topics) == ["b"]
        assert cluster.log_space.used == 0  # a's records went with it


def _metadata(version: int, names: list[str], allow: bool) -> Any:
    fields: dict[str, Any] = {"topics": [(name,) for name in names]}
    if version >= 4:
        fields["allow_auto_topic_creation"] = allow
    return MetadataRequest[version](**fields)


@pytest.mark.asyncio
async def test_metadata_creates_unknown_topics_only_when_enabled_and_allowed() -> None:
    async with Cluster(brokers=3, seed=1) as cluster:
        addresses = {b: ("h", 9000 + b) for b in range(3)}
        off = PartitionHandlers(cluster, 0, addresses, ProtocolStats())
        topics = TopicHandlers(cluster, TopicDefaults(auto_create=True, num_partitions=2))
        on = PartitionHandlers(cluster, 0, addresses, ProtocolStats(), topics.auto_create)

        async def codes(handlers: PartitionHandlers, request: Any) -> dict[str, tuple[int, int]]:
            response = await ask(handlers.apis(), request, MetadataResponse)
            return {t.name: (t.error_code, len(t.partitions)) for t in response.topics}

        assert await codes(off, _metadata(7, ["a"], True)) == {"a": (3, 0)}
        assert await codes(on, _metadata(7, ["a"], False)) == {"a": (3, 0)}  # not allowed
        assert "a" not in cluster.topics
        assert await codes(on, _metadata(7, ["a", "bad/name"], True)) == {
            "a": (0, 2),
            "bad/name": (17, 0),  # INVALID_TOPIC_EXCEPTION
        }
        # Before v4 there is no flag: Kafka creates whenever the broker allows it.
        assert await codes(on, _metadata(1, ["b"], True)) == {"b": (0, 2)}
        assert [len(p.replicas) for p in cluster.topics["b"]] == [1, 1]
        assert await codes(on, _metadata(7, [], True)) == {}  # none asked, none made
        assert sorted(cluster.topics) == ["a", "b"]


@pytest.mark.asyncio
async def test_a_default_replication_factor_above_the_brokers_is_answered_not_created() -> None:
    async with Cluster(brokers=1, seed=1) as cluster:
        topics = TopicHandlers(cluster, TopicDefaults(auto_create=True, replication_factor=3))
        handlers = PartitionHandlers(cluster, 0, {0: ("h", 1)}, ProtocolStats(), topics.auto_create)
        response = await ask(handlers.apis(), _metadata(7, ["a"], True), MetadataResponse)
        assert [(t.name, t.error_code) for t in response.topics] == [("a", 38)]
        assert not cluster.topics


def test_topic_defaults_refuse_nonsense() -> None:
    with pytest.raises(TypeError):
        TopicDefaults(auto_create=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_partitions"):
        TopicDefaults(num_partitions=0)
    with pytest.raises(ValueError, match="replication_factor"):
        TopicDefaults(replication_factor=0)


# -- real admin clients -------------------------------------------------------------------


def _kafka_python_admin(bootstrap: str) -> list[str]:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    seen = []
    try:
        admin.create_topics([NewTopic("kp", 3, 2, topic_configs={"retention.ms": "60000"})])
        try:
            admin.create_topics([NewTopic("kp", 1, 1)])
        except TopicAlreadyExistsError:
            seen.append("exists")
        seen += sorted(admin.list_topics())
        admin.delete_topics(["kp"])
    finally:
        admin.close()
    return seen


def _confluent_admin(bootstrap: str) -> list[str]:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    seen = []
    futures = admin.create_topics(
        [NewTopic("ck", 3, 2, config={"retention.ms": "60000"}), NewTopic("ck-rf", 1, 9)],
        request_timeout=10,
    )
    futures["ck"].result()
    refused = futures["ck-rf"].exception()
    if refused is not None and refused.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR:
        seen.append("invalid rf")
    seen += sorted(admin.list_topics(timeout=10).topics)
    admin.delete_topics(["ck"], request_timeout=10)["ck"].result()
    return seen


async def _aiokafka_admin(bootstrap: str) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("ai", 3, 2, topic_configs={"retention.ms": "60000"})])
        answer = await admin.create_topics([NewTopic("ai", 1, 1)])
        seen = ["exists"] if answer.topic_errors[0][1] == 36 else []
        seen += sorted(await admin.list_topics())
        await admin.delete_topics(["ai"])
    finally:
        await admin.close()
    return seen


@pytest.mark.asyncio
@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "aiokafka"])
async def test_each_admin_client_creates_and_deletes_topics(
    door: KafkaFrontDoor, client: str
) -> None:
    short = {"kafka-python": "kp", "confluent-kafka": "ck", "aiokafka": "ai"}[client]
    async with asyncio.timeout(TIMEOUT):
        if client == "aiokafka":
            seen = await _aiokafka_admin(door.bootstrap)
        else:
            run = _kafka_python_admin if client == "kafka-python" else _confluent_admin
            seen = await asyncio.to_thread(run, door.bootstrap)
    refusal = "invalid rf" if client == "confluent-kafka" else "exists"
    assert seen == [refusal, short, "t"]
    assert sorted(door.cluster.topics) == ["t"]  # deleted again
    assert door.stats.requests["CREATE_TOPICS"] >= 1
    assert door.stats.requests["DELETE_TOPICS"] == 1
    assert not door.stats.bad_input


async def _produce_to_a_new_topic(client: str, bootstrap: str) -> None:
    if client == "aiokafka":
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait("auto", b"v")
        finally:
            await producer.stop()
        return

    def produce() -> None:
        if client == "kafka-python":
            from kafka import KafkaProducer

            kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
            try:
                kp.send("auto", b"v").get(timeout=10)
            finally:
                kp.close(timeout=5)
            return
        from confluent_kafka import Producer

        errors: list[Any] = []
        ck = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        ck.produce("auto", b"v", on_delivery=lambda e, m: errors.append(e))
        assert ck.flush(10) == 0
        assert errors == [None]

    await asyncio.to_thread(produce)


@pytest.mark.asyncio
@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "aiokafka"])
async def test_each_producer_creates_its_topic_when_auto_creation_is_on(client: str) -> None:
    async with Cluster(brokers=3, seed=1) as cluster:
        door = KafkaFrontDoor(cluster, "127.0.0.1", 0, topics=TopicDefaults(auto_create=True))
        await door.start()
        try:
            async with asyncio.timeout(TIMEOUT):
                await _produce_to_a_new_topic(client, door.bootstrap)
        finally:
            await door.close()
        [partition] = cluster.topics["auto"]
        assert partition.hw == 1
