"""Group configs (Kafka's GroupConfig, the GROUP config resource of KIP-848 and KIP-932):
what IncrementalAlterConfigs and AlterConfigs set for one group id, and DescribeConfigs
reports. Each falls back on a broker config of the group coordinator (its synonym:
``consumer.session.timeout.ms`` on ``group.consumer.session.timeout.ms``) and must lie
within the bounds the broker sets (``group.consumer.min.session.timeout.ms`` ..
``group.consumer.max.session.timeout.ms``), as Kafka's GroupConfig.validate checks it.

:func:`check_group_configs` checks a group's configs against the broker's values;
:class:`GroupConfig` is a group's configs in force, what the coordinator hands the
protocols (:meth:`~.group_coordinator.GroupCoordinator.group_config`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, final

from purgatory.kafka.config_rules import Value

#: a group config's value, typed: INT int, BOOLEAN bool, STRING str
GroupValue = int | bool | str

#: Java's int bounds
_INT_MIN: Final = -(1 << 31)
_INT_MAX: Final = (1 << 31) - 1


@final
@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    """One group config: Kafka's ``name``, its ``type`` (INT, STRING or BOOLEAN), the
    broker config it falls back on (``synonym``), its ConfigDef validator (``minimum``
    for an INT, ``choices`` or ``pattern`` for a STRING) and the broker configs bounding
    it (``low``, ``high``: names; None: none)."""

    name: str
    type: str
    synonym: str
    minimum: int | None = None
    low: str | None = None
    high: str | None = None
    choices: tuple[str, ...] = ()
    pattern: str | None = None

    def parse(self, value: object) -> GroupValue:
        """``value`` (Kafka's text) typed and checked by the ConfigDef validator;
        ValueError with Kafka's message."""
        text = str(value).strip() if not isinstance(value, bool) else str(value).lower()
        if self.type == "BOOLEAN":
            if text.lower() not in ("true", "false"):
                raise _invalid(self.name, value, "Expected value to be either true or false")
            return text.lower() == "true"
        if self.type == "STRING":
            if self.choices and text not in self.choices:
                raise _invalid(
                    self.name, value, f"String must be one of: {', '.join(self.choices)}"
                )
            if self.pattern is not None and re.fullmatch(self.pattern, text) is None:
                raise _invalid(
                    self.name,
                    value,
                    "must be earliest, latest or by_duration:<ISO8601 duration> (not negative)",
                )
            return text
        try:
            number = int(text)
        except ValueError:
            raise _invalid(self.name, value, "Not a number of type INT") from None
        if not _INT_MIN <= number <= _INT_MAX:
            raise _invalid(self.name, value, "Not a number of type INT")
        if self.minimum is not None and number < self.minimum:
            raise _invalid(self.name, number, f"Value must be at least {self.minimum}")
        return number


def _invalid(name: str, value: object, why: str) -> ValueError:
    return ValueError(f"Invalid value {value} for configuration {name}: {why}")


_SESSION, _HEARTBEAT = "session.timeout.ms", "heartbeat.interval.ms"
#: ISO 8601 durations as Java's Duration.parse reads them, not negative
_DURATION = r"by_duration:P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?"

_KEYS: Final = (
    GroupConfigKey(
        "consumer.session.timeout.ms",
        "INT",
        "group.consumer.session.timeout.ms",
        1,
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    GroupConfigKey(
        "consumer.heartbeat.interval.ms",
        "INT",
        "group.consumer.heartbeat.interval.ms",
        1,
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    GroupConfigKey(
        "share.session.timeout.ms",
        "INT",
        "group.share.session.timeout.ms",
        1,
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
    GroupConfigKey(
        "share.heartbeat.interval.ms",
        "INT",
        "group.share.heartbeat.interval.ms",
        1,
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    GroupConfigKey(
        "share.record.lock.duration.ms",
        "INT",
        "group.share.record.lock.duration.ms",
        1000,
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    GroupConfigKey(
        "share.delivery.count.limit",
        "INT",
        "group.share.delivery.count.limit",
        2,
        "group.share.min.delivery.count.limit",
        "group.share.max.delivery.count.limit",
    ),
    GroupConfigKey(
        "share.partition.max.record.locks",
        "INT",
        "group.share.partition.max.record.locks",
        100,
        "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks",
    ),
    GroupConfigKey(
        "share.auto.offset.reset",
        "STRING",
        "share.auto.offset.reset",
        pattern=rf"earliest|latest|{_DURATION}",
    ),
    GroupConfigKey(
        "share.isolation.level",
        "STRING",
        "share.isolation.level",
        choices=("read_committed", "read_uncommitted"),
    ),
    GroupConfigKey(
        "streams.session.timeout.ms",
        "INT",
        "group.streams.session.timeout.ms",
        1,
        "group.streams.min.session.timeout.ms",
        "group.streams.max.session.timeout.ms",
    ),
    GroupConfigKey(
        "streams.heartbeat.interval.ms",
        "INT",
        "group.streams.heartbeat.interval.ms",
        1,
        "group.streams.min.heartbeat.interval.ms",
        "group.streams.max.heartbeat.interval.ms",
    ),
    GroupConfigKey(
        "streams.num.standby.replicas",
        "INT",
        "group.streams.num.standby.replicas",
        0,
        None,
        "group.streams.max.standby.replicas",
    ),
    GroupConfigKey(
        "streams.initial.rebalance.delay.ms",
        "INT",
        "group.streams.initial.rebalance.delay.ms",
        0,
    ),
)

#: every group config Kafka takes, by name, in Kafka's order
GROUP_CONFIGS: Final[Mapping[str, GroupConfigKey]] = {k.name: k for k in _KEYS}

#: the group configs whose default is Kafka's own, not a broker config's (no broker
#: config of that name): their value when nothing sets them
GROUP_DEFAULTS: Final[Mapping[str, GroupValue]] = {
    "share.auto.offset.reset": "latest",
    "share.isolation.level": "read_uncommitted",
}

#: what each group config does here
GROUP_EFFECTS: Final[Mapping[str, str]] = {
    "consumer.session.timeout.ms": "how long a member of this KIP-848 consumer group may go "
    "without heartbeating before it is removed",
    "consumer.heartbeat.interval.ms": "the heartbeat interval ConsumerGroupHeartbeat tells "
    "the members of this KIP-848 consumer group",
}

#: what a group config the simulation does not act on says it does
KEPT_GROUP: Final = "kept and reported (share and streams groups read it); not acted on here"


def check_group_configs(
    own: Mapping[str, Value | None], broker: Mapping[str, GroupValue]
) -> dict[str, GroupValue]:
    """A group's configs (name -> Kafka's text) checked as Kafka's GroupConfig.validate
    checks them, against the broker configs ``broker`` (the group coordinator's, by
    name): typed; ValueError with Kafka's message for an unknown name ("Unknown group
    config name: ..."), a bad value, one outside the broker's bounds, or a session
    timeout not above its heartbeat interval."""
    checked: dict[str, GroupValue] = {}
    for name, value in own.items():
        key = GROUP_CONFIGS.get(name)
        if key is None:
            raise ValueError(f"Unknown group config name: {name}")
        checked[name] = key.parse(value)

    def in_force(name: str) -> GroupValue:
        key = GROUP_CONFIGS[name]
        if name in checked:
            return checked[name]
        return broker.get(key.synonym, GROUP_DEFAULTS.get(name, 0))

    for key in _KEYS:
        value = in_force(key.name)
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        low = broker.get(key.low) if key.low is not None else None
        high = broker.get(key.high) if key.high is not None else None
        if isinstance(low, int) and value < low:
            raise ValueError(f"{key.name} must be greater than or equal to {key.low}")
        if isinstance(high, int) and value > high:
            raise ValueError(f"{key.name} must be less than or equal to {key.high}")
    for kind in ("consumer", "share", "streams"):
        session, heartbeat = in_force(f"{kind}.{_SESSION}"), in_force(f"{kind}.{_HEARTBEAT}")
        assert isinstance(session, int)
        assert isinstance(heartbeat, int)
        if session <= heartbeat:
            raise ValueError(f"{kind}.{_SESSION} must be greater than {kind}.{_HEARTBEAT}")
    return checked


@final
@dataclass(frozen=True, slots=True)
class GroupConfig:
    """One group's configs in force: its own (``own``, as set), else the broker's."""

    own: Mapping[str, GroupValue]
    broker: Mapping[str, GroupValue]

    def value(self, name: str) -> GroupValue:
        """Group config ``name``'s value in force (KeyError: no such group config)."""
        key = GROUP_CONFIGS[name]
        if name in self.own:
            return self.own[name]
        return self.broker.get(key.synonym, GROUP_DEFAULTS.get(name, 0))

    def number(self, name: str) -> int:
        value = self.value(name)
        assert isinstance(value, int), name
        return value

    @property
    def consumer_session_timeout_ms(self) -> int:
        return self.number("consumer.session.timeout.ms")

    @property
    def consumer_heartbeat_interval_ms(self) -> int:
        return self.number("consumer.heartbeat.interval.ms")

    @property
    def share_session_timeout_ms(self) -> int:
        return self.number("share.session.timeout.ms")

    @property
    def share_heartbeat_interval_ms(self) -> int:
        return self.number("share.heartbeat.interval.ms")

    @property
    def share_record_lock_duration_ms(self) -> int:
        return self.number("share.record.lock.duration.ms")

    @property
    def share_delivery_count_limit(self) -> int:
        return self.number("share.delivery.count.limit")

    @property
    def share_partition_max_record_locks(self) -> int:
        return self.number("share.partition.max.record.locks")

    @property
    def share_auto_offset_reset(self) -> str:
        return str(self.value("share.auto.offset.reset"))

    @property
    def share_isolation_level(self) -> str:
        return str(self.value("share.isolation.level"))


#: Kafka's defaults of the broker configs the group configs fall back on or are bounded
#: by (the same as :data:`purgatory.kafka.broker_config_table.BROKER_CONFIGS` says: a test
#: holds them equal), for a coordinator built without the broker's
KAFKA_BROKER_DEFAULTS: Final[Mapping[str, GroupValue]] = {
    "group.consumer.session.timeout.ms": 45_000,
    "group.consumer.min.session.timeout.ms": 45_000,
    "group.consumer.max.session.timeout.ms": 60_000,
    "group.consumer.heartbeat.interval.ms": 5_000,
    "group.consumer.min.heartbeat.interval.ms": 5_000,
    "group.consumer.max.heartbeat.interval.ms": 15_000,
    "group.share.session.timeout.ms": 45_000,
    "group.share.min.session.timeout.ms": 45_000,
    "group.share.max.session.timeout.ms": 60_000,
    "group.share.heartbeat.interval.ms": 5_000,
    "group.share.min.heartbeat.interval.ms": 5_000,
    "group.share.max.heartbeat.interval.ms": 15_000,
    "group.share.record.lock.duration.ms": 30_000,
    "group.share.min.record.lock.duration.ms": 15_000,
    "group.share.max.record.lock.duration.ms": 60_000,
    "group.share.delivery.count.limit": 5,
    "group.share.min.delivery.count.limit": 2,
    "group.share.max.delivery.count.limit": 10,
    "group.share.partition.max.record.locks": 2_000,
    "group.share.min.partition.max.record.locks": 100,
    "group.share.max.partition.max.record.locks": 4_000,
    "group.streams.session.timeout.ms": 45_000,
    "group.streams.min.session.timeout.ms": 45_000,
    "group.streams.max.session.timeout.ms": 60_000,
    "group.streams.heartbeat.interval.ms": 5_000,
    "group.streams.min.heartbeat.interval.ms": 5_000,
    "group.streams.max.heartbeat.interval.ms": 15_000,
    "group.streams.num.standby.replicas": 0,
    "group.streams.max.standby.replicas": 2,
    "group.streams.initial.rebalance.delay.ms": 3_000,
}
