"""GetTelemetrySubscriptions (API key 71) and PushTelemetry (72), version 0: client
telemetry (KIP-714), answered from the client-metrics subscriptions as Kafka 4's
ClientMetricsManager answers (:mod:`purgatory.kafka.client_metrics`).

A client is matched against the subscriptions by its client id (the request header's),
the software name and version it announced in ApiVersions (v3+), and its address and
port. GetTelemetrySubscriptions answers the client instance id (a new one for the zero
id), the subscription id, the metrics to push (none when no subscription matches), the
push interval, the compression types taken (zstd, lz4, gzip, snappy), delta temporality
and ``telemetry.max.bytes``; PushTelemetry keeps what was pushed by client instance id,
or refuses it with Kafka's error. Kafka asks the authorizer nothing for either: any
client that may connect may ask for its subscriptions and push.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.client_metrics import ACCEPTED_COMPRESSION, ClientInfo, ClientMetrics
from purgatory.kafka.handlers.units import ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable, Handler, current_connection

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        GetTelemetrySubscriptionsRequest,
        GetTelemetrySubscriptionsResponse,
        PushTelemetryRequest,
        PushTelemetryResponse,
    )


def _client(header: RequestHeader) -> ClientInfo:
    """Who sent the request being handled: its client id, and what its connection says."""
    connection = current_connection()
    if connection is None:
        return ClientInfo(header.client_id or "")
    address = connection.address
    host = str(address[0]) if isinstance(address, tuple) and address else None
    port = int(address[1]) if isinstance(address, tuple) and len(address) > 1 else None
    name, version = connection.software or (None, None)
    return ClientInfo(header.client_id or "", name, version, host, port, connection)


@final
class TelemetryHandlers:
    """GetTelemetrySubscriptions and PushTelemetry of broker ``broker_id``, over the
    cluster's ``metrics`` (subscriptions, client instances, what was pushed)."""

    def __init__(self, metrics: ClientMetrics, broker_id: int) -> None:
        self.metrics = metrics
        self.broker_id = broker_id

    def apis(self) -> ApiTable:
        handlers: list[tuple[ApiKey, Handler]] = [
            (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, self.get_telemetry_subscriptions),
            (ApiKey.PUSH_TELEMETRY, self.push_telemetry),
        ]
        return {key: Api(*versions(key), handler) for key, handler in handlers}

    def get_telemetry_subscriptions(
        self, header: RequestHeader, request: GetTelemetrySubscriptionsRequest
    ) -> GetTelemetrySubscriptionsResponse:
        answer = self.metrics.get_subscriptions(
            self.broker_id, request.client_instance_id, _client(header)
        )
        if answer.error is not ErrorCode.NONE:
            return respond(request, error_code=answer.error)
        return respond(
            request,
            error_code=ErrorCode.NONE,
            client_instance_id=answer.instance_id,
            subscription_id=answer.subscription_id,
            accepted_compression_types=list(ACCEPTED_COMPRESSION),
            push_interval=answer.interval_ms,
            telemetry_max_bytes=self.metrics.max_bytes,
            delta_temporality=True,
            requested_metrics=list(answer.metrics),
        )

    def push_telemetry(
        self, header: RequestHeader, request: PushTelemetryRequest
    ) -> PushTelemetryResponse:
        error, _ = self.metrics.push(
            self.broker_id,
            request.client_instance_id,
            request.subscription_id,
            request.terminating,
            request.compression_type,
            request.metrics,
            _client(header),
        )
        return respond(request, error_code=error)


# As Kafka advertises client telemetry only with a receiver of the metrics: here, while
# a client-metrics subscription asks for some (librdkafka asks at connect, and logs it).
UNIT: Final = ListenerUnit(
    lambda c: TelemetryHandlers(c.shared.client_metrics, c.broker_id),
    when=lambda s: s.client_metrics.receiving,
)
