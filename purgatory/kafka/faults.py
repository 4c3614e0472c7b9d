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
import inspect
import itertools
import logging
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.fault_partitions import (
    PARTITION_APIS,
    PARTITIONED_APIS,
    partitions_of,
    partly_failed,
)
from purgatory.kafka.fault_rules import (
    Hit,
    PartitionRule,
    Rule,
    api_key,
    check_times,
    error_number,
)
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import (
    error_response,
)
from purgatory.kafka.server import CloseConnection, DropResponse, Handler, Response

log = logging.getLogger(__name__)

__all__ = ["HISTORY", "Faults", "Hit", "PartitionRule", "Rule"]

#: How many hits :attr:`Faults.history` keeps (the oldest go first).
HISTORY: Final = 1000


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
        key = api_key(api)
        code = None if error is None else error_number(error)
        if sum((error is not None, drop, disconnect)) > 1:
            raise ValueError("a rule answers with an error, drops, or disconnects: pick one")
        if not (isinstance(delay_ms, int | float) and 0 <= delay_ms < float("inf")):
            raise ValueError(f"delay_ms must be a finite number >= 0, got {delay_ms!r}")
        if error is None and not drop and not disconnect and delay_ms == 0:
            raise ValueError("a rule must do something: error=, drop=, disconnect= or delay_ms=")
        if error is not None and key == ApiKey.API_VERSIONS:
            raise ValueError("ApiVersions is never intercepted: a client could not connect")
        if (topic is not None or partition is not None) and key not in PARTITIONED_APIS:
            supported = ", ".join(sorted(k.name for k in PARTITIONED_APIS))
            raise ValueError(
                f"{key.name} requests name no partitions; topic= works for {supported}"
            )
        if versions is not None and not (
            len(versions) == 2 and all(isinstance(v, int) for v in versions)
        ):
            raise ValueError(f"versions must be (lowest, highest), got {versions!r}")
        check_times(times)
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
        code = error_number(error)
        keys: frozenset[ApiKey]
        if apis is None:
            keys = PARTITION_APIS
        else:
            if isinstance(apis, str | int):
                raise TypeError(f"apis must be a list of APIs, got {apis!r}")
            keys = frozenset(api_key(api) for api in apis)
            if not keys:
                raise ValueError("apis must name at least one API (or be None: all of them)")
            wrong = sorted(k.name for k in keys - PARTITION_APIS)
            if wrong:
                supported = ", ".join(sorted(k.name for k in PARTITION_APIS))
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
        check_times(times)
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
            partitions = partitions_of(request, self._topic_name)
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
        named = partitions_of(request, self._topic_name)
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
                    return partly_failed(failed, header, request, handler, self._topic_name)
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
