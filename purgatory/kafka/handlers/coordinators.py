"""FindCoordinator and InitProducerId: which broker coordinates a group (or transactional
id), and a producer id for an idempotent producer. Every broker is a coordinator here (one
state serves them all), but each key has one, whichever broker is asked.
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
        body.nullable_string()  # transactional_id: transactions are not simulated
        body.int32()  # transaction_timeout_ms
        producer_id = self.producer_ids.next()
        return Writer().int32(0).int16(ErrorCode.NONE.wire).int64(producer_id).int16(0).buf
