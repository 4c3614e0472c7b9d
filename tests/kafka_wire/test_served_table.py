"""The docs' table of served APIs is the registry's: every key a listener advertises, at the
versions it advertises, and nothing else; and every API at its newest version in Kafka's
schemas (as kio carries them), but for the versions Kafka marks unstable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import versions

DOCS = Path(__file__).parents[2] / "docs" / "kafka.md"
ROW = re.compile(r"^\| ([A-Za-z]+) \| (\d+)-(\d+) \|", re.MULTILINE)


def _camel(key: ApiKey) -> str:
    return "".join(word.capitalize() for word in key.name.split("_"))


@pytest.mark.asyncio
async def test_the_docs_table_lists_what_a_listener_advertises() -> None:
    async with AsyncEmbeddedKafka(brokers=1, seed=1) as kafka:
        kafka.subscribe_telemetry("any")  # client telemetry is served while one exists
        advertised = kafka.front_door.advertised()
    documented = {name: (int(low), int(high)) for name, low, high in ROW.findall(DOCS.read_text())}
    assert documented == {_camel(key): served for key, served in advertised.items()}


def test_every_api_is_served_up_to_the_newest_stable_version_of_its_schema() -> None:
    documented = {name: (int(low), int(high)) for name, low, high in ROW.findall(DOCS.read_text())}
    behind = {
        name: (served, versions(key))
        for key in ApiKey
        if (name := _camel(key)) in documented and (served := documented[name]) != versions(key)
    }
    assert behind == {}
