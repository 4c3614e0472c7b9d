"""Whether two ``purgatory analyze`` outputs say the same: every Parquet table as sorted
rows, ``summary.json`` but ``elapsed_s`` (the malformed samples are in it), ``report.html``
and the PNG plots byte for byte. For a change meant to leave the outputs alone, run the
baseline and the candidate on the same input, then:

    python tools/analyze_compare.py /tmp/out-base /tmp/out-new

Exit status 0 when everything matches, 1 (naming each difference) otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from purgatory.analyze.pipeline import TABLES
from purgatory.analyze.session import get_session
from purgatory.json_types import Json

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _table(spark: SparkSession, out: str, name: str) -> list[str]:
    rows = spark.read.parquet(os.path.join(out, name)).collect()
    # each row as the repr of its sorted fields: None and NaN sort too, and equal rows
    # compare equal whatever the order of the files or of the columns
    return sorted(repr(sorted(row.asDict().items())) for row in rows)


def _summary(out: str) -> Json:
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as fh:
        summary: dict[str, Json] = json.load(fh)
    summary.pop("elapsed_s", None)  # the one figure that differs from run to run
    return summary


def _bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def differences(spark: SparkSession, base: str, new: str) -> list[str]:
    """What differs between the outputs in ``base`` and ``new`` (nothing: empty)."""
    found = [
        f"table {name}" for name in TABLES if _table(spark, base, name) != _table(spark, new, name)
    ]
    if _summary(base) != _summary(new):
        found.append("summary.json (but elapsed_s)")
    files = sorted(f for f in os.listdir(base) if f.endswith((".png", ".html")))
    found += [f for f in files if _bytes(os.path.join(base, f)) != _bytes(os.path.join(new, f))]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base")
    parser.add_argument("new")
    args = parser.parse_args()
    spark = get_session(master="local[1]").spark  # the analysis's own session settings
    try:
        found = differences(spark, args.base, args.new)
    finally:
        spark.stop()
    for what in found:
        print(f"differs: {what}")
    if not found:
        print("same outputs: tables, summary.json (but elapsed_s), report.html, plots")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
