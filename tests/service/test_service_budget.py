"""The connection budget: derived from the descriptor limit, idle connections evicted at
the budget, the excess refused with 503, and health checks and produces served throughout
a flood of long polls; the parked-request budget never refuses the produce that wakes the
polls parked in it."""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import subprocess
import sys
import time

import pytest
from serve_process import Server
from served import start_server
from test_service_connections import read_response, request

from purgatory.service.config import (
    ServiceConfig,
    budget,
    headroom,
    kafka_budget,
    reserve,
    write_reserve,
)
from purgatory.service.pending import Parks, PendingBudget
from purgatory.service.throttled import Throttled


def test_the_budget_is_derived_from_the_descriptor_limit() -> None:
    assert budget(4096, None, None) == (4096 - 409, 4096 - 409 - (4096 - 409) // 20)
    assert budget(20_000, None, None) == (18_000, 17_100)
    assert budget(1 << 20, None, None) == (30_000, 20_000)  # capped: memory bounds it too
    assert budget(4096, 1000, 900) == (1000, 900)
    assert headroom(256) == 64
    assert reserve(100) == 8


@pytest.mark.parametrize(
    ("max_connections", "max_pending", "message"),
    [
        (4000, None, "--max-connections must be in 16..3687 (the open-files limit 4096 less 409"),
        (8, None, "--max-connections must be in 16..3687"),
        (1000, 990, "--max-pending must be in 2..950 (--max-connections 1000 less 50 kept"),
        (None, 20_000, "--max-pending must be in 2..3503"),
    ],
)
def test_a_budget_that_does_not_fit_is_refused_with_the_figures(
    max_connections: int | None, max_pending: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
        budget(4096, max_connections, max_pending)


async def call(
    address: tuple[str, int],
    raw: bytes,
    hold: asyncio.Event | None = None,
    answers: list[int] | None = None,
) -> tuple[int, dict[str, object]]:
    """One request on a new connection; (0, {"error": why}) if the transport failed. With
    ``hold``, the connection stays open (idle, as a keep-alive client leaves it) until set;
    ``answers`` gets the status as soon as it arrives."""
    try:
        reader, writer = await asyncio.open_connection(*address)
    except OSError as exc:
        return 0, {"error": type(exc).__name__}
    try:
        writer.write(raw)
        answer = await read_response(reader)
        if answers is not None:
            answers.append(answer[0])
        if hold is not None:
            await hold.wait()
        return answer
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
        return 0, {"error": type(exc).__name__}
    finally:
        writer.close()


async def metric(address: tuple[str, int], name: str) -> float:
    reader, writer = await asyncio.open_connection(*address)
    writer.write(request("/metrics", close=True))
    text = (await reader.read()).decode()
    writer.close()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} in /metrics")


def test_idle_connections_are_evicted_at_the_budget_then_the_excess_gets_503() -> None:
    server = Server("--topic", "t:1:1", "--max-connections", "16", "--max-pending", "8")
    fetch = json.dumps({"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 10_000})

    async def main() -> tuple[int, int, dict[str, object], float, float]:
        idle = []
        for _ in range(16):  # the whole budget, idle on keep-alive after one request
            reader, writer = await asyncio.open_connection(*server.address)
            writer.write(request("/healthz"))
            assert (await read_response(reader))[0] == 200
            idle.append(writer)
        # a new client still gets through: the longest-idle connection makes room
        evicting, _ = await call(server.address, request("/healthz", close=True))
        # now fill the budget with connections that are not idle: 7 parked polls (all that
        # --max-pending 8 lets fetches take) and 9 heads still arriving
        parked = [
            asyncio.create_task(call(server.address, request("/v1/fetch", fetch.encode())))
            for _ in range(7)
        ]
        for _ in range(200):
            if await metric(server.address, "purgatory_http_parked_requests") == 7:
                break
            await asyncio.sleep(0.02)
        slow = []
        for _ in range(9):
            reader, writer = await asyncio.open_connection(*server.address)
            writer.write(b"GET /healthz HTTP/1.1\r\n")
            slow.append((reader, writer))
        await asyncio.sleep(0.1)
        refused_status, refused = await call(server.address, request("/healthz", close=True))
        # a second on, the slow heads are overdue: the oldest makes room, with a 503
        await asyncio.sleep(1)
        assert (await call(server.address, request("/healthz", close=True)))[0] == 200
        assert (await read_response(slow[0][0]))[0] == 503
        for writer in [w for _, w in slow] + idle:
            writer.close()
        await asyncio.sleep(0.1)
        evicted = await metric(
            server.address, 'purgatory_http_connections_closed_total{reason="evicted"}'
        )
        refusals = await metric(server.address, "purgatory_http_connections_refused_total")
        for task in parked:
            task.cancel()
        return evicting, refused_status, refused, evicted, refusals

    try:
        evicting, refused_status, refused, evicted, refusals = asyncio.run(main())
    finally:
        assert server.stop() == 0
    assert evicting == 200
    assert refused_status == 503
    assert refused["error"] == "TOO_MANY_CONNECTIONS"
    assert evicted >= 1
    assert refusals >= 1
    assert server.log().count("connection refused with 503") == 1


def test_a_flood_of_long_polls_at_4096_descriptors_gets_answers_and_503s_only() -> None:
    """Done-when of the issue: at defaults with RLIMIT_NOFILE 4,096, 4,096+ long polls get
    answers or 503s while /healthz and a waking produce succeed throughout."""
    polls = 4400
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < polls + 500:
        pytest.skip(f"needs {polls + 500} open files, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, polls + 500), hard))
    server = Server("--topic", "t:1:1", "--max-timeout-ms", "60000", open_files=4096)
    fetch = request(
        "/v1/fetch",
        json.dumps({"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 60_000}).encode(),
    )
    produce = request(
        "/v1/produce",
        json.dumps(
            {"topic": "t", "partition": 0, "records": [{"value": "wake"}], "acks": 1}
        ).encode(),
        close=True,
    )
    health: list[tuple[int, float]] = []

    async def check_health(stop: asyncio.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            status, _ = await call(server.address, request("/healthz", close=True))
            health.append((status, time.monotonic() - started))
            await asyncio.sleep(0.2)

    async def main() -> tuple[list[tuple[int, dict[str, object]]], int, float, float]:
        stop = asyncio.Event()
        checker = asyncio.create_task(check_health(stop))
        tasks = []
        answers: list[int] = []
        for i in range(polls):  # a refused poll's client keeps its connection, idle
            tasks.append(asyncio.create_task(call(server.address, fetch, stop, answers)))
            if i % 200 == 199:
                await asyncio.sleep(0.05)
        for _ in range(300):  # until every poll is parked or refused
            parked = await metric(server.address, "purgatory_http_parked_requests")
            if parked + len(answers) + sum(t.done() for t in tasks) >= polls:
                break
            await asyncio.sleep(0.1)
        woken_at = time.monotonic()
        produced, answer = await call(server.address, produce)
        assert answer.get("error") is None, answer
        for _ in range(2000):  # until every poll has its answer (or its connection failed)
            if len(answers) + sum(t.done() for t in tasks) >= polls:
                break
            await asyncio.sleep(0.01)
        wake_s = time.monotonic() - woken_at
        evicted = await metric(
            server.address, 'purgatory_http_connections_closed_total{reason="evicted"}'
        )
        stop.set()
        async with asyncio.timeout(30):
            results = await asyncio.gather(*tasks)
        await checker
        return results, produced, wake_s, evicted

    try:
        results, produced, wake_s, evicted = asyncio.run(main())
        log = server.log()
    finally:
        assert server.stop() == 0
    statuses = [status for status, _ in results]
    assert set(statuses) <= {200, 503}, {s: statuses.count(s) for s in set(statuses)}
    refusals = [str(body["error"]) for status, body in results if status == 503]
    assert refusals.count("TOO_MANY_PENDING_REQUESTS") > 0  # over max_pending
    assert evicted > 0  # refused polls' idle connections made room for later ones
    answered = [body for status, body in results if status == 200]
    assert len(answered) >= 3000  # fetches may park 3,153 of max_pending's 3,503 here
    assert all(body["records"] for body in answered)  # woken by the produce
    assert produced == 200
    assert wake_s < 20
    assert len(health) >= 5
    assert all(status == 200 for status, _ in health), health
    assert "Traceback" not in log
    assert log.count("refused with 503") <= 4  # throttled: one line per 10 s per kind


def test_fetches_never_take_the_slots_kept_for_writes() -> None:
    assert [write_reserve(n) for n in (2, 10, 19, 20, 3503)] == [1, 1, 1, 2, 350]
    pending = PendingBudget(20)
    for _ in range(18):
        assert pending.refusal(Parks.FETCH) is None
        pending.take(Parks.FETCH)
    assert pending.refusal(Parks.FETCH) == (
        "18 fetches are already parked (max_pending less 2 kept for produces)"
    )
    assert pending.refusal(Parks.NEVER) is None
    for _ in range(2):
        assert pending.refusal(Parks.WRITE) is None
        pending.take(Parks.WRITE)
    assert pending.refusal(Parks.WRITE) == "20 requests are already parked (max_pending)"
    pending.give_back(Parks.FETCH)
    assert pending.refusal(Parks.FETCH) is None
    assert (pending.parked, pending.fetches) == (19, 17)


def test_writes_may_take_every_slot_but_then_fetches_wait() -> None:
    pending = PendingBudget(10)
    for _ in range(10):
        assert pending.refusal(Parks.WRITE) is None
        pending.take(Parks.WRITE)
    assert pending.refusal(Parks.FETCH) == "10 requests are already parked (max_pending)"
    with pytest.raises(ValueError, match=r"max_pending must be at least 2 .*got 1"):
        ServiceConfig(max_pending=1)


@pytest.mark.asyncio
async def test_long_polls_filling_the_budget_never_refuse_the_produce_that_wakes_them() -> None:
    runner, server = await start_server(ServiceConfig(max_pending=10))
    poll = {"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 30_000}
    # more long polls than the whole budget: every slot a fetch may take is taken
    polls = [asyncio.create_task(server.post("/v1/fetch", poll)) for _ in range(11)]
    try:

        async def settled() -> bool:
            return await server.parked() + sum(p.done() for p in polls) == len(polls)

        await server.until(settled, "every poll parked or refused")
        refused = [p for p in polls if p.done()]
        assert refused
        for status, body in (p.result() for p in refused):
            assert (status, body["error"]) == (503, "TOO_MANY_PENDING_REQUESTS")
        started = time.monotonic()
        produce = {"topic": "t", "partition": 0, "records": [{"value": "wake"}], "acks": -1}
        assert await server.post("/v1/produce", produce) == (
            200,
            {"error": None, "base_offset": 0},
        )
        for p in polls:
            if p not in refused:
                status, body = await p
                assert status == 200
                assert [r["value"] for r in body["records"]] == ["wake"]
        assert time.monotonic() - started < 10  # woken by the produce, not max_wait_ms
    finally:
        for p in polls:
            p.cancel()
        await server.session.close()
        await runner.cleanup()


def test_serve_refuses_a_max_pending_above_its_budget_at_startup() -> None:
    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))

    result = subprocess.run(
        [sys.executable, "-m", "purgatory", "serve", "--port", "0", "--max-pending", "20000"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        preexec_fn=limit_files,
    )
    assert result.returncode == 2
    assert "--max-pending must be in 2..3503 (--max-connections 3687 less 184" in result.stderr


def test_kafka_connections_come_out_of_the_headroom() -> None:
    assert kafka_budget(20_000, None) == headroom(20_000) // 2 == 1000
    assert kafka_budget(4096, None) == 204
    assert kafka_budget(20_000, 1968) == 1968
    with pytest.raises(ValueError, match=r"must be in 1\.\.1968 \(the 2000 descriptors"):
        kafka_budget(20_000, 1969)
    with pytest.raises(ValueError, match="got 0"):
        kafka_budget(20_000, 0)


def test_a_flood_of_events_is_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    throttled = Throttled(logging.getLogger("test.throttled"), 10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.throttled"):
        for step in range(25):  # 25 events over 12 s
            now[0] = step * 0.5
            throttled.warning("refused %d", step)
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0",
        "refused 20 (and 19 more since the last such line)",
    ]
