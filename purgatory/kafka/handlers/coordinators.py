"""FindCoordinator: which broker coordinates a group (key type 0) or a transactional id
(key type 1). Every broker answers for every key, and each key has one coordinator
whichever broker is asked, named at the asking listener's addresses (plaintext or SASL).

A group's coordinator is the leader of its partition of ``__consumer_offsets``, a
transactional id's the leader of its partition of ``__transaction_state``, as in Kafka;
each topic is created by the first FindCoordinator for its key type, and while the
partition has no live leader (or the topic cannot be created) the answer is
COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.transactions import TransactionCoordinators
from purgatory.kafka.handlers.units import ListenerUnit, Locate
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        FindCoordinatorCoordinator,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
    )

#: FindCoordinator's key types (Kafka's CoordinatorType)
GROUP: Final = 0
TRANSACTION: Final = 1


@final
class CoordinatorHandlers:
    """FindCoordinator 0-6 (v4+ asks for several keys at once): groups answered by
    ``locate``, transactional ids by ``transactions`` (broker addresses from
    ``addresses``, the listener's own)."""

    def __init__(
        self,
        locate: Locate,
        transactions: TransactionCoordinators,
        addresses: Mapping[int, tuple[str, int]],
    ) -> None:
        self.locate = locate
        self.transactions = transactions
        self.addresses = addresses

    def apis(self) -> ApiTable:
        return {
            ApiKey.FIND_COORDINATOR: Api(*versions(ApiKey.FIND_COORDINATOR), self.find_coordinator),
        }

    async def find_coordinator(
        self, header: RequestHeader, request: FindCoordinatorRequest
    ) -> FindCoordinatorResponse:
        """Clients ask several brokers and follow each answer, so the answer names the one
        coordinator of the key whichever broker is asked."""
        key_type = request.key_type if hasattr(request, "key_type") else GROUP  # v1+
        if key_type == TRANSACTION:
            await self.transactions.ensure_topic()
        if hasattr(request, "coordinator_keys"):  # v4+: a batch of keys
            found = [await self._found(key_type, key) for key in request.coordinator_keys]
            return respond(request, coordinators=found)
        one = await self._found(key_type, request.key)
        return respond(
            request,
            error_code=one["error_code"],
            node_id=one["node_id"],
            host=one["host"],
            port=one["port"],
        )

    async def _found(self, key_type: int, key: str) -> FindCoordinatorCoordinator:
        if key_type == GROUP:
            located = await self.locate(key)
            if located is None:  # as Kafka answers it: no node
                return _answer(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            node_id, host, port = located
            return _answer(key, ErrorCode.NONE, node_id, host, port)
        if key_type != TRANSACTION or not key:
            return _answer(key, ErrorCode.INVALID_REQUEST)
        error, broker = self.transactions.coordinator_of(key)
        if error is not ErrorCode.NONE or broker not in self.addresses:
            return _answer(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        host, port = self.addresses[broker]
        return _answer(key, ErrorCode.NONE, broker, host, port)


def _answer(
    key: str, error: ErrorCode, node_id: int = -1, host: str = "", port: int = -1
) -> FindCoordinatorCoordinator:
    return {"key": key, "node_id": node_id, "host": host, "port": port, "error_code": error}


# each listener names a coordinator among its own protocol's listeners
UNIT: Final = ListenerUnit(
    lambda c: CoordinatorHandlers(c.locate, c.shared.transactions, c.addresses)
)
