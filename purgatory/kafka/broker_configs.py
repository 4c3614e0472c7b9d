"""A cluster's broker configs, checked and typed: :func:`broker_configs` checks what was
set (an unknown name or a bad value is a ValueError naming it; a value may be given as
Kafka's text, ``"2"``, ``"true"``, or typed, ``2``, ``True``) and returns a
:class:`BrokerConfigs`: the set values, and every config's value in force.

Broker configs are read by ``purgatory serve --kafka-config NAME=VALUE``, by
``EmbeddedKafka(configs={...})``, by DescribeConfigs, and those Kafka lets change while it
runs (``dynamic``) by AlterConfigs. The configs themselves are two tables beside each
other: the broker configs' (:data:`~purgatory.kafka.broker_config_table.BROKER_CONFIGS`)
and the topic configs' (:data:`~purgatory.kafka.topic_configs.TOPIC_CONFIGS`), over the
types and rules of :mod:`purgatory.kafka.config_rules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import final

from purgatory.kafka.broker_config_table import BROKER_CONFIGS
from purgatory.kafka.config_rules import Value
from purgatory.kafka.oauthbearer import JAAS_CONFIG, parse_jaas
from purgatory.kafka.sasl import enabled_mechanisms
from purgatory.kafka.tls import PrincipalMapper

__all__ = ["BrokerConfigs", "broker_configs", "parse_assignment"]


@final
@dataclass(frozen=True)
class BrokerConfigs:
    """The broker configs of a cluster: ``explicit``, those set (checked), by name.
    :meth:`value` is one's value in force; the cluster's own retention is read from the
    cluster, not from here."""

    explicit: Mapping[str, Value] = field(default_factory=dict)

    def value(self, name: str) -> Value | None:
        """The config's value in force: as set, else the simulation's default (None: the
        cluster's own). KeyError for a name not in :data:`BROKER_CONFIGS`."""
        config = BROKER_CONFIGS[name]
        return self.explicit.get(name, config.default)

    def number(self, name: str) -> int:
        """The value in force of a config with a fixed default."""
        value = self.value(name)
        assert isinstance(value, int), name
        return int(value)

    def optional_text(self, name: str) -> str | None:
        """The value in force of a STRING config whose default is null: None when unset
        (or set empty)."""
        value = self.value(name)
        return str(value) if value else None

    def text(self, name: str) -> str:
        """The value in force of a STRING config."""
        value = self.value(name)
        assert isinstance(value, str), name
        return value

    def is_set(self, name: str) -> bool:
        return name in self.explicit


def broker_configs(configs: Mapping[str, Value] | None = None) -> BrokerConfigs:
    """``configs`` (name -> Kafka's text or a typed value) checked against
    :data:`BROKER_CONFIGS`: ValueError naming an unknown config, a bad value, a group
    session range whose minimum exceeds its maximum, a SASL mechanism not served or an
    OAUTHBEARER JAAS config that does not read."""
    explicit: dict[str, Value] = {}
    for name, value in (configs or {}).items():
        config = BROKER_CONFIGS.get(name)
        if config is None:
            raise ValueError(f"unknown broker config {name!r} (known: {', '.join(BROKER_CONFIGS)})")
        explicit[name] = config.parse(value)
    checked = BrokerConfigs(explicit)
    enabled_mechanisms(checked.text("sasl.enabled.mechanisms"))
    try:
        parse_jaas(checked.text(JAAS_CONFIG))
    except ValueError as exc:
        raise ValueError(f"{JAAS_CONFIG}: {exc}") from None
    if not checked.text("ssl.enabled.protocols"):
        raise ValueError("ssl.enabled.protocols: enable TLSv1.2, TLSv1.3 or both")
    PrincipalMapper(checked.text("ssl.principal.mapping.rules"))  # ValueError if it is bad
    low = checked.number("group.min.session.timeout.ms")
    high = checked.number("group.max.session.timeout.ms")
    if low > high:
        raise ValueError(
            f"group.min.session.timeout.ms ({low}) exceeds group.max.session.timeout.ms ({high})"
        )
    return checked


def parse_assignment(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (``--kafka-config``) split; ValueError without the ``=``."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"--kafka-config wants NAME=VALUE, got {text!r}")
    return name.strip(), value
