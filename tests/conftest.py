"""Every async test runs on asyncio and on uvloop; tests marked ``virtual_time`` run on
purgatory's virtual-time loop instead (timers there fire instantly, in order)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Mapping

import pytest

from purgatory.testing import virtual_loop_factory

# A misspelt kio field name given to the response builder raises instead of silently
# becoming the field's default (in this process and in the `purgatory serve` it starts):
# purgatory.kafka.schemas.CHECK_NAMES_ENV, named here without importing the Kafka layer
# (the core's tests run on an install without kio)
os.environ["PURGATORY_CHECK_KIO_NAMES"] = "1"

# The kafka_cluster fixture; an install registers it through the pytest11 entry point
# too, under this same name, so it is loaded once either way.
pytest_plugins = ["purgatory.kafka.pytest_plugin"]

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def _real_loops() -> dict[str, LoopFactory]:
    loops: dict[str, LoopFactory] = {"asyncio": asyncio.new_event_loop}
    if sys.platform != "win32":
        import uvloop

        loops["uvloop"] = uvloop.new_event_loop
    return loops


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, LoopFactory]:
    if item.get_closest_marker("virtual_time") is not None:
        return {"virtual": virtual_loop_factory}
    return _real_loops()
