"""The API contract: routes and the OpenAPI document, in one place.

Request bodies are decoded with the msgspec types of :mod:`purgatory.service.bodies`, and
``/openapi.json`` renders the same types (``msgspec.json.schema_components``), so the
document cannot drift from what the server enforces. Limits from
:class:`~purgatory.service.config.ServiceConfig` appear as ``maximum``/``maxItems``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import msgspec

from purgatory.json_types import Json, JsonObject
from purgatory.service.bodies import (
    ElectLeadersResponse,
    ErrorBody,
    FetchResponse,
    PartitionFaultOut,
    PartitionFaultsOut,
    ProduceResponse,
    RequestTypes,
)
from purgatory.service.guard import STATE_CHANGING

#: a JSON object the document does not detail (metadata, fault outcomes, health)
OBJECT: Final = "object"

# status -> (description, the JSON body's type, OBJECT, or None for a non-JSON body)
Answers = dict[int, tuple[str, type | str | None]]


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    name: str  # the handler's name in purgatory.service.app
    summary: str
    request: str | None  # attribute of RequestTypes, or None
    responses: Answers  # its own; openapi_document adds those every route or POST shares
    content_type: str = "application/json"


#: what every POST (each takes a JSON body and may park) can answer besides its own
_POST_ANSWERS: Final[Answers] = {
    400: ("invalid request", ErrorBody),
    413: ("body too large", ErrorBody),
    503: ("too many parked requests, or shutting down", ErrorBody),
}

#: what each partition-fault route answers while Kafka is not served
_NO_KAFKA: Final[Answers] = {409: ("no Kafka listeners (serve without --kafka-port)", ErrorBody)}

ROUTES: Final = (
    Route(
        "POST",
        "/v1/topics",
        "create_topic",
        "Create a topic",
        "create_topic",
        {201: ("created", OBJECT), 409: ("topic exists, or max_topics reached", ErrorBody)},
    ),
    Route(
        "POST",
        "/v1/produce",
        "produce",
        "Append records; acks=-1 waits in DelayedProduce until the HW covers them",
        "produce",
        {
            200: ("produced, or a Kafka error code", ProduceResponse),
            507: ("KAFKA_STORAGE_ERROR: the stored-bytes cap would be passed", ErrorBody),
        },
    ),
    Route(
        "POST",
        "/v1/fetch",
        "fetch",
        "Read records; waits in DelayedFetch until min_bytes are available or max_wait_ms",
        "fetch",
        {200: ("records, or a Kafka error code", FetchResponse)},
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
        "Inject a fault: slow/crash/restart a partition's follower, or fail its leader over",
        "fault",
        {
            200: ("fault injected", OBJECT),
            404: ("unknown topic, partition or broker", ErrorBody),
            409: ("fault not applicable now", ErrorBody),
        },
    ),
    Route(
        "POST",
        "/v1/admin/broker-faults",
        "inject_broker_fault",
        "Crash any broker (fenced at once, or unfenced) or restart it",
        "broker_fault",
        {
            200: ("fault injected", OBJECT),
            404: ("no such broker", ErrorBody),
            409: ("fault not applicable now", ErrorBody),
        },
    ),
    Route(
        "POST",
        "/v1/faults",
        "add_partition_fault",
        "Fail partitions on the Kafka listeners: requests of the APIs that name the "
        "topic and partition answer the error in that partition's entry only, the rest "
        "is served (franz-go kfake's AddFault)",
        "partition_fault",
        {
            201: ("the rule, in force", PartitionFaultOut),
            **_NO_KAFKA,
        },
    ),
    Route(
        "GET",
        "/v1/faults",
        "list_partition_faults",
        "The partition fault rules in force, in the order they are tried",
        None,
        {
            200: ("the rules", PartitionFaultsOut),
            **_NO_KAFKA,
        },
    ),
    Route(
        "DELETE",
        "/v1/faults",
        "clear_partition_faults",
        "Remove every partition fault rule",
        None,
        {
            200: ("the rules removed", PartitionFaultsOut),
            **_NO_KAFKA,
        },
    ),
    Route(
        "DELETE",
        "/v1/faults/{id}",
        "remove_partition_fault",
        "Remove one partition fault rule",
        None,
        {
            200: ("the rule removed", PartitionFaultOut),
            404: ("no rule in force with that id", ErrorBody),
            **_NO_KAFKA,
        },
    ),
    Route(
        "POST",
        "/v1/admin/elect-leaders",
        "elect_leaders",
        "Elect leaders (preferred or unclean); waits in DelayedElectLeader until they lead",
        "elect_leaders",
        {200: ("an answer per partition (a Kafka error name, or null)", ElectLeadersResponse)},
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


def openapi_document(types: RequestTypes, version: str) -> JsonObject:
    """The OpenAPI 3.0 document of every route, rendered from :data:`ROUTES`."""
    bodies: list[Any] = [getattr(types, r.request) for r in ROUTES if r.request is not None]
    bodies += [
        ErrorBody,
        ProduceResponse,
        FetchResponse,
        ElectLeadersResponse,
        PartitionFaultOut,
        PartitionFaultsOut,
    ]
    refs, components = msgspec.json.schema_components(
        bodies, ref_template="#/components/schemas/{name}"
    )
    schema_of = dict(zip(bodies, refs, strict=True))
    components = {name: _openapi_30(schema) for name, schema in components.items()}
    paths: dict[str, JsonObject] = {}
    for route in ROUTES:
        operation: JsonObject = {"operationId": route.name, "summary": route.summary}
        names = [part[1:-1] for part in route.path.split("/") if part.startswith("{")]
        if names:
            operation["parameters"] = [
                {"name": name, "in": "path", "required": True, "schema": {"type": "integer"}}
                for name in names
            ]
        if route.request is not None:
            body = schema_of[getattr(types, route.request)]
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": body}},
            }
        responses: JsonObject = {}
        common: Answers = {
            400: ("invalid request, or a Host header this server does not serve", ErrorBody)
        }
        if route.name != "healthz":
            common[401] = ("no valid bearer token (when the server has one)", ErrorBody)
        post: Answers = {}
        if route.method in STATE_CHANGING:
            common[415] = ("Content-Type is not application/json", ErrorBody)
        if route.method == "POST":
            post = _POST_ANSWERS
        for status, (description, kind) in {**common, **route.responses, **post}.items():
            if kind is None:
                schema: Json = {"type": "string"}
            elif kind == OBJECT:
                schema = {"type": "object"}
            else:
                schema = schema_of[kind]
            content_type = route.content_type if status < 300 else "application/json"
            responses[str(status)] = {
                "description": description,
                "content": {content_type: {"schema": schema}},
            }
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
        "components": {"schemas": components},
    }


def _openapi_30(schema: Any) -> Any:
    """msgspec writes JSON Schema 2020-12 (OpenAPI 3.1); say "X or null" the 3.0 way,
    ``nullable``. 3.0 keeps ``integer`` meaning an integer literal, as the server decodes
    it (in 3.1, ``1.0`` is an integer too, which this server refuses: it never coerces)."""
    if isinstance(schema, list):
        return [_openapi_30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _openapi_30(value) for key, value in schema.items()}
    options = out.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [option for option in options if option != {"type": "null"}]
        del out["anyOf"]
        if len(rest) == 1:
            out.update(rest[0])
        else:
            out["anyOf"] = rest
        out["nullable"] = True
    return out
