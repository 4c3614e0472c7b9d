"""Every scenario on virtual time with fixed seeds, checked by the invariant checker:
no acked record lost, HW monotonic per epoch, each operation finished exactly once and
never early; runs are deterministic per seed; purgatories stay bounded."""

from __future__ import annotations

import pytest

from purgatory.sim.runner import RunSummary, run_scenario
from purgatory.sim.scenarios import SCENARIOS
from purgatory.testing import run_virtual

RATES = {"produce_rate": 400.0, "fetch_rate": 400.0}


def _simulate(name: str, duration_s: float, seed: int, **rates: float) -> RunSummary:
    scenario = SCENARIOS[name].with_workload(**(rates or RATES))
    return run_virtual(run_scenario(scenario, duration_s, seed))


def _assert_healthy(summary: RunSummary) -> None:
    assert summary.violations == []
    assert summary.lost_records == 0
    assert summary.acked_records > 0
    requests = summary.requests
    assert requests["produce_requests"] == requests["produce_ok"] + requests["produce_failed"]
    assert summary.purgatories["Produce"].operations > 0
    assert summary.purgatories["Fetch"].operations > 0


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_invariants(name: str, seed: int) -> None:
    summary = _simulate(name, 20.0, seed)
    _assert_healthy(summary)
    produce = summary.purgatories["Produce"]
    if name == "follower-crash":
        # produces waited for the ISR to shrink (replica_lag_time_max_ms = 2 s), then went on
        assert produce.duration_ms.max >= 1000
        assert produce.errors.get("REQUEST_TIMED_OUT", 0) == 0
    if name == "leader-failover":
        partitions = summary.final_metadata[0].partitions
        assert all(p.leader == p.replicas[0] for p in partitions)  # preferred again
        assert all(p.leader_epoch >= 1 for p in partitions if p.replicas[0] == 0)
    if name == "delete-records":
        deletes = summary.purgatories["DeleteRecords"]
        assert deletes.operations > 0
        assert deletes.completed > 0
    if name == "slow-follower":
        assert produce.duration_ms.p99 > 10  # the slow replica held acks=all back


def test_failover_under_load_moves_leadership_and_keeps_acked_records() -> None:
    # higher load so that requests are parked on broker 0 when it dies
    summary = _simulate("leader-failover", 12.0, 3, produce_rate=2000.0, fetch_rate=500.0)
    _assert_healthy(summary)
    errors = summary.client_errors
    assert errors.get("NOT_LEADER_OR_FOLLOWER", 0) > 0
    assert summary.requests["produce_retries"] > 0


def test_same_seed_same_summary() -> None:
    first = _simulate("leader-failover", 6.0, 11).seeded()
    second = _simulate("leader-failover", 6.0, 11).seeded()
    other = _simulate("leader-failover", 6.0, 12).seeded()
    assert first == second
    assert first != other


def test_steady_60s_purgatories_stay_bounded() -> None:
    summary = _simulate("steady", 60.0, 5, produce_rate=300.0, fetch_rate=300.0)
    _assert_healthy(summary)
    for name, series in summary.watched_per_s.items():
        assert len(series) >= 59
        # bounded: far below the number of operations, and not trending up
        assert max(series) <= 1000 + 2 * summary.purgatories[name].max_delayed, name
        assert max(series[-20:]) <= max(max(series[:20]) * 2, 50), (name, series)
    for stats in summary.purgatories.values():
        assert stats.max_watched < 2000
