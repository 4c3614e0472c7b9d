"""examples/kafka_throughput.py's consumer loop, with librdkafka's Consumer replaced by a
fake that records what each ``consume`` call asks for."""

from __future__ import annotations

from typing import Any, ClassVar

import confluent_kafka
import pytest
from example_modules import load_example


class _Message:
    def error(self) -> None:
        return None


class _Consumer:
    """librdkafka's ``consume(n, timeout)`` returns once it has ``n`` messages or the
    timeout passed: asking for more than are left waits out the whole timeout."""

    asked: ClassVar[list[int]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.left = 25_001

    def assign(self, partitions: list[Any]) -> None:
        pass

    def consume(self, num_messages: int, timeout: float) -> list[_Message]:
        self.asked.append(num_messages)
        given = min(num_messages, self.left)
        self.left -= given
        return [_Message() for _ in range(given)]

    def close(self) -> None:
        pass


def test_the_consumer_never_asks_for_more_records_than_are_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(confluent_kafka, "Consumer", _Consumer)
    _Consumer.asked = []
    load_example("kafka_throughput").confluent_consume("127.0.0.1:1", 25_001)
    # asking 10,000 for the last 5,001 would time every run out by a second at its end
    assert _Consumer.asked == [10_000, 10_000, 5_001]
