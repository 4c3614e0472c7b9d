"""Every API a listener advertises is authorized, and the table denies by default.

The APIs are those the listener's ApiVersions answer names, not a list kept here: for each,
at every version, a principal without ACLs is refused with Kafka's error and nothing in
the cluster changes; the same principal is not refused once it holds the ACLs Kafka's
documentation names for that API ("Operations and Resources on Protocols"). A new API
served without a rule fails here, and the front door does not start with one."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip
from test_schemas import TOPIC_ID, _errors, _request_values

from purgatory.errors import ErrorCode
from purgatory.kafka import authorization
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
from purgatory.kafka.authorization import Caller, Open, authorized
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.record_batches import encode_batch
from purgatory.kafka.schemas import build, request_type

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ME = "User:ANONYMOUS"  # a plaintext listener's principal
Op = Operation
T, G, C, X = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
REFUSALS = frozenset(
    {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)
#: Kafka's KafkaApis asks no ACL for client telemetry (KIP-714): any client that may
#: connect gets its subscriptions and pushes (changing them needs the cluster's configs)
TELEMETRY = {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY}
OPEN = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, *TELEMETRY}

Grants = tuple[tuple[Operation, ResourceType], ...]

#: What Kafka's documentation says each API needs, for the requests of
#: :func:`_request_values` (topic ``t``, a group, a transactional id, a config resource
#: of the topic). An advertised API missing here fails the test.
NEEDS: Mapping[ApiKey, Grants | Callable[[int], Grants]] = {
    ApiKey.PRODUCE: ((Op.WRITE, T), (Op.WRITE, X)),
    ApiKey.FETCH: ((Op.READ, T),),
    ApiKey.LIST_OFFSETS: ((Op.DESCRIBE, T),),
    ApiKey.METADATA: ((Op.DESCRIBE, T),),
    ApiKey.OFFSET_COMMIT: ((Op.READ, G), (Op.READ, T)),
    ApiKey.OFFSET_FETCH: ((Op.DESCRIBE, G), (Op.DESCRIBE, T)),
    ApiKey.FIND_COORDINATOR: ((Op.DESCRIBE, G),),
    ApiKey.JOIN_GROUP: ((Op.READ, G),),
    ApiKey.HEARTBEAT: ((Op.READ, G),),
    ApiKey.LEAVE_GROUP: ((Op.READ, G),),
    ApiKey.SYNC_GROUP: ((Op.READ, G),),
    ApiKey.DESCRIBE_GROUPS: ((Op.DESCRIBE, G),),
    ApiKey.LIST_GROUPS: ((Op.DESCRIBE, C),),
    ApiKey.CREATE_TOPICS: ((Op.CREATE, T),),
    ApiKey.DELETE_TOPICS: ((Op.DELETE, T),),
    ApiKey.DELETE_RECORDS: ((Op.DELETE, T),),
    ApiKey.INIT_PRODUCER_ID: ((Op.WRITE, X),),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ((Op.DESCRIBE, T),),
    # v4+ is sent by brokers (KIP-890 verification)
    ApiKey.ADD_PARTITIONS_TO_TXN: lambda v: (
        ((Op.WRITE, X), (Op.WRITE, T)) if v <= 3 else ((Op.CLUSTER_ACTION, C),)
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: ((Op.WRITE, X), (Op.READ, G)),
    ApiKey.END_TXN: ((Op.WRITE, X),),
    ApiKey.TXN_OFFSET_COMMIT: ((Op.WRITE, X), (Op.READ, G), (Op.READ, T)),
    ApiKey.DESCRIBE_ACLS: ((Op.DESCRIBE, C),),
    ApiKey.CREATE_ACLS: ((Op.ALTER, C),),
    ApiKey.DELETE_ACLS: ((Op.ALTER, C),),
    ApiKey.DESCRIBE_CONFIGS: ((Op.DESCRIBE_CONFIGS, T),),
    ApiKey.ALTER_CONFIGS: ((Op.ALTER_CONFIGS, T),),
    ApiKey.ALTER_REPLICA_LOG_DIRS: ((Op.ALTER, C),),
    ApiKey.DESCRIBE_LOG_DIRS: ((Op.DESCRIBE, C),),
    ApiKey.CREATE_PARTITIONS: ((Op.ALTER, T),),
    ApiKey.DELETE_GROUPS: ((Op.DELETE, G),),
    ApiKey.ELECT_LEADERS: ((Op.ALTER, C),),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ((Op.ALTER_CONFIGS, T),),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ((Op.ALTER, C),),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ((Op.DESCRIBE, C),),
    ApiKey.OFFSET_DELETE: ((Op.DELETE, G), (Op.READ, T)),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ((Op.DESCRIBE_CONFIGS, C),),
    ApiKey.ALTER_CLIENT_QUOTAS: ((Op.ALTER_CONFIGS, C),),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ((Op.DESCRIBE, C),),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ((Op.ALTER, C),),
    ApiKey.DESCRIBE_QUORUM: ((Op.DESCRIBE, C),),
    ApiKey.UPDATE_FEATURES: ((Op.ALTER, C),),
    ApiKey.DESCRIBE_CLUSTER: ((Op.DESCRIBE, C),),
    ApiKey.DESCRIBE_PRODUCERS: ((Op.READ, T),),
    ApiKey.DESCRIBE_TRANSACTIONS: ((Op.DESCRIBE, X),),
    ApiKey.LIST_TRANSACTIONS: ((Op.DESCRIBE, X),),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ((Op.READ, G), (Op.DESCRIBE, T)),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ((Op.DESCRIBE, G),),
    ApiKey.LIST_CONFIG_RESOURCES: ((Op.DESCRIBE_CONFIGS, C),),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: ((Op.DESCRIBE, T),),
    ApiKey.SHARE_GROUP_HEARTBEAT: ((Op.READ, G), (Op.DESCRIBE, T)),
    ApiKey.SHARE_GROUP_DESCRIBE: ((Op.DESCRIBE, G),),
    ApiKey.SHARE_FETCH: ((Op.READ, G), (Op.READ, T)),
    ApiKey.SHARE_ACKNOWLEDGE: ((Op.READ, G), (Op.READ, T)),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ((Op.DESCRIBE, G), (Op.DESCRIBE, T)),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: ((Op.READ, G), (Op.READ, T)),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: ((Op.DELETE, G), (Op.READ, T)),
}

RECORDS = encode_batch(0, 0, [(None, b"r")], 0)

#: the APIs that list what the principal may see: refused, they list nothing
LISTINGS = {ApiKey.LIST_GROUPS: "groups", ApiKey.LIST_TRANSACTIONS: "transaction_states"}


def _grant(kafka: AsyncEmbeddedKafka, grants: Grants) -> None:
    for operation, resource in grants:
        name = "kafka-cluster" if resource is C else "*"
        kafka.front_door.acls.add(
            Acl(resource, name, PatternType.LITERAL, ME, "*", operation, Permission.ALLOW)
        )


def _revoke_all(kafka: AsyncEmbeddedKafka) -> None:
    kafka.front_door.acls.remove(
        AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Op.ANY, Permission.ANY)
    )


def _replaced(value: Any, old: Any, new: Any) -> Any:
    if isinstance(value, dict):
        return {k: _replaced(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v, old, new) for v in value]
    return new if value == old else value


def _request(key: ApiKey, version: int, topic_id: uuid.UUID) -> Any:
    """A request naming topic ``t`` (by its id where the version names topics by id), a
    consumer's replica id, and the topic as its config resource."""
    cls = request_type(key, version)
    values = _replaced(_request_values(cls), TOPIC_ID, topic_id)
    if "replica_id" in values:
        values["replica_id"] = -1
    if key is ApiKey.PRODUCE:
        values["acks"] = -1  # answered
        for partition in values["topic_data"][0]["partition_data"]:
            partition["records"] = RECORDS
    if key in (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        for resource in values["resources"]:
            resource.update(resource_type=2, resource_name="t")
            for config in resource.get("configs", ()):
                config.update(name="retention.ms", value="1")
                if key is ApiKey.INCREMENTAL_ALTER_CONFIGS:
                    config["config_operation"] = 0  # SET
    return build(cls, values)


async def _ask(kafka: AsyncEmbeddedKafka, request: Any) -> Any:
    frame = await round_trip(kafka.front_door.addresses[0], request, within_s=5)
    return read_response(frame, request.__api_key__, request.__version__).body


async def _advertised(kafka: AsyncEmbeddedKafka) -> dict[ApiKey, tuple[int, int]]:
    answer = await _ask(
        kafka,
        build(
            request_type(ApiKey.API_VERSIONS, 3),
            {"client_software_name": "t", "client_software_version": "1"},
        ),
    )
    return {ApiKey(a.api_key): (a.min_version, a.max_version) for a in answer.api_keys}


def _state(kafka: AsyncEmbeddedKafka) -> str:
    """What a request could change, as text: topics and their partitions' logs, configs,
    ACLs, quotas, credentials, groups, committed offsets, transactions, producer ids."""
    door = kafka.front_door
    cluster = door.cluster
    topics = {
        name: [
            (repr(cluster.describe_partition(name, index)), p.leo, p.hw)
            for index, p in enumerate(partitions)
        ]
        for name, partitions in sorted(cluster.topics.items())
    }
    configs = door.cluster_configs
    return repr(
        (
            topics,
            {name: configs.topic_overrides(name) for name in sorted(cluster.topics)},
            configs.dynamic,
            configs.dynamic_default,
            sorted(map(repr, door.acls.all())),
            door.client_quotas,
            door.credentials.scram_users(),
            sorted(door.coordinator.groups),
            sorted(door.offsets.committed.items()),
            sorted((key, sp.start, sp.end) for key, sp in door.shares.partitions.items()),
            door.transactions[0].transactions(),
            cluster.partition_reassignments(),
            (door.features.finalized(), door.features.epoch),
        )
    )


async def _prepared() -> AsyncEmbeddedKafka:
    """A cluster with something to refuse: topic ``t`` with records, a group with a
    committed offset, a transactional id, a client-metrics subscription."""
    kafka = AsyncEmbeddedKafka(
        brokers=1, topics={"t": 2}, configs={"authorizer.class.name": STANDARD}
    )
    await kafka.start()
    # client telemetry is served (and advertised) while a subscription asks for metrics
    kafka.subscribe_telemetry("someone-else", match=["client_id=someone-else"])
    _grant(kafka, tuple((Op.ALL, kind) for kind in (T, G, C, X)))
    for key, key_type in (("group_id-1", 0), ("transactional_id-1", 1)):
        # the internal topics are made here, not by the first request refused
        found = await _ask(
            kafka,
            build(
                request_type(ApiKey.FIND_COORDINATOR, 6),
                {"key_type": key_type, "coordinator_keys": [key]},
            ),
        )
        assert found.coordinators[0].error_code == KioError.none
    version = 9
    await _ask(
        kafka,
        build(
            request_type(ApiKey.OFFSET_COMMIT, version),
            {
                "group_id": "group_id-1",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [
                    {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}
                ],
            },
        ),
    )
    initialized = await _ask(
        kafka,
        build(
            request_type(ApiKey.INIT_PRODUCER_ID, 5),
            {"transactional_id": "transactional_id-1", "transaction_timeout": 60_000,
             "producer_id": -1, "producer_epoch": -1},
        ),
    )  # fmt: skip
    assert initialized.error_code == KioError.none
    await _ask(
        kafka,
        build(
            request_type(ApiKey.PRODUCE, 9),
            {"acks": -1, "timeout": 5000, "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": RECORDS}]}
            ]},
        ),
    )  # fmt: skip
    assert kafka.records("t", 0)
    _revoke_all(kafka)
    return kafka


def _refused(key: ApiKey, answer: Any) -> bool:
    if key in LISTINGS:
        return not getattr(answer, LISTINGS[key])
    if key is ApiKey.DESCRIBE_LOG_DIRS and answer.__version__ < 3:
        return not answer.results  # no error field before v3: nothing described
    return bool(set(_errors(answer).values()) & {e.number for e in REFUSALS})


@pytest.mark.asyncio
async def test_every_advertised_api_refuses_a_principal_without_acls_and_serves_one_with_them() -> (
    None
):
    kafka = await _prepared()
    try:
        advertised = await _advertised(kafka)
        assert {key for key in advertised if key not in NEEDS} == OPEN
        assert {key for key, rules in authorization.RULES.items() if Open in map(type, rules)} == (
            OPEN
        )
        topic_id = kafka.front_door.cluster.topic_id("t")
        assert topic_id is not None
        asked = [
            (key, version)
            for key, (low, high) in sorted(advertised.items())
            if key not in OPEN
            for version in range(low, high + 1)
        ]
        assert len(asked) > 200
        failures = []
        for key, version in asked:
            before = _state(kafka)
            request = _request(key, version, topic_id)
            answer = await _ask(kafka, request)
            if not _refused(key, answer):
                failures.append(f"{key.name} v{version} not refused: {_errors(answer)}")
            if str(topic_id) in repr(answer) and str(topic_id) not in repr(request):
                failures.append(f"{key.name} v{version} told the topic's id: {answer}")
            after = _state(kafka)
            if after != before:
                failures.append(f"{key.name} v{version} changed the cluster:\n{before}\n{after}")
        for key in sorted(TELEMETRY):  # served without ACLs, and change nothing
            before = _state(kafka)
            answer = await _ask(kafka, _request(key, 0, topic_id))
            if _refused(key, answer):
                failures.append(f"{key.name} refused: {_errors(answer)}")
            if _state(kafka) != before:
                failures.append(f"{key.name} changed the cluster")
        for key, version in asked:
            needs = NEEDS[key]
            _grant(kafka, needs(version) if callable(needs) else needs)
            answer = await _ask(kafka, _request(key, version, topic_id))
            _revoke_all(kafka)
            if key not in LISTINGS and _refused(key, answer):
                failures.append(f"{key.name} v{version} refused with its ACLs: {_errors(answer)}")
        assert not failures, "\n".join(failures)
    finally:
        await kafka.close()


def test_an_api_without_a_rule_is_refused_and_a_listener_serving_one_does_not_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rules = dict(authorization.RULES)
    del rules[ApiKey.DESCRIBE_QUORUM]
    monkeypatch.setattr(authorization, "RULES", rules)
    request = build(request_type(ApiKey.DESCRIBE_QUORUM, 2), {"topics": []})
    ran: list[Any] = []
    superuser = Caller(
        "User:root", "h", Authorizer(Acls(), {"User:root"}), lambda _: None, lambda _: True, False
    )
    answer = authorized(superuser, request, ran.append)
    assert ran == []  # not even a super user: the table has no row
    assert answer.error_code == KioError.cluster_authorization_failed
    with pytest.raises(RuntimeError, match=r"without an authorization rule: \['DESCRIBE_QUORUM'\]"):
        EmbeddedKafka(brokers=1).start()


@pytest.mark.asyncio
async def test_a_consumer_group_using_a_topic_the_principal_may_not_describe_is_refused() -> None:
    async with AsyncEmbeddedKafka(
        brokers=1, topics={"t": 1, "u": 1}, configs={"authorizer.class.name": STANDARD}
    ) as kafka:
        heartbeat = build(
            request_type(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0),
            {"group_id": "g", "member_id": "m", "member_epoch": 0, "rebalance_timeout": 5000,
             "subscribed_topic_names": ["t", "u"], "topic_partitions": []},
        )  # fmt: skip
        _grant(kafka, ((Op.READ, G),))
        kafka.front_door.acls.add(
            Acl(T, "t", PatternType.LITERAL, ME, "*", Op.DESCRIBE, Permission.ALLOW)
        )
        refused = await _ask(kafka, heartbeat)  # "u" may not be described
        assert refused.error_code == KioError.topic_authorization_failed
        assert kafka.front_door.coordinator.consumer_group("g") is None
        kafka.front_door.acls.add(
            Acl(T, "u", PatternType.LITERAL, ME, "*", Op.DESCRIBE, Permission.ALLOW)
        )
        joined = await _ask(kafka, heartbeat)
        assert joined.error_code == KioError.none
        kafka.front_door.acls.remove(
            AclFilter(T, "u", PatternType.LITERAL, None, None, Op.ANY, Permission.ANY)
        )
        described = await _ask(
            kafka,
            build(
                request_type(ApiKey.CONSUMER_GROUP_DESCRIBE, 0),
                {"group_ids": ["g"], "include_authorized_operations": True},
            ),
        )
        (group,) = described.groups
        assert (group.group_id, group.error_code, group.error_message, group.members) == (
            "g",
            KioError.topic_authorization_failed,
            authorization.GROUP_TOPICS_REFUSED,
            (),
        )


@pytest.mark.asyncio
async def test_share_group_offsets_of_a_topic_the_principal_may_not_use_are_refused() -> None:
    async with AsyncEmbeddedKafka(
        brokers=1,
        topics={"t": 1, "u": 1},
        configs={"authorizer.class.name": STANDARD, "share.auto.offset.reset": "earliest"},
    ) as kafka:
        _grant(kafka, ((Op.ALL, G),))
        for operation in (Op.DESCRIBE, Op.READ):
            kafka.front_door.acls.add(
                Acl(T, "t", PatternType.LITERAL, ME, "*", operation, Permission.ALLOW)
            )
        for epoch, topics in ((0, ["t"]), (-1, None)):  # an empty share group "g"
            beat = build(
                request_type(ApiKey.SHARE_GROUP_HEARTBEAT, 1),
                {"group_id": "g", "member_id": "m", "member_epoch": epoch,
                 "subscribed_topic_names": topics},
            )  # fmt: skip
            assert (await _ask(kafka, beat)).error_code == KioError.none
        shares = kafka.front_door.shares
        for topic in ("t", "u"):
            shares.alter_start("g", topic, 0, 0)  # state for both, as fetches leave it
        named_topics = [
            {"topic_name": "t", "partitions": [0]},
            {"topic_name": "u", "partitions": [0]},
        ]
        (named,), (every,) = [
            (await _ask(kafka, build(request_type(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1), {
                "groups": [{"group_id": "g", "topics": topics}]}))).groups
            for topics in (named_topics, None)
        ]  # fmt: skip
        assert [
            (t.topic_name, p.start_offset, p.error_code) for t in named.topics for p in t.partitions
        ] == [("t", 0, KioError.none), ("u", -1, KioError.topic_authorization_failed)]
        assert [t.topic_name for t in every.topics] == ["t"]  # "u" left out
        deleted = await _ask(
            kafka,
            build(
                request_type(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0),
                {"group_id": "g", "topics": [{"topic_name": "t"}, {"topic_name": "u"}]},
            ),
        )
        assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
            ("t", KioError.none),
            ("u", KioError.topic_authorization_failed),
        ]
        assert shares.initialized("g") == [("u", 0)]


# -- as the attacker tried it, with real admin clients ----------------------------

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def _kafka_python_admin(bootstrap: str, user: str) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=user,
        sasl_plain_password=USERS[user],
        request_timeout_ms=10_000,
    )


def test_a_principal_without_acls_alters_and_describes_nothing_with_real_admin_clients() -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry
    from confluent_kafka.admin import ConfigResource as Resource
    from kafka import TopicPartition, TopicPartitionReplica
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import (
        ClusterAuthorizationFailedError,
        KafkaError,
        TopicAuthorizationFailedError,
    )

    configs = {
        "authorizer.class.name": STANDARD,
        "super.users": "User:alice",
        "allow.everyone.if.no.acl.found": "false",
    }
    with EmbeddedKafka(
        brokers=1, topics={"secret": 2}, users=USERS, sasl_port=0, configs=configs
    ) as cluster:
        bootstrap = cluster.sasl_bootstrap_servers
        secret = [TopicPartition("secret", 0)]

        def retention() -> object:
            return cluster._async.front_door.cluster_configs.topic_overrides("secret")

        kept = retention()
        bob = _kafka_python_admin(bootstrap, "bob")
        refused: dict[str, type[KafkaError]] = {}
        calls = {
            "alter_configs": lambda: bob.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "secret", {"retention.ms": "1"})],
                raise_on_unknown=False,
            ),
            "alter_partition_reassignments": lambda: bob.alter_partition_reassignments(
                {TopicPartition("secret", 0): [0]}
            ),
            "alter_replica_log_dirs": lambda: bob.alter_replica_log_dirs(
                {TopicPartitionReplica("secret", 0, 0): "/tmp/elsewhere"}
            ),
            "describe_log_dirs": lambda: bob.describe_log_dirs(),
            "list_config_resources": lambda: bob.list_config_resources(),
            "describe_metadata_quorum": lambda: bob.describe_metadata_quorum(),
            "list_partition_reassignments": lambda: bob.list_partition_reassignments(),
            "describe_producers": lambda: bob.describe_producers(secret),
            "describe_topic_partitions": lambda: bob.describe_topic_partitions(["secret"]),
        }
        answered = {}
        try:
            for name, call in calls.items():
                try:
                    answered[name] = call()
                except KafkaError as exc:
                    refused[name] = type(exc)
        finally:
            bob.close()
        # refused by exception, or answered with the refusal in its entries
        assert {name: error.__name__ for name, error in refused.items()} == {
            "alter_partition_reassignments": "ClusterAuthorizationFailedError",
            "describe_metadata_quorum": "ClusterAuthorizationFailedError",
            "list_config_resources": "ClusterAuthorizationFailedError",
            "list_partition_reassignments": "ClusterAuthorizationFailedError",
            # Metadata hides the topic, so the client finds no leader to ask
            "describe_producers": "UnknownTopicOrPartitionError",
        }
        altered = answered.pop("alter_configs")["topic"]["secret"]
        assert altered.startswith("[Error 29] TopicAuthorizationFailedError")
        assert answered == {
            "alter_replica_log_dirs": {
                TopicPartitionReplica("secret", 0, 0): ClusterAuthorizationFailedError
            },
            "describe_log_dirs": [{"broker": 0, "log_dirs": []}],
            "describe_topic_partitions": {
                "next_cursor": None,
                "topics": [
                    {
                        "error_code": TopicAuthorizationFailedError.errno,
                        "is_internal": False,
                        "name": "secret",
                        "partitions": [],
                        "topic_authorized_operations": -(2**31),
                        "topic_id": None,
                    }
                ],
            },
        }
        confluent = AdminClient(
            {
                "bootstrap.servers": bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bob",
                "sasl.password": USERS["bob"],
            }
        )
        change = ConfigEntry("retention.ms", "2", incremental_operation=AlterConfigOpType.SET)
        for future in confluent.incremental_alter_configs(
            [Resource("topic", "secret", incremental_configs=[change])]
        ).values():
            with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
                future.result(timeout=10)
        assert retention() == kept
