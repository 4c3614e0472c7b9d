"""ACLs and the authorizer: CreateAcls, DescribeAcls and DeleteAcls (every version, with
Kafka's errors), StandardAuthorizer's decisions (deny beats allow, implied DESCRIBE,
LITERAL / PREFIXED / wildcard patterns, super users, ``allow.everyone.if.no.acl.found``),
and requests refused as Kafka refuses them; with kio over a socket and with kafka-python's
and confluent-kafka's admin clients, producers and consumers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.kafka.acls import (
    Acl,
    AclFilter,
    Acls,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import build, request_type, versions

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def _acl(
    principal: str,
    operation: Operation,
    permission: Permission = ALLOW,
    resource: ResourceType = T,
    name: str = "orders",
    pattern: PatternType = LIT,
    host: str = "*",
) -> Acl:
    return Acl(resource, name, pattern, principal, host, operation, permission)


def test_deny_beats_allow_and_read_implies_describe() -> None:
    authorizer = Authorizer(
        Acls([_acl("User:a", Operation.READ), _acl("User:a", Operation.WRITE, DENY)])
    )
    assert authorizer.allowed("User:a", "h", Operation.READ, T, "orders")
    assert authorizer.allowed("User:a", "h", Operation.DESCRIBE, T, "orders")  # implied
    assert not authorizer.allowed("User:a", "h", Operation.WRITE, T, "orders")
    assert not authorizer.allowed("User:b", "h", Operation.READ, T, "orders")
    # a DENY of READ does not deny DESCRIBE: the implication is for ALLOW only
    denied = Authorizer(
        Acls([_acl("User:a", Operation.WRITE), _acl("User:a", Operation.READ, DENY)])
    )
    assert denied.allowed("User:a", "h", Operation.DESCRIBE, T, "orders")
    assert not denied.allowed("User:a", "h", Operation.READ, T, "orders")
    every = Authorizer(
        Acls([_acl("User:a", Operation.ALL), _acl("User:*", Operation.ALL, DENY, name="x")])
    )
    assert every.allowed("User:a", "h", Operation.DELETE, T, "orders")
    assert not every.allowed("User:a", "h", Operation.DESCRIBE, T, "x")  # User:* denied


def test_patterns_hosts_super_users_and_resources_without_acls() -> None:
    acls = Acls(
        [
            _acl("User:a", Operation.WRITE, name="ord", pattern=PRE),
            _acl("User:a", Operation.READ, name="*"),
            _acl("User:a", Operation.DESCRIBE, resource=G, name="g", host="10.0.0.1"),
        ]
    )
    authorizer = Authorizer(acls, super_users={"User:root"})
    assert authorizer.allowed("User:a", "h", Operation.WRITE, T, "orders")
    assert not authorizer.allowed("User:a", "h", Operation.WRITE, T, "or")
    assert authorizer.allowed("User:a", "h", Operation.READ, T, "anything")  # wildcard
    assert authorizer.allowed("User:a", "10.0.0.1", Operation.DESCRIBE, G, "g")
    assert not authorizer.allowed("User:a", "10.0.0.2", Operation.DESCRIBE, G, "g")
    assert authorizer.allowed("User:root", "h", Operation.ALTER, C, "kafka-cluster")
    # a group no ACL names: denied, unless allow.everyone.if.no.acl.found
    assert not authorizer.allowed("User:b", "h", Operation.READ, G, "other")
    everyone = Authorizer(acls, allow_if_no_acl=True)
    assert everyone.allowed("User:b", "h", Operation.READ, G, "other")
    assert not everyone.allowed("User:b", "10.0.0.2", Operation.DESCRIBE, G, "g")  # has ACLs


def _filter(
    resource: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern: PatternType = PatternType.ANY,
    principal: str | None = None,
) -> AclFilter:
    return AclFilter(resource, name, pattern, principal, None, Operation.ANY, Permission.ANY)


def test_filters_match_as_kafkas_acl_binding_filter() -> None:
    literal = _acl("User:a", Operation.READ, name="orders")
    prefixed = _acl("User:a", Operation.READ, name="ord", pattern=PRE)
    wildcard = _acl("User:b", Operation.READ, name="*")
    acls = [literal, prefixed, wildcard]

    def matched(selector: AclFilter) -> list[Acl]:
        return [acl for acl in acls if selector.matches(acl)]

    assert matched(_filter()) == acls
    assert matched(_filter(T, "orders")) == [literal]  # ANY: the name itself
    assert matched(_filter(T, "orders", PatternType.MATCH)) == acls  # all that apply
    assert matched(_filter(T, "ord", PRE)) == [prefixed]
    assert matched(_filter(T, None, LIT)) == [literal, wildcard]
    assert matched(_filter(principal="User:b")) == [wildcard]
    assert matched(_filter(G)) == []


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    # plaintext clients are User:ANONYMOUS: the tests give it what each needs
    async with AsyncEmbeddedKafka(
        brokers=1, topics={"orders": 1, "secret": 1}, configs={"authorizer.class.name": STANDARD}
    ) as cluster:
        yield cluster


async def _ask(kafka: AsyncEmbeddedKafka, key: ApiKey, version: int, **fields: Any) -> Any:
    request = build(request_type(key, version), fields)
    frame = await round_trip(kafka.front_door.addresses[0], request)
    return read_response(frame, key, version).body


def _creation(**fields: Any) -> dict[str, Any]:
    values = {
        "resource_type": T,
        "resource_name": "orders",
        "resource_pattern_type": LIT,
        "principal": "User:ANONYMOUS",
        "host": "*",
        "operation": Operation.DESCRIBE,
        "permission_type": ALLOW,
    }
    return {**values, **fields}


def _grant_cluster(kafka: AsyncEmbeddedKafka, *operations: Operation) -> None:
    for operation in operations:
        kafka.front_door.acls.add(
            _acl("User:ANONYMOUS", operation, resource=C, name="kafka-cluster")
        )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "version", range(versions(ApiKey.CREATE_ACLS)[0], versions(ApiKey.CREATE_ACLS)[1] + 1)
)
async def test_acls_are_created_described_and_deleted_at_every_version(
    kafka: AsyncEmbeddedKafka, version: int
) -> None:
    # without ALTER on the cluster: refused, every creation
    refused = await _ask(kafka, ApiKey.CREATE_ACLS, version, creations=[_creation(), _creation()])
    assert [r.error_code for r in refused.results] == [KioError.cluster_authorization_failed] * 2
    _grant_cluster(kafka, Operation.ALTER, Operation.DESCRIBE)
    created = await _ask(
        kafka,
        ApiKey.CREATE_ACLS,
        version,
        creations=[
            _creation(),
            _creation(resource_name="ord", resource_pattern_type=PRE, operation=Operation.READ),
            _creation(resource_type=ResourceType.ANY),
            _creation(resource_pattern_type=PatternType.MATCH),
            _creation(operation=Operation.ANY),
            _creation(permission_type=Permission.ANY),
            _creation(resource_type=C, resource_name="cluster"),
            _creation(resource_name=""),
            _creation(principal="alice"),
        ],
    )
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (KioError.none, None),
        (KioError.none, None),
        (KioError.invalid_request, "Invalid resourceType ANY"),
        (KioError.invalid_request, "Invalid patternType MATCH"),
        (KioError.invalid_request, "Invalid operation ANY"),
        (KioError.invalid_request, "Invalid permissionType ANY"),
        (KioError.invalid_request, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (KioError.invalid_request, "Resource name should not be empty"),
        (
            KioError.invalid_request,
            "Could not parse principal from `alice` (expected a string in format "
            "principalType:principalName)",
        ),
    ]
    described = await _ask(
        kafka,
        ApiKey.DESCRIBE_ACLS,
        version,
        resource_type_filter=T,
        resource_name_filter="orders",
        pattern_type_filter=PatternType.MATCH,
        principal_filter=None,
        host_filter=None,
        operation=Operation.ANY,
        permission_type=Permission.ANY,
    )
    assert described.error_code == KioError.none
    assert [
        (r.resource_name, r.pattern_type, [a.operation for a in r.acls])
        for r in described.resources
    ] == [
        ("orders", LIT, [Operation.DESCRIBE]),
        ("ord", PRE, [Operation.READ]),
    ]
    deleted = await _ask(
        kafka,
        ApiKey.DELETE_ACLS,
        version,
        filters=[
            {
                "resource_type_filter": T,
                "resource_name_filter": None,
                "pattern_type_filter": PRE,
                "principal_filter": "User:ANONYMOUS",
                "host_filter": None,
                "operation": Operation.ANY,
                "permission_type": Permission.ANY,
            },
            {
                "resource_type_filter": ResourceType.UNKNOWN,
                "resource_name_filter": None,
                "pattern_type_filter": PatternType.ANY,
                "principal_filter": None,
                "host_filter": None,
                "operation": Operation.ANY,
                "permission_type": Permission.ANY,
            },
        ],
    )
    first, second = deleted.filter_results
    assert [(m.resource_name, m.pattern_type) for m in first.matching_acls] == [("ord", PRE)]
    assert (second.error_code, second.error_message) == (
        KioError.invalid_request,
        "Unknown patternFilter.",
    )
    remaining = kafka.front_door.acls.all()
    assert [(a.resource_name, a.operation) for a in remaining if a.resource_type is T] == [
        ("orders", Operation.DESCRIBE)
    ]


@pytest.mark.asyncio
async def test_without_an_authorizer_the_acl_apis_answer_security_disabled() -> None:
    async with AsyncEmbeddedKafka(brokers=1) as kafka:
        created = await _ask(kafka, ApiKey.CREATE_ACLS, 3, creations=[_creation()])
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (KioError.security_disabled, "No Authorizer is configured.")
        ]
        described = await _ask(
            kafka, ApiKey.DESCRIBE_ACLS, 3, resource_type_filter=1, resource_name_filter=None,
            pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
            permission_type=1,
        )  # fmt: skip
        assert described.error_code == KioError.security_disabled


@pytest.mark.asyncio
async def test_metadata_hides_what_may_not_be_described_and_refuses_what_is_named(
    kafka: AsyncEmbeddedKafka,
) -> None:
    kafka.front_door.acls.add(_acl("User:ANONYMOUS", Operation.WRITE, name="orders"))
    everything = await _ask(kafka, ApiKey.METADATA, 12, topics=None)
    assert [t.name for t in everything.topics] == ["orders"]  # WRITE implies DESCRIBE
    named = await _ask(kafka, ApiKey.METADATA, 12, topics=[{"name": "secret"}, {"name": "orders"}])
    errors = {t.name: t.error_code for t in named.topics}
    assert errors == {"orders": KioError.none, "secret": KioError.topic_authorization_failed}
    # a cluster-wide request needs its cluster permission
    cluster = await _ask(
        kafka, ApiKey.DESCRIBE_CLUSTER, 0, include_cluster_authorized_operations=False
    )
    assert cluster.error_code == KioError.cluster_authorization_failed
    # per topic: the refused topic answered, the allowed one deleted
    kafka.front_door.acls.add(_acl("User:ANONYMOUS", Operation.DELETE, name="orders"))
    deleted = await _ask(
        kafka, ApiKey.DELETE_TOPICS, 5, topic_names=["orders", "secret"], timeout=5000
    )
    assert {r.name: r.error_code for r in deleted.responses} == {
        "orders": KioError.none,
        "secret": KioError.topic_authorization_failed,
    }
    assert set(kafka.topics()) == {"secret"}


# -- real clients --------------------------------------------------------------------------

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
CONFIGS = {"authorizer.class.name": STANDARD, "super.users": "User:admin"}


def _security(user: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
    }


def test_kafka_python_admin_grants_a_producer_and_a_consumer_what_they_were_refused() -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as Kind
    from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    def allow(operation: Any, kind: Any, name: str) -> Any:
        return ACL(
            principal="User:alice",
            host="*",
            operation=operation,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(kind, name),
        )

    with EmbeddedKafka(
        brokers=1, topics={"orders": 1}, users=USERS, sasl_port=0, configs=CONFIGS
    ) as cluster:
        bootstrap = cluster.sasl_bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, **_security("admin"))
        try:
            producer = KafkaProducer(
                bootstrap_servers=bootstrap, max_block_ms=5000, **_security("alice")
            )
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send("orders", b"refused").get(10)
            producer.close()
            created = admin.create_acls(
                [
                    allow(ACLOperation.WRITE, Kind.TOPIC, "orders"),
                    allow(ACLOperation.READ, Kind.TOPIC, "ord"),
                ]
            )
            assert len(created["succeeded"]) == 2
            producer = KafkaProducer(
                bootstrap_servers=bootstrap, max_block_ms=5000, **_security("alice")
            )
            producer.send("orders", b"allowed").get(10)
            producer.close()

            def consume() -> list[bytes]:
                consumer = KafkaConsumer(
                    "orders",
                    bootstrap_servers=bootstrap,
                    group_id="billing",
                    auto_offset_reset="earliest",
                    consumer_timeout_ms=5000,
                    **_security("alice"),
                )
                try:
                    return [m.value for m in consumer]
                finally:
                    consumer.close()

            with pytest.raises(GroupAuthorizationFailedError):
                consume()  # READ on the topic ("ord" does not name it: LITERAL), none on the group
            admin.create_acls(
                [
                    allow(ACLOperation.READ, Kind.TOPIC, "orders"),
                    allow(ACLOperation.READ, Kind.GROUP, "billing"),
                ]
            )
            assert consume() == [b"allowed"]
            everything = ACLFilter(
                principal="User:alice",
                host=None,
                operation=ACLOperation.ANY,
                permission_type=ACLPermissionType.ANY,
                resource_pattern=ResourcePatternFilter(Kind.ANY, None, ACLResourcePatternType.ANY),
            )
            described, _ = admin.describe_acls(everything)
            assert len(described) == 4
            deleted = admin.delete_acls([everything])
            assert len(deleted[0][1]) == 4
            assert admin.describe_acls(everything)[0] == []
        finally:
            admin.close()


def test_confluent_admin_creates_acls_and_a_confluent_producer_is_then_allowed() -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
    )
    from confluent_kafka.admin import ResourceType as Kind

    def config(user: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": cluster.sasl_bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": USERS[user],
        }

    with EmbeddedKafka(
        brokers=1, topics={"orders": 1}, users=USERS, sasl_port=0, configs=CONFIGS
    ) as cluster:
        reports: list[Any] = []
        producer = Producer(
            {**config("alice"), "enable.idempotence": False, "message.timeout.ms": 3000}
        )
        producer.produce("orders", b"refused", on_delivery=lambda err, msg: reports.append(err))
        producer.flush(10)
        assert [e.code() for e in reports] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        admin = AdminClient(config("admin"))
        binding = AclBinding(
            Kind.TOPIC, "ord", ResourcePatternType.PREFIXED, "User:alice", "*",
            AclOperation.WRITE, AclPermissionType.ALLOW,
        )  # fmt: skip
        for future in admin.create_acls([binding]).values():
            assert future.result(timeout=10) is None
        described = admin.describe_acls(
            AclBindingFilter(
                Kind.ANY,
                None,
                ResourcePatternType.ANY,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ).result(timeout=10)
        assert described == [binding]
        producer = Producer({**config("alice"), "enable.idempotence": False})
        producer.produce("orders", b"allowed")
        assert producer.flush(10) == 0
        assert [r.value for r in cluster.records("orders", 0)] == [b"allowed"]


def test_an_idempotent_producer_needs_write_on_some_topic_or_idempotent_write() -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    configs = {**CONFIGS, "super.users": "User:admin"}
    with EmbeddedKafka(
        brokers=1, topics={"orders": 1}, users=USERS, sasl_port=0, configs=configs
    ) as cluster:
        front_door = cluster._async.front_door
        producer = KafkaProducer(
            bootstrap_servers=cluster.sasl_bootstrap_servers, enable_idempotence=True,
            max_block_ms=3000, request_timeout_ms=3000, **_security("alice"),
        )  # fmt: skip
        with pytest.raises(KafkaError):
            producer.send("orders", b"x").get(5)
        producer.close(timeout=1)
        assert front_door.stats.requests_of("INIT_PRODUCER_ID") >= 1
        front_door.acls.add(
            _acl("User:alice", Operation.IDEMPOTENT_WRITE, resource=C, name="kafka-cluster")
        )
        front_door.acls.add(_acl("User:alice", Operation.WRITE))
        producer = KafkaProducer(
            bootstrap_servers=cluster.sasl_bootstrap_servers, enable_idempotence=True,
            **_security("alice"),
        )  # fmt: skip
        producer.send("orders", b"y").get(10)
        producer.close()


@pytest.mark.asyncio
async def test_a_fetch_of_an_allowed_and_a_refused_topic_answers_both(
    kafka: AsyncEmbeddedKafka,
) -> None:
    kafka.front_door.acls.add(_acl("User:ANONYMOUS", Operation.READ, name="orders"))
    partitions = [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]
    fetched = await _ask(
        kafka,
        ApiKey.FETCH,
        12,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        topics=[
            {"topic": "secret", "partitions": partitions},
            {"topic": "orders", "partitions": partitions},
        ],
    )
    assert fetched.error_code == KioError.none  # the refusal is the topic's, not the request's
    errors = {
        (t.topic, p.partition_index): p.error_code for t in fetched.responses for p in t.partitions
    }
    assert errors == {
        ("orders", 0): KioError.none,
        ("secret", 0): KioError.topic_authorization_failed,
    }


@pytest.mark.asyncio
async def test_authorized_operations_are_what_the_acls_allow_when_asked(
    kafka: AsyncEmbeddedKafka,
) -> None:
    acls = kafka.front_door.acls
    acls.add(_acl("User:ANONYMOUS", Operation.DESCRIBE, resource=C, name="kafka-cluster"))
    acls.add(_acl("User:ANONYMOUS", Operation.READ, name="orders"))
    acls.add(_acl("User:ANONYMOUS", Operation.DELETE, resource=G, name="g"))
    cluster = await _ask(
        kafka, ApiKey.DESCRIBE_CLUSTER, 0, include_cluster_authorized_operations=True
    )
    assert cluster.cluster_authorized_operations == 1 << Operation.DESCRIBE
    not_asked = await _ask(
        kafka, ApiKey.DESCRIBE_CLUSTER, 0, include_cluster_authorized_operations=False
    )
    assert not_asked.cluster_authorized_operations == -(2**31)
    metadata = await _ask(
        kafka, ApiKey.METADATA, 10, topics=[{"name": "orders"}, {"name": "secret"}],
        include_cluster_authorized_operations=True, include_topic_authorized_operations=True,
    )  # fmt: skip
    operations = {t.name: t.topic_authorized_operations for t in metadata.topics}
    # READ implies DESCRIBE; the refused topic is not reported
    assert operations == {
        "orders": (1 << Operation.READ) | (1 << Operation.DESCRIBE),
        "secret": -(2**31),
    }
    assert metadata.cluster_authorized_operations == 1 << Operation.DESCRIBE
    groups = await _ask(
        kafka, ApiKey.DESCRIBE_GROUPS, 5, groups=["g"], include_authorized_operations=True
    )
    assert [(g.group_id, g.authorized_operations) for g in groups.groups] == [
        ("g", (1 << Operation.DELETE) | (1 << Operation.DESCRIBE))
    ]


@pytest.mark.asyncio
async def test_offsets_are_committed_and_fetched_only_for_what_may_be_read_and_described(
    kafka: AsyncEmbeddedKafka,
) -> None:
    acls = kafka.front_door.acls
    for group in ("g", "h"):
        acls.add(_acl("User:ANONYMOUS", Operation.READ, resource=G, name=group))
    acls.add(_acl("User:ANONYMOUS", Operation.READ, name="orders"))
    acls.add(_acl("User:ANONYMOUS", Operation.READ, name="secret"))
    partitions = [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]
    both = [{"name": t, "partitions": partitions} for t in ("orders", "secret")]
    for group in ("g", "h"):
        committed = await _ask(
            kafka, ApiKey.OFFSET_COMMIT, 8, group_id=group, generation_id_or_member_epoch=-1,
            member_id="", topics=both,
        )  # fmt: skip
        assert {t.name: t.partitions[0].error_code for t in committed.topics} == {
            "orders": KioError.none,
            "secret": KioError.none,
        }
    kafka.front_door.acls.remove(
        AclFilter(T, "secret", LIT, None, None, Operation.ANY, Permission.ANY)
    )
    refused = await _ask(
        kafka, ApiKey.OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=-1,
        member_id="", topics=[{"name": "secret", "partitions": partitions}],
    )  # fmt: skip
    assert refused.topics[0].partitions[0].error_code == KioError.topic_authorization_failed
    fetched = await _ask(
        kafka,
        ApiKey.OFFSET_FETCH,
        9,
        groups=[
            {
                "group_id": "g",
                "topics": [{"name": n, "partition_indexes": [0]} for n in ("orders", "secret")],
            },
            {"group_id": "h", "topics": None},
            {"group_id": "x", "topics": None},
        ],
    )
    answers = {
        g.group_id: (
            g.error_code,
            {
                t.name: (t.partitions[0].error_code, t.partitions[0].committed_offset)
                for t in g.topics
            },
        )
        for g in fetched.groups
    }
    assert answers == {
        "g": (
            KioError.none,
            {"orders": (KioError.none, 5), "secret": (KioError.topic_authorization_failed, 0)},
        ),
        "h": (KioError.none, {"orders": (KioError.none, 5)}),  # "secret" left out
        "x": (KioError.group_authorization_failed, {}),
    }
