"""FindCoordinator and InitProducerId: which broker coordinates a group (or transactional
id), and a producer id for an idempotent producer. One state serves every broker, but each
key has one coordinator, whichever broker is asked: for a group, the leader of its
partition of ``__consumer_offsets`` (created at the first FindCoordinator, as Kafka does).

Idempotent producers are served (each partition's log checks their sequence numbers);
transactions are not: InitProducerId with a transactional id is answered INVALID_REQUEST
at once, so a transactional producer fails at its first call instead of retrying, and the
transaction APIs (AddPartitionsToTxn, EndTxn...) are not advertised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, final

from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim.errors import ErrorCode

#: ``locate(key)``: the (broker id, host, port) of the broker that coordinates ``key``,
#: None while no broker can (COORDINATOR_NOT_AVAILABLE)
Locate = Callable[[str], Awaitable[tuple[int, str, int] | None]]


@final
class CoordinatorHandlers:
    """FindCoordinator 0-6 (answered by ``locate``; v4+ asks for several keys at once)
    and InitProducerId 0-5."""

    def __init__(self, locate: Locate, producer_ids: ProducerIds) -> None:
        self.locate = locate
        self.producer_ids = producer_ids

    def apis(self) -> ApiTable:
        return {
            ApiKey.FIND_COORDINATOR: Api(*versions(ApiKey.FIND_COORDINATOR), self.find_coordinator),
            ApiKey.INIT_PRODUCER_ID: Api(*versions(ApiKey.INIT_PRODUCER_ID), self.init_producer_id),
        }

    def find_coordinator(self, header: RequestHeader, request: Any) -> Awaitable[Any]:
        """Clients ask several brokers and follow each answer, so the answer names the one
        coordinator of the key whichever broker is asked."""
        return self._find(header.api_version, request)

    async def _find(self, version: int, request: Any) -> Any:
        if version >= 4:
            found = [await self._found(key) for key in request.coordinator_keys]
            return respond(request, coordinators=found)
        return respond(request, **await self._found(request.key))

    async def _found(self, key: str) -> dict[str, Any]:
        located = await self.locate(key)
        if located is None:  # as Kafka answers it: no node
            return {
                "key": key,
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            }
        node_id, host, port = located
        return {
            "key": key,
            "node_id": node_id,
            "host": host,
            "port": port,
            "error_code": ErrorCode.NONE,
        }

    def init_producer_id(self, header: RequestHeader, request: Any) -> Any:
        """A fresh producer id at epoch 0 for an idempotent producer (no transactional
        id), as Kafka answers one; INVALID_REQUEST, id -1, for a transactional one."""
        if request.transactional_id is not None:
            return respond(
                request, error_code=ErrorCode.INVALID_REQUEST, producer_id=-1, producer_epoch=-1
            )
        return respond(request, producer_id=self.producer_ids.next(), producer_epoch=0)
