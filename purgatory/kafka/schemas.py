"""Kafka's message schemas through kio: every request and response, at every version.

kio (Aiven's ``kio``) generates a frozen dataclass for each request, response and header
of every API version from the JSON schemas Apache Kafka builds its own classes from. This
module is the one place the front door meets it:

* :func:`versions` / :func:`request_type` / :func:`response_type`: what kio carries;
* :func:`read_request`: a frame to a header and a typed request (walked by
  :mod:`purgatory.kafka.frame_guard` first, which kio needs);
* :func:`encode_response`: a typed response to a frame, with the response header the
  version calls for (v1 when flexible; ApiVersions always v0);
* :func:`build`: a response of any version from version-independent values, as Kafka's
  generated Java classes serialize one object at whatever version was asked: fields the
  version lacks are left out, fields not given take the schema's default;
* :func:`error_response`: the answer of any API carrying one error, derived from the
  request and the response schema (Kafka's ``AbstractRequest.getErrorResponse``).
"""

from __future__ import annotations

import datetime
import importlib
import io
import os
import pkgutil
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING
from functools import cache
from pkgutil import resolve_name
from typing import TYPE_CHECKING, Any, Final, NamedTuple

# kio without hypothesis (its phantom types would import it): first, see the module
from purgatory.kafka.kio_hypothesis import quiet_kio  # isort: skip

quiet_kio()

from kio.schema.errors import ErrorCode as KioErrorCode  # noqa: E402
from kio.schema.index import api_key_map, schema_name_map  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402
from kio.static.constants import EntityType  # noqa: E402

from purgatory.kafka.frame_guard import guard  # noqa: E402
from purgatory.kafka.protocol import ApiKey, Frame, RequestHeader  # noqa: E402
from purgatory.kafka.shapes import FieldShape, Kind, shape_of  # noqa: E402
from purgatory.kafka.wire_errors import DecodeError  # noqa: E402

if TYPE_CHECKING:
    from purgatory.kafka.messages import ErrorResponse, Respond

#: Versions kio carries that Apache Kafka marks ``latestVersionUnstable`` (released
#: brokers do not advertise them): InitProducerId v6 (KIP-939, two-phase commit).
UNSTABLE: Final[dict[ApiKey, int]] = {ApiKey.INIT_PRODUCER_ID: 6}

_PEEK: Final = struct.Struct(">hhi")


@cache
def versions(key: ApiKey) -> tuple[int, int]:
    """The lowest and highest stable version of ``key`` in Kafka's schemas (as kio has
    them: Kafka 4.x, without the versions KIP-896 removed)."""
    known = schema_name_map[api_key_map[key]]
    high = max(known)
    if UNSTABLE.get(key) == high:
        high -= 1
    return min(known), high


@cache
def _entity(key: int, version: int, kind: EntityType) -> type:
    paths: Mapping[Any, str] = schema_name_map[api_key_map[key]][version]
    path = paths[kind]
    resolved = resolve_name(path)
    assert isinstance(resolved, type)
    return resolved


def request_type(key: ApiKey, version: int) -> type:
    return _entity(key, version, EntityType.request)


def response_type(key: ApiKey, version: int) -> type:
    return _entity(key, version, EntityType.response)


class Request(NamedTuple):
    """A request read off the wire: its header, and its body as kio's dataclass."""

    header: RequestHeader
    body: Any


def peek(frame: Frame) -> RequestHeader:
    """The API key, version and correlation id at the front of a request frame (the
    client id unread), enough to choose a schema or answer ApiVersions."""
    if len(frame) < _PEEK.size:
        raise DecodeError(f"a request header needs {_PEEK.size} bytes, have {len(frame)}")
    key, version, correlation_id = _PEEK.unpack_from(frame)
    return RequestHeader(key, version, correlation_id, None)


@cache
def _readers(key: int, version: int) -> tuple[type, type, Callable[..., Any], Callable[..., Any]]:
    body = _entity(key, version, EntityType.request)
    header: type = body.__header_schema__  # type: ignore[attr-defined]
    return header, body, entity_reader(header), entity_reader(body)


def read_request(frame: Frame, key: ApiKey, version: int) -> Request:
    """Decode a whole request frame whose key and version (see :func:`peek`) the caller
    serves. Raises DecodeError for anything that does not decode."""
    header_type, body_type, read_header, read_body = _readers(key, version)
    checked = guard(frame, header_type, body_type)
    try:
        header, size = read_header(checked, 0)
        body, _ = read_body(checked, size)
    except Exception as exc:  # kio's errors (and ValueError from its phantom types)
        raise DecodeError(f"{type(exc).__name__}: {exc}") from None
    return Request(RequestHeader(key, version, int(header.correlation_id), header.client_id), body)


@cache
def _writers(cls: type) -> tuple[Callable[..., Any], Callable[..., Any], type]:
    header = cls.__header_schema__  # type: ignore[attr-defined]
    return entity_writer(header), entity_writer(cls), header


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The frame of a response: size, the response header its class names, the body."""
    cls: type = type(response)
    write_header, write_body, header = _writers(cls)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    write_header(out, header(correlation_id=correlation_id))
    write_body(out, response)
    frame = out.getbuffer()
    frame[:4] = (len(frame) - 4).to_bytes(4, "big")
    del frame
    return out.getvalue()


# -- building a response at any version ------------------------------------------------


def kio_error(code: Any) -> KioErrorCode:
    """kio's error enum member for an error: one of ours (its ``number``), kio's own, or
    a plain number."""
    if isinstance(code, KioErrorCode):
        return code
    return KioErrorCode(int(getattr(code, "number", code)))


_MS: Final = datetime.timedelta(milliseconds=1)
#: a timestamp field's zero (kio writes an aware datetime as Unix milliseconds)
_EPOCH: Final = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


def millis(value: datetime.timedelta) -> int:
    """A kio duration field in whole milliseconds."""
    return value // _MS


def _zero(field: FieldShape, *, null: bool = True) -> Any:
    """A required field's value when the builder is not given one: None if the field is
    nullable (and ``null``), else the empty value of its type."""
    kind = field.kind
    if field.nullable and null:
        return None
    if kind is Kind.ARRAY:
        return ()
    if kind is Kind.STRUCT:
        assert field.item is not None
        return build(field.item, {})
    kafka_type = field.kafka_type
    if kind is Kind.STRING:
        return ""
    if kind is Kind.BYTES:
        return b""
    if kafka_type == "error_code":
        return KioErrorCode.none
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type.startswith("datetime"):
        return _EPOCH
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type == "bool":
        return False
    if kafka_type == "float64":
        return 0.0
    return 0


def _convert(field: FieldShape, value: Any) -> Any:
    """``value`` as kio's writer wants it for ``field``."""
    kind = field.kind
    if value is None:
        return None if field.nullable else _zero(field)
    if kind is Kind.FIXED:
        kafka_type = field.kafka_type
        if kafka_type == "error_code":
            return kio_error(value)
        if kafka_type.startswith("timedelta") and isinstance(value, int):
            return datetime.timedelta(milliseconds=value)
        return value
    if kind is Kind.STRUCT:
        assert field.item is not None
        return build(field.item, value) if isinstance(value, Mapping) else value
    if kind is Kind.ARRAY:
        item = field.item
        if item is None:
            return tuple(value)
        return tuple(build(item, v) if isinstance(v, Mapping) else v for v in value)
    return value


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of kio class ``cls`` from ``values``: nested structs and arrays of
    them may be given as mappings; names the class (this version) lacks are left out;
    fields not given take their default, or a zero value.

    A name no version of the API has is a misspelling, which would silently become the
    field's default. Checking that loads every version's module (half a second per API),
    so it is done only where :data:`CHECK_NAMES_ENV` is set: the project's tests set it,
    and a misspelt name then raises TypeError."""
    kwargs: dict[str, Any] = {}
    given = 0
    for field in shape_of(cls).every:
        if field.name in values:
            kwargs[field.name] = _convert(field, values[field.name])
            given += 1
        elif field.default is MISSING:
            kwargs[field.name] = _zero(field)
    if given != len(values) and _checking_names():
        _check_names(cls, values)
    return cls(**kwargs)


#: the environment variable that turns on :func:`build`'s check of field names
CHECK_NAMES_ENV: Final = "PURGATORY_CHECK_KIO_NAMES"


@cache
def _checking_names() -> bool:
    return os.environ.get(CHECK_NAMES_ENV, "") not in ("", "0")


def _check_names(cls: type, values: Mapping[str, Any]) -> None:
    unknown = sorted(set(values) - _names_in_any_version(cls.__module__))
    if unknown:
        raise TypeError(f"{cls.__module__}.{cls.__name__}: no version has the field(s) {unknown}")


@cache
def _names_in_any_version(module: str) -> frozenset[str]:
    """Every field name of every struct of ``module``'s API and direction, in every
    version (``kio.schema.<api>.v<N>.<request|response>``): the structs are named
    differently across versions, so a name is checked against them all."""
    api, _, kind = module.rsplit(".", 2)
    names: set[str] = set()
    for version in pkgutil.iter_modules(importlib.import_module(api).__path__):
        try:
            other = importlib.import_module(f"{api}.{version.name}.{kind}")
        except ModuleNotFoundError:
            continue
        for entity in vars(other).values():
            if isinstance(entity, type) and entity.__module__ == other.__name__:
                names.update(field.name for field in shape_of(entity).every)
    return frozenset(names)


def _respond(request: Any, /, **values: Any) -> Any:
    return build(response_type(request.__api_key__, request.__version__), values)


#: ``respond(request, **values)``: the response to ``request`` at the request's version,
#: built from ``values``. Typed per API (:class:`purgatory.kafka.messages.Respond`): the
#: request's type chooses the response's fields, which mypy checks.
respond: Final[Respond] = _respond


# -- error answers ---------------------------------------------------------------------

#: Where a response names an entity under another name than the request (Kafka's
#: schemas grew apart over the years): the request field each may be copied from.
_SAME: Final[dict[str, tuple[str, ...]]] = {
    "partition_index": ("partition", "index", "partition_id"),
    "partition_id": ("partition_index", "partition"),
    "index": ("partition_index", "partition"),
    "name": ("topic", "topic_name", "user"),
    "user": ("name",),  # the SCRAM credential APIs' results name their users so
    "topic": ("name", "topic_name"),
    "topic_name": ("name", "topic"),
}


def _error_response(request: Any, error: Any, /) -> Any:
    """The response to ``request`` that carries ``error`` in every error field: at the
    top, and in every topic, partition, group or resource the request names (copied from
    the request, keys only); everything else its schema default, or empty: null only
    where Kafka's answer has null (:func:`_sent_empty`, :data:`_NULL_IN_KAFKA`)."""
    key = request.__api_key__
    cls = response_type(key, request.__version__)
    values = _mirror(cls, request, kio_error(error))
    for field in shape_of(cls).every:
        if field.name in _NULL_IN_KAFKA.get(key, ()) and field.nullable:
            values[field.name] = None
    return build(cls, values)


#: ``error_response(request, error)``, typed per API
#: (:class:`purgatory.kafka.messages.ErrorResponse`).
error_response: Final[ErrorResponse] = _error_response


#: The fields Kafka's error answers set to a value of their own, where the schema has no
#: default: DescribeShareGroupOffsets' refused partitions ``setStartOffset(-1)``.
_SET_IN_KAFKA: Final[dict[int, dict[str, int]]] = {
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: {"start_offset": -1},
}

#: The fields Kafka's ``getErrorResponse`` sets to null, where the rule of
#: :func:`_sent_empty` would send them empty: DescribeClientQuotasRequest's
#: ``setEntries(null)``, JoinGroupRequest's ``setProtocolName(null)`` (v7+, nullable).
_NULL_IN_KAFKA: Final[dict[int, frozenset[str]]] = {
    ApiKey.DESCRIBE_CLIENT_QUOTAS: frozenset({"entries"}),
    ApiKey.JOIN_GROUP: frozenset({"protocol_name"}),
}


def _sent_empty(field: FieldShape) -> bool:
    """Whether an error answer sends ``field``, when it has no value for it, empty rather
    than null though the schema allows null. Kafka's error answers are objects of its
    generated classes, which start each field at the schema's default: null where the
    schema says ``"default": "null"`` (kio's default None: left to the builder), else the
    empty string, bytes, array or struct (records start null, but every Fetch partition
    Kafka answers has its records read through ``FetchResponse.recordsOrFail``, which
    makes them empty: librdkafka refuses null records as a protocol error). A uuid or
    timestamp kio holds as None is not a null on the wire (the zero uuid, -1), and a
    tagged field is left out at its default."""
    return (
        field.nullable
        and field.default is MISSING
        and field.tag is None
        and field.kind is not Kind.FIXED
    )


def _mirror(cls: type, source: Any, error: KioErrorCode) -> dict[str, Any]:
    """Values for a ``cls`` built from the request entity ``source``."""
    values: dict[str, Any] = {}
    source_type: type = type(source)
    source_fields = shape_of(source_type).every if _is_entity(source) else ()
    arrays = [f for f in source_fields if f.kind is Kind.ARRAY]
    used: set[str] = set()
    fields = shape_of(cls).every
    # arrays of the same name first, then the others by shared keys, in order; only the
    # arrays of entries that carry an error (configs, members, ... are left empty)
    pending = [
        f for f in fields if f.kind is Kind.ARRAY and f.item is not None and _has_error(f.item)
    ]
    for field in sorted(pending, key=lambda f: f.name not in {a.name for a in arrays}):
        assert field.item is not None
        match = _matching_array(field, arrays, used)
        if match is not None:
            used.add(match.name)
            items = getattr(source, match.name) or ()
            values[field.name] = [_item(field.item, item, error) for item in items]
            continue
        # entries the request groups under keyless containers (AlterReplicaLogDirs'
        # topics under their log dirs), answered flat, as Kafka answers them
        for container in arrays:
            if container.name in used or container.item is None or _key_names(container.item):
                continue
            inner = _matching_array(field, _arrays(container.item), set())
            if inner is not None:
                used.add(container.name)
                values[field.name] = [
                    _item(field.item, item, error)
                    for outer in getattr(source, container.name) or ()
                    for item in getattr(outer, inner.name) or ()
                ]
                break
    # entries that are nothing but an outcome (CreateAcls' results, DeleteAcls' filter
    # results: no key to copy) answer the request's one array of entries one to one, in
    # order, as Kafka's getErrorResponse; entries with data of their own (DescribeLogDirs'
    # results) are left out, as Kafka leaves them
    unmatched = [
        f
        for f in pending
        if f.name not in values and not _key_names(f.item) and _only_outcome(f.item)
    ]
    left = [a for a in arrays if a.name not in used and a.item is not None]
    if len(unmatched) == 1 and len(left) == 1:
        (field,), (array,) = unmatched, left
        assert field.item is not None
        count = len(getattr(source, array.name) or ())
        values[field.name] = [_mirror(field.item, None, error) for _ in range(count)]
    for field in fields:
        if field.kafka_type == "error_code":
            values[field.name] = error
        elif field.name == "error_message":
            values[field.name] = error.name.upper()  # Kafka answers with the error's message
        elif field.kind in (Kind.FIXED, Kind.STRING) and _is_entity(source):
            copied = _copied(field, source)
            if copied is not None:
                values[field.name] = copied
        if field.name not in values and _sent_empty(field):
            values[field.name] = _zero(field, null=False)
    values.update(
        (name, value)
        for name, value in _SET_IN_KAFKA.get(int(getattr(cls, "__api_key__", -1)), {}).items()
        if name in values or name in {f.name for f in fields}
    )
    return values


def _arrays(cls: type) -> list[FieldShape]:
    return [f for f in shape_of(cls).every if f.kind is Kind.ARRAY]


@cache
def _has_error(cls: type) -> bool:
    """Whether entries of ``cls`` carry an error code, themselves or in nested entries."""
    return any(
        f.kafka_type == "error_code" or (f.item is not None and _has_error(f.item))
        for f in shape_of(cls).every
    )


def _only_outcome(cls: type | None) -> bool:
    """Whether entries of ``cls`` hold nothing but an error, its message and arrays."""
    return cls is not None and all(
        f.kind is Kind.ARRAY or f.kafka_type == "error_code" or f.name == "error_message"
        for f in shape_of(cls).every
    )


def _is_entity(value: Any) -> bool:
    return hasattr(type(value), "__dataclass_fields__")


def _matching_array(
    field: FieldShape, arrays: Iterable[FieldShape], used: set[str]
) -> FieldShape | None:
    assert field.item is not None
    keys = _key_names(field.item)
    for array in arrays:
        if array.name in used:
            continue
        if array.name == field.name:
            return array
        if array.item is None:
            # an array of names or indexes maps onto the response's key of that type
            if _scalar_key(field.item, array.kafka_type) is not None:
                return array
        elif keys & _key_names(array.item, aliases=True):
            return array
    return None


#: The fields, besides those of :data:`_SAME`, that say which entity an entry is about:
#: newer versions name topics by id alone (Produce v13, Fetch v13+), FindCoordinator v4+
#: its coordinators by key.
_KEYS: Final = frozenset(
    {"group_id", "member_id", "resource_name", "transactional_id", "topic_id", "key"}
)


@cache
def _key_names(cls: type, aliases: bool = False) -> frozenset[str]:
    names = {f.name for f in shape_of(cls).every if f.kind in (Kind.FIXED, Kind.STRING)}
    names &= set(_SAME) | _KEYS
    if aliases:
        names |= {alias for name in names for alias in _SAME.get(name, ())}
    return frozenset(names)


def _scalar_key(cls: type, kafka_type: str) -> FieldShape | None:
    """The key field of ``cls`` that a bare request value of ``kafka_type`` fills."""
    keys = _key_names(cls)
    for field in shape_of(cls).every:
        if field.name in keys and field.kafka_type == kafka_type:
            return field
    return None


def _item(cls: type, source: Any, error: KioErrorCode) -> dict[str, Any]:
    if _is_entity(source):
        return _mirror(cls, source, error)
    values = _mirror(cls, None, error)
    key = _scalar_key(cls, "string" if isinstance(source, str) else "int32")
    if key is not None:
        values[key.name] = source
    return values


def _copied(field: FieldShape, source: Any) -> Any:
    """The request's value for a response field of the same name (or an alias of it):
    the keys (topic, partition, group, resource) that tell the client which is which."""
    for name in (field.name, *_SAME.get(field.name, ())):
        if name in source.__dataclass_fields__:
            value = getattr(source, name)
            if isinstance(value, str | int | uuid.UUID) and type(value) is not bool:
                return value
    return None
