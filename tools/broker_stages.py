"""Where the broker's CPU goes per Produce request: one librdkafka producer against this
tree's `purgatory serve`, the server's request stages counted in thread CPU time.

The server runs in a child process (this script with ``--serve``) that wraps the stages of
a request before serving: each read the transport gives the connection, the wait for the
frame, the frame guard's walk, kio's read, the rest of the dispatch, the Produce handler
(its own code, the framing check and the batches' copy and CRC apart), the response
built, kio's write and the transport's. Each wrapper reads
the thread's CPU clock before and after (about 1 µs a call, against requests of thousands
of records). What no stage holds is the replication (the followers' fetches in the same
process), the purgatory's completions and the event loop. The producer is the one of
``examples/kafka_throughput.py``: ``--warmup`` records first, then ``--records`` counted.

    python tools/broker_stages.py --records 1000000
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Generator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_NS: defaultdict[str, int] = defaultdict(int)
_CALLS: defaultdict[str, int] = defaultdict(int)
_clock = time.thread_time_ns


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = _clock()
        try:
            return fn(*args, **kwargs)
        finally:
            _NS[name] += _clock() - start
            _CALLS[name] += 1

    return wrapper


class _Steps:
    """Awaits a coroutine, counting the CPU of its steps (its code between suspensions)."""

    def __init__(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        self.coro, self.name = coro, name

    def __await__(self) -> Generator[Any, Any, Any]:
        value: Any = None
        error: BaseException | None = None
        while True:
            start = _clock()
            try:
                sent = self.coro.throw(error) if error is not None else self.coro.send(value)
            except StopIteration as stop:
                _NS[self.name] += _clock() - start
                _CALLS[self.name] += 1
                return stop.value
            _NS[self.name] += _clock() - start
            value, error = None, None
            try:
                value = yield sent
            except BaseException as exc:  # thrown into the awaiting task: pass it on
                error = exc


def _stepped(name: str, fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        return await _Steps(fn(*args, **kwargs), name)

    return wrapper


def _instrument() -> None:
    import purgatory.kafka.connections as connections
    import purgatory.kafka.handlers.partitions as partitions
    import purgatory.kafka.record_batches as batches
    import purgatory.kafka.schemas as schemas
    import purgatory.kafka.server as server

    kafka = server.KafkaProtocolServer
    handlers = partitions.PartitionHandlers
    for owner, attribute, name in (
        (schemas, "guard", "guard"),
        (server, "read_request", "read"),
        (server, "encode_response", "encode"),
        (partitions, "respond", "build"),
        (partitions, "split_batches", "split"),
        (batches.WireBatch, "check_framing", "framing"),
        (handlers, "produce", "produce"),
        (kafka, "_dispatch", "dispatch"),
        (connections.Connection, "write", "transport"),
        (connections.Connection, "buffer_updated", "receive"),
    ):
        setattr(owner, attribute, _timed(name, getattr(owner, attribute)))
    for owner, attribute, name in (
        (handlers, "_produce", "produce steps"),
        (handlers, "_append_one", "append steps"),
        (kafka, "_read_frame", "frame"),
    ):
        setattr(owner, attribute, _stepped(name, getattr(owner, attribute)))


def serve(argv: list[str], out: str) -> None:
    """The child: serve with the stages counted; SIGUSR1 appends the counts to ``out``."""
    _instrument()

    def dump(*_: object) -> None:
        counts = {"ns": dict(_NS), "calls": dict(_CALLS), "cpu": time.process_time_ns()}
        with open(out, "a") as file:
            file.write(json.dumps(counts) + "\n")

    signal.signal(signal.SIGUSR1, dump)
    from purgatory.cli import main

    sys.argv = ["purgatory", "serve", *argv]
    main()


def stages(before: dict[str, Any], after: dict[str, Any]) -> tuple[int, dict[str, float]]:
    """The requests between two dumps, and each stage's ns among them."""
    ns = {k: after["ns"][k] - before["ns"].get(k, 0) for k in after["ns"]}
    requests = after["calls"]["read"] - before["calls"].get("read", 0)
    handler = ns["produce"] + ns["produce steps"] - ns["build"] + ns["append steps"]
    table = {
        "receive (each read given to the frame reader)": ns["receive"],
        "frame read (the wait for it)": ns["frame"],
        "guard (frame walk)": ns["guard"],
        "kio read": ns["read"] - ns["guard"],
        "dispatch (rest)": ns["dispatch"] - ns["read"] - ns["produce"],
        "handler: framing check": ns["framing"],
        "handler: batch copy + CRC": ns["split"],
        "handler: the rest (log append, purgatory watch)": handler - ns["framing"] - ns["split"],
        "build (response)": ns["build"],
        "write: kio encode": ns["encode"],
        "write: transport": ns["transport"],
    }
    table["not in a stage: replication, completions, loop"] = (
        after["cpu"] - before["cpu"] - sum(table.values())
    )
    return requests, table


def _mark(server: subprocess.Popen[str]) -> None:
    """The server's counts so far, appended to its file (the loop settled first)."""
    time.sleep(0.3)
    server.send_signal(signal.SIGUSR1)
    time.sleep(0.3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--serve", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, os.environ["BROKER_STAGES_OUT"])
        return
    spec = importlib.util.spec_from_file_location("kt", ROOT / "examples" / "kafka_throughput.py")
    assert spec is not None
    assert spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = Path(tempfile.mkdtemp()) / "stages.jsonl"
    command = [sys.executable, __file__, "--serve", "--port", "0", "--kafka-port", "0"]
    command += ["--topic", "t:1:3", "--log-level", "WARNING"]
    env = {**os.environ, "BROKER_STAGES_OUT": str(out)}
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        bootstrap = ""
        while not bootstrap:
            line = server.stdout.readline()
            if not line:
                raise RuntimeError("the server ended before it listened")
            if line.startswith("kafka bootstrap.servers="):
                bootstrap = line.split("=", 1)[1].strip()
        example.confluent_produce(bootstrap, args.warmup, False)
        _mark(server)
        elapsed = example.confluent_produce(bootstrap, args.records, False)
        _mark(server)
    finally:
        server.terminate()
        server.wait(10)
    before, after = (json.loads(line) for line in out.read_text().splitlines())
    requests, table = stages(before, after)
    total = after["cpu"] - before["cpu"]
    print(
        f"{args.records / elapsed:,.0f} records/s, {requests} requests, "
        f"{args.records / requests:,.0f} records a request; broker CPU "
        f"{total / requests / 1000:,.0f} µs a request, "
        f"{total / args.records / 1000:.3f} µs a record"
    )
    for name, ns in table.items():
        share = f"{100 * ns / total:4.1f}%"
        print(f"  {name:48s} {ns / requests / 1000:7.1f} µs a request  {share}")


if __name__ == "__main__":
    main()
