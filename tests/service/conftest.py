"""Fixtures for the service tests: the real app on an ephemeral loopback port."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator

import pytest_asyncio

from purgatory.service.config import ServiceConfig

sys.path.insert(0, os.path.dirname(__file__))  # served.py and serve_process.py

from served import Served, start_server


@pytest_asyncio.fixture
async def served() -> AsyncIterator[Served]:
    runner, server = await start_server()
    try:
        yield server
    finally:
        await server.session.close()
        await runner.cleanup()


@pytest_asyncio.fixture
async def tight() -> AsyncIterator[Served]:
    """A server with small limits: 1 parked fetch (and 1 slot kept for produces), 1 KiB
    bodies, 1 s timeout ceiling."""
    config = ServiceConfig(max_pending=2, max_body_bytes=1024, max_timeout_ms=1000)
    runner, server = await start_server(config)
    try:
        yield server
    finally:
        await server.session.close()
        await runner.cleanup()
