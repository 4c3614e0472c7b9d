"""Every error code, through both of the ways it leaves the process: the HTTP service's JSON
answer (its status table) and a Kafka response on the wire."""

from __future__ import annotations

import kafka.errors
import msgspec
import pytest
from kafka.protocol.admin import ElectLeadersResponse

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.handlers.elections import ElectionHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.service.app import json_response
from purgatory.service.bodies import ErrorBody
from purgatory.service.broker import HTTP_STATUS, error_name, refused
from purgatory.sim.errors import ErrorCode, SimulationError
from purgatory.sim.messages import ElectLeadersRequest, ElectLeadersResult, PartitionElection

CODES = list(ErrorCode)


def test_each_code_is_kafkas_name_and_number() -> None:
    numbers = [code.number for code in CODES if code.number is not None]
    assert len(numbers) == len(set(numbers))
    for code in CODES:
        assert code.value == code.name
        if code.number is not None:
            # an independent table (kafka-python's) knows the number as Kafka's
            assert kafka.errors.for_code(code.number).errno == code.number


@pytest.mark.parametrize("code", CODES)
def test_the_http_answer_names_the_code(code: ErrorCode) -> None:
    refusal = refused(SimulationError(code, "why"))
    assert refusal.status == HTTP_STATUS.get(code, 400)
    assert 400 <= refusal.status < 600
    response = json_response(ErrorBody(refusal.code, refusal.message), status=refusal.status)
    assert response.body is not None
    assert msgspec.json.decode(response.body) == {"error": code.name, "message": "why"}
    assert error_name(code) == (None if code is ErrorCode.NONE else code.name)


class _Answers:
    """A cluster whose every election ends in the next code of CODES."""

    async def elect_leaders(self, request: ElectLeadersRequest) -> ElectLeadersResult:
        answers = [PartitionElection(t, i, CODES[i]) for t, i in request.partitions]
        return ElectLeadersResult(ErrorCode.NONE, answers)


@pytest.mark.asyncio
async def test_the_kafka_wire_carries_each_codes_number() -> None:
    body = Writer().int8(0).int32(1).string("t").int32(len(CODES))
    for index in range(len(CODES)):
        body.int32(index)
    body.int32(1000)
    header = RequestHeader(ApiKey.ELECT_LEADERS, 1, 7, "c")
    handler = ElectionHandlers(_Answers())  # type: ignore[arg-type]
    answer = await handler.elect_leaders(header, Reader(body.buf))
    decoded = ElectLeadersResponse[1].decode(bytes(answer))
    [topic] = decoded.replica_election_results
    got = [(p.error_code, p.error_message) for p in topic.partition_result]
    # a code Kafka has no number for goes out as UNKNOWN_SERVER_ERROR, as Kafka's would
    assert got == [
        (-1 if code.number is None else code.number, None if code is ErrorCode.NONE else code.name)
        for code in CODES
    ]
