"""What a config of Kafka's takes, broker and topic configs alike: its type
(:class:`ConfigType`), its typed :data:`Value`, and the :class:`Rule` its values are
checked by, in the words of Kafka's ConfigDef."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, Literal

#: Java's short, int and long bounds: SHORT, INT and LONG configs refuse anything beyond
SHORT_MAX: Final = (1 << 15) - 1
INT_MAX: Final = (1 << 31) - 1
LONG_MAX: Final = (1 << 63) - 1

#: a config's value, typed: INT/LONG int, BOOLEAN bool, DOUBLE float, STRING/LIST str
#: (a LIST as Kafka prints it: its items joined by commas)
Value = int | bool | float | str

#: configs as a request sets them: name -> the new value, or None to remove it
ConfigChanges = dict[str, Value | None]

#: where a dynamic broker config may be set (see :class:`BrokerConfig`)
Scope = Literal["cluster", "broker", "listener"]


class ConfigType(IntEnum):
    """A config's type (Kafka's ConfigType, DescribeConfigs v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True, slots=True)
class Rule:
    """What values a config takes, as Kafka's ConfigDef validators say: a number within
    ``minimum``..``maximum`` (None: Java's int or long bound) or one of ``also``; a STRING
    one of ``choices`` (none: any); a LIST of items each one of ``choices`` or matching
    ``pattern`` (neither: any)."""

    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    also: tuple[int, ...] = ()
    pattern: str | None = None

    def parse(self, name: str, kind: ConfigType, value: object) -> Value:
        """``value`` (Kafka's text or typed) checked and typed; ValueError naming ``name``,
        in the words of Kafka's ConfigDef ("Invalid value X for configuration NAME: ...")."""
        if kind is ConfigType.BOOLEAN:
            if isinstance(value, bool):
                return value
            text = value.strip().lower() if isinstance(value, str) else None
            if text not in ("true", "false"):
                raise _invalid(name, value, "Expected value to be either true or false")
            return text == "true"
        if kind in (ConfigType.STRING, ConfigType.CLASS, ConfigType.PASSWORD):
            if not isinstance(value, str):
                raise _invalid(name, value, "Expected value to be a string")
            text = value.strip()
            if self.choices and text not in self.choices:
                raise _invalid(name, value, f"String must be one of: {', '.join(self.choices)}")
            return text
        if kind is ConfigType.LIST:
            return self._list(name, value)
        if kind is ConfigType.DOUBLE:
            return self._double(name, value)
        return self._integer(name, kind, value)

    def _list(self, name: str, value: object) -> str:
        if not isinstance(value, str):
            raise _invalid(name, value, "Expected a comma separated list")
        items = [item.strip() for item in value.split(",")] if value.strip() else []
        for item in items:
            bad = (self.choices and item not in self.choices) or (
                self.pattern is not None and re.fullmatch(self.pattern, item) is None
            )
            if bad or not item:
                what = (
                    f"String must be one of: {', '.join(self.choices)}"
                    if self.choices
                    else f"item {item!r} is not allowed"
                )
                raise _invalid(name, value, what)
        return ",".join(items)

    def _double(self, name: str, value: object) -> float:
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                raise _invalid(name, value, "Not a number of type DOUBLE") from None
        elif isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        else:
            raise _invalid(name, value, "Not a number of type DOUBLE")
        if math.isnan(number):
            raise _invalid(name, value, "Not a number of type DOUBLE")
        if self.minimum is not None and number < self.minimum:
            raise _invalid(name, value, f"Value must be at least {float(self.minimum)}")
        if self.maximum is not None and number > self.maximum:
            raise _invalid(name, value, f"Value must be no more than {float(self.maximum)}")
        return number

    def _integer(self, name: str, kind: ConfigType, value: object) -> int:
        bound = {ConfigType.SHORT: SHORT_MAX, ConfigType.LONG: LONG_MAX}.get(kind, INT_MAX)
        not_a_number = f"Not a number of type {kind.name}"
        if isinstance(value, str):
            try:
                number = int(value.strip())
            except ValueError:
                raise _invalid(name, value, not_a_number) from None
        elif isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            raise _invalid(name, value, not_a_number)
        if not -bound - 1 <= number <= bound:  # Java's parse refuses it
            raise _invalid(name, value, not_a_number)
        if number in self.also:
            return number
        if self.minimum is not None and number < self.minimum:
            raise _invalid(name, number, f"Value must be at least {int(self.minimum)}")
        if self.maximum is not None and number > self.maximum:
            raise _invalid(name, number, f"Value must be no more than {int(self.maximum)}")
        return number


def _invalid(name: str, value: object, why: str) -> ValueError:
    """Kafka's ConfigException message for a bad value."""
    shown = as_text(value) if isinstance(value, int | float | str) else value
    return ValueError(f"Invalid value {shown} for configuration {name}: {why}")


def as_text(value: Value | None) -> str | None:
    """A value as Kafka prints it (``true``, ``0.5``, ``delete,compact``; null: None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
