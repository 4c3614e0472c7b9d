"""Share groups of KIP-932 (Kafka 4.2's queues): ShareGroupHeartbeat and
ShareGroupDescribe, and the admin's DescribeShareGroupOffsets, AlterShareGroupOffsets and
DeleteShareGroupOffsets, answered by the
:class:`~purgatory.kafka.coordinator.group_coordinator.GroupCoordinator` (its share
groups), and ShareFetch and ShareAcknowledge, answered by broker ``broker_id`` for the
partitions it leads from the :class:`~purgatory.kafka.coordinator.share_partitions.SharePartitions`.
Every version kio has; partitions are named by topic id, as in Kafka.

A ShareFetch opens (epoch 0), continues (the session's next epoch) or closes (-1) its
member's share session; its acknowledgements are applied first, then it acquires up to
``max_records`` records (whole batches) across the session's partitions, or parks in the
``ShareFetch`` purgatory for ``max_wait_ms``. ``min_bytes`` is taken as "any record",
``max_bytes`` is not held to (the batches acquired are sent whole).

The admin's three read and set the share-partitions' start offsets as Kafka's group
coordinator does: a partition the group has no state for is described at start offset -1;
altering (a start per partition) and deleting (whole topics: the next fetch starts where
``share.auto.offset.reset`` says) need the group to exist, be a share group and be empty
(``GROUP_ID_NOT_FOUND``, ``NON_EMPTY_GROUP`` for the whole request).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Final, TypeAlias, final, overload

from purgatory import OperationCancelled
from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.share import ShareHeartbeatRequest
from purgatory.kafka.coordinator.share_partitions import SharePartitions
from purgatory.kafka.coordinator.share_records import (
    FINAL,
    Acknowledgement,
    PartitionFetch,
    ShareSession,
    TopicPartition,
)
from purgatory.kafka.handlers.leadership import leads
from purgatory.kafka.handlers.member_assignments import (
    NO_AUTHORIZED_OPERATIONS,
    group_not_found,
    heartbeat_fields,
    named_assignment,
)
from purgatory.kafka.handlers.units import ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.record_batches import records_section
from purgatory.kafka.schemas import millis, respond, versions
from purgatory.kafka.server import Api, ApiTable, Handler
from purgatory.sim import Cluster

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsResponse,
        AlterShareGroupOffsetsResponsePartition,
        AlterShareGroupOffsetsResponseTopic,
        DeleteShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsResponse,
        DeleteShareGroupOffsetsResponseTopic,
        DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequestGroup,
        DescribeShareGroupOffsetsResponse,
        DescribeShareGroupOffsetsResponseGroup,
        DescribeShareGroupOffsetsResponsePartition,
        DescribeShareGroupOffsetsResponseTopic,
        ShareAcknowledgeAcknowledgeTopic,
        ShareAcknowledgePartitionData,
        ShareAcknowledgeRequest,
        ShareAcknowledgeResponse,
        ShareFetchFetchTopic,
        ShareFetchLeaderIdAndEpoch,
        ShareFetchNodeEndpoint,
        ShareFetchPartitionData,
        ShareFetchRequest,
        ShareFetchResponse,
        ShareGroupDescribeDescribedGroup,
        ShareGroupDescribeRequest,
        ShareGroupDescribeResponse,
        ShareGroupHeartbeatRequest,
        ShareGroupHeartbeatResponse,
    )

    #: a partition as ShareFetch and ShareAcknowledge name it: by its topic's id (None:
    #: the zero id, as kio reads it) and index
    Named: TypeAlias = tuple[uuid.UUID | None, int]
    #: each acknowledged partition's error and its message
    Acks: TypeAlias = dict[Named, tuple[ErrorCode, str | None]]

#: Kafka's message for UNKNOWN_TOPIC_OR_PARTITION
_UNKNOWN_TOPIC_OR_PARTITION: Final = "This server does not host this topic-partition."


@final
class ShareGroupHandlers:
    """The four share-group APIs as broker ``broker_id`` answers them; ``addresses`` maps
    each broker id to the (host, port) it is advertised at."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        shares: SharePartitions,
        cluster: Cluster,
        broker_id: int,
        addresses: dict[int, tuple[str, int]],
    ) -> None:
        self.coordinator = coordinator
        self.shares = shares
        self.cluster = cluster
        self.broker_id = broker_id
        self.addresses = addresses

    def apis(self) -> ApiTable:
        handlers: list[tuple[ApiKey, Handler]] = [
            (ApiKey.SHARE_GROUP_HEARTBEAT, self.share_group_heartbeat),
            (ApiKey.SHARE_GROUP_DESCRIBE, self.share_group_describe),
            (ApiKey.SHARE_FETCH, self.share_fetch),
            (ApiKey.SHARE_ACKNOWLEDGE, self.share_acknowledge),
            (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, self.describe_share_group_offsets),
            (ApiKey.ALTER_SHARE_GROUP_OFFSETS, self.alter_share_group_offsets),
            (ApiKey.DELETE_SHARE_GROUP_OFFSETS, self.delete_share_group_offsets),
        ]
        return {key: Api(*versions(key), handler) for key, handler in handlers}

    # -- the group ---------------------------------------------------------------------------

    def share_group_heartbeat(
        self, header: RequestHeader, request: ShareGroupHeartbeatRequest
    ) -> ShareGroupHeartbeatResponse:
        result = self.coordinator.share_heartbeat(
            ShareHeartbeatRequest(
                request.group_id,
                request.member_id,
                request.member_epoch,
                header.client_id or "",
                rack_id=request.rack_id,
                topics=request.subscribed_topic_names,
            )
        )
        interval = self.coordinator.share.heartbeat_interval(request.group_id)
        return respond(request, **heartbeat_fields(result, interval))

    def share_group_describe(
        self, header: RequestHeader, request: ShareGroupDescribeRequest
    ) -> ShareGroupDescribeResponse:
        described: list[ShareGroupDescribeDescribedGroup] = []
        for name in request.group_ids:
            group = self.coordinator.share_group(name)
            if group is None:
                exists = name in self.coordinator.groups
                described.append({**group_not_found(name, "share", exists)})
                continue
            described.append(
                {
                    "group_id": name,
                    "error_code": ErrorCode.NONE,
                    "group_state": group.state(),
                    "group_epoch": group.epoch,
                    "assignment_epoch": group.assignment_epoch,
                    "assignor_name": "simple",
                    "authorized_operations": NO_AUTHORIZED_OPERATIONS,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "rack_id": m.rack_id,
                            "member_epoch": m.epoch,
                            "client_id": m.client_id,
                            "client_host": "",
                            "subscribed_topic_names": list(m.topics),
                            "assignment": named_assignment(self.cluster, m.assigned),
                        }
                        for m in group.members.values()
                    ],
                }
            )
        return respond(request, groups=described)

    # -- the admin's offsets -----------------------------------------------------------------

    def describe_share_group_offsets(
        self, header: RequestHeader, request: DescribeShareGroupOffsetsRequest
    ) -> DescribeShareGroupOffsetsResponse:
        """Each group's share-partition start offsets (and, v1, lags), as Kafka's
        coordinator reads them from the share-group state: a partition without state (an
        unknown topic or group included: Kafka does not look the group up) at -1; topics
        null asks for every partition the group has state for."""
        return respond(request, groups=[self._offsets_of(group) for group in request.groups])

    def _offsets_of(
        self, group: DescribeShareGroupOffsetsRequestGroup
    ) -> DescribeShareGroupOffsetsResponseGroup:
        name = group.group_id
        asked: dict[str, list[int]] = {}
        if group.topics is None:
            for topic, index in self.shares.initialized(name):
                asked.setdefault(topic, []).append(index)
        else:
            for wanted in group.topics:
                asked.setdefault(wanted.topic_name, []).extend(int(i) for i in wanted.partitions)
        topics: list[DescribeShareGroupOffsetsResponseTopic] = []
        for topic, indexes in asked.items():
            topic_id = self.cluster.topic_id(topic)
            partitions: list[DescribeShareGroupOffsetsResponsePartition] = []
            for index in indexes:
                state = self.shares.start_and_lag(name, topic, index) if topic_id else None
                p = self.cluster.partition(topic, index)
                partitions.append(
                    {
                        "partition_index": index,
                        "start_offset": -1 if state is None else state[0],
                        "leader_epoch": 0 if state is None or p is None else p.leader_epoch,
                        "lag": -1 if state is None else state[1],
                        "error_code": ErrorCode.NONE,
                    }
                )
            topics.append({"topic_name": topic, "topic_id": topic_id, "partitions": partitions})
        return {"group_id": name, "error_code": ErrorCode.NONE, "topics": topics}

    def _empty_share_group(self, name: str) -> tuple[ErrorCode, str | None]:
        """Whether AlterShareGroupOffsets and DeleteShareGroupOffsets may change the
        group: it exists, is a share group and has no members."""
        if not name:
            return ErrorCode.INVALID_GROUP_ID, None
        group = self.coordinator.share_group(name)
        if group is None:
            if name in self.coordinator.groups:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {name} is not a share group."
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {name} not found."
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
        return ErrorCode.NONE, None

    def alter_share_group_offsets(
        self, header: RequestHeader, request: AlterShareGroupOffsetsRequest
    ) -> AlterShareGroupOffsetsResponse:
        """Set the start offset of each partition named, in an empty share group: what
        was in flight is dropped. A topic that does not exist, or a partition past its
        count, is UNKNOWN_TOPIC_OR_PARTITION."""
        error, message = self._empty_share_group(request.group_id)
        if error is not ErrorCode.NONE:
            return respond(request, error_code=error, error_message=message, responses=[])
        responses: list[AlterShareGroupOffsetsResponseTopic] = []
        for topic in request.topics:
            topic_id = self.cluster.topic_id(topic.topic_name)
            count = len(self.cluster.topics.get(topic.topic_name, ())) if topic_id else 0
            partitions: list[AlterShareGroupOffsetsResponsePartition] = []
            for part in topic.partitions:
                index = int(part.partition_index)
                if 0 <= index < count:
                    self.shares.alter_start(
                        request.group_id, topic.topic_name, index, int(part.start_offset)
                    )
                    partitions.append({"partition_index": index, "error_code": ErrorCode.NONE})
                else:
                    partitions.append(
                        {
                            "partition_index": index,
                            "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            "error_message": _UNKNOWN_TOPIC_OR_PARTITION,
                        }
                    )
            responses.append(
                {"topic_name": topic.topic_name, "topic_id": topic_id, "partitions": partitions}
            )
        return respond(request, error_code=ErrorCode.NONE, responses=responses)

    def delete_share_group_offsets(
        self, header: RequestHeader, request: DeleteShareGroupOffsetsRequest
    ) -> DeleteShareGroupOffsetsResponse:
        """Forget an empty share group's state for whole topics: the next fetch starts
        where ``share.auto.offset.reset`` says. A topic that does not exist, or that the
        group has no state for, is UNKNOWN_TOPIC_OR_PARTITION."""
        error, message = self._empty_share_group(request.group_id)
        if error is not ErrorCode.NONE:
            return respond(request, error_code=error, error_message=message, responses=[])
        responses: list[DeleteShareGroupOffsetsResponseTopic] = []
        for topic in request.topics:
            name = topic.topic_name
            topic_id = self.cluster.topic_id(name)
            entry: DeleteShareGroupOffsetsResponseTopic = {
                "topic_name": name,
                "error_code": ErrorCode.NONE,
            }
            if topic_id is None:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                entry["error_message"] = _UNKNOWN_TOPIC_OR_PARTITION
            elif not self.shares.forget(request.group_id, name):
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                entry["error_message"] = "There is no offset information to delete."
            else:
                entry["topic_id"] = topic_id
            responses.append(entry)
        return respond(request, error_code=ErrorCode.NONE, responses=responses)

    # -- the records -------------------------------------------------------------------------

    def _session(
        self, request: ShareFetchRequest | ShareAcknowledgeRequest, *, acknowledge: bool
    ) -> tuple[ErrorCode, ShareSession | None, str]:
        if not request.group_id or not request.member_id:
            return ErrorCode.INVALID_REQUEST, None, "GroupId and MemberId must be given."
        error, session = self.shares.session(
            self.broker_id,
            request.group_id,
            request.member_id,
            int(request.share_session_epoch),
            acknowledge=acknowledge,
        )
        return error, session, ""

    def _acknowledge(
        self,
        session: ShareSession,
        topics: Sequence[ShareFetchFetchTopic] | Sequence[ShareAcknowledgeAcknowledgeTopic],
    ) -> Acks:
        """Apply every acknowledgement of the request of ``session``'s member; each
        partition's error."""
        out: Acks = {}
        for topic in topics:
            name = self.cluster.topic_name(topic.topic_id) if topic.topic_id else None
            for part in topic.partitions:
                batches = part.acknowledgement_batches
                if not batches:
                    continue
                key = (topic.topic_id, int(part.partition_index))
                if name is None:
                    out[key] = (ErrorCode.UNKNOWN_TOPIC_ID, None)
                    continue
                error, _ = leads(self.cluster, self.broker_id, name, key[1])
                if error is ErrorCode.NONE:
                    error = self.shares.acknowledge(
                        session.group_id,
                        session.member_id,
                        name,
                        key[1],
                        [
                            Acknowledgement(
                                int(b.first_offset),
                                int(b.last_offset),
                                tuple(int(t) for t in b.acknowledge_types),
                            )
                            for b in batches
                        ],
                    )
                message = None
                if error is ErrorCode.INVALID_RECORD_STATE:
                    message = "The record state is invalid. The acknowledgement is rejected."
                out[key] = (error, message)
        return out

    async def _durable(self, group_id: str, acks: Acks) -> None:
        """Wait until the acknowledgements applied are written to ``__share_group_state``;
        a partition whose write failed answers its error."""
        applied = {
            key: name
            for key, (error, _) in acks.items()
            if error is ErrorCode.NONE
            and key[0] is not None
            and (name := self.cluster.topic_name(key[0])) is not None
        }
        written = await self.shares.written(
            group_id, [(name, key[1]) for key, name in applied.items()]
        )
        for key, name in applied.items():
            error = written.get((name, key[1]), ErrorCode.NONE)
            if error is not ErrorCode.NONE:
                acks[key] = (error, None)

    def _leader(self, error: ErrorCode, name: str | None, index: int) -> ShareFetchLeaderIdAndEpoch:
        if error is ErrorCode.NOT_LEADER_OR_FOLLOWER and name is not None:
            _, p = leads(self.cluster, self.broker_id, name, index)
            if p is not None and p.leader is not None:
                return {"leader_id": p.leader, "leader_epoch": p.leader_epoch}
        return {"leader_id": -1, "leader_epoch": -1}

    def _endpoints(self, leaders: set[int]) -> list[ShareFetchNodeEndpoint]:
        return [
            {"node_id": b, "host": self.addresses[b][0], "port": self.addresses[b][1]}
            for b in sorted(leaders)
            if b in self.addresses
        ]

    def share_fetch(
        self, header: RequestHeader, request: ShareFetchRequest
    ) -> Awaitable[ShareFetchResponse] | ShareFetchResponse:
        error, session, message = self._session(request, acknowledge=False)
        if session is None:
            return _refused(request, error, message)
        epoch = int(request.share_session_epoch)
        acks = self._acknowledge(session, request.topics)
        names: dict[uuid.UUID | None, str | None] = {}
        for forgotten in request.forgotten_topics_data:
            name = self.cluster.topic_name(forgotten.topic_id) if forgotten.topic_id else None
            for dropped in forgotten.partitions:
                if name is not None:
                    session.partitions.pop((name, int(dropped)), None)
        asked: list[Named] = []
        for topic in request.topics:
            topic_id = topic.topic_id
            name = names.setdefault(
                topic_id, self.cluster.topic_name(topic_id) if topic_id else None
            )
            for part in topic.partitions:
                asked.append((topic_id, int(part.partition_index)))
                if name is not None and topic_id is not None and epoch != FINAL:
                    session.partitions[(name, int(part.partition_index))] = None
                    session.topic_ids[name] = topic_id
        if epoch == FINAL:
            self.shares.close_session(session)
            return self._fetch(request, session, acks, asked, [], {})
        self.shares.next_epoch(session)
        errors: dict[TopicPartition, ErrorCode] = {}
        wanted: list[TopicPartition] = []
        for held, index in list(session.partitions):
            named = session.topic_ids.get(held)
            if named is not None and named != self.cluster.topic_id(held):
                # made again under its name: another topic, UNKNOWN_TOPIC_ID to this session
                del session.partitions[(held, index)]
                asked.append((named, index))
                continue
            error, _ = leads(self.cluster, self.broker_id, held, index)
            if error is ErrorCode.NONE:
                wanted.append((held, index))
            else:
                errors[(held, index)] = error
        return self._fetch(request, session, acks, asked, wanted, errors)

    async def _fetch(
        self,
        request: ShareFetchRequest,
        session: ShareSession,
        acks: Acks,
        asked: list[Named],
        wanted: list[TopicPartition],
        errors: dict[TopicPartition, ErrorCode],
    ) -> ShareFetchResponse:
        await self._durable(session.group_id, acks)
        if not wanted and not errors:  # the session's last request: nothing to fetch
            return self._fetch_answer(request, acks, asked, {}, {})
        wait_ms = max(millis(request.max_wait), 0)
        max_records = int(request.max_records) or 500
        try:
            fetched = await self.shares.fetch(
                session.group_id, session.member_id, wanted, max_records, wait_ms
            )
        except OperationCancelled:  # the front door is closing
            fetched = {}
        return self._fetch_answer(request, acks, asked, fetched, errors)

    def _fetch_answer(
        self,
        request: ShareFetchRequest,
        acks: Acks,
        asked: list[Named],
        fetched: dict[TopicPartition, PartitionFetch],
        errors: dict[TopicPartition, ErrorCode],
    ) -> ShareFetchResponse:
        now_ms = int(time.time() * 1000)
        by_topic: dict[uuid.UUID | None, dict[int, ShareFetchPartitionData]] = {}
        leaders: set[int] = set()

        def entry(
            topic_id: uuid.UUID | None, name: str | None, index: int
        ) -> ShareFetchPartitionData:
            parts = by_topic.setdefault(topic_id, {})
            if index not in parts:
                error = ErrorCode.NONE
                if name is None:
                    error = ErrorCode.UNKNOWN_TOPIC_ID
                elif (name, index) in errors:
                    error = errors[(name, index)]
                elif (name, index) in fetched:
                    error = fetched[(name, index)].error
                leader = self._leader(error, name, index)
                if leader["leader_id"] >= 0:
                    leaders.add(leader["leader_id"])
                ack_error, ack_message = acks.get((topic_id, index), (ErrorCode.NONE, None))
                parts[index] = {
                    "partition_index": index,
                    "error_code": error,
                    "acknowledge_error_code": ack_error.number,
                    "acknowledge_error_message": ack_message,
                    "current_leader": leader,
                    "records": b"",
                    "acquired_records": [],
                }
            return parts[index]

        for topic_id, index in [*acks, *asked]:
            entry(topic_id, self.cluster.topic_name(topic_id) if topic_id else None, index)
        for (name, index), result in fetched.items():
            fetched_id = self.cluster.topic_id(name)
            if fetched_id is None or (not result.acquired and result.error is ErrorCode.NONE):
                continue
            answer = entry(fetched_id, name, index)
            if result.acquired:
                first = result.acquired[0].first
                section, _ = records_section(
                    list(result.batches), first, result.readable_end, now_ms
                )
                answer["records"] = section
                answer["acquired_records"] = [
                    {
                        "first_offset": a.first,
                        "last_offset": a.last,
                        "delivery_count": a.delivery_count,
                    }
                    for a in result.acquired
                ]
        for name, index in errors:
            failed_id = self.cluster.topic_id(name)
            if failed_id is not None:
                entry(failed_id, name, index)
        return respond(
            request,
            error_code=ErrorCode.NONE,
            acquisition_lock_timeout=self.shares.config.lock_duration_ms,
            responses=[
                {"topic_id": topic_id, "partitions": list(parts.values())}
                for topic_id, parts in by_topic.items()
            ],
            node_endpoints=self._endpoints(leaders),
        )

    def share_acknowledge(
        self, header: RequestHeader, request: ShareAcknowledgeRequest
    ) -> Awaitable[ShareAcknowledgeResponse] | ShareAcknowledgeResponse:
        error, session, message = self._session(request, acknowledge=True)
        if session is None:
            return _refused(request, error, message)
        acks = self._acknowledge(session, request.topics)
        if int(request.share_session_epoch) == FINAL:
            self.shares.close_session(session)
        else:
            self.shares.next_epoch(session)
        return self._acknowledged(request, session.group_id, acks)

    async def _acknowledged(
        self, request: ShareAcknowledgeRequest, group_id: str, acks: Acks
    ) -> ShareAcknowledgeResponse:
        await self._durable(group_id, acks)
        by_topic: dict[uuid.UUID | None, list[ShareAcknowledgePartitionData]] = {}
        leaders: set[int] = set()
        for (topic_id, index), (ack_error, ack_message) in acks.items():
            name = self.cluster.topic_name(topic_id) if topic_id else None
            leader = self._leader(ack_error, name, index)
            if leader["leader_id"] >= 0:
                leaders.add(leader["leader_id"])
            by_topic.setdefault(topic_id, []).append(
                {
                    "partition_index": index,
                    "error_code": ack_error,
                    "error_message": ack_message,
                    "current_leader": leader,
                }
            )
        return respond(
            request,
            error_code=ErrorCode.NONE,
            acquisition_lock_timeout=self.shares.config.lock_duration_ms,
            responses=[
                {"topic_id": topic_id, "partitions": parts} for topic_id, parts in by_topic.items()
            ],
            node_endpoints=self._endpoints(leaders),
        )


@overload
def _refused(request: ShareFetchRequest, error: ErrorCode, message: str) -> ShareFetchResponse: ...


@overload
def _refused(
    request: ShareAcknowledgeRequest, error: ErrorCode, message: str
) -> ShareAcknowledgeResponse: ...


def _refused(
    request: ShareFetchRequest | ShareAcknowledgeRequest, error: ErrorCode, message: str
) -> ShareFetchResponse | ShareAcknowledgeResponse:
    return respond(
        request,
        error_code=error,
        error_message=message or None,
        acquisition_lock_timeout=0,
        responses=[],
        node_endpoints=[],
    )


UNIT: Final = ListenerUnit(
    lambda c: ShareGroupHandlers(
        c.shared.coordinator, c.shared.shares, c.shared.cluster, c.broker_id, c.addresses
    )
)
