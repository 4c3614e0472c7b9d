"""The metrics a client pushes (KIP-714's PushTelemetry): OpenTelemetry's ``MetricsData``
(``opentelemetry/proto/metrics/v1/metrics.proto``) read from its protobuf encoding, with
no protobuf package: the wire format is small (varints, fixed 32 and 64-bit values,
length-delimited fields) and only what Kafka's clients write is read.

:func:`decode_metrics` gives one :class:`MetricPoint` per data point: the metric's name,
its kind (``gauge``, ``sum``, ``histogram``, ``exponential_histogram``, ``summary``), the
point's value (a NumberDataPoint's ``as_int`` or ``as_double``; a histogram's or
summary's sum, with its count), its attributes and times, and the attributes of the
resource it came under (Kafka's clients name themselves there). Fields it does not know
are skipped, as protobuf readers skip them; a payload that is not protobuf, or runs past
its end, is a :class:`~purgatory.kafka.codec.DecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, final

from purgatory.kafka.wire_errors import DecodeError

#: an attribute's value: OTLP's AnyValue (string, bool, int, double, bytes, array, kvlist)
AttributeValue = (
    str | bool | int | float | bytes | list["AttributeValue"] | dict[str, "AttributeValue"] | None
)

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
_DOUBLE: Final = struct.Struct("<d")
_INT64: Final = struct.Struct("<q")
_UINT64: Final = struct.Struct("<Q")
#: nesting deeper than this (AnyValue within AnyValue) is refused, not recursed into
_MAX_DEPTH: Final = 32

#: Metric's data fields: field number -> kind
_KINDS: Final = {5: "gauge", 7: "sum", 9: "histogram", 10: "exponential_histogram", 11: "summary"}


@final
@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One data point of one pushed metric. ``value``: a gauge's or sum's number, a
    histogram's or summary's sum (None when it has none); ``count``: a histogram's or
    summary's count (None for gauges and sums); ``monotonic``: a sum's ``is_monotonic``;
    ``temporality``: a sum's or histogram's aggregation temporality (1 delta,
    2 cumulative, 0 unspecified)."""

    name: str
    kind: str
    value: int | float | None
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    time_unix_nano: int = 0
    start_time_unix_nano: int = 0
    count: int | None = None
    monotonic: bool = False
    temporality: int = 0
    unit: str = ""
    description: str = ""
    resource: Mapping[str, AttributeValue] = field(default_factory=dict)


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    end = len(data)
    while True:
        if pos >= end:
            raise DecodeError("protobuf varint runs past the end")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("protobuf varint longer than 10 bytes")


def fields(data: bytes | memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """The fields of one protobuf message: (field number, wire type, value), the value an
    int for varints and fixed-size fields (their bytes read little-endian, unsigned),
    the bytes of a length-delimited one. DecodeError for a group (wire types 3 and 4),
    an unknown wire type, field number 0, or anything running past the end."""
    view = memoryview(data)
    pos, end = 0, len(view)
    while pos < end:
        tag, pos = _varint(view, pos)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise DecodeError("protobuf field number 0")
        value: int | memoryview
        if wire == _VARINT:
            value, pos = _varint(view, pos)
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            if pos + size > end:
                raise DecodeError("protobuf fixed-size field runs past the end")
            value = int.from_bytes(view[pos : pos + size], "little")
            pos += size
        elif wire == _LENGTH:
            length, pos = _varint(view, pos)
            if pos + length > end:
                raise DecodeError(f"protobuf field {number} of {length} bytes runs past the end")
            value = view[pos : pos + length]
            pos += length
        else:
            raise DecodeError(f"protobuf wire type {wire} (field {number}) not read here")
        yield number, wire, value


def _bytes(wire: int, value: int | memoryview, what: str) -> memoryview:
    if wire != _LENGTH or not isinstance(value, memoryview):
        raise DecodeError(f"{what} is not length-delimited")
    return value


def _text(wire: int, value: int | memoryview, what: str) -> str:
    try:
        return bytes(_bytes(wire, value, what)).decode()
    except UnicodeDecodeError:
        raise DecodeError(f"{what} is not UTF-8") from None


def _number(wire: int, value: int | memoryview, expected: int, what: str) -> int:
    if wire != expected or not isinstance(value, int):
        raise DecodeError(f"{what} has wire type {wire}, not {expected}")
    return value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _double(wire: int, value: int | memoryview, what: str) -> float:
    bits = _number(wire, value, _FIXED64, what)
    return float(_DOUBLE.unpack(_UINT64.pack(bits))[0])


def _any_value(data: memoryview, depth: int) -> AttributeValue:
    if depth > _MAX_DEPTH:
        raise DecodeError("attribute values nested too deep")
    out: AttributeValue = None
    for number, wire, value in fields(data):
        if number == 1:
            out = _text(wire, value, "string_value")
        elif number == 2:
            out = bool(_number(wire, value, _VARINT, "bool_value"))
        elif number == 3:
            out = _signed64(_number(wire, value, _VARINT, "int_value"))
        elif number == 4:
            out = _double(wire, value, "double_value")
        elif number == 5:  # ArrayValue: repeated AnyValue values = 1
            out = [
                _any_value(_bytes(w, v, "array value"), depth + 1)
                for n, w, v in fields(_bytes(wire, value, "array_value"))
                if n == 1
            ]
        elif number == 6:  # KeyValueList: repeated KeyValue values = 1
            out = _attributes(
                ((v, w) for n, w, v in fields(_bytes(wire, value, "kvlist_value")) if n == 1),
                depth + 1,
            )
        elif number == 7:
            out = bytes(_bytes(wire, value, "bytes_value"))
    return out


def _attributes(
    pairs: Iterable[tuple[int | memoryview, int]], depth: int = 0
) -> dict[str, AttributeValue]:
    """KeyValue messages (string key = 1; AnyValue value = 2) as a dict."""
    out: dict[str, AttributeValue] = {}
    for raw, wire in pairs:
        key, value = "", None
        for number, w, v in fields(_bytes(wire, raw, "attribute")):
            if number == 1:
                key = _text(w, v, "attribute key")
            elif number == 2:
                value = _any_value(_bytes(w, v, "attribute value"), depth + 1)
        out[key] = value
    return out


def _point(
    name: str,
    kind: str,
    data: memoryview,
    extra: Mapping[str, str | int | bool],
    resource: Mapping[str, AttributeValue],
) -> MetricPoint:
    """One NumberDataPoint (gauge, sum), HistogramDataPoint, ExponentialHistogramDataPoint
    or SummaryDataPoint."""
    attributes: list[tuple[int | memoryview, int]] = []
    value: int | float | None = None
    count: int | None = None
    times = {2: 0, 3: 0}
    numbers = kind in ("gauge", "sum")
    # the attributes' field: 7 in a NumberDataPoint, 9 in a HistogramDataPoint, 1 in an
    # ExponentialHistogramDataPoint, 7 in a SummaryDataPoint
    attribute_field = {"histogram": 9, "exponential_histogram": 1}.get(kind, 7)
    for number, wire, raw in fields(data):
        if number == attribute_field:
            attributes.append((raw, wire))
        elif number in times:
            times[number] = _number(wire, raw, _FIXED64, "time")
        elif numbers and number == 4:
            value = _double(wire, raw, "as_double")
        elif numbers and number == 6:
            value = _signed64(_number(wire, raw, _FIXED64, "as_int"))
        elif not numbers and number == 4:  # count: fixed64
            count = _number(wire, raw, _FIXED64, "count")
        elif not numbers and number == 5:  # sum: double
            value = _double(wire, raw, "sum")
    return MetricPoint(
        name,
        kind,
        value,
        _attributes(attributes),
        times[3],
        times[2],
        count,
        bool(extra.get("monotonic", False)),
        int(str(extra.get("temporality", 0))),
        str(extra.get("unit", "")),
        str(extra.get("description", "")),
        resource,
    )


def _metric(data: memoryview, resource: Mapping[str, AttributeValue]) -> list[MetricPoint]:
    name = unit = description = ""
    datas: list[tuple[str, memoryview]] = []
    for number, wire, value in fields(data):
        if number == 1:
            name = _text(wire, value, "metric name")
        elif number == 2:
            description = _text(wire, value, "metric description")
        elif number == 3:
            unit = _text(wire, value, "metric unit")
        elif number in _KINDS:
            datas.append((_KINDS[number], _bytes(wire, value, _KINDS[number])))
    out = []
    for kind, body in datas:
        extra: dict[str, str | int | bool] = {"unit": unit, "description": description}
        points = []
        for number, wire, value in fields(body):
            if number == 1:
                points.append(_bytes(wire, value, "data point"))
            elif number == 2 and kind != "gauge":
                extra["temporality"] = _number(wire, value, _VARINT, "aggregation_temporality")
            elif number == 3 and kind == "sum":
                extra["monotonic"] = bool(_number(wire, value, _VARINT, "is_monotonic"))
        out += [_point(name, kind, point, extra, resource) for point in points]
    return out


def decode_metrics(data: bytes | memoryview) -> list[MetricPoint]:
    """Every data point of a ``MetricsData`` message, in the order they were written
    (resource metrics, scope metrics, metrics, points). DecodeError when ``data`` is not
    one."""
    out: list[MetricPoint] = []
    for number, wire, value in fields(data):
        if number != 1:  # MetricsData: repeated ResourceMetrics resource_metrics = 1
            continue
        resource: dict[str, AttributeValue] = {}
        scopes = []
        for n, w, v in fields(_bytes(wire, value, "resource_metrics")):
            if n == 1:  # Resource: repeated KeyValue attributes = 1
                resource = _attributes(
                    (rv, rw) for rn, rw, rv in fields(_bytes(w, v, "resource")) if rn == 1
                )
            elif n == 2:
                scopes.append(_bytes(w, v, "scope_metrics"))
        for scope in scopes:  # ScopeMetrics: repeated Metric metrics = 2
            for n, w, v in fields(scope):
                if n == 2:
                    out += _metric(_bytes(w, v, "metric"), resource)
    return out
