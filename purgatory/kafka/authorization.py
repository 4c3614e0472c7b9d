"""What each Kafka API asks the authorizer, in one table (:data:`RULES`), and how a
request is answered when it is refused, as Kafka's ``KafkaApis`` does.

Every API a listener serves has a row, and the table denies by default: a request whose
API has no row is refused (CLUSTER_AUTHORIZATION_FAILED), and a front door whose
listeners would serve such an API does not start (:func:`unruled`). The kinds of rule:

* :class:`Open`: the request asks nothing (ApiVersions, the SASL exchange): said
  explicitly, so that a forgotten row is never taken for an open one;
* :class:`Whole`: one check for the whole request (JoinGroup needs READ on its group);
  refused, the request is answered with the error in every error field (the schema's
  error answer, :func:`~purgatory.kafka.schemas.error_response`) and not run;
* :class:`Each`: one check per entry of a request array (Produce needs WRITE on each
  topic); the refused entries are taken out of the request, the rest runs, and the refused
  ones are answered with the error beside the others' answers;
* :class:`Hide`: entries of the response the principal may not see are left out
  (Metadata for every topic lists only the topics it may DESCRIBE);
* :class:`Fill`: what the principal may do, where the request asks for it
  (``include_*_authorized_operations``: a bit per operation).

Errors by resource: TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import dataclasses
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.acls import CLUSTER_NAME, Authorizer, Operation, ResourceType
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import build, error_response

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        AddOffsetsToTxnRequest,
        AddPartitionsToTxnRequest,
        AlterConfigsResource,
        ConsumerGroupHeartbeatRequest,
        CreateTopicsCreatableTopic,
        DescribeConfigsResource,
        FetchRequest,
        FindCoordinatorRequest,
        IncrementalAlterConfigsAlterConfigsResource,
        InitProducerIdRequest,
        MetadataRequest,
        MetadataRequestTopic,
        OffsetForLeaderEpochOffsetForLeaderTopic,
        ShareGroupHeartbeatRequest,
        TxnOffsetCommitRequest,
    )

#: the error a refusal on each resource type is answered with
ERRORS: Final[Mapping[ResourceType, ErrorCode]] = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


@final
@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request, and what the checks may look up: the topic a topic id names,
    whether a topic exists, whether Metadata creates unknown topics."""

    principal: str
    host: str
    authorizer: Authorizer
    topic_name: Callable[[uuid.UUID], str | None]
    topic_exists: Callable[[str], bool]
    auto_create: bool

    def may(self, operation: Operation, resource: ResourceType, name: str) -> bool:
        return self.authorizer.allowed(self.principal, self.host, operation, resource, name)

    def may_cluster(self, operation: Operation) -> bool:
        return self.may(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def check(self, operation: Operation, resource: ResourceType, name: str) -> ErrorCode | None:
        """None if allowed, else the refusal's error."""
        return None if self.may(operation, resource, name) else ERRORS[resource]

    def topic(self, entry: Any, field: str = "name") -> str | None:
        """The topic an entry names, by name or (newer versions) by id; None for an id no
        topic has (the handler answers UNKNOWN_TOPIC_ID)."""
        name = entry if isinstance(entry, str) else getattr(entry, field, None)
        if name:
            return str(name)
        topic_id = getattr(entry, "topic_id", None)
        return None if topic_id is None else self.topic_name(topic_id)


#: a check: None (allowed) or the error of the refusal
Check = Callable[[Caller, Any], ErrorCode | None]


@final
@dataclass(frozen=True, slots=True)
class Open:
    """The request asks the authorizer nothing, for the reason given (Kafka answers it
    before or without a principal)."""

    why: str


@final
@dataclass(frozen=True, slots=True)
class Whole:
    """One check of the whole request."""

    check: Check


@final
@dataclass(frozen=True, slots=True)
class Each:
    """One check per entry of the request array ``array`` (absent at some versions: no
    check). ``empty_is_all``: an empty array asks for every entry (Metadata v0), so when
    every entry is refused the answer's own entries are dropped."""

    array: str
    check: Check
    empty_is_all: Callable[[Any], bool] | None = None


@final
@dataclass(frozen=True, slots=True)
class Hide:
    """Response entries of ``array`` that ``keep`` refuses are left out, when ``when``
    holds for the request."""

    array: str
    when: Callable[[Any], bool]
    keep: Callable[[Caller, Any], bool]


@final
@dataclass(frozen=True, slots=True)
class Fill:
    """What the principal may do, filled into the answer when the request asks
    (``include_*_authorized_operations``): ``fill(caller, answer)``."""

    when: Callable[[Any], bool]
    fill: Callable[[Caller, Any], Any]


@final
@dataclass(frozen=True, slots=True)
class Within:
    """:class:`Each` and :class:`Hide` one level down: in each entry of the request array
    ``outer`` (named by its ``key``), one check per entry of its array ``inner``; an entry
    whose ``inner`` is null asks for all, and the answer's entries ``keep`` refuses are
    left out (OffsetFetch v8+: each group's topics)."""

    outer: str
    key: str
    inner: str
    check: Check
    keep: Callable[[Caller, Any], bool]


Rule = Open | Whole | Each | Hide | Fill | Within

#: the operations a bitfield of authorized operations reports, by resource type (Kafka's
#: ``AclEntry.supportedOperations``)
SUPPORTED: Final[Mapping[ResourceType, tuple[Operation, ...]]] = {
    ResourceType.TOPIC: (
        Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE,
        Operation.DELETE, Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (
        Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE,
    ),
}  # fmt: skip


def authorized_operations(caller: Caller, resource: ResourceType, name: str) -> int:
    """The bitfield (bit ``code`` per operation) of what ``caller`` may do to a resource."""
    return sum(
        1 << operation for operation in SUPPORTED[resource] if caller.may(operation, resource, name)
    )


def _asked(field: str) -> Callable[[Any], bool]:
    return lambda request: bool(getattr(request, field, False))


def _cluster_operations(caller: Caller, answer: Any) -> Any:
    operations = authorized_operations(caller, ResourceType.CLUSTER, CLUSTER_NAME)
    return dataclasses.replace(answer, cluster_authorized_operations=operations)


def _topic_operations(caller: Caller, answer: Any) -> Any:
    topics = tuple(
        dataclasses.replace(
            topic,
            topic_authorized_operations=authorized_operations(
                caller, ResourceType.TOPIC, caller.topic(topic) or ""
            ),
        )
        if int(topic.error_code) == 0
        else topic  # a refused or unknown topic: not asked
        for topic in answer.topics
    )
    return dataclasses.replace(answer, topics=topics)


def _group_operations(caller: Caller, answer: Any) -> Any:
    groups = tuple(
        dataclasses.replace(
            group,
            authorized_operations=authorized_operations(caller, ResourceType.GROUP, group.group_id),
        )
        if int(group.error_code) == 0
        else group
        for group in answer.groups
    )
    return dataclasses.replace(answer, groups=groups)


def _topic(operation: Operation, field: str = "name") -> Check:
    def check(caller: Caller, entry: Any) -> ErrorCode | None:
        name = caller.topic(entry, field)
        return None if name is None else caller.check(operation, ResourceType.TOPIC, name)

    return check


def _group(operation: Operation, field: str = "group_id") -> Check:
    def check(caller: Caller, entry: Any) -> ErrorCode | None:
        name = entry if isinstance(entry, str) else getattr(entry, field)
        return caller.check(operation, ResourceType.GROUP, name)

    return check


def _cluster(operation: Operation) -> Check:
    return lambda caller, _: caller.check(operation, ResourceType.CLUSTER, CLUSTER_NAME)


def _create_topic(caller: Caller, entry: CreateTopicsCreatableTopic) -> ErrorCode | None:
    """CreateTopics: CREATE on the cluster, or on the topic."""
    return _may_create(caller, entry.name)


def _may_create(caller: Caller, name: str) -> ErrorCode | None:
    if caller.may_cluster(Operation.CREATE):
        return None
    return caller.check(Operation.CREATE, ResourceType.TOPIC, name)


def _metadata_topic(caller: Caller, entry: MetadataRequestTopic) -> ErrorCode | None:
    """DESCRIBE, and CREATE (on the cluster or the topic) for a topic Metadata would
    create."""
    name = caller.topic(entry)
    if name is None:
        return None
    if not caller.may(Operation.DESCRIBE, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if caller.auto_create and not caller.topic_exists(name):
        return _may_create(caller, name)
    return None


def _all_topics(request: MetadataRequest) -> bool:
    """A Metadata request for every topic (v0: an empty list; v1+: null)."""
    topics = request.topics
    return topics is None or (request.__version__ == 0 and not topics)


def _describable(caller: Caller, entry: Any) -> bool:
    name = caller.topic(entry)
    return name is None or caller.may(Operation.DESCRIBE, ResourceType.TOPIC, name)


def _transactional_id(operation: Operation) -> Check:
    def check(caller: Caller, request: Any) -> ErrorCode | None:
        name = getattr(request, "transactional_id", None)
        if not name:
            return None
        return caller.check(operation, ResourceType.TRANSACTIONAL_ID, name)

    return check


def _init_producer_id(caller: Caller, request: InitProducerIdRequest) -> ErrorCode | None:
    """A transactional id needs WRITE on it; an idempotent producer IDEMPOTENT_WRITE on the
    cluster or WRITE on some topic (KIP-679)."""
    if request.transactional_id:
        return _transactional_id(Operation.WRITE)(caller, request)
    if caller.may_cluster(Operation.IDEMPOTENT_WRITE) or caller.authorizer.allowed_any(
        caller.principal, caller.host, Operation.WRITE, ResourceType.TOPIC
    ):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _coordinator_key(caller: Caller, key: Any, key_type: int) -> ErrorCode | None:
    if key_type == 1:  # a transaction coordinator
        return caller.check(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)
    return caller.check(Operation.DESCRIBE, ResourceType.GROUP, key)


def _find_coordinator(caller: Caller, request: FindCoordinatorRequest) -> ErrorCode | None:
    if not hasattr(request, "key"):
        return None  # v4+: the keys are checked one by one
    key_type = request.key_type if hasattr(request, "key_type") else 0  # v1+
    return _coordinator_key(caller, request.key, key_type)


def _txn_and_group(
    caller: Caller, request: AddOffsetsToTxnRequest | TxnOffsetCommitRequest
) -> ErrorCode | None:
    """AddOffsetsToTxn, TxnOffsetCommit: WRITE on the transactional id, then READ on the
    group, as Kafka checks them."""
    refused = _transactional_id(Operation.WRITE)(caller, request)
    return refused if refused is not None else _group(Operation.READ)(caller, request)


def _add_partitions_to_txn(caller: Caller, request: AddPartitionsToTxnRequest) -> ErrorCode | None:
    """AddPartitionsToTxn: v4+ comes from brokers (KIP-890 verification) and needs
    CLUSTER_ACTION; v0-3 WRITE on the transactional id, then WRITE on every topic. Kafka
    fails the whole transaction when a topic is refused (the allowed partitions
    OPERATION_NOT_ATTEMPTED); here every partition is answered TOPIC_AUTHORIZATION_FAILED."""
    if hasattr(request, "transactions"):  # v4+
        return caller.check(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    name = request.v3_and_below_transactional_id
    refused = caller.check(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, name)
    if refused is not None:
        return refused
    for topic in request.v3_and_below_topics:
        refused = caller.check(Operation.WRITE, ResourceType.TOPIC, topic.name)
        if refused is not None:
            return refused
    return None


def _describable_txn(caller: Caller, entry: Any) -> bool:
    return caller.may(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, entry.transactional_id)


def _epoch_topic(
    caller: Caller, entry: OffsetForLeaderEpochOffsetForLeaderTopic
) -> ErrorCode | None:
    """OffsetForLeaderEpoch: CLUSTER_ACTION (brokers), else DESCRIBE on the topic
    (consumers checking for truncation, KIP-320)."""
    if caller.may_cluster(Operation.CLUSTER_ACTION):
        return None
    return _topic(Operation.DESCRIBE, "topic")(caller, entry)


def _follower_topic(caller: Caller, entry: Any) -> ErrorCode | None:
    """A Fetch from a follower (a replica id of 0 or more) needs CLUSTER_ACTION; refused,
    Kafka answers every partition TOPIC_AUTHORIZATION_FAILED."""
    if caller.may_cluster(Operation.CLUSTER_ACTION):
        return None
    return ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _fetch_replica_id(request: FetchRequest) -> int:
    """The fetching replica's id (v15+ in ``replica_state``); -1 for a consumer."""
    if hasattr(request, "replica_state"):  # v15+
        return int(request.replica_state.replica_id)
    return int(request.replica_id) if hasattr(request, "replica_id") else -1


#: Kafka's ConfigResource.Type ids of the resources that are not the cluster's
_TOPIC_CONFIG: Final = 2
_GROUP_CONFIG: Final = 32


def _config_resource(operation: Operation) -> Check:
    """DescribeConfigs, AlterConfigs, IncrementalAlterConfigs: ``operation`` on the topic,
    on the group (Kafka 4's group configs), else on the cluster (broker, broker logger,
    client metrics; a type Kafka does not know asks the cluster too, and its handler then
    refuses it)."""

    def check(
        caller: Caller,
        entry: DescribeConfigsResource
        | AlterConfigsResource
        | IncrementalAlterConfigsAlterConfigsResource,
    ) -> ErrorCode | None:
        if entry.resource_type == _TOPIC_CONFIG:
            return caller.check(operation, ResourceType.TOPIC, entry.resource_name)
        if entry.resource_type == _GROUP_CONFIG:
            return caller.check(operation, ResourceType.GROUP, entry.resource_name)
        return caller.check(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    return check


def _subscribed_topics(
    caller: Caller, request: ConsumerGroupHeartbeatRequest | ShareGroupHeartbeatRequest
) -> ErrorCode | None:
    """ConsumerGroupHeartbeat: a member may subscribe only to topics it may DESCRIBE
    (Kafka answers the whole heartbeat TOPIC_AUTHORIZATION_FAILED otherwise)."""
    names = request.subscribed_topic_names or ()
    for name in names:
        if not caller.may(Operation.DESCRIBE, ResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None


#: Kafka's message for a described group using a topic the principal may not DESCRIBE
GROUP_TOPICS_REFUSED: Final = (
    "The described group uses topics that the client is not authorized to describe."
)


def _group_topics(member: Any) -> set[str]:
    """The topics a described member subscribes to or is (to be) assigned."""
    names = set(member.subscribed_topic_names or ())
    for assignment in (member.assignment, getattr(member, "target_assignment", None)):
        if assignment is not None:
            names.update(t.topic_name for t in assignment.topic_partitions)
    return names


def _groups_with_refused_topics(caller: Caller, answer: Any) -> Any:
    """ConsumerGroupDescribe: a group one of whose topics the principal may not DESCRIBE
    is answered TOPIC_AUTHORIZATION_FAILED, with nothing of it but its id."""
    groups = []
    for group in answer.groups:
        topics = set().union(*(_group_topics(member) for member in group.members))
        if int(group.error_code) == 0 and not all(
            caller.may(Operation.DESCRIBE, ResourceType.TOPIC, name) for name in topics
        ):
            group = build(
                type(group),
                {
                    "group_id": group.group_id,
                    "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "error_message": GROUP_TOPICS_REFUSED,
                },
            )
        groups.append(group)
    return dataclasses.replace(answer, groups=tuple(groups))


#: What each API asks, as Kafka's KafkaApis (and, for what a KRaft broker forwards, its
#: ControllerApis) asks it. An API not here is refused: see :class:`Open`.
RULES: Final[Mapping[ApiKey, tuple[Rule, ...]]] = {
    ApiKey.API_VERSIONS: (Open("a client asks it before it authenticates"),),
    ApiKey.SASL_HANDSHAKE: (Open("the authentication itself"),),
    ApiKey.SASL_AUTHENTICATE: (Open("the authentication itself"),),
    # KIP-714: Kafka's KafkaApis checks no ACL for client telemetry (any client that may
    # connect asks for its subscriptions and pushes); the subscriptions are changed and
    # described through the client-metrics config resources, CLUSTER ALTER_CONFIGS and
    # DESCRIBE_CONFIGS
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (Open("client telemetry: Kafka asks no ACL"),),
    ApiKey.PUSH_TELEMETRY: (Open("client telemetry: Kafka asks no ACL"),),
    ApiKey.PRODUCE: (
        Whole(_transactional_id(Operation.WRITE)),
        Each("topic_data", _topic(Operation.WRITE)),
    ),
    ApiKey.FETCH: (Each("topics", _topic(Operation.READ, "topic")),),
    ApiKey.LIST_OFFSETS: (Each("topics", _topic(Operation.DESCRIBE)),),
    ApiKey.METADATA: (
        Each("topics", _metadata_topic, lambda request: request.__version__ == 0),
        Hide("topics", _all_topics, _describable),
        Fill(_asked("include_topic_authorized_operations"), _topic_operations),
        Fill(_asked("include_cluster_authorized_operations"), _cluster_operations),  # v8-10
    ),
    ApiKey.OFFSET_COMMIT: (
        Whole(_group(Operation.READ)),
        Each("topics", _topic(Operation.READ)),
    ),
    ApiKey.OFFSET_FETCH: (
        Whole(lambda c, r: _group(Operation.DESCRIBE)(c, r) if hasattr(r, "group_id") else None),
        Each("topics", _topic(Operation.DESCRIBE)),
        Hide("topics", lambda r: getattr(r, "topics", ()) is None, _describable),
        Each("groups", _group(Operation.DESCRIBE)),  # v8+
        Within("groups", "group_id", "topics", _topic(Operation.DESCRIBE), _describable),
    ),
    # v4+ keys are checked one by one, each as its key_type says (see _rules)
    ApiKey.FIND_COORDINATOR: (Whole(_find_coordinator),),
    ApiKey.JOIN_GROUP: (Whole(_group(Operation.READ)),),
    ApiKey.HEARTBEAT: (Whole(_group(Operation.READ)),),
    ApiKey.LEAVE_GROUP: (Whole(_group(Operation.READ)),),
    ApiKey.SYNC_GROUP: (Whole(_group(Operation.READ)),),
    ApiKey.DESCRIBE_GROUPS: (
        Each("groups", _group(Operation.DESCRIBE)),
        Fill(_asked("include_authorized_operations"), _group_operations),
    ),
    ApiKey.LIST_GROUPS: (
        Hide(
            "groups",
            lambda _: True,
            lambda c, group: (
                c.may_cluster(Operation.DESCRIBE)
                or c.may(Operation.DESCRIBE, ResourceType.GROUP, group.group_id)
            ),
        ),
    ),
    ApiKey.CREATE_TOPICS: (Each("topics", _create_topic),),
    ApiKey.DELETE_TOPICS: (
        Each("topic_names", _topic(Operation.DELETE)),  # v0-5
        Each("topics", _topic(Operation.DELETE)),  # v6+
    ),
    ApiKey.DELETE_RECORDS: (Each("topics", _topic(Operation.DELETE)),),
    ApiKey.INIT_PRODUCER_ID: (Whole(_init_producer_id),),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (Each("topics", _epoch_topic),),
    ApiKey.ADD_PARTITIONS_TO_TXN: (Whole(_add_partitions_to_txn),),
    ApiKey.ADD_OFFSETS_TO_TXN: (Whole(_txn_and_group),),
    ApiKey.END_TXN: (Whole(_transactional_id(Operation.WRITE)),),
    ApiKey.TXN_OFFSET_COMMIT: (
        Whole(_txn_and_group),
        Each("topics", _topic(Operation.READ)),
    ),
    ApiKey.DESCRIBE_CONFIGS: (Each("resources", _config_resource(Operation.DESCRIBE_CONFIGS)),),
    ApiKey.ALTER_CONFIGS: (Each("resources", _config_resource(Operation.ALTER_CONFIGS)),),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (
        Each("resources", _config_resource(Operation.ALTER_CONFIGS)),
    ),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (Whole(_cluster(Operation.ALTER)),),
    ApiKey.DESCRIBE_LOG_DIRS: (Whole(_cluster(Operation.DESCRIBE)),),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (Whole(_cluster(Operation.ALTER)),),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (Whole(_cluster(Operation.DESCRIBE)),),
    ApiKey.OFFSET_DELETE: (
        Whole(_group(Operation.DELETE)),
        Each("topics", _topic(Operation.READ)),
    ),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (Whole(_cluster(Operation.DESCRIBE_CONFIGS)),),
    ApiKey.ALTER_CLIENT_QUOTAS: (Whole(_cluster(Operation.ALTER_CONFIGS)),),
    ApiKey.LIST_CONFIG_RESOURCES: (Whole(_cluster(Operation.DESCRIBE_CONFIGS)),),
    ApiKey.DESCRIBE_QUORUM: (Whole(_cluster(Operation.DESCRIBE)),),
    ApiKey.UPDATE_FEATURES: (Whole(_cluster(Operation.ALTER)),),
    ApiKey.DESCRIBE_PRODUCERS: (Each("topics", _topic(Operation.READ)),),
    # every topic (an empty list) lists only those it may DESCRIBE; a list left empty by
    # refusals is not a request for every topic
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (
        Each("topics", _topic(Operation.DESCRIBE), lambda _: True),
        Hide("topics", lambda request: not request.topics, _describable),
    ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (
        Whole(_group(Operation.READ)),
        Whole(_subscribed_topics),
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (
        Each("group_ids", _group(Operation.DESCRIBE)),
        Fill(lambda _: True, _groups_with_refused_topics),
        Fill(_asked("include_authorized_operations"), _group_operations),
    ),
    ApiKey.SHARE_GROUP_HEARTBEAT: (
        Whole(_group(Operation.READ)),
        Whole(_subscribed_topics),
    ),
    ApiKey.SHARE_GROUP_DESCRIBE: (
        Each("group_ids", _group(Operation.DESCRIBE)),
        Fill(lambda _: True, _groups_with_refused_topics),
        Fill(_asked("include_authorized_operations"), _group_operations),
    ),
    ApiKey.SHARE_FETCH: (
        Whole(_group(Operation.READ)),
        Each("topics", _topic(Operation.READ)),
    ),
    ApiKey.SHARE_ACKNOWLEDGE: (
        Whole(_group(Operation.READ)),
        Each("topics", _topic(Operation.READ)),
    ),
    # KafkaApis: the groups DESCRIBE, each group's topics DESCRIBE (a refused topic's
    # partitions TOPIC_AUTHORIZATION_FAILED; topics null: the refused ones left out)
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (
        Each("groups", _group(Operation.DESCRIBE)),
        Within(
            "groups",
            "group_id",
            "topics",
            _topic(Operation.DESCRIBE, "topic_name"),
            lambda c, topic: c.may(Operation.DESCRIBE, ResourceType.TOPIC, topic.topic_name),
        ),
    ),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (
        Whole(_group(Operation.READ)),
        Each("topics", _topic(Operation.READ, "topic_name")),
    ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (
        Whole(_group(Operation.DELETE)),
        Each("topics", _topic(Operation.READ, "topic_name")),
    ),
    ApiKey.CREATE_PARTITIONS: (Each("topics", _topic(Operation.ALTER)),),
    ApiKey.DELETE_GROUPS: (Each("groups_names", _group(Operation.DELETE)),),
    ApiKey.ELECT_LEADERS: (Whole(_cluster(Operation.ALTER)),),
    ApiKey.DESCRIBE_CLUSTER: (
        Whole(_cluster(Operation.DESCRIBE)),
        Fill(_asked("include_cluster_authorized_operations"), _cluster_operations),
    ),
    ApiKey.DESCRIBE_ACLS: (Whole(_cluster(Operation.DESCRIBE)),),
    ApiKey.CREATE_ACLS: (Whole(_cluster(Operation.ALTER)),),
    ApiKey.DELETE_ACLS: (Whole(_cluster(Operation.ALTER)),),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (Whole(_cluster(Operation.DESCRIBE)),),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (Whole(_cluster(Operation.ALTER)),),
    ApiKey.DESCRIBE_TRANSACTIONS: (
        Each("transactional_ids", lambda c, name: _coordinator_key(c, name, 1)),
    ),
    # Kafka lists only the transactional ids the principal may DESCRIBE
    ApiKey.LIST_TRANSACTIONS: (Hide("transaction_states", lambda _: True, _describable_txn),),
}


def unruled(keys: Iterable[int]) -> list[str]:
    """The APIs of ``keys`` the table has no row for (a listener serving one is a bug: its
    requests would all be refused)."""
    return sorted(ApiKey(key).name for key in keys if key not in RULES)


def _rules(key: int, request: Any) -> tuple[Rule, ...] | None:
    """The rules of the request's API; None for an API without a row (refused)."""
    rules = RULES.get(ApiKey(key))
    if rules is None:
        return None
    if key == ApiKey.FETCH and _fetch_replica_id(request) >= 0:
        return (Each("topics", _follower_topic),)
    if key == ApiKey.FIND_COORDINATOR and hasattr(request, "coordinator_keys"):
        key_type = request.key_type
        each = Each("coordinator_keys", lambda c, k: _coordinator_key(c, k, key_type))
        return (*rules, each)
    return rules


Invoke = Callable[[Any], Any]


def authorized(caller: Caller, request: Any, invoke: Invoke) -> Any:
    """``invoke(request)`` with what ``caller`` may not do refused: the response (or an
    awaitable of it, or None), as Kafka answers it."""
    refused: list[Any] = []
    hide: list[Hide] = []
    fills: list[Fill] = []
    dropped: list[str] = []  # arrays whose answer entries are not what was asked
    # one level down: (rule, outer key, how the answer's inner entries change)
    within: list[tuple[Within, Any, Callable[[tuple[Any, ...]], tuple[Any, ...]]]] = []
    original = request
    rules = _rules(request.__api_key__, request)
    if rules is None:  # deny by default
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    for rule in rules:
        if isinstance(rule, Open):
            continue
        if isinstance(rule, Whole):
            error = rule.check(caller, request)
            if error is not None:
                return error_response(request, error)
        elif isinstance(rule, Each):
            entries = getattr(request, rule.array, None)
            if not entries:
                continue
            allowed: list[Any] = []
            denied: list[tuple[Any, ErrorCode]] = []
            for entry in entries:
                error = rule.check(caller, entry)
                if error is None:
                    allowed.append(entry)
                else:
                    denied.append((entry, error))
            if denied:
                request = dataclasses.replace(request, **{rule.array: tuple(allowed)})
                if not allowed and rule.empty_is_all is not None and rule.empty_is_all(request):
                    dropped.append(rule.array)
                for error in dict.fromkeys(error for _, error in denied):
                    part = tuple(e for e, err in denied if err is error)
                    refused.append(
                        error_response(dataclasses.replace(original, **{rule.array: part}), error)
                    )
        elif isinstance(rule, Within):
            request = _within(rule, caller, original, request, within)
        elif isinstance(rule, Hide):
            if rule.when(original):
                hide.append(rule)
        elif rule.when(original):
            fills.append(rule)
    response = invoke(request)
    if not refused and not hide and not fills and not within:
        return response

    def finish(answer: Any) -> Any:
        if answer is None:
            return None
        if dropped:
            answer = dataclasses.replace(answer, **dict.fromkeys(dropped, ()))
        for part in refused:
            answer = _concatenated(answer, part)
        for rule in hide:
            kept = tuple(e for e in getattr(answer, rule.array) if rule.keep(caller, e))
            answer = dataclasses.replace(answer, **{rule.array: kept})
        for fill in fills:
            answer = fill.fill(caller, answer)
        for down, key, change in within:
            outers = tuple(
                dataclasses.replace(o, **{down.inner: change(getattr(o, down.inner))})
                if getattr(o, down.key) == key
                else o
                for o in getattr(answer, down.outer)
            )
            answer = dataclasses.replace(answer, **{down.outer: outers})
        return answer

    if inspect.isawaitable(response):
        return _later(response, finish)
    return finish(response)


def _within(
    rule: Within,
    caller: Caller,
    original: Any,
    request: Any,
    changes: list[tuple[Within, Any, Callable[[tuple[Any, ...]], tuple[Any, ...]]]],
) -> Any:
    """``request`` with the refused inner entries taken out; how to change the answer is
    added to ``changes``."""
    outers = getattr(request, rule.outer, None)
    if not outers:
        return request
    kept = []
    for outer in outers:
        key, entries = getattr(outer, rule.key), getattr(outer, rule.inner)
        if entries is None:
            changes.append((rule, key, _keeping(rule, caller)))
            kept.append(outer)
            continue
        checked = [(entry, rule.check(caller, entry)) for entry in entries]
        denied = [(entry, error) for entry, error in checked if error is not None]
        if not denied:
            kept.append(outer)
            continue
        allowed = tuple(entry for entry, error in checked if error is None)
        kept.append(dataclasses.replace(outer, **{rule.inner: allowed}))
        for error in dict.fromkeys(error for _, error in denied):
            part = tuple(entry for entry, err in denied if err is error)
            alone = dataclasses.replace(outer, **{rule.inner: part})
            answered = error_response(
                dataclasses.replace(original, **{rule.outer: (alone,)}), error
            )
            extra = tuple(getattr(getattr(answered, rule.outer)[0], rule.inner))
            changes.append((rule, key, _appending(extra)))
    return dataclasses.replace(request, **{rule.outer: tuple(kept)})


def _appending(extra: tuple[Any, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    return lambda inner: tuple(inner) + extra


def _keeping(rule: Within, caller: Caller) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    return lambda inner: tuple(entry for entry in inner if rule.keep(caller, entry))


async def _later(response: Awaitable[Any], finish: Callable[[Any], Any]) -> Any:
    return finish(await response)


def _concatenated(answer: Any, refusal: Any) -> Any:
    """``answer`` with the entries of the refusal's arrays after its own (its top-level
    fields stay the answer's)."""
    extra = {
        field.name: getattr(answer, field.name) + value
        for field in dataclasses.fields(answer)
        if isinstance(value := getattr(refusal, field.name), tuple) and value
    }
    return dataclasses.replace(answer, **extra) if extra else answer
