"""DescribeConfigs 1-4, AlterConfigs 0-2, IncrementalAlterConfigs 0-1 and
ListConfigResources 0-1 (Kafka 4.1's ListClientMetricsResources renamed): the configs of
topics and brokers by Kafka's names, kept in :class:`~.settings.ClusterConfigs`.

DescribeConfigs lists every topic config Kafka has for a topic (its own, else the broker
config it inherits, else Kafka's default; none read-only) and every broker config of
:data:`~purgatory.kafka.broker_configs.BROKER_CONFIGS` for a broker (by its id; those
Kafka cannot change while it runs read-only), with ``listeners`` and
``advertised.listeners`` as the listener is bound; the broker resource ``""`` lists the
dynamic configs set for every broker, as Kafka does. Each entry has its source
(DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG, DEFAULT_CONFIG), its synonyms when asked (every place the value is
set, most binding first), its type (v3+) and its documentation when asked (v3+). A null
or empty list of keys asks for every config. An unknown topic is answered
UNKNOWN_TOPIC_OR_PARTITION, a name no topic may have INVALID_TOPIC_EXCEPTION; another
broker's id, a name that is not a broker id, or a resource type not served here
INVALID_REQUEST, each with its reason.

AlterConfigs replaces a resource's own configs with those given; IncrementalAlterConfigs
changes them one by one: SET, DELETE (back to the inherited value), APPEND and SUBTRACT
(LIST configs: items added if missing, removed if present, starting from the value the
topic has, else Kafka's default). Each resource is answered on its own: an unknown or bad
config INVALID_CONFIG, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, a broker config Kafka
does not change while it runs, a config named twice, a null value, an unknown operation or
a resource named twice INVALID_REQUEST. ``validate_only`` checks and changes nothing. A
change takes effect at once: a lower ``retention.ms`` drops records on the next retention
pass, a higher ``min.insync.replicas`` answers acks=all produces NOT_ENOUGH_REPLICAS, a
broker config reaches the topics that inherit it.

A GROUP resource (Kafka 4.0+) has the group configs of
:data:`~purgatory.kafka.coordinator.group_configs.GROUP_CONFIGS`, kept by the group
coordinator for any group id (a group that does not exist yet too, as Kafka keeps them):
DescribeConfigs lists them all (``GROUP_CONFIG`` when set for the group, else the broker's
value as ``DEFAULT_CONFIG``), AlterConfigs and IncrementalAlterConfigs set them, checked as
Kafka's GroupConfig does (INVALID_CONFIG with its message); a KIP-848 consumer group's
session timeout and heartbeat interval follow its ``consumer.*`` ones.

A CLIENT_METRICS resource is a client telemetry subscription (KIP-714,
:mod:`purgatory.kafka.client_metrics`): AlterConfigs and IncrementalAlterConfigs set its
``metrics``, ``interval.ms`` and ``match`` (APPEND and SUBTRACT on the two lists), checked
as Kafka's ClientMetricsConfigs does; none left removes it. DescribeConfigs lists the
configs set (``CLIENT_METRICS_CONFIG``; a name with none set: no config), and
ListConfigResources the subscriptions' names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, Final, Protocol, TypeVar, final

from purgatory.errors import ErrorCode
from purgatory.kafka.broker_config_table import BROKER_CONFIGS
from purgatory.kafka.client_metrics import CONFIG_NAMES as CLIENT_METRICS_CONFIGS
from purgatory.kafka.client_metrics import INTERVAL_MS, MATCH, METRICS, ClientMetrics
from purgatory.kafka.cluster_configs import (
    ADVERTISED_LISTENERS,
    LISTENER_ADDRESSES,
    LISTENER_PREFIXED,
    ClusterConfigs,
    Config,
    Source,
)
from purgatory.kafka.config_rules import ConfigChanges, ConfigType, Value
from purgatory.kafka.coordinator.group_configs import (
    GROUP_CONFIGS,
    GROUP_EFFECTS,
    KEPT_GROUP,
)
from purgatory.kafka.coordinator.group_coordinator import GroupCoordinator
from purgatory.kafka.handlers.units import ListenerUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable, Handler
from purgatory.kafka.topic_configs import TOPIC_CONFIGS, TopicConfig
from purgatory.sim.errors import SimulationError
from purgatory.sim.validate import check_topic_name

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        AlterConfigsRequest,
        AlterConfigsResource,
        AlterConfigsResourceResponse,
        AlterConfigsResponse,
        DescribeConfigsRequest,
        DescribeConfigsResourceResult,
        DescribeConfigsResponse,
        DescribeConfigsResult,
        IncrementalAlterConfigsAlterableConfig,
        IncrementalAlterConfigsAlterConfigsResource,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        ListConfigResourcesConfigResource,
        ListConfigResourcesRequest,
        ListConfigResourcesResponse,
    )


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class _Resource(Protocol):
    """What AlterConfigs and IncrementalAlterConfigs name a resource by, and its configs."""

    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def configs(self) -> Sequence[_Named]: ...


#: a resource of AlterConfigs or of IncrementalAlterConfigs
R = TypeVar("R", bound=_Resource)


class Resource(IntEnum):
    """Kafka's ConfigResource types."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class Op(IntEnum):
    """IncrementalAlterConfigs' operations (Kafka's AlterConfigOp.OpType)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


#: ListConfigResources v1's resource types (Kafka 4.1's; none asked: all of them)
_LISTED: Final = (
    Resource.TOPIC,
    Resource.BROKER,
    Resource.BROKER_LOGGER,
    Resource.CLIENT_METRICS,
    Resource.GROUP,
)


@final
class ConfigHandlers:
    """The config requests of broker ``broker_id``; ``configs``: the cluster's configs;
    ``addresses``: where each broker's listener is bound; ``coordinator``: the group
    coordinator, which keeps the group configs (None: a coordinator of Kafka's defaults
    of its own); ``client_metrics``: the client telemetry subscriptions (None: its
    own)."""

    def __init__(
        self,
        configs: ClusterConfigs,
        broker_id: int,
        addresses: Mapping[int, tuple[str, int]],
        coordinator: GroupCoordinator | None = None,
        client_metrics: ClientMetrics | None = None,
    ) -> None:
        self.configs = configs
        self.cluster = configs.cluster
        self.broker_id = broker_id
        self.addresses = addresses
        self.coordinator = GroupCoordinator() if coordinator is None else coordinator
        self.client_metrics = ClientMetrics() if client_metrics is None else client_metrics

    def apis(self) -> ApiTable:
        handlers: list[tuple[ApiKey, Handler]] = [
            (ApiKey.DESCRIBE_CONFIGS, self.describe_configs),
            (ApiKey.ALTER_CONFIGS, self.alter_configs),
            (ApiKey.INCREMENTAL_ALTER_CONFIGS, self.incremental_alter_configs),
            (ApiKey.LIST_CONFIG_RESOURCES, self.list_config_resources),
        ]
        return {key: Api(*versions(key), handler) for key, handler in handlers}

    # -- DescribeConfigs -------------------------------------------------------------------

    def _listeners(self) -> list[Config]:
        """``listeners`` and ``advertised.listeners``: the one listener, as bound (a value
        AlterConfigs set for the broker is reported before it, and not acted on)."""
        host, port = self.addresses.get(self.broker_id, ("", 0))
        value = f"PLAINTEXT://{host}:{port}"
        out = []
        for name, what in zip(
            LISTENER_ADDRESSES,
            (
                "the listener Metadata advertises: the one bound",
                "the listener this broker is bound to (one, plaintext)",
            ),
            strict=True,
        ):
            synonyms: list[tuple[str, str | None, Source]] = [
                (n, str(v), s)
                for n, v, s in self.configs.broker_chain(name, self.broker_id)
                if s is not Source.DEFAULT_CONFIG
            ]
            synonyms.append((name, value, Source.STATIC_BROKER_CONFIG))
            _, shown, source = synonyms[0]
            read_only = name == ADVERTISED_LISTENERS
            out.append(
                Config(name, shown, source, ConfigType.LIST, tuple(synonyms), read_only, what)
            )
        return out

    def _group_configs(self, name: str) -> list[Config]:
        """Every group config of group ``name``, as Kafka's ConfigHelper lists them."""
        if not name:
            raise SimulationError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        config = self.coordinator.group_config(name)
        out = []
        for key in GROUP_CONFIGS.values():
            value = config.value(key.name)
            text = str(value).lower() if isinstance(value, bool) else str(value)
            source = Source.GROUP_CONFIG if key.name in config.own else Source.DEFAULT_CONFIG
            kind = {"INT": ConfigType.INT, "BOOLEAN": ConfigType.BOOLEAN}.get(
                key.type, ConfigType.STRING
            )
            doc = GROUP_EFFECTS.get(key.name, KEPT_GROUP)
            synonym = (key.name, text, source)
            out.append(Config(key.name, text, source, kind, (synonym,), False, doc))
        return out

    def _described(self, resource_type: int, name: str) -> list[Config]:
        if resource_type == Resource.TOPIC:
            check_topic_name(name)  # a name no topic may have: INVALID_TOPIC_EXCEPTION
            own = self.configs.topic_overrides(name)
            if own is None:
                raise SimulationError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist"
                )
            return self.configs.topic_configs(own, self.broker_id)
        if resource_type == Resource.BROKER:
            if name == "":  # the dynamic configs of every broker, as Kafka lists them
                every = self.configs.broker_configs(self.broker_id)
                return [_only_default(c) for c in every if c.name in self.configs.dynamic_default]
            if self._broker_id(name) != self.broker_id:
                raise SimulationError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unexpected broker id, expected {self.broker_id} or empty string, but "
                    f"received {name}",
                )
            return self.configs.broker_configs(self.broker_id) + self._listeners()
        if resource_type == Resource.GROUP:
            return self._group_configs(name)
        if resource_type == Resource.CLIENT_METRICS:
            return self._client_metrics_configs(name)
        raise _unsupported(resource_type)

    def _client_metrics_configs(self, name: str) -> list[Config]:
        """The configs set for subscription ``name``, as Kafka's ConfigHelper lists them."""
        if not name:
            raise SimulationError(
                ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty"
            )
        own = self.client_metrics.configs.get(name, {})
        source = Source.CLIENT_METRICS_CONFIG
        return [
            Config(
                key,
                own[key],
                source,
                ConfigType.INT if key == INTERVAL_MS else ConfigType.LIST,
                (),
                False,
                "a client telemetry subscription's (KIP-714)",
            )
            for key in CLIENT_METRICS_CONFIGS
            if key in own
        ]

    def describe_configs(
        self, header: RequestHeader, request: DescribeConfigsRequest
    ) -> DescribeConfigsResponse:
        synonyms = request.include_synonyms
        documented = (  # v3+
            request.include_documentation if hasattr(request, "include_documentation") else False
        )
        results: list[DescribeConfigsResult] = []
        for resource in request.resources:
            keys = resource.configuration_keys
            configs: list[DescribeConfigsResourceResult]
            try:
                configs = [
                    _entry(config, synonyms, documented)
                    for config in self._described(resource.resource_type, resource.resource_name)
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

    # -- AlterConfigs and IncrementalAlterConfigs ------------------------------------------

    def alter_configs(
        self, header: RequestHeader, request: AlterConfigsRequest
    ) -> AlterConfigsResponse:
        def replaced(resource: AlterConfigsResource, current: Mapping[str, Value]) -> ConfigChanges:
            changes: ConfigChanges = {}
            for config in resource.configs:
                if config.value is None:
                    raise SimulationError(
                        ErrorCode.INVALID_REQUEST, f"Null value not supported for : {config.name}"
                    )
                changes[config.name] = config.value
            return changes

        resources: Sequence[AlterConfigsResource] = request.resources
        return respond(
            request,
            responses=self._alter(resources, request.validate_only, replaced, incremental=False),
        )

    def incremental_alter_configs(
        self, header: RequestHeader, request: IncrementalAlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse:
        def changed(
            resource: IncrementalAlterConfigsAlterConfigsResource, current: Mapping[str, Value]
        ) -> ConfigChanges:
            out: ConfigChanges = dict(current)
            for config in resource.configs:
                out = _incremental(resource.resource_type, config, out)
            return out

        resources: Sequence[IncrementalAlterConfigsAlterConfigsResource] = request.resources
        return respond(
            request,
            responses=self._alter(resources, request.validate_only, changed, incremental=True),
        )

    def _alter(
        self,
        resources: Sequence[R],
        validate_only: bool,
        new_configs: Callable[[R, Mapping[str, Value]], ConfigChanges],
        incremental: bool,
    ) -> list[AlterConfigsResourceResponse]:
        """Each resource answered on its own: its new configs (``new_configs(resource,
        its configs now)``) checked, then set unless validate_only (the answers of both
        APIs have the same fields)."""
        named = Counter((r.resource_type, r.resource_name) for r in resources)
        responses: list[AlterConfigsResourceResponse] = []
        for resource in resources:
            kind, name = resource.resource_type, resource.resource_name
            try:
                if named[kind, name] > 1:
                    raise SimulationError(
                        ErrorCode.INVALID_REQUEST, f"Duplicate resource: type {kind}, {name!r}"
                    )
                keys = Counter(config.name for config in resource.configs)
                if any(count > 1 for count in keys.values()):
                    raise SimulationError(
                        ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
                    )
                self._alter_one(resource, new_configs, validate_only, incremental)
                error, message = ErrorCode.NONE, None
            except SimulationError as refused:
                error, message = refused.code, refused.message
            responses.append(
                {
                    "error_code": error,
                    "error_message": message,
                    "resource_type": kind,
                    "resource_name": name,
                }
            )
        return responses

    def _alter_one(
        self,
        resource: R,
        new_configs: Callable[[R, Mapping[str, Value]], ConfigChanges],
        validate_only: bool,
        incremental: bool,
    ) -> None:
        kind, name = resource.resource_type, resource.resource_name
        if kind == Resource.TOPIC:
            check_topic_name(name)
            current = self.configs.topic_overrides(name)
            if current is None:
                raise SimulationError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist"
                )
            wanted = new_configs(resource, current)
            own = self.configs.check_topic(wanted.items())
            self.configs.alter_topic(name, own, validate_only)
        elif kind == Resource.BROKER:
            broker = None if name == "" else self._broker_id(name)
            if broker is None:
                current_broker = dict(self.configs.dynamic_default)
            else:
                current_broker = dict(self.configs.dynamic.get(broker, {}))
            wanted = new_configs(resource, current_broker)
            changes: ConfigChanges = {n: None for n in current_broker if n not in wanted}
            changes.update(wanted)
            self.configs.alter_broker(broker, changes, validate_only)
        elif kind == Resource.GROUP:
            if not name:
                raise SimulationError(
                    ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."
                )
            own = dict(self.coordinator.group_config(name).own)
            wanted = new_configs(resource, own)
            nulls = [n for n, v in wanted.items() if v is None]
            if nulls:
                raise SimulationError(
                    ErrorCode.INVALID_CONFIG,
                    f"Null value not supported for group configs: {','.join(nulls)}",
                )
            try:
                checked = self.coordinator.check_group_configs(wanted)
            except ValueError as exc:
                raise SimulationError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            if not validate_only:
                self.coordinator.set_group_configs(name, checked)
        elif kind == Resource.CLIENT_METRICS:
            subscribed = self.client_metrics.configs.get(name, {})
            wanted = new_configs(resource, subscribed)
            given = {n: str(v) for n, v in wanted.items() if v is not None}
            self.client_metrics.subscribe(name, given, validate_only)
        else:
            raise _unsupported(kind)

    def _broker_id(self, name: str) -> int:
        try:
            return int(name)
        except ValueError:
            raise SimulationError(
                ErrorCode.INVALID_REQUEST, f"broker id must be an integer, got {name!r}"
            ) from None

    # -- ListConfigResources ---------------------------------------------------------------

    def list_config_resources(
        self, header: RequestHeader, request: ListConfigResourcesRequest
    ) -> ListConfigResourcesResponse:
        """v0 (ListClientMetricsResources) lists the client-metrics subscriptions. v1
        lists the resources of the types asked (none: topics, brokers, broker loggers,
        client metrics and groups) that have configs: every topic and broker, the groups
        with configs, the client-metrics subscriptions (broker loggers have none here);
        another type INVALID_REQUEST."""
        if not hasattr(request, "resource_types"):  # v0, ListClientMetricsResources
            names = self.client_metrics.subscriptions()
            return respond(
                request,
                error_code=ErrorCode.NONE,
                config_resources=[{"resource_name": n} for n in names],
            )
        asked = list(request.resource_types) or list(_LISTED)
        if any(kind not in _LISTED for kind in asked):
            # the answer has no message field: the types refused go unnamed
            return respond(request, error_code=ErrorCode.INVALID_REQUEST, config_resources=[])
        resources: list[ListConfigResourcesConfigResource] = []
        for kind in dict.fromkeys(asked):
            if kind == Resource.TOPIC:
                names = self.configs.topics_with_configs()
            elif kind == Resource.BROKER:
                names = [str(b) for b in sorted(self.cluster.brokers)]
            elif kind == Resource.GROUP:  # the group ids with configs of their own
                names = sorted(self.coordinator.group_configs)
            elif kind == Resource.CLIENT_METRICS:  # the subscriptions
                names = self.client_metrics.subscriptions()
            else:
                names = []
            resources += [{"resource_name": n, "resource_type": kind} for n in names]
        return respond(request, error_code=ErrorCode.NONE, config_resources=resources)


def _unsupported(resource_type: int) -> SimulationError:
    try:
        what = Resource(resource_type).name
    except ValueError:
        what = str(resource_type)
    return SimulationError(
        ErrorCode.INVALID_REQUEST,
        f"Unsupported resource type: {what} (topics (2) and brokers (4) have configs here)",
    )


def _only_default(config: Config) -> Config:
    """A broker config as the resource ``""`` (every broker) describes it: its dynamic
    default value."""
    synonyms = tuple(s for s in config.synonyms if s[2] is Source.DYNAMIC_DEFAULT_BROKER_CONFIG)
    _, value, source = synonyms[0]
    return config._replace(value=value, source=source, synonyms=synonyms)


def _incremental(
    resource_type: int, config: IncrementalAlterConfigsAlterableConfig, current: ConfigChanges
) -> ConfigChanges:
    """``current`` (a resource's own configs) after one IncrementalAlterConfigs op."""
    name, value, op = config.name, config.value, int(config.config_operation)
    out = dict(current)
    if op == Op.DELETE:
        out.pop(name, None)
        return out
    if op not in (Op.SET, Op.APPEND, Op.SUBTRACT):
        raise SimulationError(ErrorCode.INVALID_REQUEST, f"Unknown operation {op} for {name}")
    if value is None:
        raise SimulationError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
    if op == Op.SET:
        out[name] = value
        return out
    if resource_type == Resource.GROUP or (  # no group config is a list
        resource_type == Resource.CLIENT_METRICS and name not in (METRICS, MATCH)
    ):
        raise SimulationError(
            ErrorCode.INVALID_CONFIG,
            f"Can't {Op(op).name} to key {name} because its type is not LIST.",
        )
    if resource_type == Resource.CLIENT_METRICS:  # metrics, match: empty by default
        return _listed(out, name, op, str(out.get(name, "")), value)
    known = TOPIC_CONFIGS if resource_type == Resource.TOPIC else BROKER_CONFIGS
    prefixed = LISTENER_PREFIXED.fullmatch(name)
    entry = known.get(prefixed[2] if prefixed and resource_type == Resource.BROKER else name)
    if entry is None:
        raise SimulationError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {name}")
    if entry.type is not ConfigType.LIST:
        verb = "append" if op == Op.APPEND else "subtract"
        raise SimulationError(
            ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}"
        )
    start = out.get(name)
    if start is None:  # Kafka starts from its default, not from an inherited value
        start = entry.kafka_default() if isinstance(entry, TopicConfig) else entry.kafka_default
    # a null default is an empty list
    return _listed(out, name, op, "" if start is None else str(start), value)


def _listed(out: ConfigChanges, name: str, op: int, start: str, value: str) -> ConfigChanges:
    """``out`` with LIST config ``name`` (now ``start``) after APPEND or SUBTRACT of the
    items of ``value``."""
    old = [item for item in str(start).split(",") if item]
    given = [item.strip() for item in value.split(",")]
    if op == Op.APPEND:
        items = old + [item for item in given if item not in old]
    else:
        items = [item for item in old if item not in given]
    out[name] = ",".join(items)
    return out


def _entry(config: Config, synonyms: bool, documented: bool) -> DescribeConfigsResourceResult:
    """One DescribeConfigs entry; a password's value (and its synonyms') is not shown."""
    hidden = config.sensitive
    return {
        "name": config.name,
        "value": None if hidden else config.value,
        "read_only": config.read_only,
        "config_source": config.source,
        "is_sensitive": hidden,
        "synonyms": [
            {"name": name, "value": None if hidden else value, "source": source}
            for name, value, source in (config.synonyms if synonyms else ())
        ],
        "config_type": config.type,
        "documentation": config.doc if documented else None,
    }


UNIT: Final = ListenerUnit(
    lambda c: ConfigHandlers(
        c.shared.configs,
        c.broker_id,
        c.shared.addresses,
        c.shared.coordinator,
        c.shared.client_metrics,
    )
)
