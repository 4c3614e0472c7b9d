"""``purgatory load`` prints a table a person reads, not Python dicts."""

from __future__ import annotations

from purgatory.loadgen.cli import format_summary


def test_summary_is_a_labelled_table_with_separators() -> None:
    summary = {
        "fetchers": 5000,
        "duration_s": 30.0126,
        "failures": {},
        "broker_errors": {"NOT_LEADER_OR_FOLLOWER": 1234},
        "wakeup_latency_ms": {"p50": 1.5, "p99": float("nan"), "max": 12.25},
    }
    lines = format_summary(summary).splitlines()
    assert lines == [
        "fetchers           5,000",
        "duration s         30.013",
        "failures           none",
        "broker errors      NOT_LEADER_OR_FOLLOWER 1,234",
        "wakeup latency ms  p50 1.5   p99 -   max 12.25",
    ]
    assert "{" not in format_summary(summary)
