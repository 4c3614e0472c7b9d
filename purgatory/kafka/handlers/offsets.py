"""OffsetCommit and OffsetFetch: what a consumer with a ``group.id`` commits and reads back,
kept in the :class:`~purgatory.kafka.coordinator.offsets.OffsetStore`. A member of a group
commits for its current generation, as the group coordinator checks.
"""

from __future__ import annotations

from typing import final

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.offsets import Committed, OffsetStore
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim.errors import ErrorCode


@final
class OffsetHandlers:
    """OffsetCommit 2-7 and OffsetFetch 1-5 over one store and one group coordinator."""

    def __init__(self, offsets: OffsetStore, coordinator: GroupCoordinator) -> None:
        self.offsets = offsets
        self.coordinator = coordinator

    def apis(self) -> ApiTable:
        return {
            ApiKey.OFFSET_COMMIT: Api(2, 7, self.offset_commit),
            ApiKey.OFFSET_FETCH: Api(1, 5, self.offset_fetch),
        }

    def offset_commit(self, header: RequestHeader, body: Reader) -> bytearray:
        version = header.api_version
        group = body.string()
        generation = body.int32()
        member_id = body.string()
        if version <= 4:
            body.int64()  # retention_time_ms
        if version >= 7:
            body.nullable_string()  # group_instance_id
        commits: list[tuple[str, int, Committed]] = []
        for _ in range(body.array_length()):
            topic = body.string()
            for _ in range(body.array_length()):
                index = body.int32()
                offset = body.int64()
                epoch = body.int32() if version >= 6 else -1
                commits.append((topic, index, Committed(offset, epoch, body.nullable_string())))
        # A member of a group commits for its generation; assign() consumers with -1.
        error = self.coordinator.commit_error(group, generation, member_id)
        out = Writer()
        if version >= 3:
            out.int32(0)  # throttle_time_ms
        by_topic: dict[str, list[int]] = {}
        for topic, index, position in commits:
            if error is ErrorCode.NONE:
                self.offsets.commit(group, topic, index, position)
            by_topic.setdefault(topic, []).append(index)
        out.int32(len(by_topic))
        for topic, indexes in by_topic.items():
            out.string(topic).int32(len(indexes))
            for index in indexes:
                out.int32(index).int16(error.wire)
        return out.buf

    def offset_fetch(self, header: RequestHeader, body: Reader) -> bytearray:
        version = header.api_version
        group = body.string()
        count = body.nullable_array_length()
        wanted: dict[str, list[int]] = {}
        if count is None:  # every partition the group committed
            wanted = self.offsets.partitions(group)
        else:
            for _ in range(count):
                topic = body.string()
                wanted[topic] = [body.int32() for _ in range(body.array_length())]
        out = Writer()
        if version >= 3:
            out.int32(0)  # throttle_time_ms
        out.int32(len(wanted))
        for topic, indexes in wanted.items():
            out.string(topic).int32(len(indexes))
            for index in indexes:
                offset, epoch, metadata = self.offsets.position(group, topic, index)
                out.int32(index).int64(offset)
                if version >= 5:
                    out.int32(epoch)
                out.string(metadata).int16(ErrorCode.NONE.wire)
        if version >= 2:
            out.int16(ErrorCode.NONE.wire)
        return out.buf
