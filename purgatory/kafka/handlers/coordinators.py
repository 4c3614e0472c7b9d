"""FindCoordinator and InitProducerId: which broker coordinates a group (or transactional
id), and a producer id for an idempotent producer. Every broker is a coordinator here (one
state serves them all), but each key has one, whichever broker is asked.

Idempotent producers are served (each partition's log checks their sequence numbers);
transactions are not: InitProducerId with a transactional id is answered INVALID_REQUEST
at once, so a transactional producer fails at its first call instead of retrying, and the
transaction APIs (AddPartitionsToTxn, EndTxn...) are not advertised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, final

from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim.errors import ErrorCode

#: ``locate(key)``: the (broker id, host, port) of the broker that coordinates ``key``
Locate = Callable[[str], tuple[int, str, int]]


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

    def find_coordinator(self, header: RequestHeader, request: Any) -> Any:
        """Clients ask several brokers and follow each answer, so the answer names the one
        coordinator of the key whichever broker is asked."""
        if header.api_version >= 4:
            found = [self._found(key) for key in request.coordinator_keys]
            return respond(request, coordinators=found)
        return respond(request, **self._found(request.key))

    def _found(self, key: str) -> dict[str, Any]:
        node_id, host, port = self.locate(key)
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
