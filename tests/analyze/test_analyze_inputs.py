"""Input handling: directories, gzip, empty input, malformed and blank lines, extra fields."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from analyze_reference import load

from purgatory.analyze import run_analysis
from purgatory.analyze.generate import generate_file

pytestmark = pytest.mark.spark


def _event(**overrides: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "purgatory": "Quiet",
        "op_id": "q-1",
        "kind": "produce",
        "keys": ["t-0", "t-1"],
        "created_at_ms": 1_767_225_600_123,
        "duration_ms": 12.5,
        "timeout_ms": 100,
        "outcome": "completed",
        "error": None,
        "lateness_ms": None,
        "checks": 2,
        "extra": {"nested": [1, 2]},  # unknown fields must be tolerated
    }
    event.update(overrides)
    return event


BAD_LINES = [
    '{"purgatory": "Quiet", "op_id": ',  # invalid JSON (truncated)
    "not json at all",
    "[1, 2, 3]",  # valid JSON, not an object
    json.dumps({k: v for k, v in _event().items() if k != "checks"}),  # missing field
    json.dumps(_event(created_at_ms="2026-01-01")),  # wrong type
    json.dumps(_event(checks=2.5)),  # wrong type (not an integer)
    json.dumps(_event(keys="t-0")),  # wrong type (not a list)
    json.dumps(_event(keys=["t-0", None])),  # null watch key
    json.dumps(_event(outcome="vanished")),  # unknown outcome
    json.dumps(_event(kind=None)),  # null required field
    json.dumps(_event(duration_ms=-1.0)),  # impossible duration
]


def test_directory_with_gzip_plain_nested_and_bad_lines(spark: Any, tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    (traces / "nested").mkdir(parents=True)
    generate_file(str(traces / "a.jsonl"), 400, seed=1, rate_per_s=100.0)
    generate_file(str(traces / "nested" / "b.jsonl.gz"), 300, seed=2, first_index=400)
    good = [json.dumps(_event(op_id=f"q-{i}", checks=i)) for i in range(3)]
    with gzip.open(traces / "nested" / "c.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write("\n".join([good[0], "", *BAD_LINES, "   ", good[1], good[2]]) + "\n")
    (traces / "empty.jsonl").write_text("")

    out = tmp_path / "out"
    summary = run_analysis(
        [str(traces)], str(out), spark=spark, plots=False, progress=False
    ).to_dict()

    ref = load(str(traces))
    assert ref.malformed == len(BAD_LINES)  # the reference agrees on what is malformed
    assert summary["events"] == len(ref.events) == 703
    assert summary["malformed_lines"] == len(BAD_LINES)
    assert summary["blank_lines"] == ref.blank == 2
    assert len(summary["malformed_samples"]) == 5
    quiet = summary["purgatories"]["Quiet"]
    assert quiet["operations"] == 3
    assert quiet["completed"] == 3
    assert quiet["checks"] == {"mean": 1.0, "max": 2}
    # nothing expired: lateness is null, not zero
    assert quiet["lateness_ms"] == {"p50": None, "p99": None, "max": None}
    assert quiet["duration_ms"]["max"] == 12.5
    totals = {n: p["operations"] for n, p in summary["purgatories"].items()}
    want: dict[str, int] = {}
    for e in ref.events:
        want[e["purgatory"]] = want.get(e["purgatory"], 0) + 1
    assert totals == want
    assert not (out / "report.html").read_text().count("<img")  # --no-plots: no images


def test_several_paths_are_combined(spark: Any, tmp_path: Path) -> None:
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl.gz"
    generate_file(str(first), 50, seed=3)
    generate_file(str(second), 70, seed=4, malformed=2)
    summary = run_analysis(
        [str(first), str(second)], str(tmp_path / "out"), spark=spark, plots=False, progress=False
    )
    assert summary.counts.events == 120
    assert summary.counts.malformed_lines == 2


def test_empty_input_gives_zeros(spark: Any, tmp_path: Path) -> None:
    empty_file = tmp_path / "empty.jsonl"
    empty_file.write_text("")
    empty_dir = tmp_path / "nothing"
    empty_dir.mkdir()
    out = tmp_path / "out"
    summary = run_analysis(
        [str(empty_file), str(empty_dir)], str(out), spark=spark, progress=False
    ).to_dict()
    assert summary["events"] == 0
    assert summary["malformed_lines"] == 0
    assert summary["purgatories"] == {}
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["events"] == 0
    assert on_disk["purgatories"] == {}
    for png in ("durations.png", "in_flight.png", "outcomes.png", "lateness.png"):
        assert (out / png).stat().st_size > 0
    for table in on_disk["tables"]:
        assert spark.read.parquet(os.path.join(out, table)).count() == 0


def test_fault_markers_are_neither_events_nor_malformed(spark: Any, tmp_path: Path) -> None:
    trace = tmp_path / "with_faults.jsonl"
    generate_file(str(trace), 50, seed=3)
    with trace.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"fault": "crash leader broker 0", "at_ms": 1_700_000_000_000}) + "\n")
        fh.write(json.dumps({"fault": "restart broker 0", "at_ms": 1_700_000_001_000}) + "\n")
    out = tmp_path / "out"
    summary = run_analysis([str(trace)], str(out), spark=spark, progress=False).to_dict()
    assert summary["events"] == 50
    assert summary["malformed_lines"] == 0
    assert summary["faults"] == [
        {"at_ms": 1_700_000_000_000, "fault": "crash leader broker 0"},
        {"at_ms": 1_700_000_001_000, "fault": "restart broker 0"},
    ]
    page = (out / "report.html").read_text()
    assert "Faults: 1: crash leader broker 0; 2: restart broker 0." in page
