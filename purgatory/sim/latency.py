"""Replication latency: :class:`Latency`, the log-normal distribution a slow follower's
round trips (and the controller's election round trips) are drawn from."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Latency:
    """A log-normal latency with the given median (``sigma`` 0: always the median).

    Models a slow follower: each replication round trip takes an extra sample.
    """

    median_ms: float
    sigma: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.median_ms) and self.median_ms >= 0):
            raise ValueError(f"median_ms must be a finite number >= 0, got {self.median_ms!r}")
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"sigma must be a finite number >= 0, got {self.sigma!r}")

    def sample_ms(self, rng: random.Random) -> float:
        if self.sigma == 0 or self.median_ms == 0:
            return self.median_ms
        return self.median_ms * math.exp(rng.gauss(0.0, self.sigma))

    @classmethod
    def from_percentiles(cls, median_ms: float, p99_ms: float) -> Latency:
        """The log-normal whose median and 99th percentile are as given."""
        if p99_ms < median_ms or median_ms <= 0:
            raise ValueError(f"need 0 < median_ms <= p99_ms, got {median_ms}, {p99_ms}")
        return cls(median_ms, math.log(p99_ms / median_ms) / 2.3263478740408408)
