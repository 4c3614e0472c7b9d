"""The ``purgatory analyze`` command line: exit codes, options, console summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from purgatory.analyze.cli import format_summary
from purgatory.analyze.generate import generate_file
from purgatory.analyze.session import default_shuffle_partitions
from purgatory.analyze.summary import (
    AnalysisSummary,
    Checks,
    LineCounts,
    OutcomeStats,
    PurgatoryAnalysis,
)
from purgatory.cli import main


def test_missing_path_exits_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    assert main(["analyze", str(missing), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err
    assert str(missing) in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_cli_module_does_not_import_spark() -> None:
    code = (
        "import sys, purgatory.cli, purgatory.analyze.cli\n"
        "purgatory.cli.build_parser()\n"
        "bad = [m for m in ('pyspark', 'matplotlib') if m in sys.modules]\n"
        "sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@pytest.mark.parametrize(
    ("master", "want"), [("local[3]", 6), ("local", 2), ("local[*]", None), ("yarn", None)]
)
def test_default_shuffle_partitions(master: str, want: int | None) -> None:
    import os

    expected = 2 * (os.cpu_count() or 2) if master == "local[*]" else want
    assert default_shuffle_partitions(master) == expected


def _summary(events: int, malformed: int, purgatories: dict[str, Any]) -> AnalysisSummary:
    counts = LineCounts(events + malformed, events, malformed, 0, None, None)
    return AnalysisSummary(counts, 100, "", purgatories, [], [], [], {}, 0.0)


def test_format_summary_lists_each_purgatory() -> None:
    entry = OutcomeStats(
        operations=10,
        completed=7,
        expired=2,
        cancelled=1,
        errors=0,
        expiration_rate=0.2,
        errors_by_code={},
        duration_ms={"p50": 1.0, "p90": 2.0, "p99": 3.0, "p999": 4.0, "max": 5.0},
        lateness_ms={},
        checks=Checks(None, None),
    )
    text = format_summary(_summary(10, 1, {"Fetch": PurgatoryAnalysis(entry, {})}))
    assert "malformed lines: 1" in text
    fetch = next(line for line in text.splitlines() if line.startswith("Fetch"))
    assert fetch.split()[1:7] == ["10", "7", "2", "1", "0", "20.00%"]


@pytest.mark.spark
def test_cli_end_to_end(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    generate_file(str(trace), 200, seed=5, malformed=3)
    out = tmp_path / "out"
    args = ["analyze", str(trace), "--out", str(out), "--no-plots", "--quiet", "--top-keys", "3"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "events: 200  malformed lines: 3" in captured.out
    assert "Produce" in captured.out
    assert "malformed lines: 3; samples:" in captured.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["events"] == 200
    ranks = [r["rank"] for r in spark.read.parquet(str(out / "hot_keys")).collect()]
    assert max(ranks) == 3
    assert not list(out.glob("*.png"))
    assert not spark.sparkContext._jsc.sc().isStopped()  # a session it did not start is kept


def test_an_empty_directory_fails_fast_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    empty = tmp_path / "empty"
    empty.mkdir()
    started = time.monotonic()
    assert main(["analyze", str(empty), "--out", str(tmp_path / "out")]) == 2
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert f"no trace files (*.jsonl or *.jsonl.gz) in {empty}" in err
    assert not (tmp_path / "out").exists()


def test_a_directory_without_trace_files_says_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("not a trace\n")
    assert main(["analyze", str(notes), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(notes) in err
    assert "1 other files skipped" in err


def test_a_run_without_any_trace_event_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import purgatory.analyze as analyze_package

    (tmp_path / "empty.jsonl").write_text("\n")  # not empty, but no event in it
    empty_summary = _summary(0, 0, {})
    monkeypatch.setattr(analyze_package, "run_analysis", lambda *a, **k: empty_summary)
    code = main(["analyze", str(tmp_path / "empty.jsonl"), "--out", str(tmp_path / "out")])
    assert code == 1
    err = capsys.readouterr().err
    assert "reading 1 trace file" in err
    assert "no trace event in 1 trace file" in err


def test_only_empty_files_fail_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import purgatory.analyze as analyze_package

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark started for empty input")

    monkeypatch.setattr(analyze_package, "run_analysis", must_not_run)
    (tmp_path / "a.jsonl").write_text("")
    (tmp_path / "b.jsonl.gz").write_bytes(b"")
    assert main(["analyze", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no trace event in 2 trace files (0.0 MB): a.jsonl, b.jsonl.gz" in err


@pytest.mark.spark
def test_quiet_is_quiet(tmp_path: Path) -> None:
    """No progress and no JVM warning lines on the terminal; Spark's go to OUT/spark.log."""
    pytest.importorskip("pyspark")
    trace = tmp_path / "t.jsonl"
    generate_file(str(trace), 100, seed=8)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "purgatory", "analyze", str(trace), "--out", str(out), "--quiet",
         "--no-plots", "--master", "local[1]", "--shuffle-partitions", "2"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "events: 100" in done.stdout
    assert (out / "spark.log").exists()
