"""Adding an API is writing one unit: every handler module declares its ``UNIT``, the
registry lists them all (checked against the package), no API is answered by two units,
and what a listener serves is exactly what the units answer."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import tomllib
from pathlib import Path

import pytest

import purgatory.kafka.handlers
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.handlers.registry import UNITS
from purgatory.kafka.handlers.units import Listener, ListenerUnit, SharedUnit
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.protocol_stats import ProtocolStats
from purgatory.kafka.server import Api, KafkaProtocolServer, ListenerLimits

#: the handlers package's modules that hold no handler class
HELPERS = {"units", "registry", "leadership", "member_assignments"}


def _handler_modules() -> dict[str, object]:
    names = [m.name for m in pkgutil.iter_modules(purgatory.kafka.handlers.__path__)]
    return {
        name: importlib.import_module(f"purgatory.kafka.handlers.{name}")
        for name in names
        if name not in HELPERS
    }


def test_every_module_with_a_handler_class_declares_its_unit_and_the_registry_lists_it() -> None:
    modules = _handler_modules()
    for name, module in modules.items():
        classes = [
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if c.__module__ == module.__name__ and hasattr(c, "apis")
        ]
        assert classes, f"{name}: no handler class (a helper module belongs in HELPERS)"
        assert isinstance(getattr(module, "UNIT", None), SharedUnit | ListenerUnit), name
    listed = {id(unit) for unit in UNITS}
    assert listed == {id(module.UNIT) for module in modules.values()}  # type: ignore[attr-defined]
    assert len(UNITS) == len(listed)


def test_the_independence_contract_names_every_handler_module() -> None:
    # a handler module left out could import another unnoticed
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    (contract,) = [
        c
        for c in pyproject["tool"]["importlinter"]["contracts"]
        if c["name"] == "The request handlers do not import each other"
    ]
    named = {m.rsplit(".", 1)[1] for m in contract["modules"]}
    assert named == set(_handler_modules())


@pytest.mark.asyncio
async def test_a_listener_serves_exactly_what_the_units_answer_each_api_once() -> None:
    async with AsyncEmbeddedKafka(brokers=2, seed=1) as kafka:
        door = kafka.front_door
        state = door._state
        listener = Listener(state, 1, door.addresses, lambda key: _nowhere())
        keys: list[ApiKey] = []
        for unit in UNITS:
            built = unit.build(state) if isinstance(unit, SharedUnit) else unit.build(listener)
            keys += built.apis()
        registered = door.listeners["PLAINTEXT"].servers[1].registered()
    assert len(keys) == len(set(keys)), "an API answered by two units"
    assert sorted(keys) == sorted(registered)


async def _nowhere() -> None:
    return None


def test_registering_an_api_twice_is_refused() -> None:
    server = KafkaProtocolServer(ProtocolStats(), ListenerLimits(), 0)
    table = {ApiKey.LIST_OFFSETS: Api(1, 2, lambda header, request: None)}
    server.register_all(table)
    with pytest.raises(ValueError, match="LIST_OFFSETS is registered already"):
        server.register_all(table)
