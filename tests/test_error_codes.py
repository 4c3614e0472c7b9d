"""Every error code, through each way it leaves the process: the HTTP service's JSON answer
(its status table) and a Kafka response on the wire; and the HTTP service's own refusals,
which Kafka has no code for, in JSON only."""

from __future__ import annotations

import kafka.errors
import msgspec
import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.elections import ElectionHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type
from purgatory.service.app import json_response
from purgatory.service.bodies import ErrorBody
from purgatory.service.cluster import HTTP_STATUS, error_name, refused
from purgatory.service.refusals import ServiceRefusal
from purgatory.sim.errors import SimulationError
from purgatory.sim.messages import ElectLeadersRequest, ElectLeadersResult, PartitionElection

CODES = list(ErrorCode)


def test_each_code_is_kafkas_name_and_number() -> None:
    numbers = [code.number for code in CODES]
    assert len(numbers) == len(set(numbers))
    for code in CODES:
        assert code.value == code.name
        # two independent tables know the number as Kafka's: kio's, generated from
        # Kafka's own, and kafka-python's
        assert KioErrorCode(code.number).name.upper() == code.name
        assert kafka.errors.for_code(code.number).errno == code.number


def test_the_http_services_own_refusals_are_not_kafka_codes() -> None:
    assert not {r.value for r in ServiceRefusal} & {c.value for c in ErrorCode}
    kafka_names = {member.name.upper() for member in KioErrorCode}
    assert not {r.value for r in ServiceRefusal} & kafka_names


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
    request = build(
        request_type(ApiKey.ELECT_LEADERS, 2),
        {
            "election_type": 0,
            "topic_partitions": [{"topic": "t", "partitions": list(range(len(CODES)))}],
            "timeout": 1000,
        },
    )
    header = RequestHeader(ApiKey.ELECT_LEADERS, 2, 7, "c")
    handler = ElectionHandlers(_Answers())  # type: ignore[arg-type]
    answer = await handler.elect_leaders(header, request)
    [topic] = answer.replica_election_results
    got = [(int(p.error_code), p.error_message) for p in topic.partition_result]
    assert got == [(code.number, None if code is ErrorCode.NONE else code.name) for code in CODES]
