"""What a Kafka message looks like, read from kio's generated dataclasses.

kio generates one frozen dataclass per (API, version, request or response, nested
struct) from Apache Kafka's JSON message schemas; each field carries its Kafka type in
its metadata (``kafka_type``), its tag if it is a tagged field (``tag``), and its Python
type. :func:`shape_of` turns that into a :class:`Shape` once per class, so the parts of
the front door that walk messages generically (the frame guard, the response builder,
the error answers, the fault rules' partition filter) read one description instead of
introspecting dataclasses on every request.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from functools import cache
from typing import Any, Final, NamedTuple

#: bytes of the fixed-width Kafka types
FIXED_WIDTH: Final[dict[str, int]] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


class Kind(enum.Enum):
    """How a field is laid out on the wire."""

    FIXED = enum.auto()  # a fixed-width primitive (FIXED_WIDTH)
    STRING = enum.auto()  # a string (int16 length, or compact)
    BYTES = enum.auto()  # bytes or records (int32 length, or compact)
    STRUCT = enum.auto()  # one nested struct
    ARRAY = enum.auto()  # an array of primitives (``kafka_type``) or of structs (``item``)


class FieldShape(NamedTuple):
    name: str
    kind: Kind
    #: the Kafka type of a primitive, or of an array's primitive items ("" for structs)
    kafka_type: str
    #: the nested struct's class (STRUCT, or ARRAY of structs), else None
    item: type | None
    nullable: bool
    #: the tag of a tagged field, else None
    tag: int | None
    #: the field's default (dataclasses.MISSING when it has none)
    default: Any


class Shape(NamedTuple):
    """One message class: its fields in wire order (tagged ones apart), flexible or not."""

    cls: type
    flexible: bool
    #: every field, in declaration order (what the builder and the error answers walk)
    every: tuple[FieldShape, ...]
    #: the untagged fields, in wire order
    fields: tuple[FieldShape, ...]
    tagged: dict[int, FieldShape]
    #: the request header: its client_id is a legacy string even in flexible versions
    is_request_header: bool


def primitive_kind(kafka_type: str, what: str) -> Kind:
    """How a value of Kafka type ``kafka_type`` (a field's, or an array's elements') is
    laid out; TypeError naming ``what`` for a type kio added after this was written."""
    if kafka_type == "string":
        return Kind.STRING
    if kafka_type in ("bytes", "records"):
        return Kind.BYTES
    if kafka_type in FIXED_WIDTH:
        return Kind.FIXED
    raise TypeError(f"{what}: Kafka type {kafka_type!r} is not known here")


def _field_shape(field: dataclasses.Field[Any]) -> FieldShape:
    hint: Any = field.type
    nullable = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(hint))
        hint = args[0]
    kafka_type = str(field.metadata.get("kafka_type", ""))
    tag = field.metadata.get("tag")
    default: Any = field.default
    if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:
        factory: Any = field.default_factory
        default = factory()
    item: type | None = None
    if typing.get_origin(hint) is tuple:
        if not kafka_type:
            item = typing.get_args(hint)[0]
        kind = Kind.ARRAY
    elif not kafka_type:
        kind, item = Kind.STRUCT, hint
    else:
        kind = primitive_kind(kafka_type, field.name)
    return FieldShape(field.name, kind, kafka_type, item, nullable, tag, default)


@cache
def shape_of(cls: type) -> Shape:
    """The shape of a kio message class (cached: computed once per class)."""
    every = tuple(_field_shape(field) for field in dataclasses.fields(cls))
    return Shape(
        cls,
        bool(getattr(cls, "__flexible__", False)),
        every,
        tuple(f for f in every if f.tag is None),
        {f.tag: f for f in every if f.tag is not None},
        cls.__name__ == "RequestHeader",
    )
