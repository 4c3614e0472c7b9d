"""purgatory: a Kafka-style delayed-operation purgatory for asyncio.

Park operations that cannot finish yet, complete them when the state behind a key changes,
and expire them on time with a hierarchical timing wheel.
"""

from purgatory._clock import Clock, ManualClock, loop_clock_ms
from purgatory._compiled import check_core
from purgatory._operation import DelayedOperation, OperationCancelled, OperationState
from purgatory._outcomes import OperationRecord, PurgatoryStatistics
from purgatory._purgatory import DelayedOperationPurgatory
from purgatory._timer import SystemTimer, TimerStatistics
from purgatory._wheel import TimerCore, TimerTask

__all__ = [
    "COMPILED",
    "Clock",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "ManualClock",
    "OperationCancelled",
    "OperationRecord",
    "OperationState",
    "PurgatoryStatistics",
    "SystemTimer",
    "TimerCore",
    "TimerStatistics",
    "TimerTask",
    "loop_clock_ms",
]

__version__ = "0.1.0"

COMPILED = check_core()
"""True when the core (wheel, timer, operation, purgatory) runs compiled by mypyc."""
