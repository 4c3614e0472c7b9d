"""The workload of Kafka's TestPurgatoryPerformance, and the outcome tally every run shares.

Each request is a fake operation with a completion latency drawn from a log-normal
distribution (given by its median and 75th percentile, as in Kafka), watched on a few random
keys. If the latency is below the timeout, the completion driver force-completes it at that
time; otherwise it expires through the implementation under test.
"""

from __future__ import annotations

import asyncio
import math
import random
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, final

# Kafka: normalStDev = (ln(p75) - ln(p50)) / 0.674490 (the 75th percentile of N(0, 1)).
Z75: Final = 0.6744897501960817


@dataclass(frozen=True, slots=True)
class PurgatoryPerformanceConfig:
    """The knobs of TestPurgatoryPerformance (defaults are Kafka's)."""

    num: int = 200_000
    rate: float | None = None  # requests/s, open loop; None: as fast as possible
    keys_per_request: int = 3
    key_space: int = 100
    timeout_ms: int = 200
    p50_ms: float = 10.0
    p75_ms: float = 20.0
    seed: int = 1
    # yield to the loop after at most this many requests (unpaced, or behind schedule) so
    # that completions and expirations interleave with generation (Kafka: other threads)
    batch: int = 100

    def __post_init__(self) -> None:
        problems = config_problems(self)
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def mu(self) -> float:
        return math.log(self.p50_ms)

    @property
    def sigma(self) -> float:
        return (math.log(self.p75_ms) - math.log(self.p50_ms)) / Z75

    def expected_expired_fraction(self) -> float:
        """P(latency >= timeout): the share of requests that must expire."""
        if self.sigma == 0.0:
            return 1.0 if self.p50_ms >= self.timeout_ms else 0.0
        z = (math.log(self.timeout_ms) - self.mu) / self.sigma
        return 0.5 * math.erfc(z / math.sqrt(2.0))


def config_problems(cfg: PurgatoryPerformanceConfig) -> list[str]:
    """Human-readable reasons why ``cfg`` is unusable (empty if it is fine)."""
    problems = []
    if cfg.num < 1:
        problems.append(f"--num must be >= 1, got {cfg.num}")
    if cfg.rate is not None and not (cfg.rate > 0 and math.isfinite(cfg.rate)):
        problems.append(f"--rate must be a positive number of requests/s, got {cfg.rate}")
    if cfg.key_space < 1:
        problems.append(f"--key-space must be >= 1, got {cfg.key_space}")
    if cfg.keys_per_request < 1:
        problems.append(f"--keys-per-request must be >= 1, got {cfg.keys_per_request}")
    elif cfg.keys_per_request > cfg.key_space:
        problems.append(
            f"--keys-per-request ({cfg.keys_per_request}) cannot exceed --key-space "
            f"({cfg.key_space}): the keys of a request are distinct"
        )
    if cfg.timeout_ms < 1:
        problems.append(f"--timeout must be >= 1 ms, got {cfg.timeout_ms}")
    if not (cfg.p50_ms > 0 and math.isfinite(cfg.p50_ms)):
        problems.append(f"--p50 must be a positive number of ms, got {cfg.p50_ms}")
    if not (cfg.p75_ms > 0 and math.isfinite(cfg.p75_ms)):
        problems.append(f"--p75 must be a positive number of ms, got {cfg.p75_ms}")
    elif cfg.p75_ms < cfg.p50_ms:
        problems.append(f"--p75 ({cfg.p75_ms}) must be >= --p50 ({cfg.p50_ms})")
    if cfg.batch < 1:
        problems.append(f"--batch must be >= 1, got {cfg.batch}")
    return problems


@final
class RequestDraws:
    """Every request's random draws, made before the measurement starts.

    Drawing costs more than the floor's whole request (``random.sample`` and
    ``lognormvariate`` are Python code). Inside the measured window it would only add the
    same amount to every implementation, and make the differences to the floor noisier.
    The draws come in Kafka's order, one request after the other, from ``cfg.seed``.
    """

    __slots__ = ("arrival_gaps_s", "keys", "latencies_ms")

    def __init__(self, cfg: PurgatoryPerformanceConfig) -> None:
        rng = random.Random(cfg.seed)
        names = [f"key-{i}" for i in range(cfg.key_space)]
        gaps = array("d")
        self.latencies_ms = array("q")
        #: the keys of request i are ``keys[i * k : (i + 1) * k]``
        self.keys: list[str] = []
        for _ in range(cfg.num):
            if cfg.rate is not None:
                gaps.append(rng.expovariate(cfg.rate))
            self.latencies_ms.append(int(rng.lognormvariate(cfg.mu, cfg.sigma)))
            self.keys.extend(rng.sample(names, cfg.keys_per_request))
        #: seconds between arrivals (Poisson), or None when unpaced
        self.arrival_gaps_s: array[float] | None = None if cfg.rate is None else gaps


@final
class Tally:
    """Counts outcomes as they happen; resolves ``done`` once ``target`` ops finished.

    Every implementation reports through the same three calls, so their bookkeeping cost
    is identical and part of the floor.
    """

    __slots__ = (
        "_time",
        "completed",
        "done",
        "duplicates",
        "expired",
        "finished",
        "lateness_ms",
        "target",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._time: Callable[[], float] = loop.time
        self.done: asyncio.Future[None] = loop.create_future()
        self.target = -1  # set once generation is over and the outcome count is known
        self.finished = 0
        self.completed = 0
        self.expired = 0
        self.duplicates = 0  # an op reported twice: an exactly-once violation
        self.lateness_ms = array("d")  # expiry time minus intended deadline, per expired op

    def on_completed(self) -> None:
        self.completed += 1
        self.finished += 1
        if self.finished == self.target:
            self.done.set_result(None)

    def on_expired(self, deadline_ms: float) -> None:
        self.lateness_ms.append(self._time() * 1000.0 - deadline_ms)
        self.expired += 1
        self.finished += 1
        if self.finished == self.target:
            self.done.set_result(None)

    def on_duplicate(self) -> None:
        self.duplicates += 1

    def expect(self, target: int) -> None:
        """All requests are out: resolve ``done`` when ``target`` outcomes are in."""
        self.target = target
        if self.finished >= target and not self.done.done():
            self.done.set_result(None)
