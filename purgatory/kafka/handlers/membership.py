"""JoinGroup 0-9, SyncGroup 0-5, Heartbeat 0-4 and LeaveGroup 0-5 on the wire (every
version Kafka 4.x has, the flexible ones included), answered by the
:class:`~purgatory.kafka.coordinator.group_coordinator.GroupCoordinator`.

As Kafka's broker answers them:

* JoinGroup v4+ answers a dynamic member's first join (no member id) MEMBER_ID_REQUIRED
  with its id (KIP-394); v7+ names the protocol type as well as the protocol chosen (null
  on an error); v8's ``reason`` is taken and not kept; v9's ``skip_assignment`` is true
  only for a static leader that rejoined a Stable group (KIP-814).
* SyncGroup v5+ checks the protocol type and name the member gives (INCONSISTENT_GROUP_PROTOCOL
  if they are not the group's) and answers them.
* LeaveGroup v3+ lets several members leave at once, each with its own answer, named by
  member id or (static members) by group instance id; a group the coordinator does not
  know (or a consumer group) is answered UNKNOWN_MEMBER_ID at the top.

Static membership (KIP-345): the ``group_instance_id`` of JoinGroup v5+, SyncGroup v3+,
Heartbeat v3+ and LeaveGroup v3+ is checked against the member id that holds it now
(FENCED_INSTANCE_ID for an older one), and the leader sees each member's instance id.

JoinGroup and SyncGroup may park until the rebalance gets that far; the connection server
keeps the answers of a connection in request order meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeVar, final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.groups import JoinResult, SyncResult
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import millis, respond, versions
from purgatory.kafka.server import Api, ApiTable

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )

T = TypeVar("T")
R = TypeVar("R")


@final
class MembershipHandlers:
    """The four group membership handlers over one coordinator."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    def apis(self) -> ApiTable:
        return {
            ApiKey.JOIN_GROUP: Api(*versions(ApiKey.JOIN_GROUP), self.join_group),
            ApiKey.SYNC_GROUP: Api(*versions(ApiKey.SYNC_GROUP), self.sync_group),
            ApiKey.HEARTBEAT: Api(*versions(ApiKey.HEARTBEAT), self.heartbeat),
            ApiKey.LEAVE_GROUP: Api(*versions(ApiKey.LEAVE_GROUP), self.leave_group),
        }

    def join_group(
        self, header: RequestHeader, request: JoinGroupRequest
    ) -> JoinGroupResponse | Awaitable[JoinGroupResponse]:
        session_timeout_ms = millis(request.session_timeout)
        # v0 has no rebalance timeout: Kafka uses the session timeout for both
        rebalance_timeout_ms = (
            millis(request.rebalance_timeout)
            if hasattr(request, "rebalance_timeout")
            else session_timeout_ms
        )
        answer = self.coordinator.join(
            request.group_id,
            request.member_id,
            header.client_id or "",
            session_timeout_ms,
            rebalance_timeout_ms,
            request.protocol_type,
            [(protocol.name, protocol.metadata) for protocol in request.protocols],
            require_known_id=header.api_version >= 4,
            instance_id=(  # v5+
                request.group_instance_id if hasattr(request, "group_instance_id") else None
            ),
            skip_assignment=header.api_version >= 9,
        )
        if isinstance(answer, JoinResult):
            return self._joined(request, answer)
        return _later(answer, lambda result: self._joined(request, result))

    def _joined(self, request: JoinGroupRequest, result: JoinResult) -> JoinGroupResponse:
        ok = result.error is ErrorCode.NONE
        group = self.coordinator.classic_group(request.group_id)
        return respond(
            request,
            error_code=result.error,
            generation_id=result.generation,
            # null on an error (v7+; the versions before have "" there)
            protocol_type=group.protocol_type if ok and group is not None else None,
            protocol_name=result.protocol if ok else None,
            leader=result.leader,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=[
                {"member_id": member_id, "group_instance_id": instance_id, "metadata": metadata}
                for member_id, instance_id, metadata in result.members
            ],
        )

    def sync_group(
        self, header: RequestHeader, request: SyncGroupRequest
    ) -> SyncGroupResponse | Awaitable[SyncGroupResponse]:
        assignments = {a.member_id: a.assignment for a in request.assignments}
        answer = self.coordinator.sync(
            request.group_id,
            request.generation_id,
            request.member_id,
            assignments,
            # v5+
            protocol_type=request.protocol_type if hasattr(request, "protocol_type") else None,
            protocol=request.protocol_name if hasattr(request, "protocol_name") else None,
            # v3+
            instance_id=(
                request.group_instance_id if hasattr(request, "group_instance_id") else None
            ),
        )
        # What a successful answer names (v5+): the generation's, known by now if the
        # member may sync at all; a later rebalance answers this one with an error.
        group = self.coordinator.classic_group(request.group_id)
        chosen = (None, None) if group is None else (group.protocol_type, group.protocol)
        if isinstance(answer, tuple):
            return _synced(request, answer, chosen)
        return _later(answer, lambda result: _synced(request, result, chosen))

    def heartbeat(self, header: RequestHeader, request: HeartbeatRequest) -> HeartbeatResponse:
        error = self.coordinator.heartbeat(
            request.group_id,
            request.generation_id,
            request.member_id,
            # v3+
            request.group_instance_id if hasattr(request, "group_instance_id") else None,
        )
        return respond(request, error_code=error)

    def leave_group(self, header: RequestHeader, request: LeaveGroupRequest) -> LeaveGroupResponse:
        if not hasattr(request, "members"):  # v0-2: one member
            [error] = self.coordinator.leave(request.group_id, [request.member_id])
            return respond(request, error_code=error)
        if self.coordinator.classic_group(request.group_id) is None:
            return respond(request, error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        errors = self.coordinator.leave(
            request.group_id,
            [m.member_id for m in request.members],
            [m.group_instance_id for m in request.members],
        )
        return respond(
            request,
            error_code=ErrorCode.NONE,
            members=[
                {
                    "member_id": member.member_id,
                    "group_instance_id": member.group_instance_id,
                    "error_code": error,
                }
                for member, error in zip(request.members, errors, strict=True)
            ],
        )


async def _later(future: asyncio.Future[T], answer: Callable[[T], R]) -> R:
    return answer(await future)


def _synced(
    request: SyncGroupRequest, result: SyncResult, chosen: tuple[str | None, str | None]
) -> SyncGroupResponse:
    error, assignment = result
    protocol_type, protocol = chosen if error is ErrorCode.NONE else (None, None)
    return respond(
        request,
        error_code=error,
        protocol_type=protocol_type,
        protocol_name=protocol,
        assignment=assignment,
    )


UNIT: Final = SharedUnit(lambda s: MembershipHandlers(s.coordinator))
