"""DescribeConfigs 1-4: the configs of a topic, and of the broker asked, that the
simulation actually follows, with Kafka's names (see :mod:`.settings`).

A topic has ``retention.ms`` and ``retention.bytes`` (its own if it was created with
them, else the brokers'), ``cleanup.policy`` (always ``delete``: nothing is compacted),
``min.insync.replicas`` (the brokers', for every topic) and ``message.timestamp.type``
(``CreateTime``: batches keep the producer's timestamps). A broker (resource name: its
id) has the settings those come from and every other config of
:data:`~purgatory.kafka.broker_configs.BROKER_CONFIGS` (``num.partitions``,
``message.max.bytes``, the group session bounds, ...), each with its value in force and
its source: STATIC_BROKER_CONFIG when it was set (``--kafka-config``,
``EmbeddedKafka(configs=...)``) or the simulation's default differs from Kafka's, else
DEFAULT_CONFIG. Nothing here can be altered
over the wire, so every config is read-only. A null or empty list of keys asks for every
config, as in Kafka. An unknown topic is answered UNKNOWN_TOPIC_OR_PARTITION, another
broker's id or another resource type INVALID_REQUEST, each with its reason. No
documentation is kept (null, v3+).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, final

from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.handlers.settings import Config, broker_configs_described, topic_configs
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim import Cluster
from purgatory.sim.errors import ErrorCode, SimulationError


class Resource(IntEnum):
    """Kafka's ConfigResource types served here."""

    TOPIC = 2
    BROKER = 4


@final
class ConfigHandlers:
    """The DescribeConfigs handler of broker ``broker_id``; ``configs``: the broker
    configs the cluster was started with."""

    def __init__(self, cluster: Cluster, broker_id: int, configs: BrokerConfigs) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.configs = configs

    def apis(self) -> ApiTable:
        return {
            ApiKey.DESCRIBE_CONFIGS: Api(*versions(ApiKey.DESCRIBE_CONFIGS), self.describe_configs)
        }

    def _broker_configs(self) -> list[Config]:
        return list(broker_configs_described(self.cluster, self.configs).values())

    def _topic_configs(self, name: str) -> list[Config]:
        config = self.cluster.topic_config(name)
        if config is None:
            raise SimulationError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        return topic_configs(self.cluster, config, self.configs.explicit)

    def _configs(self, resource_type: int, name: str) -> list[Config]:
        if resource_type == Resource.TOPIC:
            return self._topic_configs(name)
        if resource_type == Resource.BROKER:
            if name not in ("", str(self.broker_id)):
                raise SimulationError(
                    ErrorCode.INVALID_REQUEST,
                    f"broker {self.broker_id} describes its own configs ({self.broker_id!r} "
                    f"or ''), not {name!r}",
                )
            return self._broker_configs()
        raise SimulationError(
            ErrorCode.INVALID_REQUEST,
            f"resource type {resource_type}: only topics (2) and brokers (4) are described",
        )

    def describe_configs(self, header: RequestHeader, request: Any) -> Any:
        synonyms = request.include_synonyms
        results = []
        for resource in request.resources:
            keys = resource.configuration_keys
            try:
                configs = [
                    _entry(config, synonyms)
                    for config in self._configs(resource.resource_type, resource.resource_name)
                    if not keys or config.name in keys
                ]
                error, message = ErrorCode.NONE, None
            except SimulationError as refused:
                configs, error, message = [], refused.code, refused.message
            results.append(
                {
                    "error_code": error,
                    "error_message": message,
                    "resource_type": resource.resource_type,
                    "resource_name": resource.resource_name,
                    "configs": configs,
                }
            )
        return respond(request, results=results)


def _entry(config: Config, synonyms: bool) -> dict[str, Any]:
    """One DescribeConfigs entry: read-only, not sensitive, undocumented."""
    return {
        "name": config.name,
        "value": config.value,
        "read_only": True,
        "config_source": config.source,
        "is_sensitive": False,
        "synonyms": [
            {"name": name, "value": value, "source": source}
            for name, value, source in (config.synonyms if synonyms else ())
        ],
        "config_type": config.type,
        "documentation": None,
    }
