"""The API contract: request schemas, routes and the OpenAPI document, in one place.

Handlers validate with the same :class:`~purgatory.service.schema.Object` instances that
render ``/openapi.json``, so the document cannot drift from what the server enforces.
Limits from :class:`~purgatory.service.config.ServiceConfig` appear in the schemas as
``maximum``/``maxItems``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from purgatory.service.config import ServiceConfig
from purgatory.service.schema import Array, Choice, Doc, Int, Object, Schema, Str
from purgatory.sim.validate import TOPIC_NAME_PATTERN

INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1
#: Kafka's legal topic names (the simulation's rule, anchored for OpenAPI).
TOPIC_PATTERN: Final = f"^{TOPIC_NAME_PATTERN}$"
FAULTS: Final = ("slow_follower", "crash_follower", "restart_follower", "failover")


def _topic() -> Str:
    return Str(min_length=1, max_length=249, pattern=TOPIC_PATTERN, description="topic name")


@dataclass(frozen=True, slots=True)
class Schemas:
    """Request schemas of one app (their limits come from its config)."""

    create_topic: Object
    produce: Object
    fetch: Object
    fault: Object

    @classmethod
    def build(cls, config: ServiceConfig, brokers: int = INT32_MAX) -> Schemas:
        """Schemas for ``config``; ``brokers`` bounds the replication factor."""
        record = Object(
            {
                "key": Str(nullable=True, description="UTF-8 text, or null"),
                "value": Str(description="UTF-8 text"),
            },
            required=frozenset({"value"}),
        )
        partition = Int(minimum=0, maximum=INT32_MAX)
        produce_timeout = min(30_000, config.max_timeout_ms)
        return cls(
            create_topic=Object(
                {
                    "name": _topic(),
                    "partitions": Int(minimum=1, maximum=config.max_partitions),
                    "replication_factor": Int(minimum=1, maximum=brokers),
                },
                required=frozenset({"name", "partitions", "replication_factor"}),
            ),
            produce=Object(
                {
                    "topic": _topic(),
                    "partition": partition,
                    "records": Array(record, min_items=1, max_items=config.max_records),
                    "acks": Int(
                        choices=(-1, 0, 1), description="-1 waits for the whole ISR (acks=all)"
                    ),
                    "timeout_ms": Int(
                        minimum=0,
                        maximum=config.max_timeout_ms,
                        description="how long an acks=-1 produce may wait for replication",
                    ),
                },
                required=frozenset({"topic", "partition", "records"}),
                defaults={"acks": -1, "timeout_ms": produce_timeout},
            ),
            fetch=Object(
                {
                    "topic": _topic(),
                    "partition": partition,
                    "offset": Int(minimum=0, maximum=INT64_MAX),
                    "min_bytes": Int(minimum=0, maximum=INT32_MAX),
                    "max_bytes": Int(minimum=1, maximum=config.max_fetch_bytes),
                    "max_wait_ms": Int(minimum=0, maximum=config.max_timeout_ms),
                },
                required=frozenset({"topic", "partition", "offset"}),
                defaults={
                    "min_bytes": 1,
                    "max_bytes": min(1 << 20, config.max_fetch_bytes),
                    "max_wait_ms": min(500, config.max_timeout_ms),
                },
            ),
            fault=Object(
                {
                    "fault": Choice(FAULTS),
                    "topic": _topic(),
                    "partition": partition,
                    "broker": Int(
                        minimum=0,
                        maximum=INT32_MAX,
                        description="slow/crash/restart: the broker (default: the partition's "
                        "first follower); failover: the new leader (default: next in ISR)",
                    ),
                    "latency_ms": Int(
                        minimum=0,
                        maximum=config.max_timeout_ms,
                        description="slow_follower: added replication latency",
                    ),
                },
                required=frozenset({"fault", "topic", "partition"}),
            ),
        )


# -- response documents ----------------------------------------------------------------

_ERROR_CODE: Final = {"type": "string", "nullable": True, "description": "Kafka error name"}
ERROR_BODY: Final = Doc(
    {
        "type": "object",
        "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
        "required": ["error", "message"],
    }
)
PRODUCE_RESPONSE: Final = Doc(
    {
        "type": "object",
        "properties": {
            "error": _ERROR_CODE,
            "base_offset": {"type": "integer", "nullable": True},
        },
        "required": ["error", "base_offset"],
    }
)
FETCH_RESPONSE: Final = Doc(
    {
        "type": "object",
        "properties": {
            "error": _ERROR_CODE,
            "high_watermark": {"type": "integer"},
            "records": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "offset": {"type": "integer"},
                        "key": {"type": "string", "nullable": True},
                        "value": {"type": "string"},
                    },
                    "required": ["offset", "key", "value"],
                },
            },
        },
        "required": ["error", "high_watermark", "records"],
    }
)
OBJECT: Final = Doc({"type": "object"})


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    name: str  # the handler's name in purgatory.service.app
    summary: str
    request: str | None  # attribute of Schemas, or None
    responses: dict[int, tuple[str, Schema | None]]  # status -> (description, JSON body)
    content_type: str = "application/json"


_BAD = {400: ("invalid request", ERROR_BODY), 413: ("body too large", ERROR_BODY)}
_BUSY = {503: ("too many parked requests, or shutting down", ERROR_BODY)}

ROUTES: Final = (
    Route(
        "POST",
        "/v1/topics",
        "create_topic",
        "Create a topic",
        "create_topic",
        {
            201: ("created", OBJECT),
            409: ("topic exists, or max_topics reached", ERROR_BODY),
            **_BAD,
            **_BUSY,
        },
    ),
    Route(
        "POST",
        "/v1/produce",
        "produce",
        "Append records; acks=-1 waits in DelayedProduce until the HW covers them",
        "produce",
        {200: ("produced, or a Kafka error code", PRODUCE_RESPONSE), **_BAD, **_BUSY},
    ),
    Route(
        "POST",
        "/v1/fetch",
        "fetch",
        "Read records; waits in DelayedFetch until min_bytes are available or max_wait_ms",
        "fetch",
        {200: ("records, or a Kafka error code", FETCH_RESPONSE), **_BAD, **_BUSY},
    ),
    Route(
        "GET",
        "/v1/metadata",
        "metadata",
        "Topics, partitions, leaders, epochs, HW, ISR",
        None,
        {200: ("cluster metadata", OBJECT)},
    ),
    Route(
        "POST",
        "/v1/admin/faults",
        "inject_fault",
        "Inject a fault: slow/crash/restart a follower, or fail the leader over",
        "fault",
        {
            200: ("fault injected", OBJECT),
            404: ("unknown topic or partition", ERROR_BODY),
            409: ("fault not applicable now", ERROR_BODY),
            **_BAD,
            **_BUSY,
        },
    ),
    Route(
        "GET",
        "/healthz",
        "healthz",
        "Health: 200 while serving, 503 while shutting down",
        None,
        {200: ("serving", OBJECT), 503: ("shutting down", OBJECT)},
    ),
    Route(
        "GET",
        "/metrics",
        "metrics",
        "Prometheus metrics",
        None,
        {200: ("Prometheus text format", None)},
        content_type="text/plain",
    ),
    Route("GET", "/openapi.json", "openapi", "This document", None, {200: ("OpenAPI", OBJECT)}),
)


def openapi_document(schemas: Schemas, version: str) -> dict[str, Any]:
    """The OpenAPI 3.0 document of every route, rendered from :data:`ROUTES`."""
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        operation: dict[str, Any] = {"operationId": route.name, "summary": route.summary}
        if route.request is not None:
            body: Object = getattr(schemas, route.request)
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": body.openapi()}},
            }
        responses: dict[str, Any] = {}
        common: dict[int, tuple[str, Schema | None]] = {
            400: ("invalid request, or a Host header this server does not serve", ERROR_BODY)
        }
        if route.name != "healthz":
            common[401] = ("no valid bearer token (when the server has one)", ERROR_BODY)
        if route.method == "POST":
            common[415] = ("Content-Type is not application/json", ERROR_BODY)
        for status, (description, schema) in {**common, **route.responses}.items():
            response: dict[str, Any] = {"description": description}
            content_type = route.content_type if status < 300 else "application/json"
            response["content"] = {content_type: {"schema": _body_schema(schema)}}
            responses[str(status)] = response
        operation["responses"] = responses
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "purgatory serve",
            "version": version,
            "description": "Kafka-style long-poll API over a simulated broker: requests that "
            "cannot finish yet are parked in delayed-operation purgatories.",
        },
        "paths": paths,
    }


def _body_schema(schema: Schema | None) -> dict[str, Any]:
    return {"type": "string"} if schema is None else schema.openapi()
