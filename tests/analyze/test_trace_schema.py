"""The trace line has one definition (purgatory.trace): what the product writes, what the
synthetic generator writes and what the analysis reads are held to it, a real trace and a
generated one through the same validators."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from purgatory._outcomes import Outcome
from purgatory.analyze.generate import generate_file
from purgatory.cli import main
from purgatory.trace import (
    EVENT_FIELDS,
    OUTCOMES,
    FaultMarker,
    TraceEvent,
    TraceLineError,
    read_line,
)


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short simulation's trace, with a fault marker."""
    path = tmp_path_factory.mktemp("real") / "ops.jsonl"
    code = main(
        [
            "simulate", "--scenario", "delete-records", "--duration", "3", "--seed", "7",
            "--virtual-time", "--json", "--quiet", "--trace", str(path),
        ]
    )  # fmt: skip
    assert code == 0
    return path


@pytest.fixture(scope="module")
def generated_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("generated") / "ops.jsonl"
    generate_file(str(path), 3000, seed=4)
    return path


def _read(path: Path) -> list[TraceEvent | FaultMarker | None]:
    return [read_line(line) for line in path.read_text().splitlines()]


def _events(path: Path) -> list[TraceEvent]:
    return [e for e in _read(path) if isinstance(e, TraceEvent)]


@pytest.mark.parametrize("name", ["real_trace", "generated_trace"])
def test_every_line_reads_back_to_the_same_bytes(name: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(name)
    lines = path.read_text().splitlines()
    read = [read_line(line) for line in lines]
    assert all(e is not None for e in read)
    assert [e.to_json() for e in read if e is not None] == lines


def test_the_generator_writes_what_the_product_writes(
    real_trace: Path, generated_trace: Path
) -> None:
    real, generated = _events(real_trace), _events(generated_trace)
    assert any(isinstance(e, FaultMarker) for e in _read(real_trace))
    # the same kinds per purgatory, the same labels (strings), the same outcome vocabulary
    kinds = {(e.purgatory, e.kind) for e in real}
    assert {(e.purgatory, e.kind) for e in generated} == kinds
    assert {tuple(e.labels) for e in real} == {tuple(e.labels) for e in generated} == {("broker",)}
    assert {e.outcome for e in generated} == set(Outcome)
    assert all(type(e.outcome) is Outcome for e in real + generated)
    # the lines' keys, in order
    first_real = json.loads(real_trace.read_text().splitlines()[0])
    first_generated = json.loads(generated_trace.read_text().splitlines()[0])
    assert list(first_real) == list(first_generated)
    assert list(first_real) == ["purgatory", "broker", *(f.name for f in EVENT_FIELDS[1:])]


def _good() -> dict[str, Any]:
    return {
        "purgatory": "Fetch", "broker": "0", "op_id": "a-1", "kind": "fetch-consumer",
        "keys": ["t-0"], "created_at_ms": 1, "duration_ms": 2.5, "timeout_ms": 500,
        "outcome": "completed", "error": None, "lateness_ms": None, "checks": 1,
    }  # fmt: skip


@pytest.mark.parametrize(
    "change",
    [
        {"outcome": "exploded"},
        {"duration_ms": -1.0},
        {"created_at_ms": "yesterday"},
        {"keys": ["t-0", None]},
        {"kind": None},
        {"broker": 0},  # a label is a string
    ],
)
def test_read_line_refuses(change: dict[str, Any]) -> None:
    assert isinstance(read_line(json.dumps(_good())), TraceEvent)
    with pytest.raises(TraceLineError):
        read_line(json.dumps(_good() | change))
    with pytest.raises(TraceLineError):
        read_line('{"purgatory": "Fetch"')
    assert read_line("  ") is None


def test_outcomes_are_the_enum() -> None:
    assert OUTCOMES == ("completed", "expired", "cancelled", "error")


@pytest.mark.spark
@pytest.mark.parametrize("name", ["real_trace", "generated_trace"])
def test_the_analysis_reads_every_line(
    spark: Any, name: str, request: pytest.FixtureRequest
) -> None:
    from purgatory.analyze.schema import parse_lines

    path: Path = request.getfixturevalue(name)
    lines = path.read_text().splitlines()
    parsed = parse_lines(spark.read.text(str(path))).collect()
    assert len(parsed) == len(lines)
    markers = sum(1 for line in lines if isinstance(read_line(line), FaultMarker))
    assert sum(r["valid"] for r in parsed) == len(lines) - markers
    assert sum(r["marker"] for r in parsed) == markers
