"""``purgatory load``'s attack modes against a real server: slowloris and idle sockets,
a produce flood, and a refusal to attack anything but loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from serve_process import Server


def load(*args: str, timeout: float = 60) -> tuple[int, dict[str, Any], str]:
    result = subprocess.run(
        [sys.executable, "-m", "purgatory", "load", "--json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    summary = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.returncode, summary, result.stderr


@pytest.mark.parametrize(("header_timeout", "closed"), [("1", 40), ("30", 0)])
def test_slowloris_and_idle_sockets_are_counted_as_the_server_treats_them(
    header_timeout: str, closed: int
) -> None:
    server = Server("--header-timeout", header_timeout)
    try:
        status, summary, stderr = load(
            "--url", server.url, "--slowloris", "40", "--idle", "40", "--trickle-s", "0.2",
            "--duration", "2.5",
        )  # fmt: skip
    finally:
        assert server.stop() == 0
    assert status == 0, stderr
    for kind in ("slowloris", "idle"):
        assert summary[f"{kind}_opened"] == 40
        assert summary[f"{kind}_closed_by_server"] == closed
        assert summary[f"{kind}_still_open_at_end"] == 40 - closed
        if closed:
            assert summary[f"{kind}_server_answers"] == {"408": 40}
            assert summary[f"{kind}_held_until_closed_ms"]["max"] < 2000
    assert summary["healthz_ok"] >= 3
    assert summary["healthz_failed"] == {}
    assert summary["server_open_fds_max"] >= 80  # read from the server's /metrics


def test_slow_bodies_past_the_bytes_in_flight_get_503_and_the_rest_are_held() -> None:
    server = Server("--max-body-bytes", "10000", "--max-body-bytes-in-flight", "20000")
    try:
        status, summary, stderr = load(
            "--url", server.url, "--slow-bodies", "5", "--slow-body-bytes", "10000",
            "--duration", "1.5",
        )  # fmt: skip
    finally:
        assert server.stop() == 0
    assert status == 0, stderr
    assert summary["slow_body_opened"] == 5
    assert summary["slow_body_server_answers"] == {"503": 3}  # 2 x 10,000 bytes fit
    assert summary["slow_body_still_open_at_end"] == 2  # until the body timeout, 30 s
    assert summary["healthz_failed"] == {}


def flood(
    serve_args: list[str],
    producers: int,
    partitions: int,
    records: int,
    value_bytes: int,
    duration_s: float,
) -> dict[str, Any]:
    """``purgatory load --flood`` (acks=1) against a fresh ``purgatory serve``; its summary."""
    server = Server(*serve_args)
    try:
        status, summary, stderr = load(
            "--url", server.url, "--flood", "--flood-producers", str(producers),
            "--partitions", str(partitions), "--records", str(records),
            "--value-bytes", str(value_bytes), "--acks", "1", "--duration", str(duration_s),
            timeout=duration_s + 60,
        )  # fmt: skip
    finally:
        assert server.stop() == 0
    assert status == 0, stderr
    assert summary["healthz_failed"] == {}
    return summary


def test_produce_flood_reports_throughput_and_server_memory() -> None:
    summary = flood([], producers=4, partitions=2, records=5, value_bytes=200, duration_s=1.5)
    assert summary["produce_requests"] > 10
    assert set(summary["statuses"]) == {"200"}
    assert summary["accepted_mib"] > 0
    assert summary["server_rss_mib"]["max"] >= summary["server_rss_mib"]["first"] > 10


def test_a_flood_past_the_stored_bytes_cap_is_refused_and_memory_stays_bounded() -> None:
    cap_mib = 8
    serve_args = ["--max-stored-bytes", str(cap_mib << 20)]
    summary = flood(
        serve_args, producers=4, partitions=2, records=50, value_bytes=1000, duration_s=4
    )
    assert summary["statuses"]["200"] > 0
    assert summary["statuses"]["507"] > 0  # refused once full, not crashed or timed out
    assert summary["accepted_mib"] <= cap_mib
    assert summary["server_stored_mib"]["max"] <= cap_mib
    rss = summary["server_rss_mib"]
    assert rss["max"] - rss["first"] < cap_mib + 40, rss


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_60_s_flood_at_defaults_stays_under_the_documented_rss_bound() -> None:
    """docs/serve.md: with its defaults, the server's RSS stays under 350 MiB."""
    summary = flood([], producers=8, partitions=4, records=50, value_bytes=1000, duration_s=60)
    assert summary["statuses"]["507"] > 0  # the cap was reached
    assert summary["server_stored_mib"]["max"] <= 256
    assert summary["server_rss_mib"]["max"] < 350, summary["server_rss_mib"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://192.0.2.1:8080", "--idle", "5"], "attack modes target loopback only"),
        (["--url", "http://example.com", "--flood"], "attack modes target loopback only"),
        (["--idle", "70000"], "open at most 60000 sockets"),
        (["--flood", "--idle", "3"], "--flood runs alone"),
        (["--flood", "--slow-bodies", "3"], "--flood runs alone"),
        (["--slowloris", "3", "--duration", "601"], "--duration must be in (0, 600]"),
    ],
)
def test_attacks_are_bounded_and_loopback_only(args: list[str], message: str) -> None:
    status, _, stderr = load(*args)
    assert status == 2
    assert message in stderr
