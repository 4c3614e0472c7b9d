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


def test_reports_are_typed_and_flattened_at_the_json_edge() -> None:
    import json
    import math

    from purgatory.loadgen.attacks import (
        FloodReport,
        ProbeSummary,
        RssMib,
        SocketsAttackReport,
        SocketsSummary,
    )
    from purgatory.loadgen.long_polls import LongPollSummary

    nan = float("nan")
    load = LongPollSummary(
        fetchers=10, parked_before_producing=10, partitions=2, duration_s=1.0,
        produce_requests=5, produce_rate=5.0, fetch_responses=7, requests_per_s=12.0,
        ok_requests=12, failed_requests=0, failures={}, broker_errors={}, wakeups=0,
        wakeup_latency_ms={"p50": nan, "p90": nan, "p99": nan, "max": nan},
        produce_latency_ms={"p50": 1.0, "p99": 2.0},
    )  # fmt: skip
    assert load.ok
    assert list(load.to_dict()) == [
        "fetchers", "parked_before_producing", "partitions", "duration_s", "produce_requests",
        "produce_rate", "fetch_responses", "requests_per_s", "ok_requests", "failed_requests",
        "failures", "broker_errors", "wakeups", "wakeup_latency_ms", "produce_latency_ms",
    ]  # fmt: skip
    assert math.isnan(load.to_dict()["wakeup_latency_ms"]["max"])  # type: ignore[index]

    probe = ProbeSummary(1, {"http_503": 1}, {"p50": 1.0}, server_rss_mib=RssMib(1.0, 2.0, 1.5))
    sockets = SocketsSummary(4, 4, {}, 4, 0, {"408": 4}, {"max": 9.0}, 1.0)
    report = SocketsAttackReport({"idle": sockets}, probe)
    assert not report.ok
    assert json.dumps(report.to_dict()) == (
        '{"mode": "sockets", "idle_sockets": 4, "idle_opened": 4, "idle_connect_failed": {}, '
        '"idle_closed_by_server": 4, "idle_still_open_at_end": 0, "idle_server_answers": '
        '{"408": 4}, "idle_held_until_closed_ms": {"max": 9.0}, "idle_attack_s": 1.0, '
        '"healthz_ok": 1, "healthz_failed": {"http_503": 1}, "healthz_latency_ms": {"p50": 1.0}, '
        '"server_rss_mib": {"first": 1.0, "max": 2.0, "last": 1.5}}'
    )
    flood = FloodReport(2, 1.0, 10, 10.0, {"200": 10}, {}, 0.1, 0.1, ProbeSummary(3, {}, {}))
    assert flood.ok
    assert list(flood.to_dict()) == [
        "mode", "producers", "duration_s", "produce_requests", "requests_per_s", "statuses",
        "broker_errors", "accepted_mib", "accepted_mib_per_s", "healthz_ok", "healthz_failed",
        "healthz_latency_ms",
    ]  # fmt: skip
