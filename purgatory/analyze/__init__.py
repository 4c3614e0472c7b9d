"""``purgatory analyze``: a Spark pipeline over operation traces (JSON Lines).

The public entry point is :func:`run_analysis`; Spark and matplotlib are imported lazily so
that importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from purgatory.analyze.pipeline import DEFAULT_TOP_KEYS, InputPathError, check_paths

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
) -> dict[str, Any]:
    """Analyse the traces at ``paths`` (files or directories, ``.gz`` ok) into ``out_dir``.

    Writes one Parquet dataset per table, ``summary.json`` and ``report.html`` (with PNG
    plots unless ``plots`` is false) and returns the summary dict. With ``spark`` given the
    session is used as is and left running; otherwise one is created (see ``session``) and
    stopped at the end if this call started it. Raises ``InputPathError`` on a missing path.
    """
    from purgatory.analyze.pipeline import analyze
    from purgatory.analyze.progress import Progress
    from purgatory.analyze.session import get_session

    check_paths(paths)
    owned = False
    if spark is None:
        info = get_session(master, driver_memory, shuffle_partitions)
        spark, owned = info.spark, info.owned
    elif shuffle_partitions is not None:
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    try:
        with Progress(spark, enabled=progress) as bar:
            return analyze(spark, paths, out_dir, bar, plots=plots, top_keys=top_keys)
    finally:
        if owned:
            spark.stop()
