"""The trace event schema and the parsing/validation of raw JSON Lines.

The schema is explicit (never inferred) so that a malformed line cannot change the types of
a whole column, and so that a scan never needs a separate inference pass over the input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

OUTCOMES: tuple[str, ...] = ("completed", "expired", "cancelled", "error")

# (field, spark type name, required). Types follow what the library writes; optional fields
# may be null or absent. Extra fields in a line are ignored by from_json.
FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("purgatory", "string", True),
    ("op_id", "string", True),
    ("kind", "string", True),
    ("keys", "array<string>", True),
    ("created_at_ms", "long", True),
    ("duration_ms", "double", True),
    ("timeout_ms", "long", True),
    ("outcome", "string", True),
    ("error", "string", False),
    ("lateness_ms", "double", False),
    ("checks", "long", True),
    # a fault marker line instead of an operation: {"fault": description, "at_ms": Unix ms}
    ("fault", "string", False),
    ("at_ms", "long", False),
)

REQUIRED: tuple[str, ...] = tuple(name for name, _, required in FIELDS if required)


def event_schema() -> StructType:
    """The Spark schema of one trace event."""
    from pyspark.sql import types as T

    simple = {"string": T.StringType(), "long": T.LongType(), "double": T.DoubleType()}
    fields = []
    for name, type_name, _ in FIELDS:
        dtype = T.ArrayType(T.StringType()) if type_name == "array<string>" else simple[type_name]
        fields.append(T.StructField(name, dtype, nullable=True))
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
        *[F.col("r").getField(name).alias(name) for name, _, _ in FIELDS],
    )


def malformed_samples(lines: DataFrame, limit: int = 5, width: int = 200) -> list[str]:
    """Up to ``limit`` malformed raw lines, truncated to ``width`` characters."""
    from pyspark.sql import functions as F

    value = F.col("value")
    record = _parse(value)
    bad = lines.where(~_is_blank(value) & ~_is_valid(record) & ~_is_marker(record))
    return [str(row[0])[:width] for row in bad.select(value).limit(limit).collect()]
