"""Fixtures for the ``purgatory analyze`` tests: one local SparkSession for the whole run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # for analyze_reference


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] session with few shuffle partitions and no UI, shared by all Spark tests."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("purgatory-analyze-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Spark tests get a longer timeout: the first one pays for the JVM start."""
    for item in items:
        if (
            item.get_closest_marker("spark") is not None
            and item.get_closest_marker("timeout") is None
        ):
            item.add_marker(pytest.mark.timeout(240))
