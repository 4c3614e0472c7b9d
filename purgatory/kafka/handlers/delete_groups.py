"""DeleteGroups (API key 42, versions 0-2): an admin client's ``delete_consumer_groups``,
decided by the group coordinator as Kafka's does.

Each group is answered on its own, in request order (a name given twice is answered
once): a group with members, or rebalancing, NON_EMPTY_GROUP; a group nobody knows (no
members, no committed offsets) GROUP_ID_NOT_FOUND; otherwise the group goes, with its
committed offsets, NONE. Any broker takes it (one coordinator serves them all).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        DeleteGroupsDeletableGroupResult,
        DeleteGroupsRequest,
        DeleteGroupsResponse,
    )


@final
class DeleteGroupsHandlers:
    """DeleteGroups over the coordinator's groups and the committed ``offsets``."""

    def __init__(self, coordinator: GroupCoordinator, offsets: OffsetStore) -> None:
        self.coordinator = coordinator
        self.offsets = offsets

    def apis(self) -> ApiTable:
        return {ApiKey.DELETE_GROUPS: Api(*versions(ApiKey.DELETE_GROUPS), self.delete_groups)}

    def delete_groups(
        self, header: RequestHeader, request: DeleteGroupsRequest
    ) -> DeleteGroupsResponse:
        results: list[DeleteGroupsDeletableGroupResult] = [
            {"group_id": group_id, "error_code": self.coordinator.delete(group_id, self.offsets)}
            for group_id in dict.fromkeys(request.groups_names)
        ]
        return respond(request, results=results)


UNIT: Final = SharedUnit(lambda s: DeleteGroupsHandlers(s.coordinator, s.offsets))
