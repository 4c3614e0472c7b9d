"""Threshold waits against watcher lists: many waiters on one key, small advances.

``waiters`` callers wait on one key for its value to reach a threshold drawn uniformly from
``1..advances``; the value then goes up by 1, ``advances`` times, and each advance wakes
the waiters it reaches. Two ways, same thresholds, same process:

* ``set_value``: ``wait_for_value(key, threshold, ...)`` and ``set_value(key, v)``;
* ``wait_until``: ``wait_until(lambda: value >= threshold, [key], ...)`` and
  ``check_and_complete(key)`` after each change, which checks every waiter's predicate.

Per trigger: CPU (the trigger itself and the woken callers' return, one loop pass after
each trigger) and checks (conditions evaluated; a waiter's first check, on the way in, is
not a trigger's). ``wait_until`` checks every waiter on every trigger, so it runs only the
first ``baseline_advances`` advances (by default as many as make about 10**7 checks); the
ratio compares both ways over those same first advances.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
from dataclasses import asdict, dataclass
from typing import Final

import purgatory
from purgatory import DelayedOperation, DelayedOperationPurgatory, OperationCancelled
from purgatory._outcomes import OperationRecord
from purgatory.bench.runner import loop_factory
from purgatory.json_types import JsonObject

DEFAULT_WAITERS: Final = 100_000
DEFAULT_ADVANCES: Final = 10_000
#: checks the wait_until baseline may make, when its advances are not given
BASELINE_CHECKS: Final = 10**7
_TIMEOUT_MS: Final = 3_600_000  # nothing expires during a run
_KEY: Final = "hw"


@dataclass(frozen=True, slots=True)
class TriggerCost:
    """One way's cost over ``triggers`` advances."""

    way: str
    triggers: int
    completions: int
    checks: int
    cpu_s: float

    @property
    def completions_per_trigger(self) -> float:
        return self.completions / self.triggers

    @property
    def checks_per_trigger(self) -> float:
        return self.checks / self.triggers

    @property
    def us_per_trigger(self) -> float:
        return self.cpu_s * 1e6 / self.triggers


@dataclass(frozen=True, slots=True)
class ThresholdBenchResult:
    loop: str
    compiled: bool
    waiters: int
    advances: int
    baseline_advances: int
    set_value_all: TriggerCost  # every advance
    set_value: TriggerCost  # the first baseline_advances advances
    wait_until: TriggerCost  # the same first advances

    @property
    def cpu_ratio(self) -> float:
        """wait_until's CPU per trigger over set_value's, over the same advances."""
        return self.wait_until.us_per_trigger / self.set_value.us_per_trigger

    def to_dict(self) -> JsonObject:
        out = asdict(self)
        for name in ("set_value_all", "set_value", "wait_until"):
            cost: TriggerCost = getattr(self, name)
            out[name].update(
                completions_per_trigger=cost.completions_per_trigger,
                checks_per_trigger=cost.checks_per_trigger,
                us_per_trigger=cost.us_per_trigger,
            )
        out["cpu_ratio"] = self.cpu_ratio
        return out


def default_baseline_advances(waiters: int, advances: int) -> int:
    """As many advances as keep the wait_until baseline near :data:`BASELINE_CHECKS`."""
    return max(1, min(advances, BASELINE_CHECKS // max(waiters, 1)))


class _Checks:
    """Conditions evaluated by triggers: the checks of every finished op (from its record)
    and of every pending one, less each op's first check (on the way in)."""

    def __init__(self) -> None:
        self.finished = 0

    def __call__(self, record: OperationRecord) -> None:
        self.finished += record.checks - 1

    def total(self, purgatory: DelayedOperationPurgatory[DelayedOperation]) -> int:
        return self.finished + sum(op.checks - 1 for op in purgatory.pending_operations())


async def _set_value_way(thresholds: list[int], advances: int, measured: int) -> list[TriggerCost]:
    async with DelayedOperationPurgatory[DelayedOperation]("thresholds") as p:
        checks = _Checks()
        p.add_listener(checks)
        tasks = [asyncio.create_task(p.wait_for_value(_KEY, t, _TIMEOUT_MS)) for t in thresholds]
        await asyncio.sleep(0)  # every caller waits
        costs = []
        completed = 0
        set_value = p.set_value
        spent = 0.0
        gc.collect()
        start = time.process_time()
        for value in range(1, advances + 1):
            completed += set_value(_KEY, value)
            await asyncio.sleep(0)  # the callers it woke return
            if value == measured or value == advances:
                spent += time.process_time() - start
                costs.append(TriggerCost("set_value", value, completed, checks.total(p), spent))
                start = time.process_time()  # counting the checks is not charged
        await asyncio.gather(*tasks)
    return costs


async def _wait_until_way(thresholds: list[int], measured: int) -> TriggerCost:
    async with DelayedOperationPurgatory[DelayedOperation]("predicates") as p:
        checks = _Checks()
        p.add_listener(checks)
        state = [0]
        predicates = [(lambda t=t: state[0] >= t) for t in thresholds]
        tasks = [asyncio.create_task(p.wait_until(f, [_KEY], _TIMEOUT_MS)) for f in predicates]
        await asyncio.sleep(0)
        completed = 0
        check_and_complete = p.check_and_complete
        gc.collect()
        start = time.process_time()
        for value in range(1, measured + 1):
            state[0] = value
            completed += await check_and_complete(_KEY)
            await asyncio.sleep(0)
        spent = time.process_time() - start
        cost = TriggerCost("wait_until", measured, completed, checks.total(p), spent)
    for outcome in await asyncio.gather(*tasks, return_exceptions=True):
        if not (outcome is True or isinstance(outcome, OperationCancelled)):
            raise AssertionError(f"a wait_until caller ended with {outcome!r}")
    return cost


def run_threshold_bench(
    loop: str,
    waiters: int = DEFAULT_WAITERS,
    advances: int = DEFAULT_ADVANCES,
    baseline_advances: int | None = None,
    seed: int = 1,
    repeat: int = 1,
) -> ThresholdBenchResult:
    """Both ways on ``loop``, ``repeat`` times each (alternating); each way's least-CPU
    run."""
    measured = (
        default_baseline_advances(waiters, advances)
        if baseline_advances is None
        else min(baseline_advances, advances)
    )
    rng = random.Random(seed)
    thresholds = [rng.randint(1, advances) for _ in range(waiters)]
    ours: list[list[TriggerCost]] = []
    theirs: list[TriggerCost] = []
    for _ in range(repeat):
        with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
            ours.append(runner.run(_set_value_way(thresholds, advances, measured)))
        with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
            theirs.append(runner.run(_wait_until_way(thresholds, measured)))
    best = min(ours, key=lambda costs: costs[-1].cpu_s)
    return ThresholdBenchResult(
        loop=loop,
        compiled=purgatory.COMPILED,
        waiters=waiters,
        advances=advances,
        baseline_advances=measured,
        set_value_all=best[-1],
        set_value=best[0],
        wait_until=min(theirs, key=lambda cost: cost.cpu_s),
    )


def format_thresholds(result: ThresholdBenchResult) -> str:
    build = "compiled" if result.compiled else "pure-Python"
    lines = [
        f"thresholds on {result.loop} ({build} core): {result.waiters:,} waiters on one key, "
        f"thresholds uniform over 1..{result.advances:,}, advances of 1",
        f"{'way':<11} {'triggers':>9} {'completions/trigger':>20} {'checks/trigger':>15} "
        f"{'us/trigger':>11}",
    ]
    for cost in (result.set_value_all, result.set_value, result.wait_until):
        lines.append(
            f"{cost.way:<11} {cost.triggers:>9,} {cost.completions_per_trigger:>20.2f} "
            f"{cost.checks_per_trigger:>15,.2f} {cost.us_per_trigger:>11,.2f}"
        )
    lines.append(
        f"CPU per trigger, wait_until / set_value over the first {result.baseline_advances:,} "
        f"advances: {result.cpu_ratio:,.0f}x"
    )
    return "\n".join(lines)
