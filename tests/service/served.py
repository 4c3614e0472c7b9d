"""The real app on an ephemeral loopback port, and a client for it: what the service
tests share (imported by name; pytest's ``conftest`` modules are not, since every test
folder has one)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from purgatory.service.app import create_app
from purgatory.service.config import ServiceConfig
from purgatory.sim.cluster import Cluster


@dataclass
class Served:
    """A running server: its base URL, the cluster behind it, and a client session."""

    url: str
    cluster: Cluster
    app: web.Application
    session: aiohttp.ClientSession

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        async with self.session.post(self.url + path, json=body) as response:
            return response.status, await response.json()

    async def get(self, path: str) -> tuple[int, Any]:
        async with self.session.get(self.url + path) as response:
            return response.status, await response.json()

    async def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        async with self.session.get(self.url + "/metrics") as response:
            assert response.status == 200
            text = await response.text()
        out = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out

    async def metric(self, name: str, **labels: str) -> float:
        return (await self.metrics())[(name, tuple(sorted(labels.items())))]

    async def total(self, name: str, **labels: str) -> float:
        """The sum of ``name`` over every series that has ``labels`` (e.g. all brokers)."""
        wanted = set(labels.items())
        return sum(
            value
            for (sample, sample_labels), value in (await self.metrics()).items()
            if sample == name and wanted <= set(sample_labels)
        )

    async def until(self, condition: Callable[[], Awaitable[bool]], what: str) -> None:
        """Poll ``condition`` (a state the server reaches by itself) for up to 10 s."""
        for _ in range(1000):
            if await condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"timed out waiting for {what}")

    async def parked(self) -> float:
        return await self.metric("purgatory_http_parked_requests")


async def start_server(
    config: ServiceConfig | None = None, **cluster_args: Any
) -> tuple[web.AppRunner, Served]:
    cluster = Cluster(**cluster_args)
    await cluster.start()
    await cluster.create_topic("t", 2, 3)
    app = create_app(cluster, config)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
    return runner, Served(f"http://{host}:{port}", cluster, app, session)
