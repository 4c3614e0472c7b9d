"""``parse_lines`` (Spark's JSON reader) gives, line for line and in order, what
``from_json`` gives (``parse_lines_from_json``, the definition), on awkward lines too."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from test_analyze_inputs import BAD_LINES, _event

from purgatory.analyze.generate import generate_file
from purgatory.analyze.schema import (
    UNUSED_AFTER_CHECK,
    malformed_samples,
    malformed_samples_from_json,
    parse_lines,
    parse_lines_from_json,
)

pytestmark = pytest.mark.spark

AWKWARD_LINES = [
    *BAD_LINES,
    "",
    "   ",  # blank: spaces only
    "\t",  # not blank (trim drops spaces only) and no JSON: malformed
    " \t ",
    "  " + json.dumps(_event(op_id="lead-space")),  # Jackson skips leading whitespace
    "\t" + json.dumps(_event(op_id="lead-tab")),
    "\r" + json.dumps(_event(op_id="lead-cr")),  # \r ends a line for Spark's text reader
    "\ufeff" + json.dumps(_event(op_id="bom")),  # a BOM inside a line is not whitespace
    json.dumps([_event(op_id="in-array-1"), _event(op_id="in-array-2")]),  # not an object
    "[]",
    "null",
    "42",
    '"a string"',
    "B",  # the stand-ins themselves, as lines
    "M",
    "{}",
    "{",
    json.dumps(_event(op_id="trailing")) + " trailing garbage",
    json.dumps(_event(op_id="twice")) + json.dumps(_event(op_id="second")),
    json.dumps(_event(op_id="uni-\u00e9\u4e2d", kind="caf\u00e9")),
    json.dumps(_event(op_id="escaped"), ensure_ascii=True).replace("escaped", "esc\\u00e9"),
    json.dumps(_event(duration_ms=float("nan"))),  # NaN token
    json.dumps(_event(keys=[])),
    json.dumps(_event(error="E", lateness_ms=3.5, outcome="expired")),
    json.dumps({"fault": "partition", "at_ms": 1_767_225_600_500}),
    json.dumps({"fault": "partition", "at_ms": "soon"}),
    json.dumps({"fault": "both", "at_ms": 1, "purgatory": "Quiet"}),
    json.dumps(_event(purgatory=["not", "a", "string"])),
    json.dumps(_event(created_at_ms=1.5)),
    json.dumps(_event(checks="2")),
]


def _rows(df: Any) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in df.collect()]


def _same(spark: Any, path: str) -> int:
    lines = spark.read.text(path)
    want = parse_lines_from_json(lines).drop(*UNUSED_AFTER_CHECK)
    got = parse_lines(lines)
    assert got.columns == want.columns
    want_rows, got_rows = _rows(want), _rows(got)
    assert len(got_rows) == len(want_rows)
    for i, (g, w) in enumerate(zip(got_rows, want_rows, strict=True)):
        assert repr(g) == repr(w), (i, g, w)  # repr: NaN == NaN, and -0.0 != 0.0
    return len(got_rows)


def test_awkward_lines_parse_as_with_from_json(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "awkward.jsonl"
    body = "\n".join(AWKWARD_LINES).encode() + b"\n"
    body += b'{"purgatory": "Bad\xff\xfeUtf8", "op_id": "x"}\n'  # invalid UTF-8
    path.write_bytes(body)
    assert _same(spark, str(path)) == len(body.splitlines())  # one row per line


def test_generated_trace_parses_as_with_from_json(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl.gz"
    generate_file(str(path), 2000, seed=3, malformed=25)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        assert sum(1 for _ in fh) == 2025
    assert _same(spark, str(path)) == 2025


@pytest.mark.parametrize("limit", [1, 5, 40])
def test_malformed_samples_as_with_from_json(spark: Any, tmp_path: Path, limit: int) -> None:
    # several files (partitions), the malformed lines spread over them, one file without any
    generate_file(str(tmp_path / "a.jsonl.gz"), 300, seed=1, malformed=2)
    generate_file(str(tmp_path / "b.jsonl"), 300, seed=2)
    generate_file(str(tmp_path / "c.jsonl.gz"), 300, seed=3, malformed=4)
    (tmp_path / "d.jsonl").write_text("\n".join(AWKWARD_LINES) + "\n")
    lines = spark.read.text(str(tmp_path))
    assert lines.rdd.getNumPartitions() > 1
    parsed = parse_lines(lines).cache()
    try:
        got = malformed_samples(lines, parsed, limit=limit, width=60)
    finally:
        parsed.unpersist()
    want = malformed_samples_from_json(lines, limit=limit, width=60)
    assert got == want
    assert len(got) == min(limit, 34)  # a: 2, c: 4, d: 28 of the awkward lines
