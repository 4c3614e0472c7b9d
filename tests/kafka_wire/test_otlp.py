"""OTLP MetricsData read from protobuf (what PushTelemetry carries): the encoder here is
written from ``opentelemetry/proto/metrics/v1/metrics.proto`` independently of the
decoder, and imported by the telemetry tests (``from test_otlp import ...``)."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from purgatory.kafka.otlp import AttributeValue, MetricPoint, decode_metrics
from purgatory.kafka.wire_errors import DecodeError

# -- an encoder ---------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s: ten bytes, two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _message(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _message(number, text.encode())


def _fixed64(number: int, value: int) -> bytes:
    return _tag(number, 1) + struct.pack("<Q", value & ((1 << 64) - 1))


def _double(number: int, value: float) -> bytes:
    return _tag(number, 1) + struct.pack("<d", value)


def any_value(value: AttributeValue) -> bytes:
    """An AnyValue: string 1, bool 2, int 3, double 4, array 5, kvlist 6, bytes 7."""
    if isinstance(value, str):
        return _string(1, value)
    if isinstance(value, bool):
        return _tag(2, 0) + _varint(int(value))
    if isinstance(value, int):
        return _tag(3, 0) + _varint(value)
    if isinstance(value, float):
        return _double(4, value)
    if isinstance(value, list):
        return _message(5, b"".join(_message(1, any_value(item)) for item in value))
    if isinstance(value, dict):
        return _message(6, b"".join(_message(1, key_value(k, v)) for k, v in value.items()))
    assert isinstance(value, bytes)
    return _message(7, value)


def key_value(key: str, value: AttributeValue) -> bytes:
    return _string(1, key) + _message(2, any_value(value))


def number_point(
    value: int | float,
    attributes: Mapping[str, AttributeValue] | None = None,
    time_ns: int = 0,
    start_ns: int = 0,
) -> bytes:
    """A NumberDataPoint: attributes 7, start 2, time 3, as_double 4 / as_int 6."""
    out = b"".join(_message(7, key_value(k, v)) for k, v in (attributes or {}).items())
    out += _fixed64(2, start_ns) + _fixed64(3, time_ns)
    return out + (_double(4, value) if isinstance(value, float) else _fixed64(6, value))


def metric(
    name: str,
    points: Sequence[bytes],
    kind: str = "gauge",
    description: str = "",
    unit: str = "",
    monotonic: bool = False,
    temporality: int = 0,
) -> bytes:
    """A Metric: name 1, description 2, unit 3, gauge 5 / sum 7 / histogram 9."""
    body = b"".join(_message(1, point) for point in points)
    if kind != "gauge" and temporality:
        body += _tag(2, 0) + _varint(temporality)
    if kind == "sum" and monotonic:
        body += _tag(3, 0) + _varint(1)
    number = {"gauge": 5, "sum": 7, "histogram": 9}[kind]
    return _string(1, name) + _string(2, description) + _string(3, unit) + _message(number, body)


def metrics_data(
    metrics: Sequence[bytes], resource: Mapping[str, AttributeValue] | None = None
) -> bytes:
    """A MetricsData of one ResourceMetrics (resource 1, scope_metrics 2) with one
    ScopeMetrics (scope 1, metrics 2)."""
    attributes = b"".join(_message(1, key_value(k, v)) for k, v in (resource or {}).items())
    scope = _message(1, _string(1, "scope")) + b"".join(_message(2, m) for m in metrics)
    return _message(1, _message(1, attributes) + _message(2, scope))


def gauges(values: Mapping[str, int | float]) -> bytes:
    """A MetricsData of one gauge point per name."""
    return metrics_data([metric(name, [number_point(v)]) for name, v in values.items()])


# -- the decoder ----------------------------------------------------------------------------


def test_gauges_and_sums_read_back_with_their_attributes_times_and_resource() -> None:
    data = metrics_data(
        [
            metric(
                "org.apache.kafka.producer.record.queue.time.avg",
                [number_point(1.5, {"topic": "t"}, 20, 10), number_point(2.5, {"topic": "u"})],
                description="The average time",
                unit="ms",
            ),
            metric(
                "org.apache.kafka.producer.connection.creation.total",
                [number_point(-3)],
                kind="sum",
                monotonic=True,
                temporality=1,
            ),
        ],
        resource={"client_id": "c", "n": 7},
    )
    points = decode_metrics(data)
    resource = {"client_id": "c", "n": 7}
    assert points == [
        MetricPoint(
            "org.apache.kafka.producer.record.queue.time.avg",
            "gauge",
            1.5,
            {"topic": "t"},
            20,
            10,
            unit="ms",
            description="The average time",
            resource=resource,
        ),
        MetricPoint(
            "org.apache.kafka.producer.record.queue.time.avg",
            "gauge",
            2.5,
            {"topic": "u"},
            unit="ms",
            description="The average time",
            resource=resource,
        ),
        MetricPoint(
            "org.apache.kafka.producer.connection.creation.total",
            "sum",
            -3,
            monotonic=True,
            temporality=1,
            resource=resource,
        ),
    ]
    assert isinstance(points[2].value, int)


def test_every_kind_of_attribute_value_reads_back() -> None:
    attributes: dict[str, AttributeValue] = {
        "s": "text",
        "b": True,
        "f": False,
        "i": -(1 << 40),
        "d": 0.25,
        "raw": b"\x00\xff",
        "list": ["a", 1, [2.0]],
        "map": {"k": "v", "nested": {"x": 1}},
    }
    [point] = decode_metrics(metrics_data([metric("m", [number_point(1, attributes)])]))
    assert point.attributes == attributes


def test_a_histogram_point_gives_its_sum_and_count() -> None:
    point = (
        _message(9, key_value("a", "b"))
        + _fixed64(3, 5)
        + _fixed64(4, 3)  # count
        + _double(5, 7.5)  # sum
        + _message(6, struct.pack("<QQ", 1, 2))  # bucket counts, packed
    )
    [decoded] = decode_metrics(metrics_data([metric("h", [point], kind="histogram")]))
    assert (decoded.kind, decoded.value, decoded.count) == ("histogram", 7.5, 3)
    assert decoded.attributes == {"a": "b"}
    assert decoded.time_unix_nano == 5


def test_fields_it_does_not_know_are_skipped() -> None:
    unknown = _tag(99, 0) + _varint(5) + _tag(98, 5) + b"\x01\x02\x03\x04" + _string(97, "x")
    data = unknown + metrics_data([metric("m", [number_point(4) + unknown]) + unknown])
    [point] = decode_metrics(data)
    assert (point.name, point.value) == ("m", 4)


def test_nothing_pushed_reads_as_no_point() -> None:
    assert decode_metrics(b"") == []
    assert decode_metrics(metrics_data([])) == []


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x0a", "varint runs past"),  # a tag, no length
        (b"\x0a\x05ab", "runs past the end"),
        (b"\x0b", "wire type 3"),  # a group
        (b"\x00\x01", "field number 0"),
        (b"\x09\x00", "fixed-size field runs past"),
        (b"\x08" + b"\xff" * 11, "longer than 10 bytes"),
        (metrics_data([_message(1, b"\xff\xfe")]), "not UTF-8"),
        (_message(1, _tag(1, 0) + _varint(1)), "not length-delimited"),
    ],
)
def test_what_is_not_metrics_data_is_a_decode_error(data: bytes, why: str) -> None:
    with pytest.raises(DecodeError, match=why):
        decode_metrics(data)


@given(st.binary(max_size=200))
def test_any_bytes_read_or_are_a_decode_error(data: bytes) -> None:
    try:
        decode_metrics(data)
    except DecodeError:
        pass


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=20),
        st.one_of(
            st.integers(-(1 << 63), (1 << 63) - 1),
            st.floats(allow_nan=False),
        ),
        max_size=5,
    )
)
def test_gauges_read_back_as_written(values: dict[str, int | float]) -> None:
    points = decode_metrics(gauges(values))
    assert {p.name: p.value for p in points} == values
