"""A tiny schema layer: one definition validates request bodies and renders OpenAPI.

Validation is strict on purpose (no coercion, no clamping): a bool is not an integer, a
number out of range or an unknown field is an error that names the offending path, so what
the server accepts is exactly what ``/openapi.json`` documents.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class ValidationError(ValueError):
    """A request body that does not match its schema; ``path`` locates the problem."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class Schema(Protocol):
    def validate(self, value: object, path: str) -> Any: ...

    def openapi(self) -> dict[str, Any]: ...


def _nullable(schema: dict[str, Any], nullable: bool) -> dict[str, Any]:
    if nullable:
        schema["nullable"] = True
    return schema


@dataclass(frozen=True, slots=True)
class Int:
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[int, ...] | None = None
    nullable: bool = False
    description: str = ""

    def validate(self, value: object, path: str) -> int | None:
        if value is None and self.nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(path, f"expected an integer, got {_kind(value)}")
        if self.choices is not None and value not in self.choices:
            raise ValidationError(path, f"must be one of {list(self.choices)}, got {value}")
        if self.minimum is not None and value < self.minimum:
            raise ValidationError(path, f"must be >= {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise ValidationError(path, f"must be <= {self.maximum}, got {value}")
        return value

    def openapi(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer"}
        if self.choices is not None:
            schema["enum"] = list(self.choices)
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        if self.description:
            schema["description"] = self.description
        return _nullable(schema, self.nullable)


@dataclass(frozen=True, slots=True)
class Str:
    min_length: int = 0
    max_length: int | None = None
    pattern: str | None = None
    nullable: bool = False
    description: str = ""

    def validate(self, value: object, path: str) -> str | None:
        if value is None and self.nullable:
            return None
        if not isinstance(value, str):
            raise ValidationError(path, f"expected a string, got {_kind(value)}")
        if len(value) < self.min_length:
            raise ValidationError(path, f"must have at least {self.min_length} characters")
        if self.max_length is not None and len(value) > self.max_length:
            raise ValidationError(path, f"must have at most {self.max_length} characters")
        if self.pattern is not None and re.fullmatch(self.pattern, value) is None:
            raise ValidationError(path, f"must match {self.pattern}")
        return value

    def openapi(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string"}
        if self.min_length:
            schema["minLength"] = self.min_length
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        if self.pattern is not None:
            schema["pattern"] = self.pattern
        if self.description:
            schema["description"] = self.description
        return _nullable(schema, self.nullable)


@dataclass(frozen=True, slots=True)
class Choice:
    """A string from a fixed set (an enum)."""

    choices: tuple[str, ...]
    description: str = ""

    def validate(self, value: object, path: str) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise ValidationError(path, f"must be one of {list(self.choices)}")
        return value

    def openapi(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string", "enum": list(self.choices)}
        if self.description:
            schema["description"] = self.description
        return schema


@dataclass(frozen=True, slots=True)
class Array:
    items: Schema
    min_items: int = 0
    max_items: int | None = None
    description: str = ""

    def validate(self, value: object, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise ValidationError(path, f"expected an array, got {_kind(value)}")
        if len(value) < self.min_items:
            raise ValidationError(path, f"must have at least {self.min_items} items")
        if self.max_items is not None and len(value) > self.max_items:
            raise ValidationError(path, f"must have at most {self.max_items} items")
        return [self.items.validate(item, f"{path}[{i}]") for i, item in enumerate(value)]

    def openapi(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "array", "items": self.items.openapi()}
        if self.min_items:
            schema["minItems"] = self.min_items
        if self.max_items is not None:
            schema["maxItems"] = self.max_items
        if self.description:
            schema["description"] = self.description
        return schema


@dataclass(frozen=True, slots=True)
class Object:
    """A JSON object; ``defaults`` fill optional fields that were left out."""

    fields: Mapping[str, Schema]
    required: frozenset[str] = frozenset()
    defaults: Mapping[str, object] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        unknown = (self.required | set(self.defaults)) - set(self.fields)
        if unknown:
            raise ValueError(f"required/defaults name unknown fields: {sorted(unknown)}")

    def validate(self, value: object, path: str = "body") -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValidationError(path, f"expected an object, got {_kind(value)}")
        extra = sorted(set(value) - set(self.fields))
        if extra:
            raise ValidationError(path, f"unknown field(s): {', '.join(map(repr, extra))}")
        missing = sorted(self.required - set(value))
        if missing:
            raise ValidationError(path, f"missing required field(s): {', '.join(missing)}")
        out: dict[str, Any] = {}
        for name, schema in self.fields.items():
            if name in value:
                out[name] = schema.validate(value[name], f"{path}.{name}")
            elif name in self.defaults:
                out[name] = self.defaults[name]
        return out

    def openapi(self) -> dict[str, Any]:
        properties = {}
        for name, field_schema in self.fields.items():
            prop = field_schema.openapi()
            if name in self.defaults:
                prop["default"] = self.defaults[name]
            properties[name] = prop
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if self.required:
            schema["required"] = sorted(self.required)
        if self.description:
            schema["description"] = self.description
        return schema


@dataclass(frozen=True, slots=True)
class Doc:
    """A response-only schema given as raw OpenAPI (responses are not validated here)."""

    schema: dict[str, Any]

    def validate(self, value: object, path: str) -> Any:
        raise TypeError("Doc schemas describe responses and cannot validate requests")

    def openapi(self) -> dict[str, Any]:
        return self.schema


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names: Sequence[tuple[type, str]] = (
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
        (list, "an array"),
        (dict, "an object"),
    )
    for kind, name in names:
        if isinstance(value, kind):
            return name
    return type(value).__name__
