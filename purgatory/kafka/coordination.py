"""What a consumer with a ``group.id`` and a producer with idempotence need besides the log
and group membership: FindCoordinator, OffsetCommit, OffsetFetch (committed offsets kept per
group; a group member commits for its current generation) and InitProducerId. One store
serves every broker, and every broker is a coordinator (the simulation has no internal
offsets topic to fail over).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Final, final

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.group_coordinator import GroupCoordinator
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.sim.errors import ErrorCode

VERSIONS: Final = {
    ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.OFFSET_COMMIT: (2, 7),
    ApiKey.OFFSET_FETCH: (1, 5),
    ApiKey.INIT_PRODUCER_ID: (0, 1),
}


@final
class GroupOffsets:
    """Committed offsets per (group, topic, partition), with their metadata strings, and
    the producer id sequence."""

    def __init__(self, members: GroupCoordinator) -> None:
        self.committed: dict[tuple[str, str, int], tuple[int, int, str | None]] = {}
        self.members = members
        self._producer_ids = itertools.count(1000)

    def find_coordinator(
        self, header: RequestHeader, body: Reader, locate: Callable[[str], tuple[int, str, int]]
    ) -> bytearray:
        """``locate(key)`` names the one broker that coordinates a group (or transactional
        id), whichever broker is asked: clients ask several and follow each answer."""
        key = body.string()
        if header.api_version >= 1:
            body.int8()  # key_type
        node_id, host, port = locate(key)
        out = Writer()
        if header.api_version >= 1:
            out.int32(0).int16(ErrorCode.NONE.wire).string(None)
        else:
            out.int16(ErrorCode.NONE.wire)
        return out.int32(node_id).string(host).int32(port).buf

    def offset_commit(self, header: RequestHeader, body: Reader) -> bytearray:
        version = header.api_version
        group = body.string()
        generation = body.int32()
        member_id = body.string()
        if version <= 4:
            body.int64()  # retention_time_ms
        if version >= 7:
            body.nullable_string()  # group_instance_id
        commits: list[tuple[str, int, int, int, str | None]] = []
        for _ in range(body.array_length()):
            topic = body.string()
            for _ in range(body.array_length()):
                index = body.int32()
                offset = body.int64()
                epoch = body.int32() if version >= 6 else -1
                commits.append((topic, index, offset, epoch, body.nullable_string()))
        # A member of a group commits for its generation; assign() consumers with -1.
        error = self.members.commit_error(group, generation, member_id)
        out = Writer()
        if version >= 3:
            out.int32(0)  # throttle_time_ms
        by_topic: dict[str, list[int]] = {}
        for topic, index, offset, epoch, metadata in commits:
            if error is ErrorCode.NONE:
                self.committed[group, topic, index] = (offset, epoch, metadata)
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
            for g, topic, index in self.committed:
                if g == group:
                    wanted.setdefault(topic, []).append(index)
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
                offset, epoch, metadata = self.committed.get((group, topic, index), (-1, -1, ""))
                out.int32(index).int64(offset)
                if version >= 5:
                    out.int32(epoch)
                out.string(metadata).int16(ErrorCode.NONE.wire)
        if version >= 2:
            out.int16(ErrorCode.NONE.wire)
        return out.buf

    def init_producer_id(self, header: RequestHeader, body: Reader) -> bytearray:
        body.nullable_string()  # transactional_id: transactions are not simulated
        body.int32()  # transaction_timeout_ms
        producer_id = next(self._producer_ids)
        return Writer().int32(0).int16(ErrorCode.NONE.wire).int64(producer_id).int16(0).buf
