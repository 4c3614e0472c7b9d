"""``purgatory demo``: the simulation part (the analysis part is covered in tests/analyze)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from purgatory.cli import main
from purgatory.demo import timing_note
from purgatory.sim.scenarios import SCENARIOS


def test_demo_traces_faults_and_explains_its_timings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["demo", "--out", str(tmp_path), "--duration", "2", "--virtual-time", "--skip-analysis"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "(virtual time)" in out
    assert timing_note(True, 1) in out
    assert "(no operations: DeleteRecords, ElectLeader)" in out  # not all-zero rows
    lines = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    faults = [line["fault"] for line in lines if "fault" in line]
    injected = sorted(SCENARIOS["leader-failover"].faults, key=lambda e: e.at)
    assert faults == [e.description for e in injected]
    assert len(faults) >= 2
    assert all(isinstance(line["at_ms"], int) for line in lines if "fault" in line)


def test_the_real_time_note_says_why_and_how_to_reproduce() -> None:
    note = timing_note(False, 7)
    assert "real time" in note
    assert "purgatory bench deadlines" in note
    assert "--virtual-time --seed 7" in note
