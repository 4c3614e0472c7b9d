"""The event loop a command runs on: uvloop where it is installed (it is not on Windows),
asyncio otherwise or on request."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def available_loops() -> tuple[str, ...]:
    """The loops this machine can run, the default first (the ``--loop`` choices)."""
    # find_spec, not import: ``purgatory --help`` builds every parser and stays fast
    if importlib.util.find_spec("uvloop") is not None:
        return ("uvloop", "asyncio")
    return ("asyncio",)


def default_loop() -> str:
    """uvloop where it is installed, else asyncio."""
    return available_loops()[0]


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-loop factory for ``"asyncio"`` or ``"uvloop"``, as ``asyncio.Runner`` takes."""
    if name == "asyncio":
        return asyncio.new_event_loop
    if name == "uvloop":
        try:
            import uvloop
        except ImportError:
            raise ValueError("uvloop is not installed here; use the asyncio loop") from None
        return uvloop.new_event_loop
    raise ValueError(f"unknown event loop {name!r}; expected one of {available_loops()}")


def run(main: Coroutine[Any, Any, T], loop: str | None = None) -> T:
    """Run ``main`` to completion on a new loop: ``loop`` (a name), or the default."""
    name = default_loop() if loop is None else loop
    if name == "asyncio":
        return asyncio.run(main)  # as before: the thread's current loop while it runs
    try:
        factory = loop_factory(name)
    except ValueError:
        main.close()  # never started: no "never awaited" warning
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
