"""Per-request fault injection for the Kafka listeners: declarative rules a test adds and
removes while clients run.

A rule matches requests by API (and optionally version range, broker, topic, partition
and client id) and does one thing to each request it matches:

* ``error=code``: answer with Kafka's response for that API carrying ``code`` (in every
  partition, topic, group or resource the request names where the response has a code
  for each, else at the top);
* ``drop=True``: never answer. Responses on one connection go out in request order, so
  the requests that follow on that connection go unanswered too: the connection is dead
  to the client until its request timeout closes it (as a lost response is in Kafka);
* ``disconnect=True``: close the connection without answering;
* ``delay_ms=ms``: hold the request (or, with ``after``, its response) that long; other
  connections go on being served. It combines with the actions above.

``after=True`` applies the request for real first, then does the above to its response:
"the broker appended the batch, the acknowledgement was lost", the case an idempotent
producer's retry exists for.

A rule fires ``times`` times (once by default, as both librdkafka's mock and franz-go's
kfake do), or until removed (``times=None``); every hit is counted on the rule, kept in
:attr:`Faults.history` and logged. The listeners check for rules with one attribute test
per request, so a cluster with none pays nothing; the rules are read and changed under a
lock, so a test thread may add and remove them while the listeners run on their loop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, NamedTuple, final

from purgatory.kafka.codec import Reader, Writer
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.server import CloseConnection, DropResponse, Handler, Response
from purgatory.sim.errors import ErrorCode

log = logging.getLogger(__name__)

#: How many hits :attr:`Faults.history` keeps (the oldest go first).
HISTORY: Final = 1000

#: (topic, partitions) of a request, in request order.
Partitions = list[tuple[str, list[int]]]


class Hit(NamedTuple):
    """One request a rule acted on."""

    rule: Rule
    broker: int
    api: ApiKey
    version: int
    correlation_id: int
    client_id: str | None


@final
@dataclass(eq=False)
class Rule:
    """One fault rule (see the module docstring); :meth:`Faults.add` makes them."""

    api: ApiKey
    #: the Kafka error code answered (an :class:`ErrorCode`'s number, or any other code)
    error: int | None = None
    drop: bool = False
    disconnect: bool = False
    delay_ms: float = 0.0
    after: bool = False
    versions: tuple[int, int] | None = None
    broker: int | None = None
    topic: str | None = None
    partition: int | None = None
    client_id: str | None = None
    #: hits left before the rule removes itself (None: until removed)
    times: int | None = 1
    #: requests this rule acted on so far
    hits: int = 0
    _faults: Faults | None = field(default=None, repr=False)

    def remove(self) -> None:
        """Stop acting (a no-op if the rule is already gone)."""
        if self._faults is not None:
            self._faults.remove(self)

    @property
    def active(self) -> bool:
        return self._faults is not None and self in self._faults.rules

    def describe(self) -> str:
        does = [
            f"error {_error_name(self.error)}" if self.error is not None else "",
            "drop" if self.drop else "",
            "disconnect" if self.disconnect else "",
            f"delay {self.delay_ms:g} ms" if self.delay_ms else "",
        ]
        action = " + ".join(d for d in does if d)
        return f"{self.api.name} {action}{' after applying' if self.after else ''}"

    def _matches(self, broker: int, header: RequestHeader, partitions: Partitions | None) -> bool:
        if self.broker is not None and broker != self.broker:
            return False
        if self.versions is not None and not (
            self.versions[0] <= header.api_version <= self.versions[1]
        ):
            return False
        if self.client_id is not None and header.client_id != self.client_id:
            return False
        if self.topic is None and self.partition is None:
            return True
        return partitions is not None and any(
            (self.topic is None or topic == self.topic)
            and (self.partition is None or self.partition in indexes)
            for topic, indexes in partitions
        )

    def __enter__(self) -> Rule:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


@final
class Faults:
    """The fault rules of every listener of one front door.

    ``on_active(active)`` is called when the first rule is added (True) and when the last
    one goes (False): the front door then puts this object on, or takes it off, every
    listener, so a listener without rules does not look at them.
    """

    def __init__(self, on_active: Callable[[bool], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._rules: tuple[Rule, ...] = ()
        self._on_active = on_active
        #: the latest hits, oldest first (at most :data:`HISTORY`)
        self.history: deque[Hit] = deque(maxlen=HISTORY)

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules in force, in the order they are tried."""
        return self._rules

    def add(
        self,
        api: ApiKey | str,
        *,
        error: ErrorCode | int | None = None,
        drop: bool = False,
        disconnect: bool = False,
        delay_ms: float = 0.0,
        after: bool = False,
        versions: tuple[int, int] | None = None,
        broker: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        client_id: str | None = None,
        times: int | None = 1,
    ) -> Rule:
        """Add a rule for requests of ``api`` (an :class:`ApiKey` or its name, e.g.
        ``"Produce"`` or ``"PRODUCE"``). Rules scoped to a broker are tried before
        cluster-wide ones, then in the order added; the first that matches acts. Raises
        ValueError for a rule that does nothing, contradicts itself, or filters on topics
        of an API whose requests name none."""
        key = _api_key(api)
        code = None if error is None else _error_number(error)
        if sum((error is not None, drop, disconnect)) > 1:
            raise ValueError("a rule answers with an error, drops, or disconnects: pick one")
        if not (isinstance(delay_ms, int | float) and 0 <= delay_ms < float("inf")):
            raise ValueError(f"delay_ms must be a finite number >= 0, got {delay_ms!r}")
        if error is None and not drop and not disconnect and delay_ms == 0:
            raise ValueError("a rule must do something: error=, drop=, disconnect= or delay_ms=")
        if error is not None and key not in _ERROR_ANSWERS:
            supported = ", ".join(sorted(k.name for k in _ERROR_ANSWERS))
            raise ValueError(
                f"no error answer for {key.name}; error= works for {supported} "
                "(drop, disconnect and delay_ms work for every API)"
            )
        if (topic is not None or partition is not None) and key not in _PARTITIONS:
            supported = ", ".join(sorted(k.name for k in _PARTITIONS))
            raise ValueError(
                f"{key.name} requests name no partitions; topic= works for {supported}"
            )
        if versions is not None and not (
            len(versions) == 2 and all(isinstance(v, int) for v in versions)
        ):
            raise ValueError(f"versions must be (lowest, highest), got {versions!r}")
        if times is not None and (isinstance(times, bool) or not isinstance(times, int)):
            raise TypeError(f"times must be an int or None, got {times!r}")
        if times is not None and times < 1:
            raise ValueError(f"times must be >= 1 or None, got {times}")
        rule = Rule(
            key,
            code,
            drop,
            disconnect,
            float(delay_ms),
            after,
            versions,
            broker,
            topic,
            partition,
            client_id,
            times,
            _faults=self,
        )
        with self._lock:
            was_active = bool(self._rules)
            # broker-scoped rules first (librdkafka's precedence), stable otherwise
            self._rules = tuple(sorted([*self._rules, rule], key=lambda r: r.broker is None))
            if not was_active and self._on_active is not None:
                self._on_active(True)
        return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            self._drop(rule)

    def clear(self) -> None:
        """Remove every rule."""
        with self._lock:
            for rule in self._rules:
                self._drop(rule)

    def _drop(self, rule: Rule) -> None:
        if rule not in self._rules:
            return
        self._rules = tuple(r for r in self._rules if r is not rule)
        if not self._rules and self._on_active is not None:
            self._on_active(False)

    def _take(self, broker: int, header: RequestHeader, body: Reader) -> Rule | None:
        """The first rule matching the request, its hit counted (and the rule removed if
        that was its last); None if no rule matches."""
        key = header.api_key
        candidates = [r for r in self._rules if r.api == key]
        if not candidates:
            return None
        partitions = None
        if any(r.topic is not None or r.partition is not None for r in candidates):
            partitions = _PARTITIONS[ApiKey(key)](header.api_version, body)[0]
        with self._lock:
            for rule in candidates:
                if rule in self._rules and rule._matches(broker, header, partitions):
                    rule.hits += 1
                    if rule.times is not None:
                        rule.times -= 1
                        if rule.times == 0:
                            self._drop(rule)
                    hit = Hit(
                        rule,
                        broker,
                        rule.api,
                        header.api_version,
                        header.correlation_id,
                        header.client_id,
                    )
                    self.history.append(hit)
                    break
            else:
                return None
        log.info(
            "kafka fault injected on broker %d: %s (v%d, correlation id %d, client %r)",
            broker,
            rule.describe(),
            header.api_version,
            header.correlation_id,
            header.client_id,
        )
        return rule

    def intercept(
        self, broker: int, header: RequestHeader, body: Reader, handler: Handler
    ) -> Response | Awaitable[Response]:
        """What broker ``broker`` answers to a request (see
        :class:`~purgatory.kafka.server.Interceptor`)."""
        rule = self._take(broker, header, body.copy())
        if rule is None:
            return handler(header, body)
        if rule.after:
            return _after(rule, header, body, handler)
        if rule.delay_ms:
            return _delayed(rule, header, body, handler)
        return _act(rule, header, body)


def _act(rule: Rule, header: RequestHeader, body: Reader) -> Response | Awaitable[Response]:
    """``rule``'s action instead of the request's own answer."""
    if rule.disconnect:
        raise CloseConnection(rule.describe())
    if rule.drop:
        return _lost(rule)
    assert rule.error is not None
    return _ERROR_ANSWERS[rule.api](header.api_version, body, rule.error)


async def _lost(rule: Rule) -> Response:
    raise DropResponse(rule.describe())


async def _delayed(rule: Rule, header: RequestHeader, body: Reader, handler: Handler) -> Response:
    await asyncio.sleep(rule.delay_ms / 1000)
    if rule.error is None and not rule.drop and not rule.disconnect:
        result = handler(header, body)
    else:
        result = _act(rule, header, body)
    return await result if inspect.isawaitable(result) else result


async def _after(rule: Rule, header: RequestHeader, body: Reader, handler: Handler) -> Response:
    """Apply the request, then do ``rule`` to its response."""
    replay = body.copy()  # the handler consumes its own
    result = handler(header, body)
    answer = await result if inspect.isawaitable(result) else result
    if rule.delay_ms:
        await asyncio.sleep(rule.delay_ms / 1000)
    if rule.error is None and not rule.drop and not rule.disconnect:
        return answer
    if rule.disconnect:
        raise CloseConnection(rule.describe())
    acted = _act(rule, header, replay)
    return await acted if inspect.isawaitable(acted) else acted


def _error_number(error: ErrorCode | int) -> int:
    if isinstance(error, ErrorCode):
        if error.number is None:
            raise ValueError(f"{error.name} is the HTTP service's own; Kafka has no code for it")
        return error.number
    if isinstance(error, bool) or not isinstance(error, int) or not -1 <= error <= 32767:
        raise ValueError(f"error must be an ErrorCode or a Kafka error number, got {error!r}")
    return error


def _error_name(code: int) -> str:
    for member in ErrorCode:
        if member.number == code:
            return member.name
    return f"code {code}"


def _api_key(api: ApiKey | str) -> ApiKey:
    if isinstance(api, ApiKey):
        return api
    if isinstance(api, str):
        name = "".join(c for c in api.upper() if c.isalnum())
        for key in ApiKey:
            if key.name.replace("_", "") == name:
                return key
    known = ", ".join(k.name for k in ApiKey)
    raise ValueError(f"unknown Kafka API {api!r}; known: {known}")


# -- the partitions each request names ---------------------------------------------------


def _topics(body: Reader, partition: Callable[[Reader], int]) -> Partitions:
    out: Partitions = []
    for _ in range(body.array_length()):
        topic = body.string()
        out.append((topic, [partition(body) for _ in range(body.array_length())]))
    return out


def _produce(version: int, body: Reader) -> tuple[Partitions, int]:
    """The partitions of a Produce request, and its acks."""
    if version >= 3:
        body.nullable_string()  # transactional_id
    acks = body.int16()
    body.int32()  # timeout_ms

    def partition(r: Reader) -> int:
        index = r.int32()
        r.nullable_bytes()  # records
        return index

    return _topics(body, partition), acks


def _fetch(version: int, body: Reader) -> tuple[Partitions, int]:
    body.raw(16 + (1 if version >= 4 else 0) + (8 if version >= 7 else 0))

    def partition(r: Reader) -> int:
        index = r.int32()
        r.raw((4 if version >= 9 else 0) + 8 + (8 if version >= 5 else 0) + 4)
        return index

    return _topics(body, partition), 0


def _list_offsets(version: int, body: Reader) -> tuple[Partitions, int]:
    body.raw(4 + (1 if version >= 2 else 0))

    def partition(r: Reader) -> int:
        index = r.int32()
        r.raw((4 if version >= 4 else 0) + 8 + (4 if version == 0 else 0))
        return index

    return _topics(body, partition), 0


def _offset_commit(version: int, body: Reader) -> tuple[Partitions, int]:
    body.string()  # group_id
    body.int32()  # generation
    body.string()  # member_id
    if 2 <= version <= 4:
        body.int64()  # retention_time_ms
    if version >= 7:
        body.nullable_string()  # group_instance_id

    def partition(r: Reader) -> int:
        index = r.int32()
        r.raw(8 + (4 if version >= 6 else 0) + (8 if version == 1 else 0))
        r.nullable_string()  # metadata
        return index

    return _topics(body, partition), 0


def _offset_fetch(version: int, body: Reader) -> tuple[Partitions, int]:
    body.string()  # group_id
    count = body.nullable_array_length()  # null: every partition the group committed
    out: Partitions = []
    for _ in range(count or 0):
        topic = body.string()
        out.append((topic, [body.int32() for _ in range(body.array_length())]))
    return out, 0


def _delete_records(version: int, body: Reader) -> tuple[Partitions, int]:
    def partition(r: Reader) -> int:
        index = r.int32()
        r.int64()  # offset
        return index

    return _topics(body, partition), 0


_PARTITIONS: Final[dict[ApiKey, Callable[[int, Reader], tuple[Partitions, int]]]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.DELETE_RECORDS: _delete_records,
}


# -- Kafka's answer carrying an error, per API (the non-flexible versions) --------------------


def _per_partition(
    version: int,
    body: Reader,
    error: int,
    api: ApiKey,
    head: Callable[[Writer, int], object],
    fields: Callable[[Writer, int, int], object],
    tail: Callable[[Writer, int], object] = lambda out, version: None,
) -> bytearray:
    partitions, _ = _PARTITIONS[api](version, body)
    out = Writer()
    head(out, version)
    out.int32(len(partitions))
    for topic, indexes in partitions:
        out.string(topic).int32(len(indexes))
        for index in indexes:
            fields(out.int32(index), version, error)
    tail(out, version)
    return out.buf


def _produce_error(version: int, body: Reader, error: int) -> Response:
    start = body.pos
    _, acks = _produce(version, body)
    if acks == 0:
        return None  # Kafka never answers acks=0, whatever went wrong
    body.pos = start

    def fields(out: Writer, v: int, code: int) -> None:
        out.int16(code).int64(-1)  # base_offset
        if v >= 2:
            out.int64(-1)  # log_append_time_ms
        if v >= 5:
            out.int64(-1)  # log_start_offset
        if v >= 8:
            out.int32(0).string(None)  # record_errors, error_message

    return _per_partition(
        version,
        body,
        error,
        ApiKey.PRODUCE,
        lambda out, v: None,
        fields,
        lambda out, v: out.int32(0) if v >= 1 else None,  # throttle_time_ms
    )


def _fetch_error(version: int, body: Reader, error: int) -> bytearray:
    def head(out: Writer, v: int) -> None:
        out.int32(0)  # throttle_time_ms
        if v >= 7:
            out.int16(0).int32(0)  # error_code, session_id

    def fields(out: Writer, v: int, code: int) -> None:
        out.int16(code).int64(-1).int64(-1)  # high watermark, last stable offset
        if v >= 5:
            out.int64(-1)  # log_start_offset
        out.int32(0)  # aborted_transactions
        if v >= 11:
            out.int32(-1)  # preferred_read_replica
        out.int32(0)  # records: none

    return _per_partition(version, body, error, ApiKey.FETCH, head, fields)


def _list_offsets_error(version: int, body: Reader, error: int) -> bytearray:
    def fields(out: Writer, v: int, code: int) -> None:
        out.int16(code).int64(-1).int64(-1)  # timestamp, offset
        if v >= 4:
            out.int32(-1)  # leader_epoch

    return _per_partition(
        version,
        body,
        error,
        ApiKey.LIST_OFFSETS,
        lambda out, v: out.int32(0) if v >= 2 else None,
        fields,
    )


def _offset_commit_error(version: int, body: Reader, error: int) -> bytearray:
    return _per_partition(
        version,
        body,
        error,
        ApiKey.OFFSET_COMMIT,
        lambda out, v: out.int32(0) if v >= 3 else None,
        lambda out, v, code: out.int16(code),
    )


def _offset_fetch_error(version: int, body: Reader, error: int) -> bytearray:
    def fields(out: Writer, v: int, code: int) -> None:
        out.int64(-1)
        if v >= 5:
            out.int32(-1)  # leader_epoch
        out.string(None).int16(code)

    return _per_partition(
        version,
        body,
        error,
        ApiKey.OFFSET_FETCH,
        lambda out, v: out.int32(0) if v >= 3 else None,
        fields,
        lambda out, v: out.int16(error) if v >= 2 else None,
    )


def _find_coordinator_error(version: int, body: Reader, error: int) -> bytearray:
    out = Writer()
    if version >= 1:
        out.int32(0).int16(error).string(_error_name(error))
    else:
        out.int16(error)
    return out.int32(-1).string("").int32(-1).buf


def _delete_records_error(version: int, body: Reader, error: int) -> bytearray:
    return _per_partition(
        version,
        body,
        error,
        ApiKey.DELETE_RECORDS,
        lambda out, v: out.int32(0),  # throttle_time_ms
        lambda out, v, code: out.int64(-1).int16(code),  # low_watermark
    )


def _create_topics_error(version: int, body: Reader, error: int) -> bytearray:
    """Every topic of the request answered ``error`` (with its name as the message, v1+)."""
    names = []
    for _ in range(body.array_length()):
        names.append(body.string())
        body.raw(4 + 2)  # num_partitions, replication_factor
        for _ in range(body.array_length()):  # assignments
            body.int32()
            body.raw(4 * body.array_length())
        for _ in range(body.array_length()):  # configs
            body.string()
            body.nullable_string()

    def topic(out: Writer, name: str) -> None:
        out.string(name).int16(error)
        if version >= 1:
            out.string(_error_name(error))

    return _per_name(version, 2, names, topic)


def _delete_topics_error(version: int, body: Reader, error: int) -> bytearray:
    names = [body.string() for _ in range(body.array_length())]
    return _per_name(version, 1, names, lambda out, name: out.string(name).int16(error))


def _describe_groups_error(version: int, body: Reader, error: int) -> bytearray:
    names = [body.string() for _ in range(body.array_length())]

    def group(out: Writer, name: str) -> None:
        # state, protocol type, protocol, no members
        out.int16(error).string(name).string("").string("").string("").int32(0)
        if version >= 3:
            out.int32(-(2**31))  # authorized_operations: not computed

    return _per_name(version, 1, names, group)


def _per_name(
    version: int, throttle_from: int, names: list[str], entry: Callable[[Writer, str], object]
) -> bytearray:
    """An answer of one entry per named topic or group (throttle_time_ms from
    ``throttle_from`` on)."""
    out = Writer()
    if version >= throttle_from:
        out.int32(0)  # throttle_time_ms
    out.int32(len(names))
    for name in names:
        entry(out, name)
    return out.buf


def _describe_configs_error(version: int, body: Reader, error: int) -> bytearray:
    resources = []
    for _ in range(body.array_length()):
        resource_type, name = body.int8(), body.string()
        for _ in range(body.nullable_array_length() or 0):
            body.string()  # config name
        resources.append((resource_type, name))
    out = Writer().int32(0).int32(len(resources))  # throttle_time_ms
    for resource_type, name in resources:
        out.int16(error).string(_error_name(error)).int8(resource_type).string(name)
        out.int32(0)  # configs
    return out.buf


def _top_level(throttle_from: int, rest: Callable[[Writer, int], object]) -> _ErrorAnswer:
    def answer(version: int, body: Reader, error: int) -> bytearray:
        out = Writer()
        if version >= throttle_from:
            out.int32(0)
        out.int16(error)
        rest(out, version)
        return out.buf

    return answer


_ErrorAnswer = Callable[[int, Reader, int], Response]

_ERROR_ANSWERS: Final[dict[ApiKey, _ErrorAnswer]] = {
    ApiKey.PRODUCE: _produce_error,
    ApiKey.FETCH: _fetch_error,
    ApiKey.LIST_OFFSETS: _list_offsets_error,
    ApiKey.OFFSET_COMMIT: _offset_commit_error,
    ApiKey.OFFSET_FETCH: _offset_fetch_error,
    ApiKey.FIND_COORDINATOR: _find_coordinator_error,
    # generation, protocol, leader, member id, members
    ApiKey.JOIN_GROUP: _top_level(
        2, lambda out, v: out.int32(-1).string("").string("").string("").int32(0)
    ),
    ApiKey.HEARTBEAT: _top_level(1, lambda out, v: None),
    ApiKey.LEAVE_GROUP: _top_level(1, lambda out, v: out.int32(0) if v >= 3 else None),
    ApiKey.SYNC_GROUP: _top_level(1, lambda out, v: out.int32(0)),  # empty assignment
    ApiKey.INIT_PRODUCER_ID: _top_level(0, lambda out, v: out.int64(-1).int16(-1)),
    ApiKey.CREATE_TOPICS: _create_topics_error,
    ApiKey.DELETE_TOPICS: _delete_topics_error,
    ApiKey.DELETE_RECORDS: _delete_records_error,
    ApiKey.DESCRIBE_GROUPS: _describe_groups_error,
    ApiKey.LIST_GROUPS: _top_level(1, lambda out, v: out.int32(0)),  # no groups
    ApiKey.DESCRIBE_CONFIGS: _describe_configs_error,
}
