"""DescribeCluster (API key 60, versions 0-2): the brokers, the cluster id and the
controller, as a KRaft broker answers an admin client's ``describe_cluster``.

The brokers are the live ones at the addresses the front door advertises (those Metadata
names), each with its rack (``broker.rack``; null when not set); v2's
``include_fenced_brokers`` adds the dead ones, fenced (a KRaft broker whose session
expired is fenced). The controller id is the one Metadata gives (a KRaft broker
names a live broker: clients cannot reach the controllers). The cluster id is
``purgatory``. No authorizer runs here, so ``cluster_authorized_operations`` keeps its
default (-2147483648, "not asked") even when asked for. v1+ asks for an endpoint type:
brokers (1) are answered; controllers (2) MISMATCHED_ENDPOINT_TYPE and any other
UNSUPPORTED_ENDPOINT_TYPE, with Kafka's messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.units import ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        DescribeClusterBroker,
        DescribeClusterRequest,
        DescribeClusterResponse,
    )

CLUSTER_ID: Final = "purgatory"
#: DescribeCluster's endpoint types (Kafka's ``EndpointType``)
_ENDPOINT_TYPES: Final = {1: "BROKER", 2: "CONTROLLER"}
_BROKER: Final = 1


@final
class DescribeClusterHandlers:
    """DescribeCluster over ``cluster``; ``addresses`` maps broker id -> (host, port) as
    the front door advertises them (filled as the listeners start)."""

    def __init__(self, cluster: Cluster, addresses: dict[int, tuple[str, int]]) -> None:
        self.cluster = cluster
        self.addresses = addresses

    def apis(self) -> ApiTable:
        return {
            ApiKey.DESCRIBE_CLUSTER: Api(*versions(ApiKey.DESCRIBE_CLUSTER), self.describe_cluster)
        }

    def describe_cluster(
        self, header: RequestHeader, request: DescribeClusterRequest
    ) -> DescribeClusterResponse:
        endpoint_type: int = getattr(request, "endpoint_type", _BROKER)  # v1+; v0: brokers
        if endpoint_type != _BROKER:
            wanted = _ENDPOINT_TYPES.get(endpoint_type)
            if wanted is None:
                error = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
                message = f"Unsupported endpoint type {endpoint_type}"
            else:
                error = ErrorCode.MISMATCHED_ENDPOINT_TYPE
                message = (
                    "The request was sent to an endpoint of type BROKER, but we wanted an "
                    f"endpoint of type {wanted}"
                )
            return respond(request, error_code=error, error_message=message, controller_id=-1)
        fenced_too: bool = getattr(request, "include_fenced_brokers", False)  # v2+
        meta = self.cluster.metadata()
        live = [b.broker_id for b in meta.brokers if b.alive]
        brokers: list[DescribeClusterBroker] = [
            {
                "broker_id": b.broker_id,
                "host": self.addresses[b.broker_id][0],
                "port": self.addresses[b.broker_id][1],
                "rack": b.rack,
                "is_fenced": not b.alive,
            }
            for b in sorted(meta.brokers, key=lambda b: b.broker_id)
            if (b.alive or fenced_too) and b.broker_id in self.addresses
        ]
        return respond(
            request,
            error_code=ErrorCode.NONE,
            endpoint_type=_BROKER,
            cluster_id=CLUSTER_ID,
            controller_id=live[0] if live else -1,
            brokers=brokers,
        )


# each listener names its own protocol's listeners
UNIT: Final = ListenerUnit(lambda c: DescribeClusterHandlers(c.shared.cluster, c.addresses))
