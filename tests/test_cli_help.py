"""Every option of every subcommand explains itself in ``--help`` and shows its default."""

from __future__ import annotations

import argparse

import pytest

from purgatory import cli


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize("name", sorted(cli.SUBCOMMANDS))
def test_every_option_has_help_text(name: str) -> None:
    missing = [
        "/".join(a.option_strings) or a.dest
        for a in _options(_subparsers()[name])
        if not a.help and a.dest not in ("_parser", "run")
    ]
    assert not missing, f"purgatory {name}: options without help: {missing}"


@pytest.mark.parametrize("name", sorted(cli.SUBCOMMANDS))
def test_every_default_is_shown(name: str) -> None:
    parser = _subparsers()[name]
    formatter = parser._get_formatter()
    hidden = []
    for action in _options(parser):
        default = action.default
        if default in (None, False, argparse.SUPPRESS, []) or not action.option_strings:
            continue
        shown = formatter._get_help_string(action)  # what --help prints, before expansion
        if shown is None or "default" not in shown:
            hidden.append("/".join(action.option_strings))
    assert not hidden, f"purgatory {name}: defaults not shown: {hidden}"
    parser.format_help()  # every %(default)s expands
