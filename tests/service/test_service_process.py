"""``purgatory serve`` as a real process: SIGTERM with parked requests, schemathesis
against its OpenAPI document, and ``purgatory load`` driving it."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from serve_process import Server


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server("--topic", "t:2:3", "--max-timeout-ms", "30000")
    try:
        yield running
    finally:
        running.stop()


async def _parked(session: aiohttp.ClientSession, url: str) -> float:
    async with session.get(url + "/metrics") as response:
        text = await response.text()
    for family in text_string_to_metric_families(text):
        if family.name == "purgatory_http_parked_requests":
            return family.samples[0].value
    raise AssertionError("no parked gauge")


def test_sigterm_answers_every_parked_request(server: Server) -> None:
    async def main() -> list[tuple[int, dict[str, object]]]:
        async with aiohttp.ClientSession() as session:

            async def post(path: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
                async with session.post(server.url + path, json=body) as response:
                    return response.status, await response.json()

            for broker in (1, 2):  # followers so slow that acks=all produces stay parked
                slow = {"fault": "slow_follower", "topic": "t", "partition": 0, "broker": broker}
                assert (await post("/v1/admin/faults", {**slow, "latency_ms": 30_000}))[0] == 200
            fetch = {"topic": "t", "partition": 1, "offset": 0, "max_wait_ms": 30_000}
            produce = {"topic": "t", "partition": 0, "records": [{"value": "v"}]}
            tasks = [asyncio.create_task(post("/v1/fetch", fetch)) for _ in range(20)]
            tasks += [asyncio.create_task(post("/v1/produce", produce)) for _ in range(5)]
            for _ in range(1000):
                if await _parked(session, server.url) == 25:
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("requests did not park")
            server.proc.send_signal(signal.SIGTERM)
            return await asyncio.gather(*tasks)

    started = time.monotonic()
    answers = asyncio.run(main())
    assert server.proc.wait(10) == 0
    assert time.monotonic() - started < 10
    assert len(answers) == 25
    for status, body in answers:
        assert status == 200
        assert body["error"] == "BROKER_NOT_AVAILABLE"


def test_serve_rejects_bad_arguments() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "purgatory", "serve", "--topic", "bad-spec"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "NAME:PARTITIONS:RF" in result.stderr


@pytest.mark.slow  # ~30 s, mostly schemathesis' coverage phase
@pytest.mark.skipif(shutil.which("schemathesis") is None, reason="schemathesis not installed")
def test_schemathesis_finds_no_server_errors_or_schema_violations(tmp_path: Path) -> None:
    # A low timeout ceiling keeps generated long polls short.
    server = Server("--topic", "t:2:3", "--max-timeout-ms", "1000")
    try:
        result = _schemathesis(server.url, tmp_path)
    finally:
        assert server.stop() == 0
    assert result.returncode == 0, result.stdout[-4000:]
    selected = re.search(r"Selected: (\d+)/(\d+)", result.stdout)
    tested = re.search(r"Tested: (\d+)", result.stdout)
    assert selected is not None, result.stdout[-2000:]
    assert tested is not None, result.stdout[-2000:]
    assert int(tested[1]) == int(selected[2]) >= 7  # every documented operation ran


def _schemathesis(url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "schemathesis",
            "run",
            url + "/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            "12",
            "--seed",
            "7",
            "--request-timeout",
            "10",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
        cwd=tmp_path,
    )


def test_load_generator_drives_the_server(server: Server) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "purgatory",
            "load",
            "--url",
            server.url,
            "--topic",
            "load",
            "--partitions",
            "4",
            "--fetchers",
            "40",
            "--produce-rate",
            "40",
            "--duration",
            "1.5",
            "--ramp",
            "0",
            "--max-wait-ms",
            "500",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    assert summary["parked_before_producing"] == 40
    assert summary["failed_requests"] == 0
    assert summary["broker_errors"] == {}
    assert summary["produce_requests"] >= 40
    assert summary["wakeups"] > 0
    assert 0 < summary["wakeup_latency_ms"]["p50"] <= summary["wakeup_latency_ms"]["p99"]
