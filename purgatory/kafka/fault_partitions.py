"""The partitions a request names, and the answer to a request some of whose partitions
a :class:`~purgatory.kafka.fault_rules.PartitionRule` fails: the failed ones answered
their error, the rest by the handler, the two put together through the schemas' shapes
(:mod:`purgatory.kafka.shapes`)."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Final

from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import error_response, request_type, response_type, versions
from purgatory.kafka.server import Handler, Response
from purgatory.kafka.shapes import FieldShape, Kind, shape_of

#: (topic, partitions) of a request, in request order.
Partitions = list[tuple[str, list[int]]]


def partly_failed(
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
PARTITIONED_APIS: Final = frozenset(
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
PARTITION_APIS: Final = PARTITIONED_APIS - {
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.CREATE_TOPICS,
    ApiKey.DESCRIBE_LOG_DIRS,
    ApiKey.ELECT_LEADERS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
}


def partitioned_apis() -> tuple[frozenset[ApiKey], frozenset[ApiKey]]:
    """The APIs whose requests name partitions, and those of them whose answers carry a
    code for each, as the newest schema of every API has them (the source of
    ``PARTITIONED_APIS`` and :data:`PARTITION_APIS`; imports every API's newest schema)."""
    named = frozenset(
        key
        for key in ApiKey
        if key != ApiKey.API_VERSIONS and _names_partitions(request_type(key, versions(key)[1]))
    )
    failed = frozenset(
        key for key in named if _fails_per_partition(response_type(key, versions(key)[1]))
    )
    return named, failed


def partitions_of(request: Any, topic_name: Callable[[uuid.UUID], str | None]) -> Partitions:
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
