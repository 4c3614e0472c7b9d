"""Request bodies (msgspec types) and the OpenAPI document rendered from them (no HTTP)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from purgatory.errors import ErrorCode
from purgatory.service.api import ROUTES, openapi_document
from purgatory.service.bodies import RequestTypes
from purgatory.service.cluster import error_name, refused
from purgatory.service.config import ServiceConfig
from purgatory.sim.errors import SimulationError

BODIES = RequestTypes.build(ServiceConfig(max_timeout_ms=5000, max_records=2), brokers=3)


def _decode(body: Any, body_type: type[msgspec.Struct]) -> Any:
    return msgspec.json.decode(json.dumps(body), type=body_type)


def test_fetch_defaults_and_limits() -> None:
    body = _decode({"topic": "t", "partition": 0, "offset": 7}, BODIES.fetch)
    assert msgspec.structs.asdict(body) == {
        "topic": "t",
        "partition": 0,
        "offset": 7,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_wait_ms": 500,
    }
    late = {"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 5001}
    with pytest.raises(msgspec.ValidationError, match=r"<= 5000 - at `\$.max_wait_ms`"):
        _decode(late, BODIES.fetch)


def test_millisecond_defaults_stay_under_the_ceiling() -> None:
    """Every wait or latency in ms defaults to at most ``max_timeout_ms``, so a body that
    leaves it out is within the bound the server states for it."""
    low = RequestTypes.build(ServiceConfig(max_timeout_ms=50), brokers=3)
    fault = _decode({"fault": "slow_follower", "topic": "t", "partition": 0}, low.fault)
    fetch = _decode({"topic": "t", "partition": 0, "offset": 0}, low.fetch)
    produce = _decode({"topic": "t", "partition": 0, "records": [{"value": ""}]}, low.produce)
    elect = _decode({"partitions": [{"topic": "t", "partition": 0}]}, low.elect_leaders)
    defaults = (fault.latency_ms, fetch.max_wait_ms, produce.timeout_ms, elect.timeout_ms)
    assert defaults == (50, 50, 50, 50)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "Expected `object`, got `array`"),
        ({"topic": "t", "partition": 0}, "missing required field `records`"),
        ({"topic": "t", "partition": True, "records": []}, r"got `bool` - at `\$.partition`"),
        ({"topic": "t", "partition": 1.0, "records": []}, r"got `float` - at `\$.partition`"),
        ({"topic": "t", "partition": "0", "records": []}, r"got `str` - at `\$.partition`"),
        ({"topic": "t", "partition": -1, "records": []}, r">= 0 - at `\$.partition`"),
        ({"topic": "bad name", "partition": 0, "records": []}, r"regex .* - at `\$.topic`"),
        ({"topic": "t", "partition": 0, "records": []}, r"length >= 1 - at `\$.records`"),
        (
            {"topic": "t", "partition": 0, "records": [{"value": ""}] * 3},
            r"length <= 2 - at `\$.records`",
        ),
        ({"topic": "t", "partition": 0, "records": [{}]}, r"`value` - at `\$.records\[0\]`"),
        (
            {"topic": "t", "partition": 0, "records": [{"value": 1}]},
            r"Expected `str`, got `int` - at `\$.records\[0\].value`",
        ),
        (
            {"topic": "t", "partition": 0, "records": [{"value": "v"}], "acks": 2},
            r"Invalid enum value 2 - at `\$.acks`",
        ),
        ({"topic": "t", "partition": 0, "records": [{"value": "v"}], "ack": 1}, "unknown field"),
    ],
)
def test_produce_rejects_with_the_offending_path(body: Any, message: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=message):
        _decode(body, BODIES.produce)


def test_null_key_and_replication_factor_bound() -> None:
    body = _decode(
        {"topic": "t", "partition": 0, "records": [{"key": None, "value": ""}]}, BODIES.produce
    )
    assert [(r.key, r.value) for r in body.records] == [(None, "")]
    assert body.acks == -1
    with pytest.raises(msgspec.ValidationError, match=r"<= 3 - at `\$.replication_factor`"):
        _decode({"name": "t", "partitions": 1, "replication_factor": 4}, BODIES.create_topic)


def test_openapi_renders_the_same_limits() -> None:
    doc = openapi_document(BODIES, "1.2.3")
    assert (doc["openapi"], doc["info"]["version"]) == ("3.0.3", "1.2.3")
    produce = doc["paths"]["/v1/produce"]["post"]
    ref = produce["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schemas = doc["components"]["schemas"]
    schema = schemas[ref.rsplit("/", 1)[1]]
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == ["partition", "records", "topic"]
    assert schema["properties"]["timeout_ms"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 5000,
        "description": "how long an acks=-1 produce may wait for replication",
        "default": 5000,
    }
    assert schema["properties"]["records"]["maxItems"] == 2
    key = schemas["Record"]["properties"]["key"]
    assert (key["type"], key["nullable"]) == ("string", True)
    assert set(produce["responses"]) == {"200", "400", "401", "413", "415", "503", "507"}
    operations = sum(len(methods) for methods in doc["paths"].values())
    assert operations == len(ROUTES)
    assert doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"] == {
        "text/plain": {"schema": {"type": "string"}}
    }


def test_broker_glue() -> None:
    assert error_name(ErrorCode.NONE) is None
    assert error_name(ErrorCode.REQUEST_TIMED_OUT) == "REQUEST_TIMED_OUT"
    assert error_name(None) is None
    exc = refused(SimulationError(ErrorCode.TOPIC_ALREADY_EXISTS, "topic 't' exists"))
    assert (exc.status, exc.code, exc.message) == (409, "TOPIC_ALREADY_EXISTS", "topic 't' exists")
    other = refused(SimulationError(ErrorCode.INVALID_REPLICATION_FACTOR, "3 > 1 brokers"))
    assert (other.status, other.code) == (400, "INVALID_REPLICATION_FACTOR")


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_pending must be > 0"):
        ServiceConfig(max_pending=0)
    with pytest.raises(TypeError, match="max_timeout_ms must be a number"):
        ServiceConfig(max_timeout_ms=True)
