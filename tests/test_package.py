"""The package as users see it: exports, the README's commands, the command line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import purgatory
from purgatory import cli

ROOT = Path(__file__).resolve().parent.parent


def test_public_names_are_exported_and_documented() -> None:
    assert sorted(purgatory.__all__) == purgatory.__all__
    for name in purgatory.__all__:
        assert getattr(purgatory, name).__doc__, f"{name} has no docstring"
    # The contract names of DESIGN.md
    for name in ("TimerTask", "SystemTimer", "DelayedOperation", "DelayedOperationPurgatory"):
        assert name in purgatory.__all__


def readme_commands() -> dict[str, str]:
    """The README's two commands, from the code blocks after their headings."""
    text = (ROOT / "README.md").read_text()
    commands = {}
    for label in ("main job", "tests"):
        match = re.search(rf"<!-- command: {label} -->\s*```(?:sh|bash)\n(.+?)\n```", text, re.S)
        assert match, f"README lacks the marked '{label}' command"
        commands[label] = match.group(1).strip()
    return commands


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    command = readme_commands()["tests"]
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_every_subcommand_is_registered() -> None:
    parser = cli.build_parser()
    text = parser.format_help()
    for name in cli.SUBCOMMANDS:
        assert name in text


def test_console_entry_point_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "purgatory", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "simulate" in result.stdout


def test_unknown_subcommand_is_a_clear_error() -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2


def test_readme_library_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"## Using the library.*?```python\n(.+?)\n```", text, re.S)
    assert match, "README lacks the library example"
    exec(compile(match.group(1), "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip() == "3 None"
