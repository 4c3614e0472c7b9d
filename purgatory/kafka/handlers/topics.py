"""CreateTopics 0-4 and DeleteTopics 0-3 (the non-flexible versions), and the topic
creation a Metadata request asks for when the broker allows it (Kafka's
``auto.create.topics.enable``).

Any broker takes them (a KRaft broker forwards them to the controller; here there is one
cluster state). Refusals carry Kafka's codes and, from CreateTopics v1, its reason:
a name repeated in one request INVALID_REQUEST, a bad name INVALID_TOPIC_EXCEPTION, an
existing one TOPIC_ALREADY_EXISTS, partitions or replication factor 0 or below -1
INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR, an assignment together with either
INVALID_REQUEST, a bad assignment INVALID_REPLICA_ASSIGNMENT, a topic config the
simulation does not keep INVALID_CONFIG.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple, final

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster
from purgatory.sim.errors import ErrorCode, SimulationError
from purgatory.sim.validate import check_int, check_topic_name

#: CreateTopics' "use the broker's default" for partitions and replication factor (v4+)
BROKER_DEFAULT: Final = -1
_INTEGER: Final = re.compile(r"-?[0-9]{1,18}")


@dataclass(frozen=True, slots=True)
class TopicDefaults:
    """The broker settings topic creation follows, with Kafka's names and defaults.

    ``auto_create`` (``auto.create.topics.enable``): a Metadata request that names an
    unknown topic, and allows it, creates the topic. Kafka enables it by default; here it
    is off unless asked for, so that a typo in a topic name is an error, not a new topic.
    ``num_partitions`` (``num.partitions``) and ``replication_factor``
    (``default.replication.factor``), both 1 as in Kafka, size an auto-created topic and
    a CreateTopics entry that asks for the broker's default (-1). ``max_partitions``
    bounds one topic (records live in memory here; Kafka has no such bound)."""

    auto_create: bool = False
    num_partitions: int = 1
    replication_factor: int = 1
    max_partitions: int = 10_000

    def __post_init__(self) -> None:
        if not isinstance(self.auto_create, bool):
            raise TypeError(f"auto_create must be a bool, got {self.auto_create!r}")
        check_int("max_partitions", self.max_partitions, 1)
        check_int("num_partitions", self.num_partitions, 1, self.max_partitions)
        check_int("replication_factor", self.replication_factor, 1)

    def settings(self) -> dict[str, int]:
        """These settings by Kafka's broker config names (a bool is an int)."""
        return {
            "auto.create.topics.enable": self.auto_create,
            "num.partitions": self.num_partitions,
            "default.replication.factor": self.replication_factor,
        }


class NewTopic(NamedTuple):
    """One CreateTopics entry as sent: -1 partitions or replication factor for the
    broker's default; ``assignment`` maps partition index -> replica broker ids."""

    name: str
    partitions: int
    replication_factor: int
    assignment: list[tuple[int, list[int]]]
    configs: list[tuple[str, str | None]]


@final
class TopicHandlers:
    """CreateTopics and DeleteTopics over ``cluster``, and Metadata's auto-creation."""

    def __init__(self, cluster: Cluster, defaults: TopicDefaults | None = None) -> None:
        self.cluster = cluster
        self.defaults = TopicDefaults() if defaults is None else defaults

    def apis(self) -> ApiTable:
        return {
            ApiKey.CREATE_TOPICS: Api(0, 4, self.create_topics),
            ApiKey.DELETE_TOPICS: Api(0, 3, self.delete_topics),
        }

    # -- CreateTopics ----------------------------------------------------------------------

    def create_topics(self, header: RequestHeader, body: Reader) -> Awaitable[bytearray]:
        version = header.api_version
        topics = [_read_new_topic(body) for _ in range(body.array_length())]
        body.int32()  # timeout_ms: creation is immediate
        validate_only = version >= 1 and body.int8() != 0
        return self._create_topics(version, topics, validate_only)

    async def _create_topics(
        self, version: int, topics: list[NewTopic], validate_only: bool
    ) -> bytearray:
        answers = await self._create_each(topics, validate_only)
        out = Writer()
        if version >= 2:
            out.int32(0)  # throttle_time_ms
        out.int32(len(answers))
        for name, (error, message) in answers.items():
            out.string(name).int16(error.wire)
            if version >= 1:
                out.string(message)
        return out.buf

    async def _create_each(
        self, topics: list[NewTopic], validate_only: bool
    ) -> dict[str, tuple[ErrorCode, str | None]]:
        """One answer per name, in request order; a name given twice is refused whole,
        as Kafka does, since it cannot tell which entry was meant."""
        named = Counter(topic.name for topic in topics)
        answers: dict[str, tuple[ErrorCode, str | None]] = {}
        for topic in topics:
            if named[topic.name] > 1:
                answers[topic.name] = (
                    ErrorCode.INVALID_REQUEST,
                    f"topic {topic.name!r} is named {named[topic.name]} times in one request",
                )
                continue
            try:
                await self._create(topic, validate_only)
            except SimulationError as refused:
                answers[topic.name] = (refused.code, refused.message)
            else:
                answers[topic.name] = (ErrorCode.NONE, None)
        return answers

    async def _create(self, topic: NewTopic, validate_only: bool) -> None:
        """Create ``topic`` (or only check it); raises SimulationError with Kafka's code."""
        check_topic_name(topic.name)
        if topic.name in self.cluster.topics:
            raise SimulationError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists"
            )
        partitions, replication_factor, assignment = self._layout(topic)
        retention_bytes, retention_ms = self._retention(topic.configs)
        if validate_only:
            return
        await self.cluster.create_topic(
            topic.name,
            partitions,
            replication_factor,
            assignment=assignment,
            retention_bytes=retention_bytes,
            retention_ms=retention_ms,
        )

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

    def _retention(
        self, configs: Iterable[tuple[str, str | None]]
    ) -> tuple[int | None, int | None]:
        """The topic configs the simulation keeps, checked: (retention.bytes, retention.ms),
        None where not given. Any other config it cannot honour is refused, not ignored."""
        given: dict[str, int | None] = {"retention.bytes": None, "retention.ms": None}
        for name, value in configs:
            if value is None:
                raise SimulationError(ErrorCode.INVALID_CONFIG, f"{name}: a null value")
            if name in given:
                given[name] = _config_int(name, value, -1)
            elif name == "min.insync.replicas":
                brokers = self.cluster.min_insync_replicas
                if _config_int(name, value, 1) != brokers:
                    raise SimulationError(
                        ErrorCode.INVALID_CONFIG,
                        f"min.insync.replicas is the brokers' ({brokers}) for every topic "
                        f"here, got {value!r}",
                    )
            elif name == "cleanup.policy":
                if value != "delete":
                    raise SimulationError(
                        ErrorCode.INVALID_CONFIG,
                        f"cleanup.policy: only 'delete' is simulated (no compaction), got "
                        f"{value!r}",
                    )
            else:
                raise SimulationError(
                    ErrorCode.INVALID_CONFIG,
                    f"{name}: not a topic config kept here (retention.ms, retention.bytes, "
                    "cleanup.policy=delete, min.insync.replicas)",
                )
        return given["retention.bytes"], given["retention.ms"]

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

    def delete_topics(self, header: RequestHeader, body: Reader) -> Awaitable[bytearray]:
        names = [body.string() for _ in range(body.array_length())]
        body.int32()  # timeout_ms: deletion is immediate
        return self._delete_topics(header.api_version, names)

    async def _delete_topics(self, version: int, names: list[str]) -> bytearray:
        named = Counter(names)
        answers: dict[str, ErrorCode] = {}
        for name in names:
            if named[name] > 1:
                answers[name] = ErrorCode.INVALID_REQUEST
                continue
            try:
                await self.cluster.delete_topic(name)
            except SimulationError as refused:
                answers[name] = refused.code
            else:
                answers[name] = ErrorCode.NONE
        out = Writer()
        if version >= 1:
            out.int32(0)  # throttle_time_ms
        out.int32(len(answers))
        for name, error in answers.items():
            out.string(name).int16(error.wire)
        return out.buf


def _read_new_topic(body: Reader) -> NewTopic:
    name = body.string()
    partitions = body.int32()
    replication_factor = body.int16()
    assignment = []
    for _ in range(body.array_length()):
        index = body.int32()
        assignment.append((index, [body.int32() for _ in range(body.array_length())]))
    configs = [(body.string(), body.nullable_string()) for _ in range(body.array_length())]
    return NewTopic(name, partitions, replication_factor, assignment, configs)


def _uniform(replicas: list[list[int]], brokers: Iterable[int]) -> bool:
    """Every partition has the same number (at least one) of distinct known brokers."""
    known = set(brokers)
    width = len(replicas[0])
    return all(len(r) == width >= 1 and len(set(r)) == width and known >= set(r) for r in replicas)


def _config_int(name: str, value: str, minimum: int) -> int:
    if _INTEGER.fullmatch(value) is None or int(value) < minimum:
        raise SimulationError(
            ErrorCode.INVALID_CONFIG, f"{name} must be an integer >= {minimum}, got {value!r}"
        )
    return int(value)
