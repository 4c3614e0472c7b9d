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

A :class:`PartitionRule` (:meth:`Faults.add_partition_fault`, as franz-go's kfake
``AddFault``) fails partitions, not requests: in a request of its APIs that names its
topic and partition, only that partition's entry in the answer carries its error; the
handler serves the rest of the request (the failed partitions taken out of it, so nothing
is applied to them), and the two answers are put together through the schemas' shapes,
for every API whose answer has a code per partition.

A rule fires ``times`` times (once by default, as both librdkafka's mock and franz-go's
kfake do), or until removed (``times=None``); every hit is counted on the rule, kept in
:attr:`Faults.history` and logged. The listeners check for rules with one attribute test
per request, so a cluster with none pays nothing; the rules are read and changed under a
lock, so a test thread may add and remove them while the listeners run on their loop.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import itertools
import logging
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final, NamedTuple, Self, final

from purgatory.errors import ErrorCode
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import (
    error_response,
    kio_error,
    request_type,
    response_type,
    versions,
)
from purgatory.kafka.server import CloseConnection, DropResponse, Handler, Response
from purgatory.kafka.shapes import FieldShape, Kind, shape_of

log = logging.getLogger(__name__)

#: How many hits :attr:`Faults.history` keeps (the oldest go first).
HISTORY: Final = 1000

#: (topic, partitions) of a request, in request order.
Partitions = list[tuple[str, list[int]]]


class Hit(NamedTuple):
    """One request a rule acted on."""

    rule: Rule | PartitionRule
    broker: int
    api: ApiKey
    version: int
    correlation_id: int
    client_id: str | None


@dataclass(eq=False, kw_only=True)
class _Placed:
    """What a per-request rule and a partition rule share: where they act (``broker``,
    ``topic``, ``partition``: None, anywhere), how often, and the :class:`Faults` that
    holds them."""

    broker: int | None = None
    topic: str | None = None
    partition: int | None = None
    #: hits left before the rule removes itself (None: until removed)
    times: int | None = 1
    #: requests this rule acted on so far (one hit per request)
    hits: int = 0
    #: its number, unique in its :class:`Faults` (what ``DELETE /v1/faults/{id}`` names)
    id: int = 0
    _faults: Faults | None = field(default=None, repr=False)

    def remove(self) -> None:
        """Stop acting (a no-op if the rule is already gone)."""
        if self._faults is not None:
            assert isinstance(self, Rule | PartitionRule)
            self._faults.remove(self)

    @property
    def active(self) -> bool:
        return self._faults is not None and self._faults.holds(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


@final
@dataclass(eq=False)
class Rule(_Placed):
    """One fault rule (see the module docstring); :meth:`Faults.add` makes them."""

    api: ApiKey
    #: the Kafka error code answered (an :class:`ErrorCode`'s number, or any other code)
    error: int | None = None
    drop: bool = False
    disconnect: bool = False
    delay_ms: float = 0.0
    after: bool = False
    versions: tuple[int, int] | None = None
    client_id: str | None = None

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


@final
@dataclass(eq=False)
class PartitionRule(_Placed):
    """One partition fault (see :meth:`Faults.add_partition_fault`): in requests of
    ``apis`` to ``broker`` (None: any), the partitions of ``topic`` numbered ``partition``
    (None: any) are answered ``error``; the rest of each request is served."""

    #: the Kafka error code answered (an :class:`ErrorCode`'s number, or any other code)
    error: int
    #: the APIs it acts on
    apis: frozenset[ApiKey]

    @property
    def error_name(self) -> str:
        """Kafka's name of the error answered (``NOT_LEADER_OR_FOLLOWER``)."""
        return _error_name(self.error)

    def describe(self) -> str:
        apis = "/".join(sorted(k.name for k in self.apis)) if self.apis != _PER_PARTITION else "*"
        where = f"{'*' if self.topic is None else self.topic}-"
        where += "*" if self.partition is None else str(self.partition)
        on = "" if self.broker is None else f" on broker {self.broker}"
        return f"{apis} {where}{on}: error {_error_name(self.error)}"

    def _names(self, topic: str | None, index: int) -> bool:
        return (
            topic is not None
            and (self.topic is None or topic == self.topic)
            and (self.partition is None or index == self.partition)
        )


@final
class Faults:
    """The fault rules of every listener of one front door.

    ``on_active(active)`` is called when the first rule is added (True) and when the last
    one goes (False): the front door then puts this object on, or takes it off, every
    listener, so a listener without rules does not look at them.
    """

    def __init__(
        self,
        on_active: Callable[[bool], None] | None = None,
        topic_name: Callable[[uuid.UUID], str | None] = lambda topic_id: None,
    ) -> None:
        self._lock = threading.Lock()
        #: the name of the topic with an id (requests of newer versions name topics by id)
        self._topic_name = topic_name
        self._rules: tuple[Rule, ...] = ()
        self._partition_rules: tuple[PartitionRule, ...] = ()
        self._on_active = on_active
        self._ids = itertools.count(1)
        #: the latest hits, oldest first (at most :data:`HISTORY`)
        self.history: deque[Hit] = deque(maxlen=HISTORY)
        #: the latest rules added, removed ones included, by id (at most :data:`HISTORY`):
        #: what the hit counts on /metrics are read from
        self.added: OrderedDict[int, Rule | PartitionRule] = OrderedDict()

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The per-request rules in force, in the order they are tried."""
        return self._rules

    @property
    def partition_rules(self) -> tuple[PartitionRule, ...]:
        """The partition rules in force, in the order they are tried."""
        return self._partition_rules

    @property
    def active(self) -> bool:
        """Whether any rule is in force."""
        return bool(self._rules or self._partition_rules)

    def rule(self, rule_id: int) -> Rule | PartitionRule | None:
        """The rule in force with id ``rule_id``; None if there is none."""
        every: list[Rule | PartitionRule] = [*self._rules, *self._partition_rules]
        return next((r for r in every if r.id == rule_id), None)

    def add(
        self,
        api: ApiKey | str,
        *,
        error: ErrorCode | int | str | None = None,
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
        if error is not None and key == ApiKey.API_VERSIONS:
            raise ValueError("ApiVersions is never intercepted: a client could not connect")
        if (topic is not None or partition is not None) and key not in _PARTITIONED:
            supported = ", ".join(sorted(k.name for k in _PARTITIONED))
            raise ValueError(
                f"{key.name} requests name no partitions; topic= works for {supported}"
            )
        if versions is not None and not (
            len(versions) == 2 and all(isinstance(v, int) for v in versions)
        ):
            raise ValueError(f"versions must be (lowest, highest), got {versions!r}")
        _check_times(times)
        rule = Rule(
            key,
            code,
            drop,
            disconnect,
            float(delay_ms),
            after,
            versions,
            client_id,
            broker=broker,
            topic=topic,
            partition=partition,
            times=times,
            _faults=self,
        )
        with self._lock:
            was_active = self.active
            rule.id = next(self._ids)
            # broker-scoped rules first (librdkafka's precedence), stable otherwise
            self._rules = tuple(sorted([*self._rules, rule], key=lambda r: r.broker is None))
            self._added(rule, was_active)
        return rule

    def add_partition_fault(
        self,
        error: ErrorCode | int | str,
        *,
        apis: Iterable[ApiKey | str | int] | None = None,
        broker: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        times: int | None = 1,
    ) -> PartitionRule:
        """Fail partitions, as franz-go's kfake ``AddFault``: in each request of ``apis``
        (API keys, their names or numbers; default: every API whose answer has a code per
        partition, :data:`PARTITION_APIS`) to ``broker`` (None: any) that names ``topic``
        (None: any) partition ``partition`` (None: any), those partitions' entries are
        answered ``error`` (an :class:`ErrorCode`, or Kafka's number or name of an error)
        and the rest of the request is served as usual; nothing is
        applied to the failed partitions. A Produce with ``acks=0`` is served for the rest
        and answered nothing. Fires ``times`` times (requests it failed partitions of), or
        until removed (None). Partition rules are tried after the per-request rules (a
        request one of those takes is not looked at), in the order added; a partition
        takes the error of the first that names it. Raises ValueError (TypeError for a
        wrong type) for an unknown API or error, an API whose answer has no code per
        partition, or a negative broker, partition or count."""
        code = _error_number(error)
        keys: frozenset[ApiKey]
        if apis is None:
            keys = _PER_PARTITION
        else:
            if isinstance(apis, str | int):
                raise TypeError(f"apis must be a list of APIs, got {apis!r}")
            keys = frozenset(_api_key(api) for api in apis)
            if not keys:
                raise ValueError("apis must name at least one API (or be None: all of them)")
            wrong = sorted(k.name for k in keys - _PER_PARTITION)
            if wrong:
                supported = ", ".join(sorted(k.name for k in _PER_PARTITION))
                raise ValueError(
                    f"{', '.join(wrong)}: no error code per partition to fail; "
                    f"partition faults work for {supported}"
                )
        for name, value in (("broker", broker), ("partition", partition)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValueError(f"{name} must be an int >= 0 or None, got {value!r}")
        if topic is not None and (not isinstance(topic, str) or not topic):
            raise ValueError(f"topic must be a topic name or None, got {topic!r}")
        _check_times(times)
        rule = PartitionRule(
            code, keys, broker=broker, topic=topic, partition=partition, times=times, _faults=self
        )
        with self._lock:
            was_active = self.active
            rule.id = next(self._ids)
            self._partition_rules = (*self._partition_rules, rule)
            self._added(rule, was_active)
        return rule

    def _added(self, rule: Rule | PartitionRule, was_active: bool) -> None:
        self.added[rule.id] = rule
        while len(self.added) > HISTORY:
            self.added.popitem(last=False)
        if not was_active and self._on_active is not None:
            self._on_active(True)

    def remove(self, rule: Rule | PartitionRule) -> None:
        with self._lock:
            self._drop(rule)

    def holds(self, rule: object) -> bool:
        """Whether ``rule`` is one of this set's rules, still acting."""
        return rule in self._rules or rule in self._partition_rules

    def clear(self) -> None:
        """Remove every rule."""
        with self._lock:
            every: list[Rule | PartitionRule] = [*self._rules, *self._partition_rules]
            for rule in every:
                self._drop(rule)

    def _drop(self, rule: Rule | PartitionRule) -> None:
        if isinstance(rule, PartitionRule):
            if rule not in self._partition_rules:
                return
            self._partition_rules = tuple(r for r in self._partition_rules if r is not rule)
        else:
            if rule not in self._rules:
                return
            self._rules = tuple(r for r in self._rules if r is not rule)
        if not self.active and self._on_active is not None:
            self._on_active(False)

    def _take(self, broker: int, header: RequestHeader, request: Any) -> Rule | None:
        """The first rule matching the request, its hit counted (and the rule removed if
        that was its last); None if no rule matches."""
        key = header.api_key
        candidates = [r for r in self._rules if r.api == key]
        if not candidates:
            return None
        partitions = None
        if any(r.topic is not None or r.partition is not None for r in candidates):
            partitions = _partitions(request, self._topic_name)
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

    def _take_partitions(
        self, broker: int, header: RequestHeader, request: Any
    ) -> dict[tuple[str, int], int] | None:
        """The error of each partition of the request that a partition rule fails, each
        rule that failed one counted a hit; None if none does."""
        key = ApiKey(header.api_key)
        candidates = [
            r
            for r in self._partition_rules
            if key in r.apis and (r.broker is None or r.broker == broker)
        ]
        if not candidates:
            return None
        named = _partitions(request, self._topic_name)
        failed: dict[tuple[str, int], int] = {}
        fired: list[PartitionRule] = []
        with self._lock:
            live = [r for r in candidates if r in self._partition_rules]
            for topic, indexes in named:
                for index in indexes:
                    rule = next((r for r in live if r._names(topic, index)), None)
                    if rule is not None:
                        failed.setdefault((topic, index), rule.error)
                        if rule not in fired:
                            fired.append(rule)
            for rule in fired:
                rule.hits += 1
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times == 0:
                        self._drop(rule)
                self.history.append(
                    Hit(
                        rule,
                        broker,
                        key,
                        header.api_version,
                        header.correlation_id,
                        header.client_id,
                    )
                )
        for rule in fired:
            log.info(
                "kafka partition fault injected on broker %d: %s (%s v%d, correlation id %d, "
                "client %r)",
                broker,
                rule.describe(),
                key.name,
                header.api_version,
                header.correlation_id,
                header.client_id,
            )
        return failed or None

    def intercept(
        self, broker: int, header: RequestHeader, request: Any, handler: Handler
    ) -> Response | Awaitable[Response]:
        """What broker ``broker`` answers to a request (see
        :class:`~purgatory.kafka.server.Interceptor`)."""
        rule = self._take(broker, header, request)
        if rule is None:
            if self._partition_rules:
                failed = self._take_partitions(broker, header, request)
                if failed is not None:
                    return _partly_failed(failed, header, request, handler, self._topic_name)
            return handler(header, request)
        if rule.after:
            return _after(rule, header, request, handler)
        if rule.delay_ms:
            return _delayed(rule, header, request, handler)
        return _act(rule, request)


def _act(rule: Rule, request: Any) -> Response | Awaitable[Response]:
    """``rule``'s action instead of the request's own answer."""
    if rule.disconnect:
        raise CloseConnection(rule.describe())
    if rule.drop:
        return _lost(rule)
    assert rule.error is not None
    if rule.api == ApiKey.PRODUCE and request.acks == 0:
        return None  # acks=0: Kafka answers nothing, an error included
    return error_response(request, rule.error)


async def _lost(rule: Rule) -> Response:
    raise DropResponse(rule.describe())


async def _delayed(rule: Rule, header: RequestHeader, request: Any, handler: Handler) -> Response:
    await asyncio.sleep(rule.delay_ms / 1000)
    if rule.error is None and not rule.drop and not rule.disconnect:
        result = handler(header, request)
    else:
        result = _act(rule, request)
    return await result if inspect.isawaitable(result) else result


async def _after(rule: Rule, header: RequestHeader, request: Any, handler: Handler) -> Response:
    """Apply the request, then do ``rule`` to its response."""
    result = handler(header, request)
    answer = await result if inspect.isawaitable(result) else result
    if rule.delay_ms:
        await asyncio.sleep(rule.delay_ms / 1000)
    if rule.error is None and not rule.drop and not rule.disconnect:
        return answer
    if rule.disconnect:
        raise CloseConnection(rule.describe())
    acted = _act(rule, request)
    return await acted if inspect.isawaitable(acted) else acted


def _check_times(times: int | None) -> None:
    if times is not None and (isinstance(times, bool) or not isinstance(times, int)):
        raise TypeError(f"times must be an int or None, got {times!r}")
    if times is not None and times < 1:
        raise ValueError(f"times must be >= 1 or None, got {times}")


def _partly_failed(
    failed: dict[tuple[str, int], int],
    header: RequestHeader,
    request: Any,
    handler: Handler,
    topic_name: Callable[[uuid.UUID], str | None],
) -> Response | Awaitable[Response]:
    """The answer to ``request`` with the partitions of ``failed`` answered their error
    and the others by ``handler``, which is handed the request without them."""
    kept = _select(request, lambda topic, index: (topic, index) not in failed, topic_name)
    answers = [
        error_response(
            _select(request, _failing_with(failed, code), topic_name),
            code,
        )
        for code in sorted(set(failed.values()))
    ]
    if header.api_key == ApiKey.PRODUCE and request.acks == 0:
        # acks=0: Kafka answers nothing, an error included; the rest is applied
        return None if kept is None else handler(header, kept)
    if kept is None:
        return _merged(answers[0], answers[1:])
    result = handler(header, kept)
    if inspect.isawaitable(result):
        return _merged_later(result, answers)
    return _merged(result, answers)


def _failing_with(
    failed: dict[tuple[str, int], int], code: int
) -> Callable[[str | None, int], bool]:
    return lambda topic, index: topic is not None and failed.get((topic, index)) == code


async def _merged_later(result: Awaitable[Response], answers: list[Any]) -> Response:
    return _merged(await result, answers)


def _merged(answer: Any, others: list[Any]) -> Any:
    if answer is None:  # the handler answers nothing (acks=0 is handled before)
        return None
    for other in others:
        answer = _merge(answer, other)
    return answer


def _select(
    entity: Any,
    keep: Callable[[str | None, int], bool],
    topic_name: Callable[[uuid.UUID], str | None],
) -> Any:
    """A copy of the request ``entity`` with only the partition entries ``keep(topic,
    index)`` wants (topic None: a topic id no topic has), topic entries left without
    any dropped; None if no partition entry is left. Entries that hold topic entries
    (OffsetFetch's groups) stay in place, so that the answers line up by position."""
    selected, count = _select_in(entity, keep, topic_name)
    return selected if count else None


def _select_in(
    entity: Any,
    keep: Callable[[str | None, int], bool],
    topic_name: Callable[[uuid.UUID], str | None],
) -> tuple[Any, int]:
    changes: dict[str, tuple[Any, ...]] = {}
    count = 0
    cls: type = type(entity)
    for f in shape_of(cls).every:
        if f.item is None or f.kind is not Kind.ARRAY:
            continue
        items = getattr(entity, f.name)
        if not items:
            continue
        out = []
        parts = _partition_array(f.item)
        for item in items:
            if parts is not None:  # a topic entry
                topic = _topic_of(item, topic_name)
                entries = tuple(
                    e for e in getattr(item, parts.name) or () if keep(topic, _index_of(e))
                )
                if entries:
                    out.append(replace(item, **{parts.name: entries}))
                    count += len(entries)
            elif _names_partitions(f.item):  # it holds topic entries
                inner, n = _select_in(item, keep, topic_name)
                out.append(inner)
                count += n
            else:
                out.append(item)
        changes[f.name] = tuple(out)
    return (replace(entity, **changes) if changes else entity), count


def _topic_key(entry: Any) -> tuple[Any, ...]:
    return tuple(getattr(entry, name, None) for name in _TOPIC_FIELDS)


def _merge(into: Any, extra: Any) -> Any:
    """The response ``into`` with the topic and partition entries of ``extra`` (a response
    of the same type) added: partitions of a topic ``into`` has go to its entry, other
    topics are appended; entries holding topic entries are merged by position; the rest
    (top-level codes, throttle, endpoints) is ``into``'s."""
    changes: dict[str, tuple[Any, ...]] = {}
    cls: type = type(into)
    for f in shape_of(cls).every:
        if f.item is None or f.kind is not Kind.ARRAY:
            continue
        theirs = getattr(extra, f.name) or ()
        if not theirs:
            continue
        mine = list(getattr(into, f.name) or ())
        parts = _partition_array(f.item)
        if parts is not None:
            for item in theirs:
                key = _topic_key(item)
                at = next((i for i, m in enumerate(mine) if _topic_key(m) == key), None)
                if at is None:
                    mine.append(item)
                else:
                    joined = (*getattr(mine[at], parts.name), *getattr(item, parts.name))
                    mine[at] = replace(mine[at], **{parts.name: joined})
        elif _names_partitions(f.item):
            merged = [_merge(a, b) for a, b in zip(mine, theirs, strict=False)]
            mine = merged + mine[len(merged) :] + list(theirs[len(merged) :])
        else:
            continue
        changes[f.name] = tuple(mine)
    return replace(into, **changes) if changes else into


def _error_number(error: ErrorCode | int | str) -> int:
    """An error's number: an :class:`ErrorCode`, a number Kafka has, or Kafka's name of
    one (``"NOT_LEADER_OR_FOLLOWER"``, any case)."""
    if isinstance(error, ErrorCode):
        return error.number
    if isinstance(error, str) and not isinstance(error, enum.Enum):
        try:
            return int(type(kio_error(0))[error.strip().lower()].value)
        except KeyError:
            raise ValueError(f"{error!r} is not the name of a Kafka error code") from None
    if isinstance(error, bool) or not isinstance(error, int):
        raise ValueError(f"error must be an ErrorCode, a Kafka error number or name, got {error!r}")
    try:
        kio_error(error)
    except ValueError:
        raise ValueError(f"{error} is not a Kafka error code") from None
    return error


def _error_name(code: int) -> str:
    return kio_error(code).name.upper()


def _api_key(api: ApiKey | str | int) -> ApiKey:
    if isinstance(api, ApiKey):
        return api
    if isinstance(api, int) and not isinstance(api, bool):
        try:
            return ApiKey(api)
        except ValueError:
            pass
    elif isinstance(api, str):
        name = "".join(c for c in api.upper() if c.isalnum())
        for key in ApiKey:
            if key.name.replace("_", "") == name:
                return key
    known = ", ".join(k.name for k in ApiKey)
    raise ValueError(f"unknown Kafka API {api!r}; known: {known}")


# -- the partitions a request names --------------------------------------------------------

#: the fields that name a topic in a request entry, and those that hold a partition index
_TOPIC_FIELDS: Final = ("name", "topic", "topic_id")
_PARTITION_FIELDS: Final = ("partition_index", "index", "partition")


def _partition_array(cls: type) -> FieldShape | None:
    """The field of ``cls`` that lists partitions: indexes, or entries with an index."""
    for f in shape_of(cls).every:
        if f.kind is not Kind.ARRAY:
            continue
        if f.item is None:
            if f.kafka_type == "int32" and "partition" in f.name:
                return f
        elif any(g.name in _PARTITION_FIELDS for g in shape_of(f.item).every):
            return f
    return None


def _names_partitions(cls: type) -> bool:
    """Whether requests of ``cls`` name topic partitions anywhere."""
    for f in shape_of(cls).every:
        if f.item is None:
            continue
        names = {g.name for g in shape_of(f.item).every}
        if names & set(_TOPIC_FIELDS) and _partition_array(f.item) is not None:
            return True
        if _names_partitions(f.item):
            return True
    return False


#: the APIs whose requests name partitions (a rule may filter them by topic/partition):
#: what :func:`partitioned_apis` finds in the schemas, written out so that importing this
#: module loads no schema (finding it takes every API's newest schema module, 0.4 s of
#: imports); a test checks the two agree
_PARTITIONED: Final = frozenset(
    {
        ApiKey.ADD_PARTITIONS_TO_TXN,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_RECORDS,
        ApiKey.DESCRIBE_LOG_DIRS,
        ApiKey.DESCRIBE_PRODUCERS,
        ApiKey.ELECT_LEADERS,
        ApiKey.FETCH,
        ApiKey.LIST_OFFSETS,
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_DELETE,
        ApiKey.OFFSET_FETCH,
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        ApiKey.PRODUCE,
        ApiKey.SHARE_ACKNOWLEDGE,
        ApiKey.SHARE_FETCH,
        ApiKey.TXN_OFFSET_COMMIT,
    }
)


def _fails_per_partition(cls: type) -> bool:
    """Whether responses of ``cls`` carry an error code in each partition entry."""
    for f in shape_of(cls).every:
        if f.item is None:
            continue
        parts = _partition_array(f.item)
        if parts is not None and parts.item is not None:
            if any(g.kafka_type == "error_code" for g in shape_of(parts.item).every):
                return True
        elif _fails_per_partition(f.item):
            return True
    return False


#: the APIs a partition rule may fail: their requests name partitions and their answers
#: carry a code for each (what :func:`partitioned_apis` finds, written out as above)
_PER_PARTITION: Final = _PARTITIONED - {
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.CREATE_TOPICS,
    ApiKey.DESCRIBE_LOG_DIRS,
    ApiKey.ELECT_LEADERS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
}
PARTITION_APIS: Final = _PER_PARTITION


def partitioned_apis() -> tuple[frozenset[ApiKey], frozenset[ApiKey]]:
    """The APIs whose requests name partitions, and those of them whose answers carry a
    code for each, as the newest schema of every API has them (the source of
    ``_PARTITIONED`` and :data:`PARTITION_APIS`; imports every API's newest schema)."""
    named = frozenset(
        key
        for key in ApiKey
        if key != ApiKey.API_VERSIONS and _names_partitions(request_type(key, versions(key)[1]))
    )
    failed = frozenset(
        key for key in named if _fails_per_partition(response_type(key, versions(key)[1]))
    )
    return named, failed


def _partitions(request: Any, topic_name: Callable[[uuid.UUID], str | None]) -> Partitions:
    """The (topic, partitions) a request names, in request order; topics named by id are
    looked up with ``topic_name``."""
    out: Partitions = []

    def walk(entity: Any) -> None:
        cls: type = type(entity)
        for f in shape_of(cls).every:
            if f.item is None or f.kind is not Kind.ARRAY:
                continue
            for item in getattr(entity, f.name) or ():
                parts = _partition_array(type(item))
                topic = _topic_of(item, topic_name)
                if parts is not None and topic is not None:
                    entries = getattr(item, parts.name) or ()
                    out.append((topic, [_index_of(e) for e in entries]))
                else:
                    walk(item)

    walk(request)
    return out


def _topic_of(item: Any, topic_name: Callable[[uuid.UUID], str | None]) -> str | None:
    for name in _TOPIC_FIELDS:
        value = getattr(item, name, None)
        if isinstance(value, str):
            return value
        if isinstance(value, uuid.UUID) and value.int:
            return topic_name(value)
    return None


def _index_of(entry: Any) -> int:
    if isinstance(entry, int):
        return entry
    for name in _PARTITION_FIELDS:
        value = getattr(entry, name, None)
        if isinstance(value, int):
            return value
    return -1
