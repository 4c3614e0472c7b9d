"""``purgatory analyze``: a Spark pipeline over operation traces (JSON Lines).

The public entry point is :func:`run_analysis`; Spark and matplotlib are imported lazily so
that importing this package stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from purgatory.analyze.inputs import DEFAULT_PATTERNS, InputPathError, find_inputs
from purgatory.analyze.pipeline import DEFAULT_TOP_KEYS
from purgatory.analyze.summary import AnalysisSummary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["InputPathError", "run_analysis"]


def run_analysis(
    paths: list[str],
    out_dir: str,
    *,
    master: str | None = None,
    spark: SparkSession | None = None,
    plots: bool = True,
    progress: bool = True,
    driver_memory: str | None = None,
    shuffle_partitions: int | None = None,
    top_keys: int = DEFAULT_TOP_KEYS,
    patterns: Sequence[str] = DEFAULT_PATTERNS,
    jvm_log: str | None = None,
) -> AnalysisSummary:
    """Analyse the traces at ``paths`` into ``out_dir``: files as named, and in directories
    the files matching ``patterns`` (trace files, ``.gz`` ok), recursively.

    Writes one Parquet dataset per table, ``summary.json`` and ``report.html`` (with PNG
    plots unless ``plots`` is false) and returns the summary (``to_dict()`` is
    ``summary.json``). With ``spark`` given the
    session is used as is and left running; otherwise one is created (see ``session``) and
    stopped at the end if this call started it; ``jvm_log`` takes the console output of a
    JVM started here (see ``session.get_session``). Raises ``InputPathError`` on a missing path
    or when no file is left to read (before any Spark work).
    """
    from purgatory.analyze.pipeline import analyze
    from purgatory.analyze.progress import Progress
    from purgatory.analyze.session import get_session

    files = list(find_inputs(paths, patterns).files)
    owned = False
    if spark is None:
        info = get_session(master, driver_memory, shuffle_partitions, jvm_log)
        spark, owned = info.spark, info.owned
    elif shuffle_partitions is not None:
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    try:
        with Progress(spark, enabled=progress) as bar:
            return analyze(spark, files, out_dir, bar, plots=plots, top_keys=top_keys)
    finally:
        if owned:
            spark.stop()
