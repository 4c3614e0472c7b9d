"""purgatory/kafka/messages.py (the handlers' static types) is derived from kio's classes
of the served versions by tools/gen_kafka_messages.py, never kept by hand: regenerated
here, it must be what is checked in, so a new API key, a served range changed or kio
upgraded fails until it is regenerated."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

import pytest

import purgatory.kafka.messages
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.protocol import ApiKey

ROOT = Path(__file__).resolve().parents[2]


def _camel(key: ApiKey) -> str:
    return "".join(part.title() for part in key.name.lower().split("_"))


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
        name = _camel(key)
        for alias in (f"{name}Request", f"{name}Response", f"{name}ResponseFields"):
            assert f"    {alias}: TypeAlias = " in text or f"class {alias}(" in text, alias
        assert f"**values: Unpack[{name}ResponseFields]" in text, name


def test_importing_the_module_defines_nothing_at_run_time() -> None:
    # everything is under TYPE_CHECKING: importing it imports no kio module
    for name in ("DeleteGroupsRequest", "DeleteGroupsResponseFields", "Respond"):
        assert not hasattr(purgatory.kafka.messages, name), name


def _messages_imports(module: ModuleType) -> dict[str, str]:
    """The names a module imports from purgatory.kafka.messages: as bound -> as defined."""
    tree = ast.parse(inspect.getsource(module))
    return {
        alias.asname or alias.name: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "purgatory.kafka.messages"
        for alias in node.names
    }


@pytest.mark.asyncio
async def test_every_handler_is_typed_by_the_request_of_the_api_it_is_registered_for() -> None:
    # mypy checks a handler against the request type it is annotated with; that it is the
    # type of the API the handler answers, the registry says
    async with AsyncEmbeddedKafka(brokers=1, seed=1) as kafka:
        registered = kafka.front_door._all_servers()[0]._handlers
    annotated = {}
    for key, (_, _, handler) in registered.items():
        function = getattr(handler, "__func__", handler)
        name = function.__annotations__.get("request", "")
        annotated[ApiKey(key)] = _messages_imports(inspect.getmodule(function)).get(name, name)
    assert annotated == {key: f"{_camel(key)}Request" for key in annotated}
    assert len(annotated) == len(ApiKey) - 1  # all but ApiVersions, the server's own
