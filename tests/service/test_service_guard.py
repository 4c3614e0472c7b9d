"""Access control and hygiene: bearer token, JSON-only state changes (CSRF), Host check (DNS
rebinding), JSON 404/405, HEAD, no Server banner, Kafka's topic-name rule."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from served import Served

from purgatory.service.app import create_app
from purgatory.service.guard import AccessPolicy, host_name
from purgatory.sim.cluster import Cluster

TOKEN = "s3cret-token"
JSON = {"Content-Type": "application/json"}


async def _serve(access: AccessPolicy) -> tuple[web.AppRunner, Served]:
    cluster = Cluster()
    await cluster.start()
    await cluster.create_topic("t", 1, 3)
    runner = web.AppRunner(create_app(cluster, access=access), handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, Served(f"http://{host}:{port}", cluster, runner.app, aiohttp.ClientSession())


@pytest_asyncio.fixture
async def guarded() -> AsyncIterator[Served]:
    runner, server = await _serve(AccessPolicy.for_bind("127.0.0.1", token=TOKEN))
    try:
        yield server
    finally:
        await server.session.close()
        await runner.cleanup()


async def _status(server: Served, method: str, path: str, **kwargs: object) -> tuple[int, dict]:
    async with server.session.request(method, server.url + path, **kwargs) as response:  # type: ignore[arg-type]
        body = await response.json() if response.content_type == "application/json" else {}
        return response.status, body


@pytest.mark.asyncio
async def test_the_token_guards_every_route_but_healthz(guarded: Served) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert (await _status(guarded, "GET", "/healthz"))[0] == 200
    for path in ("/v1/metadata", "/metrics", "/openapi.json"):
        status, body = await _status(guarded, "GET", path)
        assert (status, body["error"]) == (401, "UNAUTHORIZED"), path
        assert (await _status(guarded, "GET", path, headers={"Authorization": "Bearer nope"}))[
            0
        ] == 401
        async with guarded.session.get(guarded.url + path, headers=auth) as ok:
            assert ok.status == 200, path
    produce = {"topic": "t", "partition": 0, "records": [{"value": "v"}], "acks": 1}
    assert (await _status(guarded, "POST", "/v1/produce", json=produce))[0] == 401
    status, body = await _status(guarded, "POST", "/v1/produce", json=produce, headers=auth)
    assert (status, body["error"]) == (200, None)
    guarded.session.headers.update(auth)  # the fixture's metric reader needs the token too
    rejected = await guarded.metric("purgatory_rejected_requests_total", reason="unauthorized")
    assert rejected >= 5


@pytest.mark.asyncio
async def test_public_metrics_needs_no_token() -> None:
    runner, server = await _serve(
        AccessPolicy.for_bind("127.0.0.1", token=TOKEN, public_metrics=True)
    )
    try:
        assert (await _status(server, "GET", "/metrics"))[0] == 200
        assert (await _status(server, "GET", "/v1/metadata"))[0] == 401
    finally:
        await server.session.close()
        await runner.cleanup()


@pytest.mark.asyncio
async def test_state_changes_accept_only_json(served: Served) -> None:
    # today's CSRF: a form post from any web page crashed a broker
    fault = '{"fault": "crash_follower", "topic": "t", "partition": 0}'
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {} if content_type is None else {"Content-Type": content_type}
        status, body = await _status(
            served, "POST", "/v1/admin/faults", data=fault.encode(), headers=headers
        )
        assert (status, body["error"]) == (415, "UNSUPPORTED_MEDIA_TYPE"), content_type
    assert all(b.alive for b in served.cluster.brokers.values())
    status, _ = await _status(
        served,
        "POST",
        "/v1/admin/faults",
        data=fault.encode(),
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert status == 200


@pytest.mark.asyncio
async def test_a_foreign_host_header_is_refused_on_loopback() -> None:
    runner, server = await _serve(AccessPolicy.for_bind("127.0.0.1"))
    try:
        status, body = await _status(
            server, "GET", "/v1/metadata", headers={"Host": "evil.example:8080"}
        )
        assert (status, body["error"]) == (400, "INVALID_HOST")
        for host in ("localhost:1234", "127.0.0.1", "[::1]:80"):
            assert (await _status(server, "GET", "/v1/metadata", headers={"Host": host}))[0] == 200
    finally:
        await server.session.close()
        await runner.cleanup()


def test_host_rules() -> None:
    assert AccessPolicy.for_bind("0.0.0.0").allowed_hosts is None
    assert AccessPolicy.for_bind("0.0.0.0", allowed_hosts=["API.example"]).allowed_hosts == {
        "api.example"
    }
    assert AccessPolicy.for_bind("::1").allowed_hosts == {"localhost", "127.0.0.1", "::1"}
    assert [host_name(h) for h in ("a:1", "[::1]:9", "B", "::1")] == ["a", "::1", "b", "::1"]
    with pytest.raises(ValueError, match="token"):
        AccessPolicy(token=" padded ")


@pytest.mark.asyncio
async def test_unknown_routes_and_methods_answer_in_the_json_error_format(served: Served) -> None:
    status, body = await _status(served, "GET", "/v1/nope")
    assert (status, body["error"]) == (404, "NOT_FOUND")
    async with served.session.delete(served.url + "/v1/produce", headers=JSON) as response:
        assert response.status == 405
        assert (await response.json())["error"] == "METHOD_NOT_ALLOWED"
        assert "POST" in response.headers["Allow"]
    # a wrong method is a 405, whatever the body's type
    status, body = await _status(served, "PUT", "/healthz", data=b"x")
    assert (status, body["error"]) == (405, "METHOD_NOT_ALLOWED")


@pytest.mark.asyncio
async def test_head_works_on_get_routes_and_no_server_banner(served: Served) -> None:
    async with served.session.head(served.url + "/healthz") as response:
        assert response.status == 200
        assert response.headers["Server"] == "purgatory"
    async with served.session.get(served.url + "/v1/metadata") as response:
        assert "Python" not in response.headers.get("Server", "")
        assert "aiohttp" not in response.headers.get("Server", "")


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["t\n", ".", "..", "a/b", "x" * 250, ""])
async def test_topic_names_follow_kafkas_rule(served: Served, name: str) -> None:
    body = {"name": name, "partitions": 1, "replication_factor": 1}
    status, _ = await _status(served, "POST", "/v1/topics", json=body)
    assert status == 400, name
    assert name not in served.cluster.topics


@pytest.mark.asyncio
async def test_the_cluster_applies_the_same_topic_rule() -> None:
    from purgatory.errors import ErrorCode
    from purgatory.sim.errors import SimulationError

    async with Cluster(brokers=1) as cluster:
        for bad in ("t\n", ".", ".."):
            with pytest.raises(SimulationError) as refused:
                await cluster.create_topic(bad, 1, 1)
            assert refused.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION
        await cluster.create_topic("..a_b-C.9", 1, 1)
