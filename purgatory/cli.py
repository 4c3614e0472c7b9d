"""The ``purgatory`` command line: one subcommand per tool, each in its own module.

Every subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int`` and must
not import heavy dependencies (pyspark, aiohttp, matplotlib) at module level, so that
``purgatory --help`` stays fast and works without the optional extras.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from purgatory.cli_types import DefaultsShownFormatter

# subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("purgatory.demo", "run a simulation and analyse its trace (the main job)"),
    "bench": ("purgatory.bench.cli", "benchmark the purgatory against asyncio baselines"),
    "simulate": ("purgatory.sim.cli", "run a broker simulation scenario"),
    "serve": ("purgatory.service.cli", "serve the HTTP long-poll API over a simulated broker"),
    "load": ("purgatory.loadgen.cli", "drive a running server with long polls and producers"),
    "analyze": ("purgatory.analyze.cli", "analyse operation traces with Spark"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="purgatory", description="Kafka-style delayed-operation purgatory for asyncio."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise
            continue  # this subcommand is not part of this build
        command = sub.add_parser(
            name, help=help_text, description=help_text, formatter_class=DefaultsShownFormatter
        )
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
