"""The one event-loop choice every command makes: uvloop where it is installed, asyncio
otherwise, and a clear error for a loop that cannot run here."""

from __future__ import annotations

import asyncio
import sys

import pytest

from purgatory import event_loops
from purgatory.cli import build_parser


async def _running_loop_type() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop does not support Windows")
def test_uvloop_is_the_default_where_installed() -> None:
    assert event_loops.available_loops() == ("uvloop", "asyncio")
    assert event_loops.run(_running_loop_type()) == "uvloop"
    assert event_loops.run(_running_loop_type(), "asyncio") == "asyncio"


def test_without_uvloop_every_command_runs_on_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert event_loops.available_loops() == ("asyncio",)
    assert event_loops.run(_running_loop_type()) == "asyncio"
    with pytest.raises(ValueError, match="uvloop is not installed"):
        event_loops.loop_factory("uvloop")
    # the --loop options offer and default to what can run
    for command in ("simulate", "serve"):
        assert build_parser().parse_args([command]).loop == "asyncio"
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--loop", "uvloop"])


def test_an_unknown_loop_is_refused_before_anything_runs() -> None:
    main = _running_loop_type()
    with pytest.raises(ValueError, match="unknown event loop 'trio'"):
        event_loops.run(main, "trio")
    assert main.cr_frame is None  # closed, not left to warn "never awaited"
