"""CreateTopics 2-7 and DeleteTopics 1-6, and the topic creation a Metadata request asks
for when the broker allows it (Kafka's ``auto.create.topics.enable``).

Any broker takes them (a KRaft broker forwards them to the controller; here there is one
cluster state). CreateTopics refusals carry Kafka's codes and its reason: a name repeated
in one request INVALID_REQUEST, a bad name INVALID_TOPIC_EXCEPTION, an existing one
TOPIC_ALREADY_EXISTS, partitions or replication factor 0 or below -1 INVALID_PARTITIONS /
INVALID_REPLICATION_FACTOR, an assignment together with either INVALID_REQUEST, a bad
assignment INVALID_REPLICA_ASSIGNMENT, an unknown topic config or a bad value INVALID_CONFIG
naming it (every topic config Kafka takes is taken: see
:data:`~purgatory.kafka.broker_configs.TOPIC_CONFIGS`). From v5 a created topic's answer
carries its partitions, replication factor and configs (those DescribeConfigs reports, by
name), validate_only's too; from v7 its topic id (the zero id for validate_only: nothing
was created; Kafka names one it never uses).

DeleteTopics answers an unknown name UNKNOWN_TOPIC_OR_PARTITION and a name repeated in one
request INVALID_REQUEST, once. v6 names each topic by name or by id: an unknown id is
UNKNOWN_TOPIC_ID; an entry with both or neither, an id given twice, or a name whose topic's
id is also given, INVALID_REQUEST, as Kafka checks them. Answers come in request order
(Kafka shuffles them); from v5 with a reason, from v6 with the topic's id.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Awaitable, Iterable, Mapping
from typing import TYPE_CHECKING, Final, NamedTuple, final

from purgatory.errors import ErrorCode
from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.cluster_configs import ClusterConfigs, TopicDefaults
from purgatory.kafka.config_rules import Value
from purgatory.kafka.handlers.units import Shared, SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster
from purgatory.sim.errors import SimulationError
from purgatory.sim.validate import check_topic_name

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        CreateTopicsCreatableTopic,
        CreateTopicsCreatableTopicResult,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteTopicsDeletableTopicResult,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
    )

#: CreateTopics' "use the broker's default" for partitions and replication factor (v4+)
BROKER_DEFAULT: Final = -1


class NewTopic(NamedTuple):
    """One CreateTopics entry as sent: -1 partitions or replication factor for the
    broker's default; ``assignment`` maps partition index -> replica broker ids."""

    name: str
    partitions: int
    replication_factor: int
    assignment: list[tuple[int, list[int]]]
    configs: list[tuple[str, str | None]]

    @classmethod
    def of(cls, topic: CreateTopicsCreatableTopic) -> NewTopic:
        """The entry of a CreateTopics request (kio's ``CreatableTopic``)."""
        return cls(
            topic.name,
            topic.num_partitions,
            topic.replication_factor,
            [(a.partition_index, list(a.broker_ids)) for a in topic.assignments],
            [(c.name, c.value) for c in topic.configs],
        )


class Created(NamedTuple):
    """What a CreateTopics entry created (or would create, validate_only): its id (None
    for validate_only), partitions, replication factor and its own configs (checked)."""

    topic_id: uuid.UUID | None
    partitions: int
    replication_factor: int
    configs: dict[str, Value]


#: one CreateTopics answer: the error, its reason, what was created (None on error)
_Answer = tuple[ErrorCode, str | None, Created | None]


@final
class TopicHandlers:
    """CreateTopics and DeleteTopics over ``cluster``, and Metadata's auto-creation."""

    def __init__(
        self,
        cluster: Cluster,
        defaults: TopicDefaults | None = None,
        configs: ClusterConfigs | None = None,
    ) -> None:
        self.cluster = cluster
        self.defaults = TopicDefaults() if defaults is None else defaults
        self.configs = ClusterConfigs(cluster, BrokerConfigs()) if configs is None else configs

    @classmethod
    def of(cls, shared: Shared) -> TopicHandlers:
        """The handlers over the front door's cluster, with its topic defaults and configs."""
        return cls(shared.cluster, shared.topic_defaults, shared.configs)

    def apis(self) -> ApiTable:
        return {
            ApiKey.CREATE_TOPICS: Api(*versions(ApiKey.CREATE_TOPICS), self.create_topics),
            ApiKey.DELETE_TOPICS: Api(*versions(ApiKey.DELETE_TOPICS), self.delete_topics),
        }

    # -- CreateTopics ----------------------------------------------------------------------

    def create_topics(
        self, header: RequestHeader, request: CreateTopicsRequest
    ) -> Awaitable[CreateTopicsResponse]:
        """Creation is immediate: the request's timeout is not waited on."""
        return self._create_topics(request)

    async def _create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        topics = [NewTopic.of(topic) for topic in request.topics]
        answers = await self._create_each(topics, request.validate_only)
        return respond(
            request,
            topics=[self._result(name, *answer) for name, answer in answers.items()],
        )

    def _result(
        self, name: str, error: ErrorCode, message: str | None, created: Created | None
    ) -> CreateTopicsCreatableTopicResult:
        """One topic's answer; the fields of later versions are dropped by ``respond``."""
        if created is None:  # Kafka's defaults: no id, -1 partitions and factor, no configs
            return {"name": name, "error_code": error, "error_message": message, "configs": []}
        configs = sorted(
            self.configs.topic_configs(created.configs, min(self.cluster.brokers)),
            key=lambda c: c.name,
        )
        return {
            "name": name,
            "topic_id": created.topic_id,
            "error_code": error,
            "error_message": message,
            "num_partitions": created.partitions,
            "replication_factor": created.replication_factor,
            "configs": [
                {
                    "name": config.name,
                    "value": config.value,
                    "read_only": config.read_only,  # False: AlterConfigs changes them
                    "config_source": config.source,
                    "is_sensitive": False,
                }
                for config in configs
            ],
        }

    async def _create_each(self, topics: list[NewTopic], validate_only: bool) -> dict[str, _Answer]:
        """One answer per name, in request order; a name given twice is refused whole,
        as Kafka does, since it cannot tell which entry was meant."""
        named = Counter(topic.name for topic in topics)
        answers: dict[str, _Answer] = {}
        for topic in topics:
            if named[topic.name] > 1:
                answers[topic.name] = (
                    ErrorCode.INVALID_REQUEST,
                    f"topic {topic.name!r} is named {named[topic.name]} times in one request",
                    None,
                )
                continue
            try:
                created = await self._create(topic, validate_only)
            except SimulationError as refused:
                answers[topic.name] = (refused.code, refused.message, None)
            else:
                answers[topic.name] = (ErrorCode.NONE, None, created)
        return answers

    async def _create(self, topic: NewTopic, validate_only: bool) -> Created:
        """Create ``topic`` (or only check it); raises SimulationError with Kafka's code."""
        check_topic_name(topic.name)
        if topic.name in self.cluster.topics:
            raise SimulationError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists"
            )
        partitions, replication_factor, assignment = self._layout(topic)
        own = self.configs.check_topic(topic.configs)
        config = self.configs.log_config(own, min(self.cluster.brokers))
        if validate_only:
            return Created(None, partitions, replication_factor, own)
        await self.cluster.create_topic(
            topic.name,
            partitions,
            replication_factor,
            assignment=assignment,
            retention_bytes=config.retention_bytes,
            retention_ms=config.retention_ms,
        )
        self.configs.created(topic.name, own)
        topic_id = self.cluster.topic_id(topic.name)
        return Created(topic_id, partitions, replication_factor, own)

    def _layout(self, topic: NewTopic) -> tuple[int, int, list[list[int]] | None]:
        """Partitions, replication factor and replica assignment (None: round-robin)."""
        brokers = len(self.cluster.brokers)
        if topic.assignment:  # (index, broker ids) pairs
            if (topic.partitions, topic.replication_factor) != (BROKER_DEFAULT, BROKER_DEFAULT):
                raise SimulationError(
                    ErrorCode.INVALID_REQUEST,
                    "give a replica assignment or partitions and a replication factor, "
                    "not both (-1 for both with an assignment)",
                )
            indexes = [index for index, _ in topic.assignment]
            replicas = [ids for _, ids in sorted(topic.assignment)]
            known = self.cluster.brokers
            if sorted(indexes) != list(range(len(indexes))) or not _uniform(replicas, known):
                raise SimulationError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"an assignment lists partitions 0..n-1 once each, each with the same "
                    f"number of distinct brokers out of {sorted(known)}: got "
                    f"{topic.assignment}",
                )
            return len(replicas), len(replicas[0]), replicas
        defaults = self.defaults
        partitions = topic.partitions
        if partitions == BROKER_DEFAULT:
            partitions = defaults.num_partitions
        if not 1 <= partitions <= defaults.max_partitions:
            raise SimulationError(
                ErrorCode.INVALID_PARTITIONS,
                f"partitions must be 1..{defaults.max_partitions} or -1 (the broker's "
                f"default), got {topic.partitions}",
            )
        factor = topic.replication_factor
        if factor == BROKER_DEFAULT:
            factor = defaults.replication_factor
        if not 1 <= factor <= brokers:
            raise SimulationError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor must be 1..{brokers} (the brokers there are) or -1 "
                f"(the broker's default: {defaults.replication_factor}), got "
                f"{topic.replication_factor}",
            )
        return partitions, factor, None

    # -- auto-creation (Metadata) -----------------------------------------------------------

    async def auto_create(self, names: Iterable[str]) -> Mapping[str, ErrorCode]:
        """Create each unknown topic of ``names`` with the defaults, if auto-creation is
        on; returns the error of each one that could not be (an invalid name
        INVALID_TOPIC_EXCEPTION, a default replication factor above the brokers
        INVALID_REPLICATION_FACTOR). Off, it creates nothing and returns nothing."""
        errors: dict[str, ErrorCode] = {}
        if not self.defaults.auto_create:
            return errors
        for name in dict.fromkeys(names):
            if name in self.cluster.topics:
                continue
            new = NewTopic(name, BROKER_DEFAULT, BROKER_DEFAULT, [], [])
            try:
                await self._create(new, validate_only=False)
            except SimulationError as refused:
                errors[name] = refused.code
        return errors

    # -- DeleteTopics ----------------------------------------------------------------------

    def delete_topics(
        self, header: RequestHeader, request: DeleteTopicsRequest
    ) -> Awaitable[DeleteTopicsResponse]:
        """Deletion is immediate: the request's timeout is not waited on."""
        entries: list[tuple[str | None, uuid.UUID | None]]
        if hasattr(request, "topics"):  # v6: by name or by id
            entries = [(t.name, _given(t.topic_id)) for t in request.topics]
        else:
            entries = [(name, None) for name in request.topic_names]
        return self._delete_topics(request, entries)

    async def _delete_topics(
        self, request: DeleteTopicsRequest, entries: list[tuple[str | None, uuid.UUID | None]]
    ) -> DeleteTopicsResponse:
        """One answer per entry, in request order; a name or id given twice is answered
        once. Every name and id is resolved before anything is deleted, as by Kafka."""
        names = Counter(name for name, topic_id in entries if topic_id is None and name is not None)
        ids = Counter(
            topic_id for name, topic_id in entries if name is None and topic_id is not None
        )
        resolved = {name: self.cluster.topic_id(name) for name in names}
        answers: list[DeleteTopicsDeletableTopicResult] = []
        answered: set[str | uuid.UUID] = set()

        def answer(
            name: str | None, topic_id: uuid.UUID | None, error: ErrorCode, message: str | None
        ) -> None:
            answers.append(
                {"name": name, "topic_id": topic_id, "error_code": error, "error_message": message}
            )

        for name, topic_id in entries:
            if name is not None and topic_id is not None:
                answer(
                    name, topic_id, ErrorCode.INVALID_REQUEST, "name a topic or its id, not both"
                )
            elif name is None and topic_id is None:
                answer(None, None, ErrorCode.INVALID_REQUEST, "name a topic or its id")
            elif name is not None:
                if name in answered:
                    continue
                answered.add(name)
                own_id = resolved[name]
                if names[name] > 1:
                    message = f"topic {name!r} is named {names[name]} times in one request"
                    answer(name, None, ErrorCode.INVALID_REQUEST, message)
                elif own_id is not None and own_id in ids:
                    message = f"topic {name!r} is also named by its id {own_id} in this request"
                    answer(name, None, ErrorCode.INVALID_REQUEST, message)
                else:
                    answer(name, own_id, *await self._delete(name))
            elif topic_id is not None:
                if topic_id in answered:
                    continue
                answered.add(topic_id)
                named = self.cluster.topic_name(topic_id)
                if ids[topic_id] > 1:
                    message = f"topic id {topic_id} is named {ids[topic_id]} times in one request"
                    answer(None, topic_id, ErrorCode.INVALID_REQUEST, message)
                elif named is None:
                    message = f"no topic has id {topic_id}"
                    answer(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, message)
                else:
                    answer(named, topic_id, *await self._delete(named))
        return respond(request, responses=answers)

    async def _delete(self, name: str) -> tuple[ErrorCode, str | None]:
        try:
            await self.cluster.delete_topic(name)
        except SimulationError as refused:
            return refused.code, refused.message
        return ErrorCode.NONE, None


def _given(topic_id: uuid.UUID | None) -> uuid.UUID | None:
    """A request's topic id, None for none (the zero id, which kio may read as None)."""
    return None if topic_id is None or topic_id.int == 0 else topic_id


def _uniform(replicas: list[list[int]], brokers: Iterable[int]) -> bool:
    """Every partition has the same number (at least one) of distinct known brokers."""
    known = set(brokers)
    width = len(replicas[0])
    return all(len(r) == width >= 1 and len(set(r)) == width and known >= set(r) for r in replicas)


UNIT: Final = SharedUnit(TopicHandlers.of)
