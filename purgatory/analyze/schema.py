"""Spark's parsing and validation of raw JSON Lines, with the trace line's schema
(:mod:`purgatory.trace`, the one definition of what a line holds).

The schema is explicit (never inferred) so that a malformed line cannot change the types of
a whole column, and so that a scan never needs a separate inference pass over the input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from purgatory.trace import EVENT_FIELDS, MARKER_FIELDS, OUTCOMES, TraceField

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

# The trace line's schema is purgatory.trace's (what TraceWriter writes). A line is an
# operation's event or a fault marker, so every field is nullable here: required means
# required of an event. Extra fields in a line (the labels) are ignored by the parse.
FIELDS: tuple[TraceField, ...] = (
    *EVENT_FIELDS,
    *(f._replace(required=False) for f in MARKER_FIELDS),
)

REQUIRED: tuple[str, ...] = tuple(f.name for f in FIELDS if f.required)
#: the fields no table reads: checked for presence and type, then not kept in the cache
UNUSED_AFTER_CHECK: tuple[str, ...] = ("op_id", "timeout_ms")
# parse_lines' stand-ins for the lines that do not open a JSON object: such a line can be
# neither an event nor a marker, so only whether it is blank matters.
_BLANK, _NOT_OBJECT = "B", "M"
_CORRUPT = "_corrupt_line"


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


Field = Callable[[str], "Column"]  # a parsed field by name


def _is_valid(record: Column) -> Column:
    """True when the parsed struct holds a usable event.

    PERMISSIVE from_json yields a struct of nulls for invalid JSON and a null field for a value
    of the wrong type, so "required field is null" covers bad JSON, missing fields and wrong
    types alike. A JSON null in a required field counts as missing.
    """
    return _fields_valid(record.getField, record.isNotNull())


def _fields_valid(field: Field, present: Column) -> Column:
    """:func:`_is_valid` over fields however they are reached (struct or columns)."""
    from pyspark.sql import functions as F

    cond = present
    for name in REQUIRED:
        cond = cond & field(name).isNotNull()
    cond = cond & field("outcome").isin(*OUTCOMES)
    # A negative or NaN duration cannot come from a monotonic clock: the line is corrupt.
    duration = field("duration_ms")
    cond = cond & (duration >= 0) & ~F.isnan(duration)
    # No lambda (F.exists) here: higher-order functions disable code generation for the
    # whole expression, which made parsing several times slower.
    keys = field("keys")
    cond = cond & (F.size(F.array_compact(keys)) == F.size(keys))
    return F.coalesce(cond, F.lit(False))


def _is_marker(record: Column) -> Column:
    """True for a fault marker line (neither an operation nor malformed)."""
    return _fields_marker(record.getField)


def _fields_marker(field: Field) -> Column:
    from pyspark.sql import functions as F

    marker = field("fault").isNotNull() & field("at_ms").isNotNull()
    return F.coalesce(marker & field("purgatory").isNull(), F.lit(False))


def _is_blank(value: Column) -> Column:
    from pyspark.sql import functions as F

    return F.trim(value) == ""


def parse_lines(lines: DataFrame) -> DataFrame:
    """Parse a text DataFrame (column ``value``) into events plus ``blank``/``valid``/``marker``
    flags, one row per line in the lines' order: the rows of :func:`parse_lines_from_json`
    without :data:`UNUSED_AFTER_CHECK`, which nothing reads once a line is known valid.

    Blank lines and fault markers are neither events nor malformed (an empty line is not a
    corrupt record), but they are counted. The raw line is dropped so that the result is
    cheap to cache; ``malformed_samples`` fetches back the few bad lines it shows.

    Why not ``from_json``: it decodes every line through a new ``InputStreamReader`` (an
    8 KiB buffer per line), which made parsing about twice as slow as Spark's JSON reader
    over the same strings. That reader runs the same ``JacksonParser`` with the same
    options, and differs from ``from_json`` only on lines whose first JSON token is not
    ``{`` (it drops empty ones and splits arrays into rows). Those lines can be neither an
    event nor a marker, so they are handed to it as a one-letter stand-in (which it reports
    as a corrupt record) saying whether the line was blank: one row per line, as before.
    """
    from pyspark.sql import functions as F

    value = F.col("value")
    # Jackson skips these four before the first token; anything else first is not "{".
    opens_object = value.startswith("{") | value.rlike(r"^[ \t\r\n]+\{")
    stand_in = F.when(_is_blank(value), F.lit(_BLANK)).otherwise(F.lit(_NOT_OBJECT))
    parsed = _read_json(
        lines.select(F.when(opens_object, value).otherwise(stand_in).alias("value"))
    )
    blank = F.coalesce(F.col(_CORRUPT) == _BLANK, F.lit(False))
    kept = [f.name for f in FIELDS if f.name not in UNUSED_AFTER_CHECK]
    return parsed.select(
        blank.alias("blank"),
        (~blank & _fields_valid(F.col, F.lit(True))).alias("valid"),
        (~blank & _fields_marker(F.col)).alias("marker"),
        *kept,
    )


def _read_json(lines: DataFrame) -> DataFrame:
    """Spark's JSON reader (PERMISSIVE, :func:`event_schema` plus the corrupt record) over
    a one-string-column DataFrame, row for row."""
    import pyspark
    from pyspark.sql import types as T

    schema = event_schema().add(T.StructField(_CORRUPT, T.StringType(), nullable=True))
    reader = lines.sparkSession.read.schema(schema).options(
        mode="PERMISSIVE", columnNameOfCorruptRecord=_CORRUPT
    )
    if int(pyspark.__version__.split(".")[0]) >= 4:
        return reader.json(lines)
    # PySpark 3.5 takes no DataFrame here: pass the JVM's Dataset[String] itself.
    jvm = lines.sparkSession.sparkContext._jvm
    assert jvm is not None
    strings = getattr(lines._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
    jdf = reader._jreader.json(strings)
    result: DataFrame = reader._df(jdf)
    return result


def parse_lines_from_json(lines: DataFrame) -> DataFrame:
    """The definition :func:`parse_lines` keeps to, with ``from_json`` line by line (all
    fields, ``r`` the parsed struct's fields)."""
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


def malformed_samples(
    lines: DataFrame, parsed: DataFrame, limit: int = 5, width: int = 200
) -> list[str]:
    """The first ``limit`` malformed raw lines (in the lines' order), truncated to ``width``
    characters; ``parsed`` is ``parse_lines(lines)``, cached.

    ``parsed`` keeps no raw line, so the malformed lines are found there by position
    (partition and row: ``parse_lines`` keeps both) and only those lines are fetched from
    the text, which is read up to the last of them and never parsed again.
    """
    from pyspark.sql import functions as F

    position = F.monotonically_increasing_id().alias("position")
    bad = parsed.select(position, "blank", "valid", "marker")  # positions before the filter
    bad = bad.where(~F.col("blank") & ~F.col("valid") & ~F.col("marker"))
    wanted = [int(row[0]) for row in bad.select("position").limit(limit).collect()]
    if not wanted:
        return []
    found = lines.select(position, "value").where(F.col("position").isin(wanted))
    rows = sorted((int(r[0]), str(r[1])) for r in found.limit(len(wanted)).collect())
    return [value[:width] for _, value in rows]


def malformed_samples_from_json(lines: DataFrame, limit: int = 5, width: int = 200) -> list[str]:
    """What :func:`malformed_samples` returns, by parsing every line with ``from_json`` until
    ``limit`` malformed ones are found (the definition; slower)."""
    from pyspark.sql import functions as F

    value = F.col("value")
    record = _parse(value)
    bad = lines.where(~_is_blank(value) & ~_is_valid(record) & ~_is_marker(record))
    return [str(row[0])[:width] for row in bad.select(value).limit(limit).collect()]
