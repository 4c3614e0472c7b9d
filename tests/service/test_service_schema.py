"""The schema layer and the OpenAPI document it renders (no HTTP)."""

from __future__ import annotations

from typing import Any

import pytest

from purgatory.service.api import ROUTES, Schemas, openapi_document
from purgatory.service.broker import error_name, jsonable, refused
from purgatory.service.config import ServiceConfig
from purgatory.service.schema import Array, Int, Object, Str, ValidationError
from purgatory.sim.errors import ErrorCode, SimulationError

SCHEMAS = Schemas.build(ServiceConfig(max_timeout_ms=5000, max_records=2), brokers=3)


def test_fetch_defaults_and_limits() -> None:
    body = SCHEMAS.fetch.validate({"topic": "t", "partition": 0, "offset": 7})
    assert body == {
        "topic": "t",
        "partition": 0,
        "offset": 7,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_wait_ms": 500,
    }
    with pytest.raises(ValidationError, match=r"body.max_wait_ms: must be <= 5000, got 5001"):
        SCHEMAS.fetch.validate({"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 5001})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "body: expected an object, got an array"),
        ({"topic": "t", "partition": 0}, r"missing required field\(s\): records"),
        ({"topic": "t", "partition": True, "records": []}, "partition: expected an integer"),
        ({"topic": "t", "partition": 1.0, "records": []}, "partition: expected an integer"),
        ({"topic": "t", "partition": -1, "records": []}, "partition: must be >= 0"),
        ({"topic": "bad name", "partition": 0, "records": []}, "topic: must match"),
        ({"topic": "t", "partition": 0, "records": []}, "records: must have at least 1"),
        ({"topic": "t", "partition": 0, "records": [{}] * 3}, "records: must have at most 2"),
        ({"topic": "t", "partition": 0, "records": [{}]}, r"records\[0\]: missing required"),
        ({"topic": "t", "partition": 0, "records": [{"value": 1}]}, r"value: expected a string"),
        (
            {"topic": "t", "partition": 0, "records": [{"value": "v"}], "acks": 2},
            r"acks: must be one of \[-1, 0, 1\]",
        ),
        ({"topic": "t", "partition": 0, "records": [{"value": "v"}], "ack": 1}, "unknown field"),
    ],
)
def test_produce_rejects_with_the_offending_path(body: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SCHEMAS.produce.validate(body)


def test_null_key_and_replication_factor_bound() -> None:
    body = SCHEMAS.produce.validate(
        {"topic": "t", "partition": 0, "records": [{"key": None, "value": ""}]}
    )
    assert body["records"] == [{"key": None, "value": ""}]
    assert body["acks"] == -1
    with pytest.raises(ValidationError, match="replication_factor: must be <= 3"):
        SCHEMAS.create_topic.validate({"name": "t", "partitions": 1, "replication_factor": 4})


def test_openapi_renders_the_same_limits() -> None:
    doc = openapi_document(SCHEMAS, "1.2.3")
    assert doc["info"]["version"] == "1.2.3"
    produce = doc["paths"]["/v1/produce"]["post"]
    schema = produce["requestBody"]["content"]["application/json"]["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["partition", "records", "topic"]
    assert schema["properties"]["timeout_ms"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 5000,
        "description": "how long an acks=-1 produce may wait for replication",
        "default": 5000,
    }
    assert schema["properties"]["records"]["maxItems"] == 2
    assert schema["properties"]["records"]["items"]["properties"]["key"]["nullable"] is True
    assert set(produce["responses"]) == {"200", "400", "401", "413", "415", "503"}
    operations = sum(len(methods) for methods in doc["paths"].values())
    assert operations == len(ROUTES)
    assert doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"] == {
        "text/plain": {"schema": {"type": "string"}}
    }


def test_schema_definitions_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown fields"):
        Object({"a": Int()}, required=frozenset({"b"}))
    assert Array(Str(), max_items=1).openapi() == {
        "type": "array",
        "items": {"type": "string"},
        "maxItems": 1,
    }


def test_broker_glue() -> None:
    assert error_name(ErrorCode.NONE) is None
    assert error_name(ErrorCode.REQUEST_TIMED_OUT) == "REQUEST_TIMED_OUT"
    assert error_name(None) is None
    assert jsonable({"s": {3, 1}, "e": ErrorCode.NONE, "t": (1, 2)}) == {
        "s": [1, 3],
        "e": "NONE",
        "t": [1, 2],
    }
    exc = refused(SimulationError(ErrorCode.TOPIC_ALREADY_EXISTS, "topic 't' exists"))
    assert (exc.status, exc.code, exc.message) == (409, "TOPIC_ALREADY_EXISTS", "topic 't' exists")
    other = refused(SimulationError(ErrorCode.INVALID_REPLICATION_FACTOR, "3 > 1 brokers"))
    assert (other.status, other.code) == (400, "INVALID_REPLICATION_FACTOR")


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_pending must be > 0"):
        ServiceConfig(max_pending=0)
    with pytest.raises(TypeError, match="max_timeout_ms must be a number"):
        ServiceConfig(max_timeout_ms=True)
