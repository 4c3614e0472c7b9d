"""Spark's parsing and validation of raw JSON Lines, with the trace line's schema
(:mod:`purgatory.trace`, the one definition of what a line holds).

The schema is explicit (never inferred) so that a malformed line cannot change the types of
a whole column, and so that a scan never needs a separate inference pass over the input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from purgatory.trace import EVENT_FIELDS, MARKER_FIELDS, OUTCOMES, TraceField

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

# The trace line's schema is purgatory.trace's (what TraceWriter writes). A line is an
# operation's event or a fault marker, so every field is nullable here: required means
# required of an event. Extra fields in a line (the labels) are ignored by from_json.
FIELDS: tuple[TraceField, ...] = (
    *EVENT_FIELDS,
    *(f._replace(required=False) for f in MARKER_FIELDS),
)

REQUIRED: tuple[str, ...] = tuple(f.name for f in FIELDS if f.required)


def event_schema() -> StructType:
    """The Spark schema of one trace event."""
    from pyspark.sql import types as T

    simple = {"string": T.StringType(), "long": T.LongType(), "double": T.DoubleType()}
    fields = []
    for f in FIELDS:
        dtype = T.ArrayType(T.StringType()) if f.type == "array<string>" else simple[f.type]
        fields.append(T.StructField(f.name, dtype, nullable=True))
    return T.StructType(fields)


def _parse(value: Column) -> Column:
    from pyspark.sql import functions as F

    return F.from_json(value, event_schema(), {"mode": "PERMISSIVE"})


def _is_valid(record: Column) -> Column:
    """True when the parsed struct holds a usable event.

    PERMISSIVE from_json yields a struct of nulls for invalid JSON and a null field for a value
    of the wrong type, so "required field is null" covers bad JSON, missing fields and wrong
    types alike. A JSON null in a required field counts as missing.
    """
    from pyspark.sql import functions as F

    cond = record.isNotNull()
    for name in REQUIRED:
        cond = cond & record.getField(name).isNotNull()
    cond = cond & record.getField("outcome").isin(*OUTCOMES)
    # A negative or NaN duration cannot come from a monotonic clock: the line is corrupt.
    duration = record.getField("duration_ms")
    cond = cond & (duration >= 0) & ~F.isnan(duration)
    # No lambda (F.exists) here: higher-order functions disable code generation for the
    # whole expression, which made parsing several times slower.
    keys = record.getField("keys")
    cond = cond & (F.size(F.array_compact(keys)) == F.size(keys))
    return F.coalesce(cond, F.lit(False))


def _is_marker(record: Column) -> Column:
    """True for a fault marker line (neither an operation nor malformed)."""
    from pyspark.sql import functions as F

    marker = record.getField("fault").isNotNull() & record.getField("at_ms").isNotNull()
    return F.coalesce(marker & record.getField("purgatory").isNull(), F.lit(False))


def _is_blank(value: Column) -> Column:
    from pyspark.sql import functions as F

    return F.trim(value) == ""


def parse_lines(lines: DataFrame) -> DataFrame:
    """Parse a text DataFrame (column ``value``) into events plus ``blank``/``valid`` flags.

    Blank lines and fault markers are neither events nor malformed (an empty line is not a
    corrupt record), but they are counted. The raw line is dropped so that the result is
    cheap to cache; ``malformed_samples`` re-reads the few bad lines it shows.
    """
    from pyspark.sql import functions as F

    parsed = lines.select(
        _is_blank(F.col("value")).alias("blank"), _parse(F.col("value")).alias("r")
    )
    return parsed.select(
        "blank",
        (~F.col("blank") & _is_valid(F.col("r"))).alias("valid"),
        (~F.col("blank") & _is_marker(F.col("r"))).alias("marker"),
        *[F.col("r").getField(f.name).alias(f.name) for f in FIELDS],
    )


def malformed_samples(lines: DataFrame, limit: int = 5, width: int = 200) -> list[str]:
    """Up to ``limit`` malformed raw lines, truncated to ``width`` characters."""
    from pyspark.sql import functions as F

    value = F.col("value")
    record = _parse(value)
    bad = lines.where(~_is_blank(value) & ~_is_valid(record) & ~_is_marker(record))
    return [str(row[0])[:width] for row in bad.select(value).limit(limit).collect()]
