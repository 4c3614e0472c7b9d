"""The real servers the bus tests run against, from ``purgatory.bus.testing``. What a
server needs (its binary, a client library) is checked here once: a test that needs what
is missing is skipped with the reason, or fails under ``CI=true``, where nothing may skip.

``start_redis``, ``start_postgres``, ``start_kafka``: the ``throwaway_*`` context manager,
once what it needs is there. ``redis_server``, ``postgres_server``, ``kafka_server``: one
per session for the tests that do not break it. ``own_redis``, ``own_kafka``: a server of
the test's own, to kill, stop or reconfigure.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import NoReturn

import pytest

from purgatory.bus.testing import (
    KafkaServer,
    PostgresServer,
    RedisServer,
    find_binary,
    throwaway_kafka,
    throwaway_postgres,
    throwaway_redis,
)


def _missing(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _need_binaries(package: str, *names: str) -> None:
    for name in names:
        try:
            find_binary(name, package)
        except FileNotFoundError as exc:
            _missing(str(exc))


@pytest.fixture(scope="session")
def start_redis() -> Callable[..., AbstractContextManager[RedisServer]]:
    _need_binaries("redis-server", "redis-server")
    return throwaway_redis


@pytest.fixture(scope="session")
def redis_server(
    start_redis: Callable[..., AbstractContextManager[RedisServer]],
) -> Iterator[RedisServer]:
    with start_redis() as server:
        yield server


@pytest.fixture
def own_redis(
    start_redis: Callable[..., AbstractContextManager[RedisServer]],
) -> Iterator[RedisServer]:
    with start_redis() as server:
        yield server


@pytest.fixture(scope="session")
def start_postgres() -> Callable[[], AbstractContextManager[PostgresServer]]:
    _need_binaries("postgresql", "initdb", "postgres", "pg_isready")
    return throwaway_postgres


@pytest.fixture(scope="session")
def postgres_server(
    start_postgres: Callable[[], AbstractContextManager[PostgresServer]],
) -> Iterator[PostgresServer]:
    with start_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def kafka_client() -> None:
    """aiokafka for the buses, aiohttp for ``purgatory serve``."""
    for module in ("aiokafka", "aiohttp"):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            _missing(f"{exc} (pip install 'purgatory-aio[kafka,service]')")


@pytest.fixture(scope="session")
def start_kafka(kafka_client: None) -> Callable[..., AbstractContextManager[KafkaServer]]:
    return throwaway_kafka


@pytest.fixture(scope="session")
def kafka_server(
    start_kafka: Callable[..., AbstractContextManager[KafkaServer]],
) -> Iterator[KafkaServer]:
    with start_kafka() as server:
        yield server


@pytest.fixture
def own_kafka(
    start_kafka: Callable[..., AbstractContextManager[KafkaServer]],
) -> Iterator[KafkaServer]:
    with start_kafka() as server:
        yield server
