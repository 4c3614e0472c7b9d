"""Correctness of every implementation under the benchmark workload (never timings)."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics

import pytest

from purgatory import DelayedOperationPurgatory
from purgatory.bench.baselines import Floor
from purgatory.bench.report import round_ratios
from purgatory.bench.runner import (
    IMPLEMENTATIONS,
    LatenessSummary,
    RunResult,
    WorkloadStuck,
    percentile,
    run_workload,
)
from purgatory.bench.workload import PurgatoryPerformanceConfig, RequestDraws

# deadlines are kept in ms, loop time in s: the conversion may differ in the last bits
FLOAT_SLACK_MS = 1e-9
SMALL = PurgatoryPerformanceConfig(num=3000, timeout_ms=50, p50_ms=10, p75_ms=25, seed=7)


def _drawn_expired(cfg: PurgatoryPerformanceConfig) -> int:
    """Independent replay of the request stream: how many latencies reach the timeout."""
    rng = random.Random(cfg.seed)
    keys = [f"key-{i}" for i in range(cfg.key_space)]
    drawn = 0
    for _ in range(cfg.num):
        if cfg.rate is not None:
            rng.expovariate(cfg.rate)
        latency = int(rng.lognormvariate(cfg.mu, cfg.sigma))
        rng.sample(keys, cfg.keys_per_request)
        drawn += latency >= cfg.timeout_ms
    return drawn


def test_draws_give_every_request_distinct_keys_and_a_paced_arrival() -> None:
    cfg = PurgatoryPerformanceConfig(num=500, rate=1000.0, keys_per_request=4, key_space=6, seed=3)
    draws = RequestDraws(cfg)
    assert draws.arrival_gaps_s is not None
    assert len(draws.arrival_gaps_s) == cfg.num
    assert len(draws.latencies_ms) == cfg.num
    assert len(draws.keys) == cfg.num * 4
    for i in range(cfg.num):
        keys = draws.keys[i * 4 : (i + 1) * 4]
        assert len(set(keys)) == 4
        assert set(keys) <= {f"key-{k}" for k in range(6)}
    # a seed is a workload: the same draws every time, others for another seed
    again = RequestDraws(cfg)
    assert again.keys == draws.keys
    assert again.latencies_ms == draws.latencies_ms
    assert RequestDraws(dataclasses.replace(cfg, seed=4)).keys != draws.keys
    assert RequestDraws(dataclasses.replace(cfg, rate=None)).arrival_gaps_s is None


def _check_exactly_once(run: RunResult, cfg: PurgatoryPerformanceConfig) -> None:
    assert run.duplicates == 0
    if run.implementation == "floor":
        assert run.expired == 0
        assert run.completed == cfg.num - run.drawn_expired
    else:
        assert run.completed + run.expired == cfg.num
    assert run.extra["driver_completions"] == cfg.num - run.drawn_expired


@pytest.fixture(scope="module")
def virtual_runs() -> dict[str, RunResult]:
    return {name: run_workload(SMALL, name, "virtual") for name in IMPLEMENTATIONS}


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_every_op_finishes_exactly_once(virtual_runs: dict[str, RunResult], name: str) -> None:
    _check_exactly_once(virtual_runs[name], SMALL)


@pytest.mark.parametrize("name", ["call_later", "heap", "purgatory"])
def test_expired_are_exactly_the_slow_ones(virtual_runs: dict[str, RunResult], name: str) -> None:
    run = virtual_runs[name]
    assert run.drawn_expired == _drawn_expired(SMALL)
    assert run.drawn_expired > 0  # the test would be vacuous otherwise
    assert run.expired == run.drawn_expired
    assert run.lateness.count == run.expired


@pytest.mark.parametrize("name", ["call_later", "heap", "purgatory"])
def test_nothing_expires_before_its_deadline(virtual_runs: dict[str, RunResult], name: str) -> None:
    lateness = virtual_runs[name].lateness
    assert lateness.min_ms is not None
    assert lateness.min_ms >= -FLOAT_SLACK_MS


def test_purgatory_expires_within_rounding_and_one_tick(virtual_runs: dict[str, RunResult]) -> None:
    # On virtual time no CPU delay exists: only the ms rounding up and the 1 ms tick remain.
    lateness = virtual_runs["purgatory"].lateness
    assert lateness.max_ms is not None
    assert lateness.max_ms < 2.0


def test_implementations_agree(virtual_runs: dict[str, RunResult]) -> None:
    counts = {(r.completed, r.expired) for n, r in virtual_runs.items() if n != "floor"}
    assert len(counts) == 1
    assert len({r.drawn_expired for r in virtual_runs.values()}) == 1


def test_purgatory_statistics_match_the_tally(virtual_runs: dict[str, RunResult]) -> None:
    run = virtual_runs["purgatory"]
    assert run.extra["purgatory_completed"] == run.completed
    assert run.extra["purgatory_expired"] == run.expired
    assert run.extra["purges"] > 0  # watcher lists were purged along the way


def test_paced_run_on_virtual_time() -> None:
    cfg = PurgatoryPerformanceConfig(
        num=2000, rate=20_000, timeout_ms=30, p50_ms=5, p75_ms=12, seed=3
    )
    runs = {name: run_workload(cfg, name, "virtual") for name in ("call_later", "purgatory")}
    for run in runs.values():
        _check_exactly_once(run, cfg)
        assert run.expired == run.drawn_expired == _drawn_expired(cfg)
    late = runs["call_later"].lateness  # virtual time fires call_later exactly on time
    assert late.max_ms == pytest.approx(0.0, abs=FLOAT_SLACK_MS)
    assert late.min_ms == pytest.approx(0.0, abs=FLOAT_SLACK_MS)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_real_loop_smoke(loop: str, name: str) -> None:
    cfg = PurgatoryPerformanceConfig(num=400, timeout_ms=20, p50_ms=2, p75_ms=6, seed=5)
    run = run_workload(cfg, name, loop)
    assert run.duplicates == 0
    if name != "floor":
        assert run.completed + run.expired == cfg.num
        # a busy loop may run a completion after the timeout: more expire, never fewer
        assert run.expired >= run.drawn_expired
        assert run.lateness.min_ms is not None
        assert run.lateness.min_ms >= -1e-6


def test_memory_pass_reports_a_peak() -> None:
    run = run_workload(
        PurgatoryPerformanceConfig(num=500, timeout_ms=20), "purgatory", "virtual", memory=True
    )
    assert run.peak_heap_bytes is not None
    assert run.peak_heap_bytes > 0


def test_expected_fraction_matches_the_lognormal() -> None:
    cfg = PurgatoryPerformanceConfig()
    normal = statistics.NormalDist(cfg.mu, cfg.sigma)
    assert math.isclose(cfg.sigma, math.log(2) / statistics.NormalDist().inv_cdf(0.75))
    expected = 1 - statistics.NormalDist().cdf((math.log(200) - math.log(10)) / cfg.sigma)
    assert math.isclose(cfg.expected_expired_fraction(), expected, rel_tol=1e-9)
    assert math.isclose(math.exp(normal.inv_cdf(0.75)), 20.0, rel_tol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num": 0}, "--num"),
        ({"key_space": 0}, "--key-space"),
        ({"keys_per_request": 4, "key_space": 3}, "cannot exceed"),
        ({"p50_ms": 20, "p75_ms": 10}, "--p75"),
        ({"rate": 0.0}, "--rate"),
        ({"rate": math.inf}, "--rate"),
        ({"timeout_ms": 0}, "--timeout"),
    ],
)
def test_bad_configs_are_rejected(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PurgatoryPerformanceConfig(**kwargs)  # type: ignore[arg-type]


def test_percentile_is_nearest_rank() -> None:
    ordered = [float(i) for i in range(1, 101)]
    assert percentile(ordered, 50) == 50.0
    assert percentile(ordered, 99) == 99.0
    assert percentile([3.0], 99) == 3.0


@pytest.mark.skipif(
    not hasattr(DelayedOperationPurgatory, "try_complete_else_watch_nowait"),
    reason="the core has no try_complete_else_watch_nowait",
)
def test_nowait_entry_point_agrees(virtual_runs: dict[str, RunResult]) -> None:
    run = run_workload(SMALL, "purgatory-nowait", "virtual")
    _check_exactly_once(run, SMALL)
    reference = virtual_runs["purgatory"]
    assert (run.completed, run.expired) == (reference.completed, reference.expired)
    assert run.lateness.min_ms is not None
    assert run.lateness.min_ms >= -FLOAT_SLACK_MS


def test_lost_operations_fail_instead_of_hanging(monkeypatch: pytest.MonkeyPatch) -> None:
    # The floor never expires anything; claiming it does leaves the slow requests unfinished.
    monkeypatch.setattr(Floor, "expires", lambda self: True)
    with pytest.raises(WorkloadStuck, match=r"neither completed nor expired"):
        run_workload(SMALL, "floor", "virtual")


def _cpu_run(name: str, us_per_request: float) -> RunResult:
    return RunResult(
        implementation=name,
        loop="asyncio",
        num=1_000_000,
        target_rate=None,
        achieved_rate=1.0,
        cpu_s=us_per_request,  # 1M requests: seconds == us per request
        wall_s=1.0,
        completed=0,
        expired=0,
        drawn_expired=0,
        duplicates=0,
        lateness=LatenessSummary.of([]),
    )


def test_round_ratios_compare_runs_of_the_same_round() -> None:
    # Round 2 ran on a slower machine state: all three are slower, the ratio is unchanged.
    samples = [
        _cpu_run("floor", 5.0),
        _cpu_run("call_later", 11.0),
        _cpu_run("purgatory", 8.0),
        _cpu_run("floor", 10.0),
        _cpu_run("call_later", 22.0),
        _cpu_run("purgatory", 16.0),
    ]
    assert round_ratios(samples, "purgatory", "call_later") == pytest.approx([0.5, 0.5])
    # A floor run that was disturbed in one round changes that round's ratio only.
    samples[3] = _cpu_run("floor", 4.0)
    assert round_ratios(samples, "purgatory", "call_later") == pytest.approx([0.5, 12 / 18])
