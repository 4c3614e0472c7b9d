"""Which files ``purgatory analyze`` reads (no Spark needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from purgatory.analyze.inputs import InputPathError, find_inputs


def _touch(path: Path, text: str = "{}\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_mixed_directory_yields_only_trace_files(tmp_path: Path) -> None:
    a = _touch(tmp_path / "run" / "a.jsonl")
    b = _touch(tmp_path / "run" / "deep" / "b.jsonl.gz")
    _touch(tmp_path / "run" / "notes.txt")
    _touch(tmp_path / "run" / "report.html")
    _touch(tmp_path / "run" / "table" / "part-0.parquet")
    inputs = find_inputs([str(tmp_path / "run")])
    assert inputs.files == (str(a), str(b))
    assert inputs.skipped == 3
    assert "2 trace files" in inputs.describe()
    assert "3 other files skipped" in inputs.describe()


def test_a_named_file_is_read_whatever_its_name(tmp_path: Path) -> None:
    log = _touch(tmp_path / "trace.log")
    assert find_inputs([str(log)]).files == (str(log),)


def test_patterns_choose_other_files(tmp_path: Path) -> None:
    _touch(tmp_path / "a.jsonl")
    other = _touch(tmp_path / "b.ndjson")
    assert find_inputs([str(tmp_path)], ["*.ndjson"]).files == (str(other),)


def test_uris_are_left_to_spark(tmp_path: Path) -> None:
    assert find_inputs(["hdfs://nn/traces"]).files == ("hdfs://nn/traces",)


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_nothing_to_read_is_an_error(tmp_path: Path, make: str) -> None:
    path = tmp_path / "x"
    if make == "empty":
        path.mkdir()
    with pytest.raises(InputPathError, match="does not exist" if make == "missing" else "no trace"):
        find_inputs([str(path)])
    with pytest.raises(InputPathError, match="no input path"):
        find_inputs([])
