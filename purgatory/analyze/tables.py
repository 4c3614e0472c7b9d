"""The analysis tables, each a Spark aggregation over the parsed, valid events.

Percentiles use ``percentile_approx`` with ``PERCENTILE_ACCURACY``: Spark guarantees that
the returned value's rank is within ``n / PERCENTILE_ACCURACY`` of the exact rank (relative
rank error 1e-4). ``max``/``min`` and all counts are exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from purgatory._outcomes import Outcome

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

PERCENTILE_ACCURACY = 10_000
DURATION_QUANTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p999", 0.999),
)
LATENESS_QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p99", 0.99))
# Log-scale duration histogram: bin b covers [10**(b/B), 10**((b+1)/B)) ms.
DURATION_BINS_PER_DECADE = 10
DURATION_FLOOR_MS = 1e-3  # shorter (but non-zero) durations land in the lowest log bin
#: the bin of operations that took no time at all (answered in the call that watched them),
#: kept apart so that they are not drawn as a spike at the floor of the log axis
ZERO_DURATION_BIN = -1_000_000
LATENESS_BINS = 40


def _count_if(cond: Column) -> Column:
    from pyspark.sql import functions as F

    return F.sum(F.when(cond, 1).otherwise(0)).cast("long")


def outcome_stats(events: DataFrame) -> DataFrame:
    """Counts, rates and latency percentiles per (purgatory, kind), per purgatory and overall.

    A single ``rollup`` computes all three levels in one pass; ``level`` tells them apart
    ("kind", "purgatory", "all") because percentiles cannot be merged after the fact.
    """
    from pyspark.sql import functions as F

    outcome = F.col("outcome")
    expired_lateness = F.when(outcome == Outcome.EXPIRED.value, F.col("lateness_ms"))
    duration_pcts = F.percentile_approx(
        "duration_ms", [q for _, q in DURATION_QUANTILES], PERCENTILE_ACCURACY
    )
    lateness_pcts = F.percentile_approx(
        expired_lateness, [q for _, q in LATENESS_QUANTILES], PERCENTILE_ACCURACY
    )
    agg = events.rollup("purgatory", "kind").agg(
        F.grouping_id().alias("gid"),
        F.count(F.lit(1)).alias("operations"),
        _count_if(outcome == Outcome.COMPLETED.value).alias("completed"),
        _count_if(outcome == Outcome.EXPIRED.value).alias("expired"),
        _count_if(outcome == Outcome.CANCELLED.value).alias("cancelled"),
        _count_if(outcome == Outcome.ERROR.value).alias("errors"),
        duration_pcts.alias("duration_pcts"),
        F.max("duration_ms").alias("duration_max_ms"),
        lateness_pcts.alias("lateness_pcts"),
        F.min(expired_lateness).alias("lateness_min_ms"),
        F.max(expired_lateness).alias("lateness_max_ms"),
        F.avg("checks").alias("checks_mean"),
        F.max("checks").alias("checks_max"),
    )
    level = F.when(F.col("gid") == 0, "kind").when(F.col("gid") == 1, "purgatory").otherwise("all")
    columns: list[Column | str] = [
        level.alias("level"),
        "purgatory",
        "kind",
        "operations",
        "completed",
        "expired",
        "cancelled",
        "errors",
        (F.col("expired") / F.col("operations")).alias("expiration_rate"),
    ]
    columns += [
        F.col("duration_pcts")[i].alias(f"duration_{name}_ms")
        for i, (name, _) in enumerate(DURATION_QUANTILES)
    ]
    columns.append("duration_max_ms")
    columns += [
        F.col("lateness_pcts")[i].alias(f"lateness_{name}_ms")
        for i, (name, _) in enumerate(LATENESS_QUANTILES)
    ]
    columns += ["lateness_min_ms", "lateness_max_ms", "checks_mean", "checks_max"]
    return agg.select(*columns)


def outcome_counts(events: DataFrame) -> DataFrame:
    """Operations (``operations``) per purgatory, kind, outcome, error code and log-scale
    duration bin: :func:`error_codes` and :func:`duration_histogram` are sums of its rows,
    so one scan of the events feeds both (a few thousand rows, however many events)."""
    from pyspark.sql import functions as F

    b = DURATION_BINS_PER_DECADE
    log = F.log10(F.greatest(F.col("duration_ms"), F.lit(DURATION_FLOOR_MS)))
    zero = F.col("duration_ms") <= 0
    bin_ = F.when(zero, F.lit(ZERO_DURATION_BIN)).otherwise(F.floor(log * b))
    return (
        events.select("purgatory", "kind", "outcome", "error", bin_.alias("bin"))
        .groupBy("purgatory", "kind", "outcome", "error", "bin")
        .agg(F.count(F.lit(1)).alias("operations"))
    )


def error_codes(counts: DataFrame) -> DataFrame:
    """Operations per (purgatory, kind, outcome, error code), for ops that carry a code;
    ``counts`` is :func:`outcome_counts`' table."""
    from pyspark.sql import functions as F

    return (
        counts.where("error IS NOT NULL")
        .groupBy("purgatory", "kind", "outcome", "error")
        .agg(F.sum("operations").alias("operations"))
    )


def per_second(events: DataFrame) -> DataFrame:
    """Arrivals, finishes by outcome and operations in flight per purgatory and second.

    Each op becomes a +1 event at its creation second and a -1 event at its finish second
    (finish = created_at_ms + duration_ms); ``in_flight`` at second s is the running sum of
    the deltas up to s, i.e. ops created before the end of s and not finished by then.
    Only seconds with at least one arrival or finish have a row.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    created = F.floor(F.col("created_at_ms") / 1000)
    finished = F.floor((F.col("created_at_ms") + F.col("duration_ms")) / 1000)
    marks = events.select(
        "purgatory",
        F.explode(
            F.array(
                F.struct(created.alias("second"), F.lit(None).cast("string").alias("finish")),
                F.struct(finished.alias("second"), F.col("outcome").alias("finish")),
            )
        ).alias("m"),
    ).select("purgatory", "m.second", "m.finish")
    finish = F.col("finish")
    counts = marks.groupBy("purgatory", "second").agg(
        _count_if(finish.isNull()).alias("arrivals"),
        _count_if(finish == Outcome.COMPLETED.value).alias("completions"),
        _count_if(finish == Outcome.EXPIRED.value).alias("expirations"),
        _count_if(finish == Outcome.CANCELLED.value).alias("cancellations"),
        _count_if(finish == Outcome.ERROR.value).alias("errors"),
    )
    running = (
        Window.partitionBy("purgatory")
        .orderBy("second")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    finishes = (
        F.col("completions") + F.col("expirations") + F.col("cancellations") + F.col("errors")
    )
    return counts.withColumn(
        "in_flight", F.sum(F.col("arrivals") - finishes).over(running).cast("long")
    )


def hot_keys(events: DataFrame, top_n: int) -> DataFrame:
    """The ``top_n`` most watched keys per purgatory with their expiration rate.

    Ties are broken by key name so that the result is deterministic.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_key = (
        events.select(
            "purgatory",
            F.explode(F.array_distinct("keys")).alias("key"),
            (F.col("outcome") == Outcome.EXPIRED.value).alias("is_expired"),
        )
        .groupBy("purgatory", "key")
        .agg(F.count(F.lit(1)).alias("operations"), _count_if(F.col("is_expired")).alias("expired"))
    )
    rank = Window.partitionBy("purgatory").orderBy(F.desc("operations"), F.asc("key"))
    return (
        per_key.withColumn("rank", F.row_number().over(rank))
        .where(F.col("rank") <= top_n)
        .withColumn("expiration_rate", F.col("expired") / F.col("operations"))
        .select("purgatory", "rank", "key", "operations", "expired", "expiration_rate")
    )


def duration_histogram(counts: DataFrame) -> DataFrame:
    """Operations per log-scale duration bin, per purgatory and outcome; operations that
    took no time have a bin of their own (:data:`ZERO_DURATION_BIN`, bounds 0..0).
    ``counts`` is :func:`outcome_counts`' table."""
    from pyspark.sql import functions as F

    b = DURATION_BINS_PER_DECADE
    is_zero = F.col("bin") == ZERO_DURATION_BIN
    return (
        counts.groupBy("purgatory", "outcome", "bin")
        .agg(F.sum("operations").alias("operations"))
        .withColumn(
            "lower_ms", F.when(is_zero, 0.0).otherwise(F.pow(F.lit(10.0), F.col("bin") / b))
        )
        .withColumn(
            "upper_ms", F.when(is_zero, 0.0).otherwise(F.pow(F.lit(10.0), (F.col("bin") + 1) / b))
        )
    )


def lateness_histogram(
    spark: SparkSession, events: DataFrame, bounds: dict[str, tuple[float, float]]
) -> DataFrame:
    """Expired operations per linear lateness bin; ``bounds`` is (min, max) per purgatory.

    The bounds come from ``outcome_stats`` so the bins span exactly the observed range.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("purgatory", T.StringType()),
            T.StructField("lo", T.DoubleType()),
            T.StructField("width", T.DoubleType()),
        ]
    )
    rows = [(name, lo, (hi - lo) / LATENESS_BINS or 1.0) for name, (lo, hi) in bounds.items()]
    edges = spark.createDataFrame(rows, schema)
    is_expired = F.col("outcome") == Outcome.EXPIRED.value
    expired = events.where(is_expired & F.col("lateness_ms").isNotNull())
    index = F.least(
        F.floor((F.col("lateness_ms") - F.col("lo")) / F.col("width")), F.lit(LATENESS_BINS - 1)
    )
    return (
        expired.join(F.broadcast(edges), "purgatory")
        .select("purgatory", index.alias("bin"), "lo", "width")
        .groupBy("purgatory", "bin", "lo", "width")
        .count()
        .select(
            "purgatory",
            "bin",
            (F.col("lo") + F.col("bin") * F.col("width")).alias("lower_ms"),
            (F.col("lo") + (F.col("bin") + 1) * F.col("width")).alias("upper_ms"),
            F.col("count").alias("operations"),
        )
    )
