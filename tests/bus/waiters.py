"""A worker process for the cross-process bus tests: parks waiters, reports their outcomes.

Run as ``python tests/bus/waiters.py SPEC`` where SPEC is JSON:
``{"bus": {"kind": "RedisBus", ...constructor arguments}, "state_dir": DIR,
"keys": [...], "timeout_ms": N, "loop": "asyncio" | "uvloop"}``.

Each key's state is a version in the file ``DIR/<key>`` (a shared store every process can
read while the bus is down). One ``wait_until(version >= 1)`` is parked per key. The process
prints JSON lines on stdout: ``{"event": "parked"}`` once every waiter is parked and the bus
is connected, one ``{"event": "answered", "key", "ok", "ms"}`` per waiter, and
``{"event": "done", "statistics": {...}}`` last.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import purgatory.bus
from purgatory import DelayedOperation, DelayedOperationPurgatory


def say(**event: Any) -> None:
    print(json.dumps(event), flush=True)


def version(state_dir: Path, key: str) -> int:
    try:
        return int((state_dir / key).read_text() or 0)
    except FileNotFoundError:
        return 0


async def main(spec: dict[str, Any]) -> None:
    bus_spec = dict(spec["bus"])
    bus_class = getattr(purgatory.bus, bus_spec.pop("kind"))
    state_dir = Path(spec["state_dir"])
    keys: list[str] = spec["keys"]
    started = time.monotonic()

    async def wait(waiting: DelayedOperationPurgatory[DelayedOperation], key: str) -> None:
        ok = await waiting.wait_until(
            lambda: version(state_dir, key) >= 1, [key], spec["timeout_ms"]
        )
        say(event="answered", key=key, ok=ok, ms=round((time.monotonic() - started) * 1000))

    async with DelayedOperationPurgatory[DelayedOperation]("waiters") as waiting:
        async with bus_class(**bus_spec) as bus:
            bus.attach(waiting)
            waits = [asyncio.create_task(wait(waiting, key)) for key in keys]
            # wait_until has no "parked" callback: poll the watcher count (test-only)
            while waiting.watched < len(keys) and not all(w.done() for w in waits):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            say(event="parked")
            await asyncio.gather(*waits)
            say(event="done", statistics=dataclasses.asdict(bus.statistics()))


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    if spec.get("loop") == "uvloop":
        import uvloop

        uvloop.run(main(spec))
    else:
        asyncio.run(main(spec))
