"""Which files a run reads: named files as given, trace files found in named directories.

A directory is searched recursively for trace files only (``*.jsonl`` and ``*.jsonl.gz``
unless other patterns are given), so a directory that also holds notes, plots or Parquet
output is read correctly. URIs (``hdfs://``, ``s3a://``...) are passed to Spark as they are.
Everything here runs before Spark starts, so a wrong path fails in milliseconds.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_PATTERNS = ("*.jsonl", "*.jsonl.gz")


class InputPathError(ValueError):
    """No usable input: a path does not exist, or names no trace file (exit code 2)."""


@dataclass(frozen=True)
class Inputs:
    """The files (and URIs) to read, with what was skipped."""

    files: tuple[str, ...]
    skipped: int  # files in the named directories that match no pattern
    total_bytes: int  # of the local files

    def describe(self) -> str:
        shown = ", ".join(os.path.basename(f) for f in self.files[:3])
        more = f" and {len(self.files) - 3} more" if len(self.files) > 3 else ""
        skipped = f"; {self.skipped} other files skipped" if self.skipped else ""
        return (
            f"{len(self.files)} trace file{'s' if len(self.files) != 1 else ''} "
            f"({self.total_bytes / 1e6:.1f} MB): {shown}{more}{skipped}"
        )


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def find_inputs(paths: Sequence[str], patterns: Sequence[str] = DEFAULT_PATTERNS) -> Inputs:
    """Resolve ``paths`` to the files to read; raise :class:`InputPathError` when a path
    is missing or nothing at all is left to read."""
    if not paths:
        raise InputPathError("no input path given")
    files: list[str] = []
    skipped = 0
    empty_dirs: list[str] = []
    for path in paths:
        if _is_uri(path):
            files.append(path)
            continue
        local = path.removeprefix("file://")
        if os.path.isfile(local):
            files.append(local)  # named explicitly: read whatever its name
        elif os.path.isdir(local):
            found = []
            for root, dirs, names in os.walk(local):
                dirs.sort()
                for name in sorted(names):
                    if any(fnmatch.fnmatch(name, p) for p in patterns):
                        found.append(os.path.join(root, name))
                    else:
                        skipped += 1
            if not found:
                empty_dirs.append(path)
            files.extend(found)
        else:
            raise InputPathError(f"input path does not exist: {path}")
    if not files:
        where = ", ".join(empty_dirs)
        raise InputPathError(
            f"no trace files ({' or '.join(patterns)}) in {where}"
            + (f" ({skipped} other files skipped)" if skipped else "")
        )
    size = sum(os.path.getsize(f) for f in files if not _is_uri(f))
    return Inputs(tuple(files), skipped, size)
