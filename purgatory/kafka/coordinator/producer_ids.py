"""Producer ids, as Kafka's ``ProducerIdManager`` hands them out to InitProducerId."""

from __future__ import annotations

import itertools
from typing import final


@final
class ProducerIds:
    """A sequence of producer ids, unique for the life of the front door."""

    def __init__(self, first: int = 1000) -> None:
        self._ids = itertools.count(first)

    def next(self) -> int:
        return next(self._ids)
