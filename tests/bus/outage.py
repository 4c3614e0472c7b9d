"""The parent side of the cross-process bus tests: start waiter processes, change the
shared state, collect what each waiter was answered. Used by every backend's outage test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WAITERS = Path(__file__).with_name("waiters.py")


@dataclass
class WaiterProcess:
    """One process with its waiters; its stdout is read line by line."""

    process: subprocess.Popen[str]
    keys: list[str]
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    statistics: dict[str, Any] | None = None

    def read_until(self, event: str, deadline: float) -> None:
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(
                    f"waiter process exited ({self.process.wait()}) before {event!r}"
                )
            message = json.loads(line)
            if message["event"] == "answered":
                self.answers[message["key"]] = message
            elif message["event"] == "done":
                self.statistics = message["statistics"]
            if message["event"] == event:
                return
        raise AssertionError(f"no {event!r} from the waiter process in time")


@contextmanager
def waiter_processes(
    bus: dict[str, Any],
    state_dir: Path,
    keys_per_process: list[list[str]],
    *,
    timeout_ms: int = 60_000,
    loop: str = "asyncio",
    ready_within_s: float = 30.0,
) -> Iterator[list[WaiterProcess]]:
    """Start one process per key list, each parked on its keys once this yields; kill any
    still running on the way out."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    processes: list[WaiterProcess] = []
    try:
        for keys in keys_per_process:
            spec = {
                "bus": bus,
                "state_dir": str(state_dir),
                "keys": keys,
                "timeout_ms": timeout_ms,
                "loop": loop,
            }
            popen = subprocess.Popen(
                [sys.executable, str(WAITERS), json.dumps(spec)],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            processes.append(WaiterProcess(popen, keys))
        deadline = time.monotonic() + ready_within_s
        for process in processes:
            process.read_until("parked", deadline)
        yield processes
    finally:
        for process in processes:
            if process.process.poll() is None:
                process.process.kill()
            process.process.wait()
            if process.process.stdout is not None:
                process.process.stdout.close()


def set_versions(state_dir: Path, keys: list[str], version: int = 1) -> None:
    for key in keys:
        (state_dir / key).write_text(str(version))


def collect(processes: list[WaiterProcess], within_s: float) -> float:
    """Wait for every process to report all its waiters; return the seconds it took.
    Fails if any waiter timed out or was not answered in time."""
    started = time.monotonic()
    deadline = started + within_s
    for process in processes:
        process.read_until("done", deadline)
        process.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        assert process.process.returncode == 0
        missing = [k for k in process.keys if not process.answers.get(k, {}).get("ok")]
        assert not missing, f"waiters not woken: {missing[:5]} (of {len(missing)})"
    return time.monotonic() - started
