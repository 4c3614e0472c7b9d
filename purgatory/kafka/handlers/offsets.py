"""OffsetCommit, OffsetFetch and OffsetDelete: what a consumer with a ``group.id`` commits,
reads back and an admin deletes, kept in the
:class:`~purgatory.kafka.coordinator.offsets.OffsetStore`. A member of a group commits for
its current generation, as the group coordinator checks; the offsets of a topic the live
group consumes cannot be deleted (GROUP_SUBSCRIBED_TO_TOPIC).

Every version Kafka 4.x has, the flexible ones included: OffsetCommit 2-10 and OffsetFetch
1-10 (OffsetFetch v8+ asks for several groups at once). Version 10 of both names topics by
id (KIP-848's consumers), mapped to names through ``topics`` (the cluster): a topic id
nobody knows is answered UNKNOWN_TOPIC_ID in each of its partitions, and a fetch of every
committed partition leaves out the topics that have no id any more (deleted). A commit to a
topic or partition the cluster does not have is refused UNKNOWN_TOPIC_OR_PARTITION for that
partition alone, as Kafka's broker refuses it before asking the group coordinator.

As Kafka keeps them, a commit's null metadata is kept as "" (fetched back "", not null),
and OffsetCommit v9+ answers a commit with a generation for a group nobody knows
GROUP_ID_NOT_FOUND (the versions before: ILLEGAL_GENERATION).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final, Protocol, final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.offsets import Committed, OffsetStore
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitResponse,
        OffsetCommitResponseTopic,
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        OffsetDeleteResponsePartition,
        OffsetFetchRequest,
        OffsetFetchRequestTopic,
        OffsetFetchRequestTopics,
        OffsetFetchResponse,
        OffsetFetchResponseGroup,
        OffsetFetchResponsePartitions,
        OffsetFetchResponseTopics,
    )

#: the first version of each API that names topics by id
_TOPIC_IDS = 10


class TopicIds(Protocol):
    """Topic ids and names both ways, and which partitions exist (a
    :class:`~purgatory.sim.Cluster` is one)."""

    def topic_id(self, name: str) -> uuid.UUID | None: ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...

    def partition(self, topic: str, partition: int) -> object | None: ...


@final
class OffsetHandlers:
    """OffsetCommit 2-10, OffsetFetch 1-10 and OffsetDelete 0 over one store and one group
    coordinator; ``topics`` names the topics v10 asks for by id."""

    def __init__(
        self,
        offsets: OffsetStore,
        coordinator: GroupCoordinator,
        topics: TopicIds,
    ) -> None:
        self.offsets = offsets
        self.coordinator = coordinator
        self.topics = topics

    def apis(self) -> ApiTable:
        return {
            ApiKey.OFFSET_COMMIT: Api(*versions(ApiKey.OFFSET_COMMIT), self.offset_commit),
            ApiKey.OFFSET_FETCH: Api(*versions(ApiKey.OFFSET_FETCH), self.offset_fetch),
            ApiKey.OFFSET_DELETE: Api(*versions(ApiKey.OFFSET_DELETE), self.offset_delete),
        }

    def _name(self, topic_id: uuid.UUID | None) -> str | None:
        return None if topic_id is None else self.topics.topic_name(topic_id)

    def offset_commit(
        self, header: RequestHeader, request: OffsetCommitRequest
    ) -> OffsetCommitResponse:
        """As Kafka's broker answers it: a topic or partition the cluster does not have is
        refused (UNKNOWN_TOPIC_OR_PARTITION; a v10 topic id nobody knows, UNKNOWN_TOPIC_ID)
        before the group coordinator is asked; it decides for the others, if any."""
        version = header.api_version
        group = request.group_id
        named = [  # v10 names topics by id
            (topic, self._name(topic.topic_id) if hasattr(topic, "topic_id") else topic.name)
            for topic in request.topics
        ]
        unknown = {
            (i, p.partition_index): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if name is not None
            else ErrorCode.UNKNOWN_TOPIC_ID
            for i, (topic, name) in enumerate(named)
            for p in topic.partitions
            if name is None or self.topics.partition(name, p.partition_index) is None
        }
        error = ErrorCode.NONE
        if len(unknown) < sum(len(topic.partitions) for topic in request.topics):
            generation = request.generation_id_or_member_epoch
            instance_id = (  # v7+
                request.group_instance_id if hasattr(request, "group_instance_id") else None
            )
            error = self._commit_error(version, group, generation, request.member_id, instance_id)
        answered: list[OffsetCommitResponseTopic] = []
        for i, (topic, name) in enumerate(named):
            partitions: Sequence[OffsetCommitRequestPartition] = topic.partitions
            errors = [unknown.get((i, p.partition_index), error) for p in partitions]
            for partition, partition_error in zip(partitions, errors, strict=True):
                if partition_error is ErrorCode.NONE:
                    assert name is not None
                    epoch = (  # v6+
                        partition.committed_leader_epoch
                        if hasattr(partition, "committed_leader_epoch")
                        else -1
                    )
                    metadata = partition.committed_metadata
                    position = Committed(
                        partition.committed_offset, epoch, "" if metadata is None else metadata
                    )
                    self.offsets.commit(group, name, partition.partition_index, position)
            answered.append(
                {
                    "name": name or "",
                    "topic_id": topic.topic_id if hasattr(topic, "topic_id") else None,
                    "partitions": [
                        {"partition_index": p.partition_index, "error_code": e}
                        for p, e in zip(partitions, errors, strict=True)
                    ],
                }
            )
        return respond(request, topics=answered)

    def _commit_error(
        self, version: int, group: str, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        """A member of a group commits for its generation (its member epoch in a KIP-848
        group); assign() consumers with -1."""
        known = self.offsets.has_group(group)
        error = self.coordinator.commit_error(
            group, generation, member_id, instance_id, version=version, committed=known
        )
        nobody_knows = group not in self.coordinator.groups and not known
        if error is ErrorCode.ILLEGAL_GENERATION and nobody_knows and version >= 9:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return error

    def offset_fetch(
        self, header: RequestHeader, request: OffsetFetchRequest
    ) -> OffsetFetchResponse:
        version = header.api_version
        # KIP-447: a read_committed consumer asks not to be given an offset that an open
        # transaction may still change; such a partition answers UNSTABLE_OFFSET_COMMIT (v7+).
        stable = hasattr(request, "require_stable") and request.require_stable
        if hasattr(request, "groups"):  # v8+: groups of topics
            return respond(
                request,
                groups=[
                    self._fetched(version, group.group_id, group.topics, stable)
                    for group in request.groups
                ],
            )
        fetched = self._fetched(version, request.group_id, request.topics, stable)
        return respond(request, topics=fetched["topics"], error_code=ErrorCode.NONE)

    def _fetched(
        self,
        version: int,
        group: str,
        # (a union of the two sequences: mypy's hasattr narrows their items, not the
        # items of a union of two unions)
        topics: Sequence[OffsetFetchRequestTopic] | Sequence[OffsetFetchRequestTopics] | None,
        stable: bool = False,
    ) -> OffsetFetchResponseGroup:
        """One group's committed offsets: of the partitions asked for, or (``topics``
        null) of every partition it committed."""
        by_id = version >= _TOPIC_IDS
        answered: list[OffsetFetchResponseTopics] = []
        if topics is None:
            for name, indexes in self.offsets.partitions(group).items():
                topic_id = self.topics.topic_id(name) if by_id else None
                if by_id and topic_id is None:
                    continue  # the topic is gone: it has no id to be named by
                answered.append(self._positions(group, name, topic_id, indexes, stable))
        else:
            for topic in topics:
                topic_id = None
                if hasattr(topic, "topic_id"):  # v10 names topics by id
                    topic_id = topic.topic_id
                    asked = self._name(topic_id)
                else:
                    asked = topic.name
                answered.append(
                    self._positions(group, asked, topic_id, topic.partition_indexes, stable)
                )
        return {"group_id": group, "topics": answered, "error_code": ErrorCode.NONE}

    def _positions(
        self,
        group: str,
        name: str | None,
        topic_id: uuid.UUID | None,
        indexes: Iterable[int],
        stable: bool = False,
    ) -> OffsetFetchResponseTopics:
        partitions: list[OffsetFetchResponsePartitions] = []
        for index in indexes:
            unstable = stable and name is not None and self.offsets.has_pending(group, name, index)
            if name is None or unstable:  # an id nobody knows, or a transaction's offset
                partitions.append(
                    {
                        "partition_index": index,
                        "committed_offset": -1,
                        "committed_leader_epoch": -1,
                        "metadata": "",
                        "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT
                        if unstable
                        else ErrorCode.UNKNOWN_TOPIC_ID,
                    }
                )
                continue
            offset, epoch, metadata = self.offsets.position(group, name, index)
            partitions.append(
                {
                    "partition_index": index,
                    "committed_offset": offset,
                    "committed_leader_epoch": epoch,
                    "metadata": "" if metadata is None else metadata,
                    "error_code": ErrorCode.NONE,
                }
            )
        return {"name": name or "", "topic_id": topic_id, "partitions": partitions}

    def offset_delete(
        self, header: RequestHeader, request: OffsetDeleteRequest
    ) -> OffsetDeleteResponse:
        """OffsetDelete, as Kafka's broker answers it: an empty group id INVALID_GROUP_ID;
        a partition no topic has UNKNOWN_TOPIC_OR_PARTITION; the coordinator decides the
        rest (:meth:`GroupCoordinator.delete_offsets`), and an error of its for the whole
        request is answered alone."""
        if not request.group_id:
            return respond(request, error_code=ErrorCode.INVALID_GROUP_ID, topics=[])
        answers: dict[str, list[OffsetDeleteResponsePartition]] = {}
        known: dict[str, list[int]] = {}
        for topic in request.topics:
            for p in topic.partitions:
                index = p.partition_index
                if self.topics.partition(topic.name, index) is None:
                    answers.setdefault(topic.name, []).append(
                        {
                            "partition_index": index,
                            "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        }
                    )
                else:
                    known.setdefault(topic.name, []).append(index)
        decided = self.coordinator.delete_offsets(request.group_id, known, self.offsets)
        if isinstance(decided, ErrorCode):
            return respond(request, error_code=decided, topics=[])
        for topic_name, indexes in known.items():
            answers.setdefault(topic_name, []).extend(
                {"partition_index": index, "error_code": decided[topic_name]} for index in indexes
            )
        return respond(
            request,
            error_code=ErrorCode.NONE,
            topics=[{"name": name, "partitions": parts} for name, parts in answers.items()],
        )


UNIT: Final = SharedUnit(lambda s: OffsetHandlers(s.offsets, s.coordinator, s.cluster))
