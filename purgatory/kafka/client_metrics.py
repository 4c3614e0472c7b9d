"""Client metrics (KIP-714), as Kafka's ClientMetricsManager keeps them: the
subscriptions, the client instances that ask for them, and what the clients push.

A subscription is a CLIENT_METRICS config resource, named by whoever makes it, with three
configs (Kafka's ClientMetricsConfigs): ``metrics``, the metric name prefixes to push
(``*``: all); ``interval.ms``, how often (100 .. 3600000, default 300000); ``match``,
``PARAM=REGEX`` selectors of the clients it is for (``client_instance_id``,
``client_id``, ``client_software_name``, ``client_software_version``,
``client_source_address``, ``client_source_port``; none: every client).
:func:`check_subscription` checks them as Kafka does; :meth:`ClientMetrics.subscribe`
sets one (no configs left: removed).

GetTelemetrySubscriptions gives a client its instance id (a new random one when it sends
the zero id), the metrics every matching subscription asks (none when none matches: the
client then pushes nothing), the shortest of their intervals, the subscription id (a
CRC-32C of the metrics and interval, XORed with the instance id's hash), the compression
types accepted (zstd, lz4, gzip, snappy), ``telemetry.max.bytes`` and delta temporality.
A client asking again before its interval has passed is answered
THROTTLING_QUOTA_EXCEEDED, unless a subscription changed since.

PushTelemetry is checked in Kafka's order: a reserved or missing instance id
INVALID_REQUEST, a push after one marked ``terminating`` INVALID_REQUEST, one before the
interval has passed (but the first after GetTelemetrySubscriptions, and a terminating
one) THROTTLING_QUOTA_EXCEEDED, a subscription id not the instance's
UNKNOWN_SUBSCRIPTION_ID, a compression type Kafka does not know
UNSUPPORTED_COMPRESSION_TYPE, metrics larger than ``telemetry.max.bytes``
TELEMETRY_TOO_LARGE. The metrics are then inflated and read (:mod:`~purgatory.kafka.otlp`)
and kept by client instance id (:meth:`ClientMetrics.telemetry`) where Kafka hands them
to its ClientTelemetryReceiver; what does not inflate or read is INVALID_RECORD.

Each broker keeps its own client instances, as Kafka's do; an instance is forgotten when
the connection that made it closes, or after ``max(60 s, 3 x interval)`` unheard of.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol, final

from purgatory.errors import ErrorCode
from purgatory.kafka.compression import GZIP, LZ4, SNAPPY, ZSTD, inflate
from purgatory.kafka.crc32c import crc32c
from purgatory.kafka.otlp import MetricPoint, decode_metrics
from purgatory.kafka.wire_errors import DecodeError
from purgatory.sim.errors import SimulationError

METRICS: Final = "metrics"
INTERVAL_MS: Final = "interval.ms"
MATCH: Final = "match"
#: the configs of a client-metrics resource, in Kafka's order
CONFIG_NAMES: Final = (METRICS, INTERVAL_MS, MATCH)
#: ``metrics`` naming every metric
ALL_METRICS: Final = "*"
DEFAULT_INTERVAL_MS: Final = 5 * 60 * 1000
MIN_INTERVAL_MS: Final = 100
MAX_INTERVAL_MS: Final = 3_600_000
#: what a ``match`` selector may name
MATCH_PARAMS: Final = frozenset(
    {
        "client_instance_id",
        "client_id",
        "client_software_name",
        "client_software_version",
        "client_source_address",
        "client_source_port",
    }
)
#: the compression types GetTelemetrySubscriptions offers, in Kafka's order
ACCEPTED_COMPRESSION: Final = (ZSTD, LZ4, GZIP, SNAPPY)
#: Kafka's reserved Uuids (Uuid.RESERVED): no client instance may have them
RESERVED_IDS: Final = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})
#: how long an instance unheard of is kept at least (Kafka's DEFAULT_CACHE_EXPIRY_MS)
CACHE_EXPIRY_MS: Final = 60_000
#: the pushes kept per client instance (the oldest go first)
KEPT_PUSHES: Final = 1000
_INT: Final = re.compile(r"[+-]?\d+")
_JAVA_INT_MAX: Final = (1 << 31) - 1


@final
@dataclass(frozen=True, slots=True)
class Subscription:
    """One client-metrics resource, checked: its metric prefixes, push interval and
    client selectors (param -> compiled regex; none: every client)."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, re.Pattern[str]]


def _list(text: str) -> list[str]:
    """A LIST config's text as Kafka's ConfigDef parses it: trimmed, split at commas
    (with the whitespace around them); empty: no item."""
    trimmed = text.strip()
    return [] if not trimmed else re.split(r"\s*,\s*", trimmed)


def _illegal(pattern: str) -> SimulationError:
    return SimulationError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")


def parse_match(patterns: Iterable[str]) -> dict[str, re.Pattern[str]]:
    """``PARAM=REGEX`` selectors as Kafka's parseMatchingPatterns reads them (INVALID_CONFIG
    "Illegal client matching pattern" for anything else)."""
    out: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        while len(parts) > 1 and parts[-1] == "":  # Java's split drops trailing empties
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in MATCH_PARAMS:
            raise _illegal(pattern)
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise _illegal(pattern) from None
    return out


def check_subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """A client-metrics resource's configs checked as Kafka's ClientMetricsConfigs.validate
    checks them: SimulationError INVALID_REQUEST for an empty name, an unknown config or an
    interval outside 100 .. 3600000 ms; INVALID_CONFIG for an interval that is not an INT
    or a bad ``match``."""
    if not name:
        raise SimulationError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CONFIG_NAMES:
            raise SimulationError(
                ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}"
            )
    interval = DEFAULT_INTERVAL_MS
    if INTERVAL_MS in configs:
        text = configs[INTERVAL_MS].strip()
        if not _INT.fullmatch(text) or abs(int(text)) > _JAVA_INT_MAX:
            raise SimulationError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {text} for configuration {INTERVAL_MS}: Not a number of type INT",
            )
        interval = int(text)
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise SimulationError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 "
                "and 3600000 (1 hour)",
            )
    metrics = tuple(_list(configs.get(METRICS, "")))
    match = parse_match(_list(configs.get(MATCH, "")))
    return Subscription(name, metrics, interval, match)


def _java_hash(text: str) -> int:
    """Java's String.hashCode, unsigned."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_set_order(items: Iterable[str]) -> list[str]:
    """``items`` (duplicates dropped) in the order a Java HashSet of them iterates: by
    bucket of the table the set grew to, then as added."""
    unique = list(dict.fromkeys(items))
    size = 16
    while len(unique) > size * 3 // 4:
        size *= 2

    def bucket(text: str) -> int:
        h = _java_hash(text)
        return (h ^ (h >> 16)) & (size - 1)

    return sorted(unique, key=bucket)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def uuid_hash(instance: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode: the two halves XORed, then their two halves."""
    xor = (instance.int >> 64) ^ (instance.int & ((1 << 64) - 1))
    return _int32((xor >> 32) ^ xor)


def subscription_id(metrics: Iterable[str], interval_ms: int, instance: uuid.UUID) -> int:
    """Kafka's computeSubscriptionId: CRC-32C of the metric set as Java prints it followed
    by the interval, XORed with the instance id's hash."""
    text = "[" + ", ".join(java_set_order(metrics)) + "]" + str(interval_ms)
    return _int32(crc32c(text.encode()) ^ uuid_hash(instance))


class Connection(Protocol):
    """The connection a request came on (the server's), as far as telemetry asks."""

    @property
    def closed(self) -> bool: ...


@final
@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Who asks: what the ``match`` selectors are matched against, and the connection
    (an instance is forgotten when the connection that made it closes)."""

    client_id: str = ""
    software_name: str | None = None
    software_version: str | None = None
    address: str | None = None
    port: int | None = None
    connection: Connection | None = field(default=None, compare=False)

    def attributes(self, instance: uuid.UUID) -> dict[str, str | None]:
        return {
            "client_instance_id": str(instance),
            "client_id": self.client_id,
            "client_software_name": self.software_name,
            "client_software_version": self.software_version,
            "client_source_address": self.address,
            "client_source_port": None if self.port is None else str(self.port),
        }


@dataclass(slots=True)
class _Instance:
    """A client instance as one broker knows it (Kafka's ClientMetricsInstance)."""

    instance_id: uuid.UUID
    client: ClientInfo
    connection: Connection | None
    subscription_id: int
    version: int
    metrics: tuple[str, ...]
    interval_ms: int
    expires_ms: int = 0
    last_get_ms: int = 0
    last_push_ms: int = 0
    terminating: bool = False

    def may_get(self, now_ms: int) -> bool:
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def may_push(self, now_ms: int) -> bool:
        # the first push after GetTelemetrySubscriptions is taken early: clients jitter it
        accepted = self.last_get_ms > self.last_push_ms
        if not accepted:
            accepted = now_ms - self.last_push_ms >= self.interval_ms
        if accepted:
            self.last_push_ms = now_ms
        return accepted


@final
@dataclass(frozen=True, slots=True)
class Push:
    """One accepted push: when (ms), whether the client said it was terminating, and its
    data points."""

    time_ms: int
    terminating: bool
    points: tuple[MetricPoint, ...]


@final
@dataclass(frozen=True, slots=True)
class ClientTelemetry:
    """What one client instance pushed: who it said it was (at its latest push), and its
    pushes, oldest first (at most :data:`KEPT_PUSHES`)."""

    client_instance_id: uuid.UUID
    client_id: str
    software_name: str | None
    software_version: str | None
    pushes: tuple[Push, ...] = field(default=())

    @property
    def points(self) -> tuple[MetricPoint, ...]:
        """Every data point pushed, in order."""
        return tuple(point for push in self.pushes for point in push.points)

    def names(self) -> set[str]:
        """The names of the metrics pushed."""
        return {point.name for point in self.points}

    def latest(self) -> dict[str, int | float | None]:
        """Each metric name's value in the latest push that had it (of its last point
        there: a metric pushed per partition or broker has several)."""
        return {point.name: point.value for point in self.points}

    @property
    def terminated(self) -> bool:
        """Whether the client's last push said it was terminating."""
        return bool(self.pushes) and self.pushes[-1].terminating


@final
@dataclass(slots=True)
class _Pushed:
    client: ClientInfo
    pushes: deque[Push] = field(default_factory=lambda: deque(maxlen=KEPT_PUSHES))


@final
@dataclass(frozen=True, slots=True)
class Answer:
    """GetTelemetrySubscriptions' answer (error NONE) or refusal."""

    error: ErrorCode
    message: str | None = None
    instance_id: uuid.UUID | None = None
    subscription_id: int = 0
    metrics: tuple[str, ...] = ()
    interval_ms: int = 0


@final
class ClientMetrics:
    """The subscriptions (shared by every broker), each broker's client instances, and the
    metrics pushed. ``max_bytes``: ``telemetry.max.bytes``; ``now_ms``: the clock (wall
    clock milliseconds, as Kafka's)."""

    def __init__(self, max_bytes: int = 1 << 20, now_ms: Callable[[], int] | None = None) -> None:
        self.max_bytes = max_bytes
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        #: subscription name -> its configs as set (Kafka's text)
        self.configs: dict[str, dict[str, str]] = {}
        self._subscriptions: dict[str, Subscription] = {}
        self._version = 0
        self._instances: dict[tuple[int, uuid.UUID], _Instance] = {}
        self._pushed: dict[uuid.UUID, _Pushed] = {}

    # -- subscriptions ---------------------------------------------------------------------

    def subscribe(self, name: str, configs: Mapping[str, str], validate_only: bool = False) -> None:
        """Set subscription ``name``'s configs (checked: :func:`check_subscription`); none
        removes it. Every client instance gets the changed subscriptions at its next
        request."""
        checked = check_subscription(name, configs)
        if validate_only:
            return
        if not configs:
            if self._subscriptions.pop(name, None) is not None:
                del self.configs[name]
                self._version += 1
            return
        self.configs[name] = dict(configs)
        self._subscriptions[name] = checked
        self._version += 1

    def receiving(self) -> bool:
        """Whether any subscription asks for metrics: client telemetry is served (and
        advertised) only then."""
        return bool(self._subscriptions)

    def subscriptions(self) -> list[str]:
        """The subscriptions' names (ListConfigResources' client-metrics resources)."""
        return sorted(self._subscriptions)

    # -- client instances ------------------------------------------------------------------

    def _instance(self, broker: int, instance_id: uuid.UUID, client: ClientInfo) -> _Instance:
        now = self.now_ms()
        key = (broker, instance_id)
        known = self._instances.get(key)
        if known is None or now >= known.expires_ms or _closed(known.connection):
            # new, or forgotten: made now, matched against who asks
            known = self._instances[key] = self._make(instance_id, client, client.connection)
        elif known.version < self._version:
            # made before a subscription changed: made again, for whom it was made
            known = self._instances[key] = self._make(instance_id, known.client, client.connection)
        known.expires_ms = now + max(CACHE_EXPIRY_MS, 3 * known.interval_ms)
        return known

    def _make(
        self, instance_id: uuid.UUID, client: ClientInfo, connection: Connection | None
    ) -> _Instance:
        """A client instance with the subscriptions matching ``client`` (Kafka's
        createClientInstance)."""
        interval = DEFAULT_INTERVAL_MS
        metrics: list[str] = []
        everything = False
        attributes = client.attributes(instance_id)
        for name in java_set_order(self._subscriptions):
            subscription = self._subscriptions[name]
            if _matches(subscription.match, attributes):
                everything = everything or ALL_METRICS in subscription.metrics
                metrics += java_set_order(subscription.metrics)
                interval = min(interval, subscription.interval_ms)
        chosen = [ALL_METRICS] if everything else java_set_order(metrics)
        return _Instance(
            instance_id,
            client,
            connection,
            subscription_id(chosen, interval, instance_id),
            self._version,
            tuple(chosen),
            interval,
        )

    def get_subscriptions(
        self, broker: int, instance_id: uuid.UUID | None, client: ClientInfo
    ) -> Answer:
        """GetTelemetrySubscriptions from ``client`` at broker ``broker``."""
        if instance_id is None or instance_id.int == 0:
            instance_id = self._new_id(broker)
        instance = self._instance(broker, instance_id, client)
        if not instance.may_get(self.now_ms()):
            return Answer(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{instance_id}] arrived before the next push "
                "interval time",
            )
        return Answer(
            ErrorCode.NONE,
            None,
            instance_id,
            instance.subscription_id,
            instance.metrics,
            instance.interval_ms,
        )

    def _new_id(self, broker: int) -> uuid.UUID:
        while True:
            made = uuid.uuid4()
            if made not in RESERVED_IDS and (broker, made) not in self._instances:
                return made

    def push(
        self,
        broker: int,
        instance_id: uuid.UUID | None,
        subscription: int,
        terminating: bool,
        compression: int,
        metrics: bytes,
        client: ClientInfo,
    ) -> tuple[ErrorCode, str | None]:
        """PushTelemetry from ``client`` at broker ``broker``: (error, message)."""
        if instance_id is None or instance_id in RESERVED_IDS:
            return ErrorCode.INVALID_REQUEST, (
                f"Invalid request from the client [{instance_id}], invalid client instance id"
            )
        now = self.now_ms()
        instance = self._instance(broker, instance_id, client)
        try:
            refused = self._refused(instance, subscription, terminating, compression, metrics, now)
        finally:
            instance.terminating = terminating
        if refused is not None:
            return refused
        if metrics:
            try:
                raw = metrics if compression == 0 else inflate(compression, memoryview(metrics))
                points = decode_metrics(raw)
            except DecodeError as exc:
                return ErrorCode.INVALID_RECORD, f"Metrics do not read: {exc}"
            pushed = self._pushed.get(instance_id)
            if pushed is None:
                pushed = self._pushed[instance_id] = _Pushed(client)
            pushed.client = client
            pushed.pushes.append(Push(now, terminating, tuple(points)))
        return ErrorCode.NONE, None

    def _refused(
        self,
        instance: _Instance,
        subscription: int,
        terminating: bool,
        compression: int,
        metrics: bytes,
        now: int,
    ) -> tuple[ErrorCode, str] | None:
        who = instance.instance_id
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST, (
                f"Client [{who}] sent the previous request with state terminating to TRUE, "
                "can not acceptany requests after that"
            )
        if not instance.may_push(now) and not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, (
                f"Request from the client [{who}] arrived before the next push interval time"
            )
        if subscription != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID, (
                f"Unknown client subscription id for the client [{who}]"
            )
        if compression not in (0, *ACCEPTED_COMPRESSION):
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, (
                f"Unknown compression type [{compression}] is received in telemetry request "
                f"from [{who}]"
            )
        if len(metrics) > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE, (
                f"Telemetry request from [{who}] is larger than the maximum allowed size "
                f"[{self.max_bytes}]"
            )
        return None

    # -- what was pushed -------------------------------------------------------------------

    def telemetry(self) -> dict[uuid.UUID, ClientTelemetry]:
        """What each client instance pushed, by its instance id (a copy)."""
        return {
            instance_id: ClientTelemetry(
                instance_id,
                pushed.client.client_id,
                pushed.client.software_name,
                pushed.client.software_version,
                tuple(pushed.pushes),
            )
            for instance_id, pushed in self._pushed.items()
        }

    def clear_telemetry(self) -> None:
        """Forget what was pushed."""
        self._pushed.clear()


def _closed(connection: Connection | None) -> bool:
    return connection is not None and connection.closed


def _matches(match: Mapping[str, re.Pattern[str]], attributes: Mapping[str, str | None]) -> bool:
    """Whether a client's attributes match every selector (none: every client)."""
    for param, pattern in match.items():
        value = attributes.get(param)
        if value is None or pattern.fullmatch(value) is None:
            return False
    return True
