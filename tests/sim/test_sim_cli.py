"""``purgatory simulate`` end to end, in process, on virtual time."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from purgatory.cli import main
from purgatory.sim.cli import stderr_progress

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_simulate_json_and_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "ops.jsonl"
    code = main(
        [
            "simulate", "--scenario", "leader-failover", "--duration", "4", "--seed", "3",
            "--virtual-time", "--json", "--quiet", "--produce-rate", "300",
            "--fetch-rate", "300", "--trace", str(trace),
        ]
    )  # fmt: skip
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    # scripts and diffs of --json outputs rely on these fields, in this order
    assert list(summary) == [
        "scenario", "seed", "duration_s", "simulated_s", "acked_records", "lost_records",
        "lost_to_unclean_elections", "unclean_elections", "purgatories", "requests",
        "client_errors", "faults", "watched_per_s", "final_metadata", "violations",
        "virtual_time", "wall_s", "requests_per_wall_s", "purgatory_operations_per_wall_s",
        "produce_fetch_operations", "produce_fetch_operations_per_wall_s", "workload", "trace",
    ]  # fmt: skip
    assert summary["virtual_time"] is True
    assert summary["scenario"] == "leader-failover"
    assert summary["seed"] == 3
    assert summary["lost_records"] == 0
    assert summary["acked_records"] > 0
    for name in ("Produce", "Fetch", "DeleteRecords"):
        stats = summary["purgatories"][name]
        assert set(stats) >= {"operations", "completed", "expired", "errors", "duration_ms"}
        assert set(stats["duration_ms"]) == {"p50", "p99", "max"}
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    events = [line for line in lines if "fault" not in line]
    assert len(events) == sum(s["operations"] for s in summary["purgatories"].values())
    faults = [line["fault"] for line in lines if "fault" in line]
    assert faults == [fault.split(": ", 1)[1] for fault in summary["faults"]]
    kinds = {e["kind"] for e in events}
    assert {"produce", "fetch-consumer", "fetch-follower"} <= kinds
    first = events[0]
    assert set(first) >= {
        "purgatory", "op_id", "kind", "keys", "created_at_ms", "duration_ms", "timeout_ms",
        "outcome", "error", "lateness_ms", "checks",
    }  # fmt: skip
    assert all(e["keys"] and all(k.startswith("events-") for k in e["keys"]) for e in events)
    assert len({e["op_id"] for e in events}) == len(events)
    expired = [e for e in events if e["outcome"] == "expired"]
    assert all(e["lateness_ms"] is not None and e["lateness_ms"] >= 0 for e in expired)


def test_simulate_table_and_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--duration", "1", "--virtual-time", "--quiet",
                 "--produce-rate", "100", "--fetch-rate", "100"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "Produce" in out
    assert "invariant violations: 0" in out
    assert main(["simulate", "--record-bytes", "3", "--quiet"]) == 2
    assert "record_bytes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["simulate", "--duration", "-1"])


@pytest.mark.parametrize("script", ["long_poll.py", "broker_walkthrough.py", "failover_demo.py"])
def test_examples_run(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout


class _Stderr(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [False, True])
def test_progress_lines_in_a_log_and_on_a_terminal(
    tty: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    stderr = _Stderr(tty)
    monkeypatch.setattr(sys, "stderr", stderr)
    progress = stderr_progress()
    for line in ("\rt= 1.0s a", "\rt= 2.0s b", "t=2.5s fault: crash\n", "\rt= 3.0s c"):
        progress(line)
    if tty:  # rewritten in place, but a fault line starts a line of its own
        assert stderr.getvalue() == "\rt= 1.0s a\rt= 2.0s b\nt=2.5s fault: crash\n\rt= 3.0s c"
    else:  # a log gets one line per update
        assert stderr.getvalue() == "t= 1.0s a\nt= 2.0s b\nt=2.5s fault: crash\nt= 3.0s c\n"
