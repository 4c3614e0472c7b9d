"""A live progress line fed by Spark's status tracker.

A daemon thread polls ``statusTracker()`` and rewrites one line on a TTY; on a pipe or a
log file it prints a plain line at most every ``plain_interval`` seconds, and only when
something changed, so that CI logs stay readable.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Progress:
    """Context manager showing the current step and Spark stage progress on ``stream``."""

    def __init__(
        self,
        spark: SparkSession,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        poll_interval: float = 0.5,
        plain_interval: float = 10.0,
    ) -> None:
        self._spark = spark
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = enabled
        self._tty = enabled and self._stream.isatty()
        self._poll = poll_interval
        self._plain_interval = plain_interval
        self._step = "starting"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()
        self._width = 0

    def step(self, name: str) -> None:
        """Name the phase now running; also shown as the Spark job description (UI)."""
        self._step = name
        self._spark.sparkContext.setJobDescription(name)
        if self._enabled and not self._tty:
            self._emit(f"[analyze {self._elapsed():6.1f}s] {name}")

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def status(self) -> str:
        """One line: step, active stages with tasks done/total, elapsed time."""
        tracker = self._spark.sparkContext.statusTracker()
        parts = []
        for stage_id in sorted(tracker.getActiveStageIds()):
            info = tracker.getStageInfo(stage_id)
            if info is None:
                continue
            parts.append(
                f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks"
                f" ({info.numActiveTasks} running)"
            )
        stages = "; ".join(parts) if parts else "no active stage"
        return f"[analyze {self._elapsed():6.1f}s] {self._step} | {stages}"

    def _emit(self, line: str) -> None:
        if self._tty:
            pad = max(0, self._width - len(line))
            self._stream.write("\r" + line + " " * pad)
            self._width = len(line)
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def _run(self) -> None:
        last_line = ""
        last_plain = 0.0
        while not self._stop.wait(self._poll):
            try:
                line = self.status()
            except Exception:  # the JVM may be shutting down; progress is best effort
                return
            if self._tty:
                self._emit(line)
            elif line != last_line and time.monotonic() - last_plain >= self._plain_interval:
                self._emit(line)
                last_plain = time.monotonic()
            last_line = line

    def __enter__(self) -> Progress:
        if self._enabled:
            self._thread = threading.Thread(target=self._run, name="analyze-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._tty and self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
        self._spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
