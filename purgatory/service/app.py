"""The aiohttp application: JSON handlers over a broker, limits, metrics, shutdown.

Requests that cannot be answered yet (acks=-1 produces, fetches waiting for ``min_bytes``)
park in the broker's purgatories while the handler awaits them, within the parked-request
budget (:mod:`purgatory.service.pending`: fetches never take the slots kept for the produces
that wake them). Run the app with
``handler_cancellation=True`` (``purgatory serve`` does): a client that disconnects then
cancels its handler, and the broker cancels the parked operation.

The app owns the broker it is given: on shutdown it refuses new requests, closes the
broker (which answers every parked request) and waits for those answers to be written.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, cast, final

import msgspec
from aiohttp import web
from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.aiohttp import make_aiohttp_handler

import purgatory
from purgatory.errors import ErrorCode
from purgatory.metrics import PurgatoryMetrics
from purgatory.service import cluster as cluster_api
from purgatory.service.api import ROUTES, openapi_document
from purgatory.service.bodies import (
    ElectLeadersResponse,
    ErrorBody,
    FetchResponse,
    PartitionElectionOut,
    PartitionFaultOut,
    PartitionFaultsOut,
    ProduceResponse,
    RecordOut,
    RequestTypes,
)
from purgatory.service.cluster import BrokerError, KafkaListeners, ServiceCluster, refused
from purgatory.service.config import ServiceConfig
from purgatory.service.guard import AccessPolicy
from purgatory.service.http_metrics import ServiceMetrics
from purgatory.service.pending import Parks, PendingBudget
from purgatory.service.refusals import ServiceRefusal
from purgatory.service.throttled import Throttled
from purgatory.sim.errors import SimulationError
from purgatory.sim.messages import ElectLeadersRequest, FetchRequest, ProduceRequest

if TYPE_CHECKING:
    from purgatory.kafka.fault_rules import PartitionRule
    from purgatory.kafka.faults import Faults

logger = logging.getLogger("purgatory.service")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@final
class Rejected(Exception):
    """A request refused before reaching the broker; becomes a JSON error response."""

    def __init__(
        self, status: int, reason: str, code: ErrorCode | ServiceRefusal, message: str
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason  # the rejected-requests metric label (or "" if not counted)
        self.code = code
        self.message = message


@final
class ServiceState:
    """Per-app state: the broker, limits, metrics and the parked-request count."""

    def __init__(
        self,
        broker: ServiceCluster,
        config: ServiceConfig,
        registry: CollectorRegistry,
        access: AccessPolicy,
        on_fault: Callable[[str], None] | None = None,
        kafka: KafkaListeners | None = None,
    ):
        self.broker = broker
        self.on_fault = on_fault
        #: the Kafka listeners, if served: their fault rules, closed by a crash
        self.kafka = kafka
        self.config = config
        self.access = access
        self.registry = registry
        self.bodies = RequestTypes.build(config, cluster_api.broker_count(broker))
        self.metrics = ServiceMetrics(registry)
        # a simulated broker's purgatories: one set per broker, told apart by their label
        self.purgatory_metrics = PurgatoryMetrics(registry, labels=("broker",))
        for purg in broker.all_purgatories():
            self.purgatory_metrics.track(purg)
        self.openapi = openapi_document(self.bodies, purgatory.__version__)
        self.pending = PendingBudget(config.max_pending)
        #: bytes of request bodies being read now (max_body_bytes_in_flight)
        self.body_bytes = 0
        self.overloads = Throttled(logger)
        self.closing = False
        self.idle = asyncio.Event()
        self.idle.set()

    @asynccontextmanager
    async def parking(self, parks: Parks) -> AsyncIterator[None]:
        """Admit a request that may park, within its share of ``max_pending``."""
        if self.closing:
            raise Rejected(
                503, "shutting_down", ErrorCode.BROKER_NOT_AVAILABLE, "server shutting down"
            )
        refusal = self.pending.refusal(parks)
        if refusal is not None:
            self.overloads.warning("request refused with 503: %s", refusal)
            raise Rejected(503, "overloaded", ServiceRefusal.TOO_MANY_PENDING_REQUESTS, refusal)
        if parks is Parks.NEVER:
            yield
            return
        self.pending.take(parks)
        self.metrics.parked.inc()
        self.idle.clear()
        try:
            yield
        finally:
            self.pending.give_back(parks)
            self.metrics.parked.dec()
            if self.pending.parked == 0:
                self.idle.set()


STATE: Final = web.AppKey("purgatory_state", ServiceState)


def create_app(
    broker: ServiceCluster,
    config: ServiceConfig | None = None,
    *,
    registry: CollectorRegistry | None = None,
    access: AccessPolicy | None = None,
    on_fault: Callable[[str], None] | None = None,
    kafka: KafkaListeners | None = None,
) -> web.Application:
    """The ``purgatory serve`` application over ``broker`` (which it closes on shutdown).

    Each app gets its own Prometheus registry unless one is given, so several apps can
    live in one process. ``access`` sets the token and host rules (default: none; state-
    changing requests must still be JSON). ``on_fault(description)`` hears of each fault
    injected through the admin route (``TraceWriter.mark_fault``). ``kafka``: the Kafka
    listeners over the same cluster, if any (a crash closes its broker's listener; the
    ``/v1/faults`` routes set their partition fault rules).
    """
    config = ServiceConfig() if config is None else config
    # Counters' and histograms' *_created series only double what /metrics carries.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry() if registry is None else registry
    access = AccessPolicy() if access is None else access
    state = ServiceState(broker, config, registry, access, on_fault, kafka)
    app = web.Application(client_max_size=config.max_body_bytes, middlewares=[_errors_and_metrics])
    app[STATE] = state
    handlers: dict[str, Handler] = {
        "create_topic": create_topic,
        "produce": produce,
        "fetch": fetch,
        "metadata": metadata,
        "inject_fault": inject_fault,
        "inject_broker_fault": inject_broker_fault,
        "add_partition_fault": add_partition_fault,
        "list_partition_faults": list_partition_faults,
        "clear_partition_faults": clear_partition_faults,
        "remove_partition_fault": remove_partition_fault,
        "elect_leaders": elect_leaders,
        "healthz": healthz,
        "metrics": make_aiohttp_handler(state.registry),
        "openapi": openapi,
    }
    for route in ROUTES:
        if route.method == "GET":  # and HEAD, as HTTP asks of every GET resource
            app.router.add_get(route.path, handlers[route.name], name=route.name)
        else:
            app.router.add_route(route.method, route.path, handlers[route.name], name=route.name)
    app.on_shutdown.append(_shutdown)
    app.on_response_prepare.append(_server_header)
    return app


# -- middleware ------------------------------------------------------------------------


@web.middleware
async def _errors_and_metrics(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = request.app[STATE]
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    start = time.perf_counter()
    status = 500
    try:
        refusal = state.access.check(
            request.method,
            request.path,
            _headers(request),
            routed=request.match_info.http_exception is None,
        )
        if refusal is not None:
            logger.info("refused %s %s: %s", request.method, request.path, refusal.code)
            raise Rejected(refusal.status, refusal.reason, refusal.code, refusal.message)
        response = await handler(request)
        status = response.status
        return response
    except Rejected as exc:
        if exc.reason:
            state.metrics.reject(exc.reason)
        status = exc.status
        return _error_response(exc, state.config.retry_after_s)
    except web.HTTPException as exc:
        status = exc.status
        if status in (404, 405):  # the same JSON error format as every other refusal
            reason, code = _NOT_ROUTED[status]
            state.metrics.reject(reason)
            headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else {}
            message = f"{request.method} {request.path}: {exc.reason}"
            return json_response(ErrorBody(code, message), status=status, headers=headers)
        raise
    except asyncio.CancelledError:
        status = 499  # the client went away (nginx's "client closed request")
        raise
    finally:
        state.metrics.requests.labels(request.method, route, str(status)).inc()
        state.metrics.latency.labels(request.method, route).observe(time.perf_counter() - start)


_NOT_ROUTED: Final = {
    404: ("not_found", ServiceRefusal.NOT_FOUND),
    405: ("method_not_allowed", ServiceRefusal.METHOD_NOT_ALLOWED),
}


def _headers(request: web.Request) -> dict[str, str]:
    # only those the access rules read, lower-cased keys
    names = ("host", "authorization", "content-type", "content-length", "transfer-encoding")
    return {name: request.headers.get(name, "") for name in names}


async def _server_header(request: web.Request, response: web.StreamResponse) -> None:
    # aiohttp would name Python's and its own versions: no need to tell an attacker
    response.headers["Server"] = "purgatory"


def _error_response(exc: Rejected, retry_after_s: int) -> web.Response:
    headers = {}
    if exc.status == 503:
        headers["Retry-After"] = str(retry_after_s)
    if exc.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="purgatory"'
    return json_response(ErrorBody(exc.code, exc.message), status=exc.status, headers=headers)


async def _body(request: web.Request, body_type: type[msgspec.Struct]) -> Any:
    """Read and decode a JSON body: 503 if too many bytes of bodies are being read at once,
    413 if too large, 400 with the reason otherwise."""
    state = request.app[STATE]
    config = state.config
    length = request.content_length
    claim = config.max_body_bytes if length is None else min(length, config.max_body_bytes)
    if state.body_bytes + claim > config.max_body_bytes_in_flight:
        state.overloads.warning(
            "request refused with 503: %d bytes of bodies being read (max_body_bytes_in_flight)",
            state.body_bytes,
        )
        raise Rejected(
            503,
            "overloaded",
            ServiceRefusal.TOO_MANY_BYTES_IN_FLIGHT,
            f"{state.body_bytes} bytes of request bodies are being read "
            f"(max_body_bytes_in_flight {config.max_body_bytes_in_flight})",
        )
    state.body_bytes += claim
    try:
        return _decode(await request.read(), body_type, config)
    except web.HTTPRequestEntityTooLarge as exc:
        raise Rejected(
            413,
            "too_large",
            ServiceRefusal.REQUEST_TOO_LARGE,
            f"body exceeds {config.max_body_bytes} bytes",
        ) from exc
    finally:
        state.body_bytes -= claim


def _decode(raw: bytes, body_type: type[msgspec.Struct], config: ServiceConfig) -> Any:
    """A body as ``body_type``; 400 with the reason if it is not one."""
    try:
        return msgspec.json.decode(raw, type=body_type)
    except msgspec.ValidationError as exc:
        reason = "invalid"
        ceiling = config.max_timeout_ms
        if str(exc).endswith(("`$.timeout_ms`", "`$.max_wait_ms`")) and f"<= {ceiling}" in str(exc):
            reason = "timeout_ceiling"
        raise Rejected(400, reason, ErrorCode.INVALID_REQUEST, f"body: {exc}") from exc
    except msgspec.DecodeError as exc:
        message = f"body is not valid JSON: {exc}"
        if b"\\u" in raw and _is_json(raw):
            message = "body strings must be valid Unicode (a lone surrogate is not)"
        raise Rejected(400, "invalid", ErrorCode.INVALID_REQUEST, message) from exc


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True


def json_response(
    body: object, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response encoded by msgspec (structs, dataclasses, enums)."""
    return web.Response(
        body=msgspec.json.encode(body),
        status=status,
        headers=headers,
        content_type="application/json",
    )


# -- handlers --------------------------------------------------------------------------


async def create_topic(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await _body(request, state.bodies.create_topic)
    async with state.parking(Parks.NEVER):
        topics = cluster_api.topic_count(state.broker)
        if topics >= state.config.max_topics:
            raise Rejected(
                409, "", ServiceRefusal.TOO_MANY_TOPICS, f"{topics} topics exist (max_topics)"
            )
        try:
            await state.broker.create_topic(
                body.name,
                body.partitions,
                body.replication_factor,
                retention_bytes=body.retention_bytes,
                retention_ms=body.retention_ms,
            )
        except SimulationError as exc:
            return _broker_error(refused(exc))
    return json_response(body, status=201)


async def produce(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await _body(request, state.bodies.produce)
    records = [(None if r.key is None else r.key.encode(), r.value.encode()) for r in body.records]
    async with state.parking(Parks.WRITE if body.acks == -1 else Parks.NEVER):
        try:
            result = await state.broker.produce(
                ProduceRequest(body.topic, body.partition, records, body.acks, body.timeout_ms)
            )
        except SimulationError as exc:
            return _broker_error(refused(exc))
    return json_response(ProduceResponse(cluster_api.error_name(result.error), result.base_offset))


async def fetch(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await _body(request, state.bodies.fetch)
    async with state.parking(Parks.FETCH if body.max_wait_ms > 0 else Parks.NEVER):
        try:
            result = await state.broker.fetch(
                FetchRequest(
                    body.topic,
                    body.partition,
                    body.offset,
                    body.min_bytes,
                    body.max_bytes,
                    body.max_wait_ms,
                )
            )
        except SimulationError as exc:
            return _broker_error(refused(exc))
    records = [
        RecordOut(r.offset, None if r.key is None else _text(r.key), _text(r.value))
        for r in result.records
    ]
    return json_response(
        FetchResponse(
            cluster_api.error_name(result.error),
            result.high_watermark,
            records,
            result.log_start_offset,
        )
    )


async def metadata(request: web.Request) -> web.Response:
    return json_response(request.app[STATE].broker.metadata())


async def elect_leaders(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await _body(request, state.bodies.elect_leaders)
    partitions = [(tp.topic, tp.partition) for tp in body.partitions]
    async with state.parking(Parks.WRITE):
        try:
            result = await state.broker.elect_leaders(
                ElectLeadersRequest(partitions, body.election_type, body.timeout_ms)
            )
        except SimulationError as exc:
            return _broker_error(refused(exc))
    answers = [
        PartitionElectionOut(a.topic, a.partition, cluster_api.error_name(a.error), a.leader)
        for a in result.partitions
    ]
    return json_response(ElectLeadersResponse(cluster_api.error_name(result.error), answers))


async def inject_fault(request: web.Request) -> web.Response:
    return await _inject(request, request.app[STATE].bodies.fault)


async def inject_broker_fault(request: web.Request) -> web.Response:
    return await _inject(request, request.app[STATE].bodies.broker_fault)


async def _inject(request: web.Request, body_type: type[msgspec.Struct]) -> web.Response:
    state = request.app[STATE]
    body: Any = await _body(request, body_type)
    async with state.parking(Parks.NEVER):
        try:
            # the body's fields, as msgspec validated them
            asked = cast("cluster_api.FaultRequest", msgspec.structs.asdict(body))
            outcome = await cluster_api.apply_fault(state.broker, asked, state.kafka)
        except BrokerError as exc:
            return _broker_error(exc)
    if state.on_fault is not None:
        fields = {
            "fault": body.fault,
            "topic": getattr(body, "topic", None),
            "partition": getattr(body, "partition", None),
            **outcome,
        }
        state.on_fault(" ".join(f"{k}={v}" for k, v in fields.items() if v is not None))
    return json_response({"fault": body.fault, **outcome})


def _kafka_faults(state: ServiceState) -> Faults:
    if state.kafka is None:
        raise Rejected(
            409,
            "",
            ErrorCode.INVALID_REQUEST,
            "no Kafka listeners to fail partitions on: serve with --kafka-port",
        )
    return state.kafka.faults


def _rule_out(rule: PartitionRule) -> PartitionFaultOut:
    return PartitionFaultOut(
        rule.id,
        sorted(key.name for key in rule.apis),
        rule.broker,
        rule.topic,
        rule.partition,
        rule.error_name,
        rule.error,
        rule.times,
        rule.hits,
        rule.active,
    )


async def add_partition_fault(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await _body(request, state.bodies.partition_fault)
    faults = _kafka_faults(state)
    async with state.parking(Parks.NEVER):
        try:
            rule = faults.add_partition_fault(
                body.error,
                apis=body.api_keys,
                broker=body.broker,
                topic=body.topic,
                partition=body.partition,
                times=body.count,
            )
        except (TypeError, ValueError) as exc:
            raise Rejected(400, "invalid", ErrorCode.INVALID_REQUEST, f"body: {exc}") from exc
    if state.on_fault is not None:
        state.on_fault(f"fault=partition id={rule.id} {rule.describe()}")
    return json_response(_rule_out(rule), status=201)


async def list_partition_faults(request: web.Request) -> web.Response:
    faults = _kafka_faults(request.app[STATE])
    return json_response(PartitionFaultsOut([_rule_out(r) for r in faults.partition_rules]))


async def clear_partition_faults(request: web.Request) -> web.Response:
    faults = _kafka_faults(request.app[STATE])
    removed = list(faults.partition_rules)
    for rule in removed:
        rule.remove()
    return json_response(PartitionFaultsOut([_rule_out(r) for r in removed]))


async def remove_partition_fault(request: web.Request) -> web.Response:
    faults = _kafka_faults(request.app[STATE])
    text = request.match_info["id"]
    rule = next((r for r in faults.partition_rules if str(r.id) == text), None)
    if rule is None:
        raise Rejected(404, "", ServiceRefusal.NOT_FOUND, f"no partition fault {text!r} in force")
    rule.remove()
    return json_response(_rule_out(rule))


async def healthz(request: web.Request) -> web.Response:
    state = request.app[STATE]
    # 503 while shutting down, so that load balancers stop sending work here.
    return json_response(
        {"status": "closing" if state.closing else "ok", "parked": state.pending.parked},
        status=503 if state.closing else 200,
    )


async def openapi(request: web.Request) -> web.Response:
    return json_response(request.app[STATE].openapi)


def _broker_error(exc: BrokerError) -> web.Response:
    return json_response(ErrorBody(exc.code, exc.message), status=exc.status)


def _text(data: bytes) -> str:
    # Kafka clients may store any bytes; JSON carries text, so invalid UTF-8 is replaced.
    return data.decode("utf-8", "replace")


# -- shutdown --------------------------------------------------------------------------


async def _shutdown(app: web.Application) -> None:
    """Refuse new work, answer everything parked, stop the broker's reapers."""
    state = app[STATE]
    state.closing = True
    await state.broker.close()
    try:
        async with asyncio.timeout(state.config.shutdown_timeout_s):
            await state.idle.wait()
    except TimeoutError:
        logger.error("%d parked requests were not answered at shutdown", state.pending.parked)
