"""CreateTopics, DeleteTopics and Metadata's auto-creation: asked directly with requests
that kafka-python's own schemas encode (every version served), over a socket with kio's,
and through the three real admin clients."""

from __future__ import annotations

import asyncio
import datetime
import inspect
import io
import uuid
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.delete_topics.v6 import request as delete_v6
from kio.schema.errors import ErrorCode as KioError
from kio.serial import entity_reader, entity_writer

from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.cluster_configs import TopicDefaults
from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.partitions import PartitionHandlers
from purgatory.kafka.handlers.topics import TopicHandlers
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.schemas import encode_response, read_request, response_type, versions
from purgatory.kafka.server import ApiTable
from purgatory.kafka.topic_configs import TOPIC_CONFIGS
from purgatory.sim import Cluster, ProduceRequest

TIMEOUT = 30.0
CREATE = versions(ApiKey.CREATE_TOPICS)
DELETE = versions(ApiKey.DELETE_TOPICS)


async def ask(apis: ApiTable, request: Any, response_class: Any) -> Any:
    """Send ``request`` (kafka-python's, which encodes it) to the handler ``apis`` has for
    its key and version, as the server does (decoded with kio, the answer encoded with
    kio), and decode the answer frame with ``response_class`` (kafka-python's)."""
    version = request.API_VERSION
    low, high, handler = apis[ApiKey(request.API_KEY)]
    assert low <= version <= high, f"{type(request).__name__} v{version} not served"
    request.with_header(correlation_id=1, client_id="c")
    frame = bytes(request.encode(header=True))
    header, body = read_request(frame, ApiKey(request.API_KEY), version)
    answer = handler(header, body)
    if inspect.isawaitable(answer):
        answer = await answer
    frame = encode_response(1, answer)
    return response_class[version].decode(frame, header=True, framed=True)


async def over_a_socket(address: tuple[str, int], request: Any) -> Any:
    """Send kio's ``request`` to a listener and read its answer with kio."""
    key, version = int(request.__api_key__), int(request.__version__)
    header_type = request.__header_schema__
    out = io.BytesIO()
    header = header_type(
        request_api_key=key, request_api_version=version, correlation_id=9, client_id="kio"
    )
    entity_writer(header_type)(out, header)
    entity_writer(type(request))(out, request)
    reader, writer = await asyncio.open_connection(*address)
    try:
        writer.write(len(out.getvalue()).to_bytes(4, "big") + out.getvalue())
        size = int.from_bytes(await reader.readexactly(4), "big")
        frame = await reader.readexactly(size)
    finally:
        writer.close()
        await writer.wait_closed()
    cls = response_type(ApiKey(key), version)
    answer_header, used = entity_reader(cls.__header_schema__)(frame, 0)
    assert answer_header.correlation_id == 9
    response, size = entity_reader(cls)(frame, used)  # (value, bytes read)
    assert used + size == len(frame)
    return response


def _create(version: int, *topics: tuple[Any, ...], validate_only: bool = False) -> Any:
    return CreateTopicsRequest[version](
        topics=list(topics), timeout_ms=1000, validate_only=validate_only
    )


def _answers(response: Any) -> dict[str, tuple[int, str | None]]:
    return {t.name: (t.error_code, t.error_message) for t in response.topics}


_SOME = ("cleanup.policy", "compression.type", "min.insync.replicas", "retention.bytes")
_SOME += ("retention.ms",)


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [4, CREATE[1]])
async def test_create_topics_answers_each_bad_entry_with_kafkas_code(version: int) -> None:
    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("exists", 1, 1)
        apis = TopicHandlers(cluster, TopicDefaults(num_partitions=2)).apis()
        request = _create(
            version,
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
            ("bad-policy", 1, 1, [], [("cleanup.policy", "shred")]),
            ("not-a-number", 1, 1, [], [("retention.ms", "soon")]),
            ("too-small", 1, 1, [], [("segment.bytes", "1000")]),
            ("unknown-config", 1, 1, [], [("retention.minutes", "10")]),
            ("null-config", 1, 1, [], [("retention.ms", None), ("segment.ms", None)]),
            ("defaults", -1, -1, [], []),
            ("assigned", -1, -1, [(1, [2, 0]), (0, [1, 2])], []),
        )
        response = await ask(apis, request, CreateTopicsResponse)
        answers = _answers(response)
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
            "bad-policy": 40,  # INVALID_CONFIG
            "not-a-number": 40,
            "too-small": 40,
            "unknown-config": 40,
            "null-config": 40,
            "defaults": 0,
            "assigned": 0,
        }
        assert answers["ok"][1] is None
        assert "cleanup.policy" in (answers["bad-policy"][1] or "")
        assert "segment.bytes" in (answers["too-small"][1] or "")
        assert answers["unknown-config"][1] == "Unknown topic config name: retention.minutes"
        assert answers["null-config"][1] == (
            "Null value not supported for topic configs: retention.ms,segment.ms"
        )
        # what was created is what was asked, and nothing else
        assert sorted(cluster.topics) == ["assigned", "defaults", "exists", "ok"]
        assert [p.replicas for p in cluster.topics["ok"]] == [(1, 2), (2, 0), (0, 1)]
        assert cluster.topic_config("ok").retention_ms == 60_000
        assert [len(p.replicas) for p in cluster.topics["defaults"]] == [1, 1]  # the defaults
        assert [p.replicas for p in cluster.topics["assigned"]] == [(1, 2), (2, 0)]
        if version < 5:
            return
        # v5+: the created topic as created, its configs as DescribeConfigs has them
        by_name = {t.name: t for t in response.topics}
        shapes = {n: (t.num_partitions, t.replication_factor) for n, t in by_name.items()}
        assert (shapes["ok"], shapes["defaults"], shapes["assigned"]) == ((3, 2), (2, 1), (2, 2))
        assert shapes["exists"] == (-1, -1)  # Kafka's defaults for a refusal
        assert by_name["exists"].configs == []
        configs = {c.name: (c.value, c.config_source) for c in by_name["ok"].configs}
        assert set(configs) == set(TOPIC_CONFIGS)  # every topic config Kafka has
        assert {name: configs[name] for name in _SOME} == {
            "cleanup.policy": ("delete", 1),  # DYNAMIC_TOPIC_CONFIG: given, if Kafka's default
            "compression.type": ("producer", 5),  # DEFAULT_CONFIG
            "min.insync.replicas": ("1", 3),  # DYNAMIC_DEFAULT_BROKER_CONFIG (Kafka 4.1+)
            "retention.bytes": ("-1", 5),
            "retention.ms": ("60000", 1),  # its own
        }
        assert not any(c.read_only for c in by_name["ok"].configs)  # AlterConfigs changes them
        assert [c.name for c in by_name["ok"].configs] == sorted(configs)  # as Kafka sorts
        if version >= 7:
            assert by_name["ok"].topic_id == cluster.topic_id("ok")
            assert by_name["assigned"].topic_id == cluster.topic_id("assigned")
            assert by_name["exists"].topic_id is None  # the zero id: none for a refusal


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(CREATE[0], CREATE[1] + 1))
async def test_every_create_topics_version_creates_and_validate_only_does_not(
    version: int,
) -> None:
    async with Cluster(brokers=1, seed=1) as cluster:
        apis = TopicHandlers(cluster).apis()
        created = await ask(apis, _create(version, ("a", 2, 1, [], [])), CreateTopicsResponse)
        assert [(t.name, t.error_code) for t in created.topics] == [("a", 0)]
        checked = _create(version, ("b", 3, 1, [], [("retention.ms", "5")]), validate_only=True)
        answer = await ask(apis, checked, CreateTopicsResponse)
        assert [(t.name, t.error_code) for t in answer.topics] == [("b", 0)]
        assert sorted(cluster.topics) == ["a"]
        if version >= 5:  # what would have been created
            [b] = answer.topics
            assert (b.num_partitions, b.replication_factor) == (3, 1)
            assert ("retention.ms", "5") in [(c.name, c.value) for c in b.configs]
        if version >= 7:
            assert created.topics[0].topic_id == cluster.topic_id("a") is not None
            assert answer.topics[0].topic_id is None  # nothing was created


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(DELETE[0], DELETE[1] + 1))
async def test_delete_topics_deletes_and_answers_unknown_and_repeated_names(version: int) -> None:
    async with Cluster(brokers=3, seed=1) as cluster:
        for name in ("a", "b"):
            await cluster.create_topic(name, 2, 3)
        await cluster.produce(ProduceRequest("a", 0, [(None, b"x")]))
        a_id = cluster.topic_id("a")
        apis = TopicHandlers(cluster).apis()
        names = ["a", "nope", "b", "b"]
        if version >= 6:  # by name or id
            request = DeleteTopicsRequest[version](
                topics=[(name, None) for name in names], timeout_ms=1000
            )
        else:
            request = DeleteTopicsRequest[version](topic_names=names, timeout_ms=1000)
        response = await ask(apis, request, DeleteTopicsResponse)
        assert {r.name: r.error_code for r in response.responses} == {"a": 0, "nope": 3, "b": 42}
        assert sorted(cluster.topics) == ["b"]
        assert cluster.log_space.used == 0  # a's records went with it
        if version >= 5:
            messages = {r.name: r.error_message for r in response.responses}
            assert messages == {
                "a": None,
                "nope": "no topic 'nope'",
                "b": "topic 'b' is named 2 times in one request",
            }
        if version >= 6:
            ids = {r.name: r.topic_id for r in response.responses}
            assert ids == {"a": a_id, "nope": None, "b": None}


@pytest.mark.asyncio
async def test_delete_topics_v6_names_topics_by_id_as_kafka_checks_them() -> None:
    async with Cluster(brokers=1, seed=1) as cluster:
        for name in ("by-id", "twice", "named-and-id", "both"):
            await cluster.create_topic(name, 1, 1)
        ids = {name: cluster.topic_id(name) for name in cluster.topics}
        unknown = uuid.UUID(int=7)
        request = DeleteTopicsRequest[6](
            topics=[
                (None, ids["by-id"]),
                (None, unknown),
                (None, ids["twice"]),
                (None, ids["twice"]),
                ("named-and-id", None),
                (None, ids["named-and-id"]),
                ("both", ids["both"]),
                (None, None),
            ],
            timeout_ms=1000,
        )
        apis = TopicHandlers(cluster).apis()
        response = await ask(apis, request, DeleteTopicsResponse)
        assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [
            ("by-id", ids["by-id"], 0),
            (None, unknown, 100),  # UNKNOWN_TOPIC_ID
            (None, ids["twice"], 42),  # INVALID_REQUEST, answered once
            ("named-and-id", None, 42),  # its id is given too: the name is refused...
            ("named-and-id", ids["named-and-id"], 0),  # ...the id deletes it
            ("both", ids["both"], 42),  # a name and an id in one entry
            (None, None, 42),  # neither
        ]
        assert all(r.error_message for r in response.responses if r.error_code)
        assert sorted(cluster.topics) == ["both", "twice"]
        # created again, a topic is another topic: its old id is unknown
        await cluster.create_topic("by-id", 1, 1)
        assert cluster.topic_id("by-id") not in (None, ids["by-id"])
        request = DeleteTopicsRequest[6](topics=[(None, ids["by-id"])], timeout_ms=1000)
        again = await ask(apis, request, DeleteTopicsResponse)
        assert [r.error_code for r in again.responses] == [100]
        assert "by-id" in cluster.topics


@pytest.mark.asyncio
async def test_flexible_create_and_delete_round_trip_over_a_socket(door: KafkaFrontDoor) -> None:
    """CreateTopics v7 and DeleteTopics v6, built and read with kio, through a listener."""
    address = door.addresses[1]
    create = create_v7.CreateTopicsRequest(
        topics=(
            create_v7.CreatableTopic(
                name="flex",
                num_partitions=-1,
                replication_factor=3,
                assignments=(),
                configs=(create_v7.CreatableTopicConfig(name="retention.bytes", value="1000"),),
            ),
        ),
        timeout=datetime.timedelta(seconds=5),
        validate_only=False,
    )
    created = await over_a_socket(address, create)
    [topic] = created.topics
    assert (topic.name, topic.error_code, topic.error_message) == ("flex", KioError.none, None)
    assert topic.topic_id == door.cluster.topic_id("flex")
    assert (topic.num_partitions, topic.replication_factor) == (1, 3)
    assert {c.name: c.value for c in topic.configs}["retention.bytes"] == "1000"
    delete = delete_v6.DeleteTopicsRequest(
        topics=(delete_v6.DeleteTopicState(name=None, topic_id=topic.topic_id),),
        timeout=datetime.timedelta(seconds=5),
    )
    deleted = await over_a_socket(address, delete)
    [answer] = deleted.responses
    assert (answer.name, answer.topic_id, answer.error_code) == (
        "flex",
        topic.topic_id,
        KioError.none,
    )
    assert sorted(door.cluster.topics) == ["t"]
    assert door.stats.requests["CREATE_TOPICS", CREATE[1]] == 1
    assert door.stats.requests["DELETE_TOPICS", DELETE[1]] == 1
    assert not door.stats.bad_input


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
    assert door.stats.requests_of("CREATE_TOPICS") >= 1
    assert door.stats.requests_of("DELETE_TOPICS") == 1
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
        door = KafkaFrontDoor(
            cluster, "127.0.0.1", 0, configs=BrokerConfigs({"auto.create.topics.enable": True})
        )
        await door.start()
        try:
            async with asyncio.timeout(TIMEOUT):
                await _produce_to_a_new_topic(client, door.bootstrap)
        finally:
            await door.close()
        [partition] = cluster.topics["auto"]
        assert partition.hw == 1
