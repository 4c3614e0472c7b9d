"""Client quotas that throttle, as Kafka's ``ClientQuotaManager`` (``producer_byte_rate``,
``consumer_byte_rate``), ``ClientRequestQuotaManager`` (``request_percentage``),
``ControllerMutationQuotaManager`` (``controller_mutation_rate``, KIP-599) and the socket
server's ``ConnectionQuotas`` (``connection_creation_rate`` per IP).

A rate is Kafka's ``Rate`` over a ``SampledStat``: ``quota.window.num`` samples of
``quota.window.size.seconds`` each; the rate is the samples' sum over the time they span,
taken as at least ``quota.window.num - 1`` whole windows (so a first burst is not measured
over one millisecond). A client over its quota is throttled for
``(observed - quota) / quota * window`` ms, rounded: the time its rate takes to come back
to the quota if it sends nothing meanwhile; the request and connection quotas bound that
by one window, the byte rates do not (as Kafka). A controller mutation quota is a token
bucket of ``quota * quota.window.num * quota.window.size.seconds`` tokens refilled at
``quota`` per second: a topic is refused while the bucket is below zero.

Which quota holds a client is Kafka's precedence, the first of these that is set (per
quota key): ``/config/users/<user>/clients/<client-id>``, ``/config/users/<user>/clients/
<default>``, ``/config/users/<user>``, ``/config/users/<default>/clients/<client-id>``,
``/config/users/<default>/clients/<default>``, ``/config/users/<default>``,
``/config/clients/<client-id>``, ``/config/clients/<default>``; the clients it holds share
one rate (Kafka's quota metric tags). A user is the principal's name (``ANONYMOUS`` on a
listener without SASL or a client certificate).

Nothing here reads the wire or the clock by itself: the server hands each request's
numbers in, with the time; the delays are the front door's timing wheel's.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, final

#: how Kafka names a default entity in its quota paths (``/config/users/<default>``)
DEFAULT: Final = "<default>"

PRODUCE: Final = "produce"
FETCH: Final = "fetch"
REQUEST: Final = "request"
CONTROLLER_MUTATION: Final = "controller_mutation"

#: the quota key each quota type reads
KEYS: Final = {
    PRODUCE: "producer_byte_rate",
    FETCH: "consumer_byte_rate",
    REQUEST: "request_percentage",
    CONTROLLER_MUTATION: "controller_mutation_rate",
}
CONNECTION_RATE_KEY: Final = "connection_creation_rate"

#: an entity of the quota store: its (type, name) pairs, a null name the default entity
StoreKey = frozenset[tuple[str, str | None]]
#: a quota entity as Kafka's ClientQuotaManager keys it: (user, client-id), each a name,
#: DEFAULT, or None where the entity has no such part
Entity = tuple[str | None, str | None]
#: what names a rate (Kafka's quota metric tags): (user, client-id), "" for a part not in it
Tags = tuple[str, str]


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """``quota.window.num`` samples of ``quota.window.size.seconds`` (Kafka: 11 of 1 s)."""

    samples: int = 11
    size_ms: int = 1000

    def __post_init__(self) -> None:
        if self.samples < 1 or self.size_ms < 1:
            raise ValueError(f"a quota window needs samples >= 1 and size >= 1 ms, got {self}")


@final
class _Sample:
    __slots__ = ("count", "last_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.count = 0
        self.start_ms = now_ms
        self.last_ms = now_ms


@final
class Rate:
    """Kafka's ``Rate`` of a windowed sum, per second: ``record`` adds a value at a time,
    ``measure`` is the sum of the live samples over :meth:`window_ms`."""

    __slots__ = ("_current", "_samples", "window")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window.size_ms:
            # the next sample, one more kept than the window holds (it may overlap it)
            self._current = (self._current + 1) % (self.window.samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.count += 1
        sample.last_ms = now_ms

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        """Samples with no event within the whole window start over (empty)."""
        expire = self.window.samples * self.window.size_ms
        for sample in self._samples:
            if now_ms - sample.last_ms >= expire:
                sample.reset(now_ms)

    def window_ms(self, now_ms: int) -> int:
        """The time the rate is measured over: since the oldest sample began, and at least
        ``samples - 1`` whole windows plus the current one's part (never 0)."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        size = self.window.size_ms
        full = elapsed // size
        least = self.window.samples - 1
        if full < least:
            elapsed += (least - full) * size
        return max(elapsed, 1)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def measure(self, now_ms: int) -> float:
        """The rate now, per second."""
        total = self.total(now_ms)
        return total / (self.window_ms(now_ms) / 1000.0)


def round_half_up(value: float) -> int:
    """Java's ``Math.round``."""
    return math.floor(value + 0.5)


def throttle_ms(observed: float, bound: float, window_ms: int) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: how long the client must send nothing for its
    rate, measured over ``window_ms``, to come back from ``observed`` to ``bound``."""
    return round_half_up((observed - bound) / bound * window_ms)


@final
class TokenBucket:
    """Kafka's ``TokenBucket`` (KIP-599): at most ``bound * samples * window`` tokens,
    refilled at ``bound`` per second; a record takes tokens and may drive them below 0."""

    __slots__ = ("_last_ms", "tokens", "window")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self.tokens: float | None = None  # full at first use
        self._last_ms = 0

    def burst(self, bound: float) -> float:
        return self.window.samples * self.window.size_ms / 1000.0 * bound

    def measure(self, bound: float, now_ms: int) -> float:
        burst = self.burst(bound)
        if self.tokens is None:
            self.tokens = burst
        else:
            refill = bound * (now_ms - self._last_ms) / 1000.0
            self.tokens = min(burst, self.tokens + refill)
        self._last_ms = now_ms
        return self.tokens

    def record(self, permits: float, bound: float, now_ms: int) -> None:
        self.tokens = min(self.burst(bound), self.measure(bound, now_ms) - permits)


def mutation_throttle_ms(tokens: float, bound: float) -> int:
    """Kafka's ``ControllerMutationQuotaManager.throttleTimeMs``: the time the bucket
    takes to refill from ``tokens`` (below 0) to 0."""
    return round_half_up(-tokens / bound * 1000.0)


def _entity_of(key: StoreKey) -> Entity | None:
    """A store entity as a (user, client-id) entity; None for an ``ip`` one."""
    user: str | None = None
    client: str | None = None
    for kind, name in key:
        if kind == "user":
            user = DEFAULT if name is None else name
        elif kind == "client-id":
            client = DEFAULT if name is None else name
        else:
            return None
    return user, client


@final
class ClientQuotaManager:
    """One quota type's quotas (Kafka's ``ClientQuotaManager`` with its default callback):
    the entities that set its key, the rates by quota metric tags, the throttle time
    given per tags. ``bounded``: a throttle is at most one window (the request quota)."""

    __slots__ = ("_resolved", "bounded", "overrides", "quota_type", "rates", "window")

    def __init__(self, quota_type: str, window: QuotaWindow, *, bounded: bool = False) -> None:
        self.quota_type = quota_type
        self.window = window
        self.bounded = bounded
        #: (user, client-id) entity -> its quota
        self.overrides: dict[Entity, float] = {}
        #: (user, client-id) asked -> (tags, quota or None), until the quotas change
        self._resolved: dict[tuple[str, str], tuple[Tags, float | None]] = {}
        self.rates: dict[Tags, Rate] = {}

    @property
    def active(self) -> bool:
        return bool(self.overrides)

    def update(self, overrides: Mapping[Entity, float]) -> None:
        """The quotas now in force (the rates measured so far are kept, as Kafka keeps
        its sensors and changes their quota)."""
        self.overrides = dict(overrides)
        self._resolved.clear()

    def tags(self, user: str, client_id: str) -> Tags:
        """Kafka's ``quotaMetricTags``: which rate the client's requests count in."""
        has = self.overrides.__contains__
        if has((user, client_id)) or has((user, DEFAULT)):
            return user, client_id
        if has((user, None)):
            return user, ""
        if has((DEFAULT, client_id)) or has((DEFAULT, DEFAULT)):
            return user, client_id
        if has((DEFAULT, None)):
            return user, ""
        return "", client_id

    def limit(self, tags: Tags) -> float | None:
        """Kafka's ``quotaLimit``: the quota of a rate's tags, by the precedence."""
        user, client_id = tags
        get = self.overrides.get
        if user and client_id:
            for entity in (
                (user, client_id),
                (user, DEFAULT),
                (DEFAULT, client_id),
                (DEFAULT, DEFAULT),
            ):
                bound = get(entity)
                if bound is not None:
                    return bound
            return None
        if user:
            bound = get((user, None))
            return get((DEFAULT, None)) if bound is None else bound
        if client_id:
            bound = get((None, client_id))
            return get((None, DEFAULT)) if bound is None else bound
        return None

    def resolve(self, user: str, client_id: str) -> tuple[Tags, float | None]:
        """The client's rate tags and its quota (None: not held)."""
        asked = (user, client_id)
        resolved = self._resolved.get(asked)
        if resolved is None:
            tags = self.tags(user, client_id)
            resolved = self._resolved[asked] = (tags, self.limit(tags))
        return resolved

    def rate(self, tags: Tags) -> Rate:
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = Rate(self.window)
        return rate

    def record(self, tags: Tags, bound: float, value: float, now_ms: int) -> int:
        """Kafka's ``recordAndGetThrottleTimeMs``: ``value`` recorded, then the rate
        checked against ``bound``; the throttle time (0 within the quota)."""
        rate = self.rate(tags)
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle = throttle_ms(observed, bound, rate.window_ms(now_ms))
        if self.bounded:
            throttle = min(throttle, self.window.size_ms)
        return throttle

    def unrecord(self, tags: Tags, value: float, now_ms: int) -> None:
        """A value recorded then not sent (a throttled Fetch's records)."""
        self.rate(tags).record(-value, now_ms)


@final
class MutationQuotaManager:
    """``controller_mutation_rate`` (Kafka's ``ControllerMutationQuotaManager``): per
    rate tags (resolved as the other client quotas) a token bucket of partitions."""

    __slots__ = ("buckets", "quotas")

    def __init__(self, window: QuotaWindow) -> None:
        self.quotas = ClientQuotaManager(CONTROLLER_MUTATION, window)
        self.buckets: dict[Tags, TokenBucket] = {}

    def bucket(self, tags: Tags) -> TokenBucket:
        bucket = self.buckets.get(tags)
        if bucket is None:
            bucket = self.buckets[tags] = TokenBucket(self.quotas.window)
        return bucket

    def strict(
        self, tags: Tags, bound: float, permits: Iterable[int], now_ms: int
    ) -> tuple[list[bool], int]:
        """Each mutation of ``permits`` partitions in turn, as Kafka's strict quota
        (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): refused while the
        bucket is below zero, else taken (even past zero). Whether each was taken, and
        the throttle time of the last refusal (0 if none)."""
        bucket = self.bucket(tags)
        taken: list[bool] = []
        throttle = 0
        for count in permits:
            tokens = bucket.measure(bound, now_ms)
            if tokens < 0:
                throttle = mutation_throttle_ms(tokens, bound)
                taken.append(False)
            else:
                bucket.record(count, bound, now_ms)
                taken.append(True)
        return taken, throttle

    def permissive(self, tags: Tags, bound: float, permits: int, now_ms: int) -> int:
        """Older versions: every mutation is taken, and the client throttled by the time
        the bucket takes to come back to zero."""
        bucket = self.bucket(tags)
        bucket.record(permits, bound, now_ms)
        tokens = bucket.measure(bound, now_ms)
        return mutation_throttle_ms(tokens, bound) if tokens < 0 else 0

    def refund(self, tags: Tags, bound: float, permits: int, now_ms: int) -> None:
        """Partitions taken for a mutation that then failed (Kafka takes them only once
        the topic is valid)."""
        if permits:
            self.bucket(tags).record(-permits, bound, now_ms)


@final
class ConnectionQuotas:
    """``connection_creation_rate`` per IP (Kafka's ``ConnectionQuotas``): a connection
    over its IP's rate is not counted and not served; Kafka closes it once the throttle
    time (at most one window) has passed."""

    __slots__ = ("overrides", "rates", "window")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        #: ip (or DEFAULT) -> connections per second
        self.overrides: dict[str, float] = {}
        self.rates: dict[str, Rate] = {}

    def throttle(self, ip: str, now_ms: int) -> int:
        bound = self.overrides.get(ip)
        if bound is None:
            bound = self.overrides.get(DEFAULT)
            if bound is None:
                return 0
        rate = self.rates.get(ip)
        if rate is None:
            rate = self.rates[ip] = Rate(self.window)
        rate.record(1.0, now_ms)
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        rate.record(-1.0, now_ms)  # not accepted: not counted
        return min(throttle_ms(observed, bound, rate.window_ms(now_ms)), self.window.size_ms)


@final
class ClientQuotas:
    """Every quota type over one quota store, and what they throttled: the throttle time
    given per (quota type, user, client-id) tags, the connections throttled per IP."""

    def __init__(self, window: QuotaWindow | None = None) -> None:
        self.window = QuotaWindow() if window is None else window
        self.produce = ClientQuotaManager(PRODUCE, self.window)
        self.fetch = ClientQuotaManager(FETCH, self.window)
        self.request = ClientQuotaManager(REQUEST, self.window, bounded=True)
        self.mutation = MutationQuotaManager(self.window)
        self.connections = ConnectionQuotas(self.window)
        #: (quota type, user, client-id) -> throttle time given, ms
        self.throttle_time_ms: Counter[tuple[str, str, str]] = Counter()
        #: (quota type, user, client-id) -> requests throttled
        self.throttled: Counter[tuple[str, str, str]] = Counter()
        #: ip -> connections refused over its rate
        self.connections_throttled: Counter[str] = Counter()
        self.active = False

    def update(self, store: Mapping[StoreKey, Mapping[str, float]]) -> None:
        """The quotas of ``store`` (AlterClientQuotas') in force from now."""
        by_type: dict[str, dict[Entity, float]] = {name: {} for name in KEYS}
        ips: dict[str, float] = {}
        for key, values in store.items():
            entity = _entity_of(key)
            if entity is None:
                ((_, ip),) = key
                rate = values.get(CONNECTION_RATE_KEY)
                if rate is not None:
                    ips[DEFAULT if ip is None else ip] = rate
                continue
            for quota_type, quota_key in KEYS.items():
                value = values.get(quota_key)
                if value is not None:
                    by_type[quota_type][entity] = value
        self.produce.update(by_type[PRODUCE])
        self.fetch.update(by_type[FETCH])
        self.request.update(by_type[REQUEST])
        self.mutation.quotas.update(by_type[CONTROLLER_MUTATION])
        self.connections.overrides = ips
        self.active = bool(
            self.produce.active
            or self.fetch.active
            or self.request.active
            or self.mutation.quotas.active
            or ips
        )

    def throttled_for(self, quota_type: str, tags: Tags, ms: int) -> None:
        """A client throttled ``ms`` by ``quota_type`` (Kafka's throttle-time sensor)."""
        key = (quota_type, *tags)
        self.throttle_time_ms[key] += ms
        self.throttled[key] += 1
