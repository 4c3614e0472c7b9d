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
from typing import final

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim.errors import ErrorCode

#: ``locate(key)``: the (broker id, host, port) of the broker that coordinates ``key``
Locate = Callable[[str], tuple[int, str, int]]


@final
class CoordinatorHandlers:
    """FindCoordinator 0-2 (answered by ``locate``) and InitProducerId 0-1."""

    def __init__(self, locate: Locate, producer_ids: ProducerIds) -> None:
        self.locate = locate
        self.producer_ids = producer_ids

    def apis(self) -> ApiTable:
        return {
            ApiKey.FIND_COORDINATOR: Api(0, 2, self.find_coordinator),
            ApiKey.INIT_PRODUCER_ID: Api(0, 1, self.init_producer_id),
        }

    def find_coordinator(self, header: RequestHeader, body: Reader) -> bytearray:
        """Clients ask several brokers and follow each answer, so the answer names the one
        coordinator of the key whichever broker is asked."""
        key = body.string()
        if header.api_version >= 1:
            body.int8()  # key_type
        node_id, host, port = self.locate(key)
        out = Writer()
        if header.api_version >= 1:
            out.int32(0).int16(ErrorCode.NONE.wire).string(None)
        else:
            out.int16(ErrorCode.NONE.wire)
        return out.int32(node_id).string(host).int32(port).buf

    def init_producer_id(self, header: RequestHeader, body: Reader) -> bytearray:
        """A fresh producer id at epoch 0 for an idempotent producer (no transactional
        id), as Kafka answers one; INVALID_REQUEST, id -1, for a transactional one."""
        transactional_id = body.nullable_string()
        body.int32()  # transaction_timeout_ms: transactions only
        out = Writer().int32(0)  # throttle_time_ms
        if transactional_id is not None:
            return out.int16(ErrorCode.INVALID_REQUEST.wire).int64(-1).int16(-1).buf
        return out.int16(ErrorCode.NONE.wire).int64(self.producer_ids.next()).int16(0).buf
