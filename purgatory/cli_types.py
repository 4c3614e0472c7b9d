"""What every command line of the package shares: argument types (each parses a string or
raises ``argparse.ArgumentTypeError`` saying what was expected) and the help formatter."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An integer ``>= minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = f"int>={minimum}"  # what argparse names in "invalid ... value"
    return parse


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_float(text: str) -> float:
    """A finite number ``> 0``."""
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number ``>= 0``."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


class DefaultsShownFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to an option's help unless it says its default already or
    has none worth showing (None, False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or not action.option_strings
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or default == []
        ):
            return action.help
        return f"{text} (default: %(default)s)"
