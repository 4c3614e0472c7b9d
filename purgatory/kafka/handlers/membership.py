"""JoinGroup 0-5, SyncGroup 0-3, Heartbeat 0-3 and LeaveGroup 0-3 on the wire (the
non-flexible versions), answered by the
:class:`~purgatory.kafka.coordinator.group_coordinator.GroupCoordinator`.

JoinGroup and SyncGroup may park until the rebalance gets that far; the connection server
keeps the answers of a connection in request order meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar, final

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import JoinResult, SyncResult
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim.errors import ErrorCode

T = TypeVar("T")


@final
class MembershipHandlers:
    """The four group membership handlers over one coordinator."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    def apis(self) -> ApiTable:
        return {
            ApiKey.JOIN_GROUP: Api(0, 5, self.join_group),
            ApiKey.SYNC_GROUP: Api(0, 3, self.sync_group),
            ApiKey.HEARTBEAT: Api(0, 3, self.heartbeat),
            ApiKey.LEAVE_GROUP: Api(0, 3, self.leave_group),
        }

    def join_group(self, header: RequestHeader, body: Reader) -> bytearray | Awaitable[bytearray]:
        version = header.api_version
        group_id = body.string()
        session_timeout_ms = body.int32()
        # v0 has no rebalance timeout: Kafka uses the session timeout for both
        rebalance_timeout_ms = body.int32() if version >= 1 else session_timeout_ms
        member_id = body.string()
        if version >= 5:
            body.nullable_string()  # group_instance_id: static membership is not kept
        protocol_type = body.string()
        protocols = [
            (body.string(), bytes(body.nullable_bytes() or b"")) for _ in range(body.array_length())
        ]
        answer = self.coordinator.join(
            group_id,
            member_id,
            header.client_id or "",
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            require_known_id=version >= 4,
        )
        if isinstance(answer, JoinResult):
            return _encode_join(version, answer)
        return _later(answer, lambda result: _encode_join(version, result))

    def sync_group(self, header: RequestHeader, body: Reader) -> bytearray | Awaitable[bytearray]:
        version = header.api_version
        group_id = body.string()
        generation = body.int32()
        member_id = body.string()
        if version >= 3:
            body.nullable_string()  # group_instance_id
        assignments = {}
        for _ in range(body.array_length()):
            member = body.string()  # read before the value: `d[k()] = v()` calls v first
            assignments[member] = bytes(body.nullable_bytes() or b"")
        answer = self.coordinator.sync(group_id, generation, member_id, assignments)
        if isinstance(answer, tuple):
            return _encode_sync(version, answer)
        return _later(answer, lambda result: _encode_sync(version, result))

    def heartbeat(self, header: RequestHeader, body: Reader) -> bytearray:
        group_id = body.string()
        generation = body.int32()
        member_id = body.string()
        if header.api_version >= 3:
            body.nullable_string()  # group_instance_id
        error = self.coordinator.heartbeat(group_id, generation, member_id)
        return _throttle(header.api_version).int16(error.wire).buf

    def leave_group(self, header: RequestHeader, body: Reader) -> bytearray:
        version = header.api_version
        group_id = body.string()
        if version <= 2:
            [error] = self.coordinator.leave(group_id, [body.string()])
            return _throttle(version).int16(error.wire).buf
        members: list[tuple[str, str | None]] = []
        for _ in range(body.array_length()):
            members.append((body.string(), body.nullable_string()))
        errors = self.coordinator.leave(group_id, [member_id for member_id, _ in members])
        out = _throttle(version).int16(ErrorCode.NONE.wire).int32(len(members))
        for (member_id, instance_id), error in zip(members, errors, strict=True):
            out.string(member_id).string(instance_id).int16(error.wire)
        return out.buf


def _throttle(version: int) -> Writer:
    """Every response here starts with throttle_time_ms from v1 on (JoinGroup: v2)."""
    return Writer().int32(0) if version >= 1 else Writer()


async def _later(future: asyncio.Future[T], encode: Callable[[T], bytearray]) -> bytearray:
    return encode(await future)


def _encode_join(version: int, result: JoinResult) -> bytearray:
    out = Writer().int32(0) if version >= 2 else Writer()
    out.int16(result.error.wire).int32(result.generation).string(result.protocol)
    out.string(result.leader).string(result.member_id).int32(len(result.members))
    for member_id, metadata in result.members:
        out.string(member_id)
        if version >= 5:
            out.string(None)  # group_instance_id
        out.nullable_bytes(metadata)
    return out.buf


def _encode_sync(version: int, result: SyncResult) -> bytearray:
    error, assignment = result
    return _throttle(version).int16(error.wire).nullable_bytes(assignment).buf
