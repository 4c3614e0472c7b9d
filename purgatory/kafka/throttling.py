"""Client quotas applied to requests on the wire, as Kafka's ``KafkaApis`` and request
channel apply them: what a request counts (a Produce's request bytes, a Fetch's response
bytes, the time its handler ran, a controller mutation's partitions), its throttle time
in the answer's ``throttle_time_ms``, and the connection muted for that time.

As Kafka (KIP-219), a client whose version of the API throttles itself (Produce v6+,
Fetch v8+, ...: :data:`CLIENT_THROTTLES_SINCE`) is answered at once, then its connection
is muted: its next request is not read until the throttle time has passed. An older
client's answer is held back that long instead. Either way the wait is a
:class:`Throttle` operation expiring on the front door's ``Throttle`` purgatory (its
timing wheel), as Kafka keeps throttled channels in a delay queue.

A throttled Fetch is answered with no records (its bytes not counted), as Kafka's. A
connection over its IP's ``connection_creation_rate`` is never served: it is closed once
its throttle time has passed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import time
from collections.abc import Awaitable, Callable, Hashable
from datetime import timedelta
from typing import Any, Final, final

from purgatory import DelayedOperation, DelayedOperationPurgatory, OperationCancelled
from purgatory.errors import ErrorCode
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.quotas import (
    CONTROLLER_MUTATION,
    FETCH,
    PRODUCE,
    REQUEST,
    ClientQuotas,
    Tags,
)
from purgatory.kafka.schemas import encode_response, error_response

#: The first version of each API whose clients throttle themselves on ``throttle_time_ms``
#: (Kafka's ``shouldClientThrottle``): answered at once, then muted. Not listed: delayed.
CLIENT_THROTTLES_SINCE: Final[dict[int, int]] = {
    ApiKey.PRODUCE: 6,
    ApiKey.FETCH: 8,
    ApiKey.LIST_OFFSETS: 3,
    ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1,
    ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.DESCRIBE_CONFIGS: 2,
    ApiKey.ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1,
    ApiKey.DESCRIBE_LOG_DIRS: 1,
    ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1,
    ApiKey.ELECT_LEADERS: 0,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 0,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.OFFSET_DELETE: 0,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0,
}

#: the mutations KIP-599 counts: the first version refused per topic over the quota
#: (THROTTLING_QUOTA_EXCEEDED; older ones are throttled instead), the request's field of
#: topics and the response's field of results
_MUTATIONS: Final[dict[int, tuple[int, str]]] = {
    ApiKey.CREATE_TOPICS: (6, "topics"),
    ApiKey.DELETE_TOPICS: (5, "responses"),
    ApiKey.CREATE_PARTITIONS: (3, "results"),
}
#: Kafka's message for the error
THROTTLING_MESSAGE: Final = "The throttling quota has been exceeded."

Response = Any


@final
class Throttle(DelayedOperation):
    """A throttle time: completes only by expiring (Kafka's ``ThrottledChannel``)."""

    __slots__ = ()

    def try_complete(self) -> bool:
        return False


@final
class Mute:
    """One connection's mute: the throttle its next request waits for (None: none)."""

    __slots__ = ("throttle",)

    def __init__(self) -> None:
        self.throttle: Throttle | None = None


@final
class _Mutation:
    """A controller mutation request's partitions: those taken per topic entry (to
    give back for a topic that then failed), the entries refused."""

    __slots__ = ("bound", "refused", "request", "results", "tags", "taken", "throttle")

    def __init__(self, tags: Tags, bound: float, request: Any, results: str, throttle: int) -> None:
        self.tags = tags
        self.bound = bound
        self.request = request
        self.results = results
        self.throttle = throttle
        self.taken: dict[str, int] = {}
        self.refused: list[Any] = []


@final
class Throttler:
    """Applies ``quotas`` to the requests of every listener of a front door, its delays
    on ``throttles``. ``partitions_of`` gives a topic's partition count (None: unknown)
    and ``default_partitions`` what a CreateTopics entry asking -1 gets."""

    def __init__(
        self,
        quotas: ClientQuotas,
        throttles: DelayedOperationPurgatory[Throttle],
        partitions_of: Callable[[str], int | None],
        default_partitions: Callable[[], int],
    ) -> None:
        self.quotas = quotas
        self.throttles = throttles
        self._partitions_of = partitions_of
        self._default_partitions = default_partitions

    def now_ms(self) -> int:
        return math.floor(self.throttles.timer.now_ms())

    def delay(self, ms: int, channel: Hashable) -> Throttle:
        """A throttle of ``ms`` of ``channel`` (its key in the purgatory) started now on
        the timing wheel (await it)."""
        throttle = Throttle(ms)
        self.throttles.try_complete_else_watch_nowait(throttle, (channel,))
        return throttle

    # -- connections ------------------------------------------------------------------

    def connection_throttle(self, ip: str) -> int:
        """0 to serve a new connection from ``ip``; else the ms to hold it before it is
        closed unserved (its IP over ``connection_creation_rate``)."""
        quotas = self.quotas
        if not quotas.connections.overrides:
            return 0
        throttle = quotas.connections.throttle(ip, self.now_ms())
        if throttle:
            quotas.connections_throttled[ip] += 1
        return throttle

    # -- requests ---------------------------------------------------------------------

    def serve(
        self,
        key: int,
        version: int,
        user: str,
        client_id: str,
        request_bytes: int,
        request: Any,
        run: Callable[[Any], Response | Awaitable[Response]],
        mute: Mute,
    ) -> Response | Awaitable[Response]:
        """``run(request)``, its quotas recorded: the response, or an awaitable of it
        when it waits (a parked request) or is throttled."""
        quotas = self.quotas
        now = self.now_ms()
        mutation = None
        if key in _MUTATIONS and quotas.mutation.quotas.active:
            request, mutation = self._mutate(key, version, user, client_id, request, now)
        started = time.perf_counter_ns()
        result = run(request)
        spent_ns = time.perf_counter_ns() - started
        throttle, quota_type, tags = 0, "", ("", "")
        if key == ApiKey.PRODUCE and quotas.produce.active:
            tags, bound = quotas.produce.resolve(user, client_id)
            if bound is not None:
                throttle = quotas.produce.record(tags, bound, request_bytes, now)
                quota_type = PRODUCE
        if quotas.request.active and not (key == ApiKey.PRODUCE and request.acks == 0):
            request_tags, bound = quotas.request.resolve(user, client_id)
            if bound is not None:
                # Kafka's request time, as a percentage of one thread's second
                percent = spent_ns * 100.0 / 1e9
                request_throttle = quotas.request.record(request_tags, bound, percent, now)
                if request_throttle > throttle:
                    throttle, quota_type, tags = request_throttle, REQUEST, request_tags
        fetch = key == ApiKey.FETCH and quotas.fetch.active
        if not (throttle or fetch or mutation is not None or inspect.isawaitable(result)):
            return result
        return self._finish(
            result, key, version, user, client_id, (throttle, quota_type, tags), mutation, mute
        )

    async def _finish(
        self,
        result: Any,
        key: int,
        version: int,
        user: str,
        client_id: str,
        throttled: tuple[int, str, Tags],
        mutation: _Mutation | None,
        mute: Mute,
    ) -> Response:
        response = (await result) if inspect.isawaitable(result) else result
        throttle, quota_type, tags = throttled
        quotas = self.quotas
        now = self.now_ms()
        if mutation is not None:
            response = self._settle(mutation, response, now)
            if mutation.throttle > throttle:
                throttle, quota_type, tags = mutation.throttle, CONTROLLER_MUTATION, mutation.tags
        if key == ApiKey.FETCH and response is not None and quotas.fetch.active:
            fetch_tags, bound = quotas.fetch.resolve(user, client_id)
            if bound is not None:
                size = len(encode_response(0, response))
                fetch_throttle = quotas.fetch.record(fetch_tags, bound, size, now)
                if fetch_throttle or throttle:
                    # answered with no records: their bytes are not counted
                    quotas.fetch.unrecord(fetch_tags, size, now)
                    response = dataclasses.replace(response, responses=())
                if fetch_throttle > throttle:
                    throttle, quota_type, tags = fetch_throttle, FETCH, fetch_tags
        if throttle <= 0:
            return response
        quotas.throttled_for(quota_type, tags, throttle)
        if response is not None and hasattr(response, "throttle_time"):
            response = dataclasses.replace(response, throttle_time=timedelta(milliseconds=throttle))
        wait = self.delay(throttle, mute)
        if response is None or version >= CLIENT_THROTTLES_SINCE.get(key, 1 << 16):
            mute.throttle = wait  # answered now, the next request read once it passes
        else:
            with contextlib.suppress(OperationCancelled):  # the front door closing
                await wait  # an older client: the answer waits out the throttle
        return response

    # -- controller mutations (KIP-599) -----------------------------------------------

    def _permits(self, key: int, entry: Any) -> tuple[str, int]:
        """A topic entry's name and the partitions it creates or deletes."""
        if key == ApiKey.DELETE_TOPICS:
            name = entry if isinstance(entry, str) else entry.name
            return name or "", (self._partitions_of(name) or 0) if name else 0
        name = entry.name
        if key == ApiKey.CREATE_TOPICS:
            if entry.num_partitions != -1:
                return name, max(int(entry.num_partitions), 0)
            return name, len(entry.assignments) or self._default_partitions()
        now = self._partitions_of(name) or 0  # CreatePartitions: those added
        return name, max(int(entry.count) - now, 0)

    def _mutate(
        self, key: int, version: int, user: str, client_id: str, request: Any, now: int
    ) -> tuple[Any, _Mutation | None]:
        manager = self.quotas.mutation
        tags, bound = manager.quotas.resolve(user, client_id)
        if bound is None:
            return request, None
        strict_since, results = _MUTATIONS[key]
        field = "topic_names" if key == ApiKey.DELETE_TOPICS and version < 6 else "topics"
        entries = list(getattr(request, field))
        permits = [self._permits(key, entry) for entry in entries]
        if version < strict_since:
            throttle = manager.permissive(tags, bound, sum(p for _, p in permits), now)
            mutation = _Mutation(tags, bound, request, results, throttle)
            mutation.taken = dict(permits)
            return request, mutation
        taken, throttle = manager.strict(tags, bound, [p for _, p in permits], now)
        mutation = _Mutation(tags, bound, request, results, throttle)
        kept = []
        for entry, (name, count), took in zip(entries, permits, taken, strict=True):
            if took:
                kept.append(entry)
                mutation.taken[name] = count
            else:
                mutation.refused.append(entry)
        if mutation.refused:
            mutation.request = dataclasses.replace(request, **{field: tuple(mutation.refused)})
            request = dataclasses.replace(request, **{field: tuple(kept)})
        return request, mutation

    def _settle(self, mutation: _Mutation, response: Any, now: int) -> Any:
        """Partitions of topics that failed given back; the refused topics answered
        THROTTLING_QUOTA_EXCEEDED."""
        manager = self.quotas.mutation
        results = list(getattr(response, mutation.results))
        for result in results:
            if int(result.error_code) != ErrorCode.NONE.number:
                count = mutation.taken.get(result.name or "", 0)
                manager.refund(mutation.tags, mutation.bound, count, now)
        if not mutation.refused:
            return response
        refused = getattr(
            error_response(mutation.request, ErrorCode.THROTTLING_QUOTA_EXCEEDED),
            mutation.results,
        )
        results.extend(
            dataclasses.replace(result, error_message=THROTTLING_MESSAGE)
            if hasattr(result, "error_message")
            else result
            for result in refused
        )
        return dataclasses.replace(response, **{mutation.results: tuple(results)})
