"""Client-metrics subscriptions checked as Kafka's ClientMetricsConfigs checks them, and
the client instances and pushes of Kafka's ClientMetricsManager, on a clock of the test's;
the subscription ids against Java's (jshell) for the same metrics, interval and id."""

from __future__ import annotations

import uuid

import pytest
from test_otlp import gauges

from purgatory.errors import ErrorCode
from purgatory.kafka.client_metrics import (
    ClientInfo,
    ClientMetrics,
    check_subscription,
    java_set_order,
    subscription_id,
    uuid_hash,
)
from purgatory.kafka.compression import GZIP, LZ4, SNAPPY, ZSTD, deflate
from purgatory.sim.errors import SimulationError

CLIENT_METRICS = 16
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
E = ErrorCode
ZERO = uuid.UUID(int=0)
#: a Kafka client instance id, and Java's answers for it (jshell: java.util.HashSet's
#: toString, java.util.zip.CRC32C, UUID.hashCode, as Kafka's computeSubscriptionId)
JAVA_ID = uuid.UUID("f9ab3b4d-8e1c-4a5e-9b2f-0123456789ab")


# -- subscriptions checked as Kafka's ClientMetricsConfigs.validate ------------------------


@pytest.mark.parametrize(
    ("name", "configs", "code", "message"),
    [
        ("", {}, E.INVALID_REQUEST, "Subscription name can't be empty"),
        ("s", {"metric": "a"}, E.INVALID_REQUEST, "Unknown client metrics configuration: metric"),
        (
            "s",
            {"interval.ms": "soon"},
            E.INVALID_CONFIG,
            "Invalid value soon for configuration interval.ms: Not a number of type INT",
        ),
        (
            "s",
            {"interval.ms": "99"},
            E.INVALID_REQUEST,
            "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        ),
        ("s", {"interval.ms": "3600001"}, E.INVALID_REQUEST, "Invalid value 3600001"),
        (
            "s",
            {"match": "client_id"},
            E.INVALID_CONFIG,
            "Illegal client matching pattern: client_id",
        ),
        ("s", {"match": "client_id="}, E.INVALID_CONFIG, "Illegal client matching pattern"),
        ("s", {"match": "client_id=a=b"}, E.INVALID_CONFIG, "Illegal client matching pattern"),
        ("s", {"match": "host=a"}, E.INVALID_CONFIG, "Illegal client matching pattern: host=a"),
        ("s", {"match": "client_id=[a"}, E.INVALID_CONFIG, "Illegal client matching pattern"),
    ],
)
def test_a_bad_subscription_is_refused_with_kafkas_error(
    name: str, configs: dict[str, str], code: ErrorCode, message: str
) -> None:
    with pytest.raises(SimulationError) as refused:
        check_subscription(name, configs)
    assert refused.value.code is code
    assert refused.value.message.startswith(message)


def test_a_subscription_reads_its_lists_and_interval_as_kafka_does() -> None:
    checked = check_subscription(
        "s",
        {
            "metrics": " org.apache.kafka.producer. , org.apache.kafka.consumer.",
            "interval.ms": " +250 ",
            "match": "client_id = app-.* ,client_software_name=apache-kafka-java",
        },
    )
    assert checked.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer.")
    assert checked.interval_ms == 250
    assert {k: p.pattern for k, p in checked.match.items()} == {
        "client_id": "app-.*",
        "client_software_name": "apache-kafka-java",
    }
    assert check_subscription("s", {}).interval_ms == 300_000


def test_the_subscription_id_is_kafkas_for_the_same_metrics_interval_and_instance() -> None:
    metrics = [
        "org.apache.kafka.producer.",
        "org.apache.kafka.consumer.",
        "org.apache.kafka.client.",
        "z",
        "Aa",
        "BB",  # Aa's hash: one bucket, in the order added
    ]
    assert java_set_order(metrics) == [
        "org.apache.kafka.producer.",
        "Aa",
        "BB",
        "org.apache.kafka.consumer.",
        "org.apache.kafka.client.",
        "z",
    ]
    assert subscription_id(metrics, 200, JAVA_ID) == 805893779
    assert subscription_id([], 300_000, JAVA_ID) == 2100863557
    assert subscription_id(["*"], 100, JAVA_ID) == -1671363270
    many = [f"org.apache.kafka.m{i}" for i in range(20)]  # the set grows to 32 buckets
    assert java_set_order(many)[:3] == [
        "org.apache.kafka.m19",
        "org.apache.kafka.m18",
        "org.apache.kafka.m17",
    ]
    assert subscription_id(many, 1000, JAVA_ID) == -344627789
    assert uuid_hash(JAVA_ID) == -1442842213


# -- the client metrics manager --------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000_000

    def __call__(self) -> int:
        return self.ms


class Conn:
    closed = False


def _manager(max_bytes: int = 1 << 20) -> tuple[ClientMetrics, Clock]:
    clock = Clock()
    return ClientMetrics(max_bytes, clock), clock


def test_without_a_subscription_a_client_gets_no_metrics_and_the_default_interval() -> None:
    metrics, clock = _manager()
    client = ClientInfo("app")
    answer = metrics.get_subscriptions(0, ZERO, client)
    assert answer.error is E.NONE
    assert answer.instance_id is not None
    assert answer.instance_id != ZERO
    assert (answer.metrics, answer.interval_ms) == ((), 300_000)
    assert answer.subscription_id == subscription_id([], 300_000, answer.instance_id)
    # asked again before the interval: throttled, until it has passed
    again = metrics.get_subscriptions(0, answer.instance_id, client)
    assert again.error is E.THROTTLING_QUOTA_EXCEEDED
    clock.ms += 300_000
    assert metrics.get_subscriptions(0, answer.instance_id, client).error is E.NONE


def test_a_changed_subscription_reaches_the_client_at_once_and_only_the_matching_ones() -> None:
    metrics, clock = _manager()
    app = ClientInfo("app-1", "apache-kafka-java", "4.0.0", "10.0.0.1", 5000)
    first = metrics.get_subscriptions(0, None, app)
    assert first.instance_id is not None
    metrics.subscribe("producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
    metrics.subscribe(
        "java",
        {
            "metrics": "org.apache.kafka.consumer.",
            "interval.ms": "500",
            "match": "client_software_name=apache-kafka-java,client_id=app-.*",
        },
    )
    metrics.subscribe("others", {"metrics": "x.", "match": "client_id=other"})
    answer = metrics.get_subscriptions(0, first.instance_id, app)  # not throttled: changed
    assert answer.error is E.NONE
    assert sorted(answer.metrics) == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert answer.interval_ms == 500
    assert answer.subscription_id == subscription_id(answer.metrics, 500, first.instance_id)
    # "*" in any: every metric
    metrics.subscribe("all", {"metrics": "*", "interval.ms": "60000"})
    every = metrics.get_subscriptions(0, first.instance_id, app)
    assert (every.metrics, every.interval_ms) == (("*",), 500)
    assert metrics.subscriptions() == ["all", "java", "others", "producers"]
    # no configs left: removed
    for name in ("all", "java", "producers", "others"):
        metrics.subscribe(name, {})
    assert metrics.subscriptions() == []
    assert metrics.get_subscriptions(0, first.instance_id, app).metrics == ()
    assert clock.ms == 1_000_000_000  # no time passed


def _subscribed(
    metrics: ClientMetrics, client: ClientInfo, broker: int = 0
) -> tuple[uuid.UUID, int]:
    metrics.subscribe("all", {"metrics": "*", "interval.ms": "1000"})
    answer = metrics.get_subscriptions(broker, None, client)
    assert answer.instance_id is not None
    return answer.instance_id, answer.subscription_id


def test_pushes_are_kept_per_client_instance_in_every_compression() -> None:
    metrics, clock = _manager()
    client = ClientInfo("app", "librdkafka", "2.16.0")
    instance, sub = _subscribed(metrics, client)
    for n, codec in enumerate((0, GZIP, SNAPPY, LZ4, ZSTD)):
        payload = gauges({"org.apache.kafka.producer.m": n, "org.apache.kafka.x": 0.5})
        data = payload if codec == 0 else deflate(codec, payload)
        assert metrics.push(0, instance, sub, False, codec, data, client) == (E.NONE, None)
        clock.ms += 1000
    [(got_id, telemetry)] = metrics.telemetry().items()
    assert got_id == instance
    assert (telemetry.client_id, telemetry.software_name, telemetry.software_version) == (
        "app",
        "librdkafka",
        "2.16.0",
    )
    assert len(telemetry.pushes) == 5
    assert telemetry.names() == {"org.apache.kafka.producer.m", "org.apache.kafka.x"}
    assert telemetry.latest() == {"org.apache.kafka.producer.m": 4, "org.apache.kafka.x": 0.5}
    assert [p.points[0].value for p in telemetry.pushes] == [0, 1, 2, 3, 4]
    # an empty push is answered, and keeps nothing
    clock.ms += 1000
    assert metrics.push(0, instance, sub, False, 0, b"", client)[0] is E.NONE
    assert len(metrics.telemetry()[instance].pushes) == 5
    metrics.clear_telemetry()
    assert metrics.telemetry() == {}


def test_bad_pushes_get_kafkas_errors_in_kafkas_order() -> None:
    metrics, clock = _manager(max_bytes=100)
    client = ClientInfo("app")
    instance, sub = _subscribed(metrics, client)
    data = gauges({"m": 1})

    def push(
        sub_id: int = sub, codec: int = 0, payload: bytes = data, ending: bool = False
    ) -> ErrorCode:
        return metrics.push(0, instance, sub_id, ending, codec, payload, client)[0]

    for reserved in (None, ZERO, uuid.UUID(int=1)):
        assert metrics.push(0, reserved, sub, False, 0, data, client)[0] is E.INVALID_REQUEST
    assert push(sub_id=sub + 1) is E.UNKNOWN_SUBSCRIPTION_ID  # the first after the get
    clock.ms += 1000
    assert push(codec=5) is E.UNSUPPORTED_COMPRESSION_TYPE
    clock.ms += 1000
    assert push(payload=b"x" * 101) is E.TELEMETRY_TOO_LARGE
    clock.ms += 1000
    assert push(payload=b"\x0b") is E.INVALID_RECORD  # not protobuf
    clock.ms += 1000
    assert push(codec=GZIP, payload=b"not gzip") is E.INVALID_RECORD
    clock.ms += 1000
    assert push() is E.NONE
    assert push() is E.THROTTLING_QUOTA_EXCEEDED  # before the interval
    clock.ms += 999
    assert push(sub_id=sub + 1) is E.THROTTLING_QUOTA_EXCEEDED  # throttling comes first
    clock.ms += 1
    assert push() is E.NONE
    # a terminating push is taken early; after it, nothing is
    assert push(ending=True) is E.NONE
    assert metrics.telemetry()[instance].terminated
    clock.ms += 10_000
    assert push() is E.INVALID_REQUEST
    assert len(metrics.telemetry()[instance].pushes) == 3


def test_each_broker_keeps_its_own_instances_forgotten_on_disconnect_or_expiry() -> None:
    metrics, clock = _manager()
    connection = Conn()
    client = ClientInfo("app", connection=connection)
    instance, sub = _subscribed(metrics, client)
    # another broker has not seen it: made there, and its first push is taken
    assert metrics.push(1, instance, sub, False, 0, gauges({"m": 1}), client)[0] is E.NONE
    assert metrics.get_subscriptions(0, instance, client).error is E.THROTTLING_QUOTA_EXCEEDED
    connection.closed = True  # the connection that made it closed: a new instance
    assert metrics.get_subscriptions(0, instance, ClientInfo("app")).error is E.NONE
    assert metrics.get_subscriptions(0, instance, client).error is E.THROTTLING_QUOTA_EXCEEDED
    clock.ms += 60_000  # max(60 s, 3 x 1 s) unheard of: forgotten
    assert metrics.get_subscriptions(0, instance, client).error is E.NONE
