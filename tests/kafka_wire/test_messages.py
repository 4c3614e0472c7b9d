"""purgatory/kafka/messages.py (the handlers' static types) is derived from kio's classes
of the served versions by tools/gen_kafka_messages.py, never kept by hand: regenerated
here, it must be what is checked in, so a new API key, a served range changed or kio
upgraded fails until it is regenerated."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

import purgatory.kafka.messages
from purgatory.kafka.protocol import ApiKey

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    path = ROOT / "tools" / "gen_kafka_messages.py"
    spec = importlib.util.spec_from_file_location("gen_kafka_messages", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_messages_module_is_current() -> None:
    pytest.importorskip("ruff")
    generated = _generator().generate()
    current = (ROOT / "purgatory" / "kafka" / "messages.py").read_text()
    assert generated == current, "stale: run python tools/gen_kafka_messages.py"


def test_every_api_key_has_its_types() -> None:
    text = (ROOT / "purgatory" / "kafka" / "messages.py").read_text()
    for key in ApiKey:
        name = "".join(part.title() for part in key.name.lower().split("_"))
        for alias in (f"{name}Request", f"{name}Response", f"{name}ResponseFields"):
            assert f"    {alias}: TypeAlias = " in text or f"class {alias}(" in text, alias
        assert f"**values: Unpack[{name}ResponseFields]" in text, name


def test_importing_the_module_defines_nothing_at_run_time() -> None:
    # everything is under TYPE_CHECKING: importing it imports no kio module
    for name in ("DeleteGroupsRequest", "DeleteGroupsResponseFields", "Respond"):
        assert not hasattr(purgatory.kafka.messages, name), name
