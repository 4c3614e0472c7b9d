"""Build the core (wheel, timer, operation, purgatory) with mypyc when possible.

The compiled core runs the hot paths about twice as fast as the same modules interpreted
(see README, Performance). It is optional: set PURGATORY_PURE_PYTHON=1, or lack a C compiler,
and the identical pure-Python modules are installed instead.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

COMPILED = [
    "purgatory/_wheel.py",
    "purgatory/_timer.py",
    "purgatory/_operation.py",
    "purgatory/_purgatory.py",
]


class OptionalBuildExt(build_ext):
    """A failed compilation falls back to the pure-Python modules instead of failing."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, no headers, ...
            print(
                f"purgatory: compiling the core failed ({exc}); using pure Python", file=sys.stderr
            )

    def build_extension(self, ext: Any) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(
                f"purgatory: compiling {ext.name} failed ({exc}); using pure Python",
                file=sys.stderr,
            )


def extensions() -> list[Any]:
    if os.environ.get("PURGATORY_PURE_PYTHON", "") not in ("", "0"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return []
    try:
        return list(mypycify(COMPILED, opt_level="3"))
    except Exception as exc:
        print(f"purgatory: mypyc failed ({exc}); using pure Python", file=sys.stderr)
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
