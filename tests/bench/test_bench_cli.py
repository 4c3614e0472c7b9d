"""``purgatory bench`` argument validation and JSON output shape."""

from __future__ import annotations

import json

import pytest

from purgatory.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num", "0"], "must be >= 1"),
        (["--num", "-5"], "must be >= 1"),
        (["--num", "ten"], "expected an integer"),
        (["--key-space", "0"], "must be >= 1"),
        (["--keys-per-request", "5", "--key-space", "3"], "cannot exceed"),
        (["--p50", "20", "--p75", "10"], "--p75"),
        (["--p50", "0"], "positive"),
        (["--rate", "0"], "positive"),
        (["--rate", "nan"], "positive"),
        (["--timeout", "0"], "must be >= 1"),
        (["--tasks", "10"], "only for 'purgatory bench timer'"),
        (["timer", "--num", "10"], "only for 'purgatory bench workload'"),
        (["timer", "--compare"], "only for 'purgatory bench workload'"),
        (["timer", "--nowait"], "only for 'purgatory bench workload'"),
        (["timer", "--min-delay", "50", "--max-delay", "10"], "--min-delay"),
        (["deadlines", "--num", "10"], "only for 'purgatory bench workload'"),
        (["deadlines", "--min-delay", "50", "--max-delay", "10"], "--min-delay"),
        (["thresholds", "--num", "10"], "only for 'purgatory bench workload'"),
        (["thresholds", "--tasks", "10"], "only for 'purgatory bench timer'"),
        (["timer", "--waiters", "10"], "only for 'purgatory bench thresholds'"),
        (["--advances", "10"], "only for 'purgatory bench thresholds'"),
        (["thresholds", "--waiters", "0"], "must be >= 1"),
        (["--loop", "trio"], "invalid choice"),
        (["--repeat", "0"], "must be >= 1"),
    ],
)
def test_bad_options_are_argparse_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_workload_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--num", "300", "--timeout", "20", "--compare", "--json", "--loop", "asyncio"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["benchmark"] == "workload"
    assert out["config"]["num"] == 300
    (result,) = out["results"]
    assert result["loop"] == "asyncio"
    runs = {run["implementation"]: run for run in result["runs"]}
    assert set(runs) == {"floor", "call_later", "heap", "purgatory"}
    subject = runs["purgatory"]
    for field in (
        "cpu_us_per_request",
        "cpu_us_above_floor",
        "ratio_vs_call_later",
        "ratio_vs_heap",
        "achieved_rate",
        "completed",
        "expired",
        "lateness_ms",
        "peak_heap_bytes",
    ):
        assert field in subject, field
    assert subject["completed"] + subject["expired"] == 300
    assert subject["peak_heap_bytes"] > 0
    assert set(subject["lateness_ms"]) == {"count", "min_ms", "p50_ms", "p99_ms", "max_ms"}
    assert "cpu_us_above_floor" not in runs["floor"]
    assert {"expected_fraction", "drawn", "z_score"} <= set(result["expired_check"])
    assert "cpu_above_floor_vs_call_later" in result["targets"]


def test_workload_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--num", "200", "--timeout", "20", "--no-memory"]) == 0
    out = capsys.readouterr().out
    assert "workload on uvloop: 200 requests, no pacing" in out
    assert "purgatory" in out


def test_timer_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "timer", "--tasks", "2000", "--loop", "both", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["benchmark"] == "timer"
    assert [r["loop"] for r in out["results"]] == ["asyncio", "uvloop"]
    for result in out["results"]:
        assert result["tasks"] == 2000
        for side in ("system_timer", "call_later"):
            assert set(result[side]) == {"create_s", "add_s", "cancel_s", "cleanup_s", "total_s"}
        assert result["ratio"] > 0


def test_rounds_alternate_their_order(capsys: pytest.CaptureFixture[str]) -> None:
    # A steady drift of the machine's speed must not favour whoever runs first.
    argv = ["bench", "--num", "200", "--timeout", "20", "--compare", "--repeat", "3", "--json"]
    assert main([*argv, "--loop", "asyncio"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    forward = ["floor", "call_later", "heap", "purgatory"]
    assert result["run_order"] == forward + forward[::-1] + forward


def test_deadlines_json_counts_no_early_expiry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "deadlines", "--tasks", "200", "--max-delay", "30", "--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)["results"]
    assert (result["operations"], result["early"]) == (200, 0)
    assert 0 <= result["lateness_p50_ms"] <= result["lateness_p99_ms"] <= result["lateness_max_ms"]


def test_thresholds_checks_only_what_each_advance_reaches(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "thresholds", "--waiters", "300", "--advances", "60", "--json"]
    assert main([*argv, "--baseline-advances", "20", "--loop", "both"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["loop"] for r in results] == ["asyncio", "uvloop"]
    for result in results:
        ours, all_of_ours, theirs = (
            result["set_value"],
            result["set_value_all"],
            result["wait_until"],
        )
        assert (ours["triggers"], all_of_ours["triggers"], theirs["triggers"]) == (20, 60, 20)
        assert all_of_ours["completions"] == 300  # every threshold is in 1..60
        # set_value checks exactly whom it completes; wait_until checks every waiter
        assert ours["checks"] == ours["completions"] == theirs["completions"]
        assert all_of_ours["checks"] == 300
        assert theirs["checks"] > 10 * theirs["completions"]
        assert result["cpu_ratio"] > 0


def test_an_unmeasurable_cpu_target_is_reported_not_dropped() -> None:
    from purgatory.bench.report import CpuTarget, format_workload, workload_report
    from purgatory.bench.runner import LatenessSummary, RunResult
    from purgatory.bench.workload import PurgatoryPerformanceConfig

    cfg = PurgatoryPerformanceConfig(num=10)

    def run(name: str, cpu_s: float) -> RunResult:
        return RunResult(
            implementation=name, loop="asyncio", num=10, target_rate=None, achieved_rate=1.0,
            cpu_s=cpu_s, wall_s=cpu_s, completed=10, expired=0, drawn_expired=0, duplicates=0,
            lateness=LatenessSummary.of([]), peak_heap_bytes=None,
        )  # fmt: skip

    # call_later no more expensive than the floor (noise on a tiny run): no ratio exists
    samples = [run("floor", 0.002), run("call_later", 0.001), run("purgatory", 0.001)]
    result = workload_report(cfg, "asyncio", samples, [])
    assert result.targets is not None
    target = result.targets["cpu_above_floor_vs_call_later"]
    assert isinstance(target, CpuTarget)
    assert (target.measured, target.met, target.rounds) == (None, None, [])
    assert "not measured" in format_workload(cfg, result)
