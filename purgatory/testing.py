"""Test helpers: virtual time for asyncio, and ``purgatory serve`` in a child process.

Virtual time runs minutes of timers in milliseconds, deterministically.
``VirtualTimeLoop`` is an ordinary selector event loop whose ``time()`` is virtual. When
nothing is ready to run and no I/O is pending, it jumps straight to the next scheduled
timer instead of sleeping (trio's MockClock with autojump, for asyncio). Everything that
reads ``loop.time()``, the purgatory's default clock included, sees the jump.

    purgatory.testing.run_virtual(main())

:class:`ServeProcess` is the one owner of a running ``purgatory serve``: it starts it on
free ports, learns its addresses from its ready file (:class:`ServeAddresses`), waits for
it with a timeout that names what did not come up, stops it by PID and keeps its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from purgatory.json_types import Json

__all__ = [
    "ServeAddresses",
    "ServeNotReady",
    "ServeProcess",
    "VirtualTimeLoop",
    "run_virtual",
    "virtual_loop_factory",
]

T = TypeVar("T")


class _AutojumpSelector:
    """Wraps the loop's selector: a select() that would block advances virtual time."""

    def __init__(self, loop: VirtualTimeLoop, selector: selectors.BaseSelector) -> None:
        self._loop = loop
        self._selector = selector

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = self._selector.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:  # no timer at all: only real I/O or another thread can wake us
            return self._selector.select(None)
        self._loop._jump(timeout)
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._selector, name)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time that never sleeps while a timer is pending."""

    def __init__(self, start: float = 0.0) -> None:
        super().__init__()
        self._virtual_now = float(start)
        real: selectors.BaseSelector = self._selector  # type: ignore[has-type]
        self._selector = _AutojumpSelector(self, real)

    def time(self) -> float:
        return self._virtual_now

    def _jump(self, timeout: float) -> None:
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        # Land exactly on the next timer's instant: now + timeout may round just short of it.
        target = scheduled[0].when() if scheduled else self._virtual_now + timeout
        self._virtual_now = max(self._virtual_now, target)

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by hand (timers due by then run on the next turn)."""
        if not seconds >= 0:
            raise ValueError(f"virtual time cannot move backwards (advance by {seconds!r})")
        self._virtual_now += seconds


def virtual_loop_factory() -> asyncio.AbstractEventLoop:
    """A new :class:`VirtualTimeLoop`: a ``loop_factory`` for ``asyncio.Runner`` or
    ``asyncio.run``."""
    return VirtualTimeLoop()


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh :class:`VirtualTimeLoop`."""
    with asyncio.Runner(loop_factory=virtual_loop_factory) as runner:
        return runner.run(main)


class ServeNotReady(RuntimeError):
    """``purgatory serve`` exited or timed out before its ready file said it was up; the
    message names what did not come up and ends with the tail of its log."""


@dataclass(frozen=True)
class ServeAddresses:
    """What a running ``purgatory serve`` bound, as its ready file says (the format is in
    docs/serve.md): ``url`` and ``http`` (every HTTP listener's (host, port)); with Kafka,
    ``bootstrap_servers`` and ``brokers`` (broker id -> (host, port)), else None and empty.
    ``document`` is the whole file, for keys a later server adds."""

    pid: int
    url: str
    http: tuple[tuple[str, int], ...]
    bootstrap_servers: str | None
    brokers: Mapping[int, tuple[str, int]]
    document: Mapping[str, Json]

    @classmethod
    def parse(cls, text: str) -> ServeAddresses:
        """From a ready file's text; ValueError if it is not one this reader knows."""
        document = json.loads(text)
        if not isinstance(document, dict) or document.get("version") != READY_FILE_VERSION:
            raise ValueError(f"not a version {READY_FILE_VERSION} ready file: {text[:200]!r}")
        kafka = document.get("kafka")
        brokers = (
            {}
            if kafka is None
            else {int(b["id"]): (str(b["host"]), int(b["port"])) for b in kafka["brokers"]}
        )
        return cls(
            pid=int(document["pid"]),
            url=str(document["http"]["url"]),
            http=tuple((str(a["host"]), int(a["port"])) for a in document["http"]["addresses"]),
            bootstrap_servers=None if kafka is None else str(kafka["bootstrap_servers"]),
            brokers=brokers,
            document=document,
        )


#: the ready file format :class:`ServeAddresses` reads (``purgatory serve`` writes it)
READY_FILE_VERSION = 1


class ServeProcess:
    """``purgatory serve ARGS`` in a child process, on free ports, for tests, examples and
    benchmarks::

        with ServeProcess("--kafka-port", "0", "--topic", "t:1:3") as server:
            server.url, server.bootstrap_servers  # what it bound

    It runs ``python -m purgatory serve --port 0 ARGS --ready-file DIR/ready.json`` (a
    ``--port`` in ``ARGS`` wins; ``--kafka-port 0`` puts broker i on the first free port
    + i) and learns its addresses from the ready file, which the server writes once every
    listener is up: no port is picked here, nothing is read from its output.
    :meth:`start` waits for it, at most ``timeout_s``, and raises :class:`ServeNotReady`
    naming what did not come up, with the tail of the log. :meth:`stop` sends SIGTERM to
    its PID, then SIGKILL after ``grace_s``. Its stdout and stderr go to ``log_path``
    (default: ``DIR/serve.log``), appended to across restarts and kept after it stops.
    ``directory`` defaults to a new temporary directory, left in place for its log;
    ``open_files`` lowers the child's RLIMIT_NOFILE; ``env`` adds to the environment."""

    def __init__(
        self,
        *args: str,
        directory: str | os.PathLike[str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        open_files: int | None = None,
    ) -> None:
        self.args = tuple(args)
        if directory is None:
            directory = tempfile.mkdtemp(prefix="purgatory-serve-")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.log_path = self.directory / "serve.log" if log_path is None else Path(log_path)
        self.ready_file = self.directory / "ready.json"
        self.process: subprocess.Popen[bytes] | None = None
        self._env = dict(env or {})
        self._open_files = open_files
        self._addresses: ServeAddresses | None = None

    def command(self) -> list[str]:
        return [
            *(sys.executable, "-m", "purgatory", "serve", "--port", "0", *self.args),
            *("--ready-file", str(self.ready_file)),
        ]

    def start(self, timeout_s: float = 30.0) -> ServeAddresses:
        """Start it (again, after :meth:`stop` or :meth:`kill`) and wait until its ready
        file is written; its addresses. On a timeout it is killed."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        self._addresses = None
        self.ready_file.unlink(missing_ok=True)
        limit = self._open_files

        def lower_limit() -> None:
            import resource  # Unix only

            if limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._environment(),
                start_new_session=True,  # a ^C meant for the parent is not for it
                preexec_fn=None if limit is None else lower_limit,
            )
        deadline = time.monotonic() + timeout_s
        while True:
            addresses = self._read_ready_file()
            if addresses is not None:
                self._addresses = addresses
                return addresses
            status = self.process.poll()
            if status is not None:
                raise ServeNotReady(self._not_ready(f"exited with status {status}"))
            if time.monotonic() >= deadline:
                self.kill()
                raise ServeNotReady(self._not_ready(f"was not ready within {timeout_s} s"))
            time.sleep(0.01)

    def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM to its PID; SIGKILL if it has not exited ``grace_s`` later. Its exit
        status (negative: the signal that ended it), None if never started."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                return self.kill()
        return self.process.returncode

    def kill(self) -> int | None:
        """A crash: SIGKILL to its PID, no shutdown (the ready file stays, stale, until
        the next :meth:`start`); its exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
        return self.process.returncode

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"{self!r} was never started")
        return self.process.pid

    @property
    def addresses(self) -> ServeAddresses:
        """What it bound, from its ready file (RuntimeError before it is ready)."""
        if self._addresses is None:
            raise RuntimeError(f"{self!r} is not ready: start() it")
        return self._addresses

    @property
    def url(self) -> str:
        """Its HTTP API, ``http://HOST:PORT``."""
        return self.addresses.url

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of its Kafka brokers (RuntimeError without ``--kafka-port``)."""
        bootstrap = self.addresses.bootstrap_servers
        if bootstrap is None:
            raise RuntimeError(f"{self!r} serves no Kafka: pass --kafka-port 0")
        return bootstrap

    def log(self) -> str:
        """Everything it wrote to stdout and stderr so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> ServeProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        pid = "not started" if self.process is None else f"pid {self.process.pid}"
        return f"<ServeProcess {' '.join(self.args)!r} ({pid}), log {self.log_path}>"

    def _read_ready_file(self) -> ServeAddresses | None:
        try:
            text = self.ready_file.read_text()
        except FileNotFoundError:
            return None
        return ServeAddresses.parse(text)  # written by rename: whole, or not there

    def _environment(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self._env}
        # the child imports the purgatory we run, installed or not
        root = str(Path(__file__).resolve().parent.parent)
        if Path(root).name not in ("site-packages", "dist-packages"):
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        return env

    def _expected(self) -> str:
        """The listeners its ready file waits for, from its arguments."""
        kafka = _flag(self.args, "--kafka-port")
        if kafka is None:
            return "the HTTP listener"
        brokers = _flag(self.args, "--brokers") or "3"
        return f"the HTTP listener and the Kafka listeners of {brokers} brokers"

    def _not_ready(self, why: str) -> str:
        tail = self.log()[-2000:] or "(empty)\n"
        return (
            f"purgatory serve (pid {self.pid}) {why}: {self._expected()} did not all come up "
            f"(no ready file at {self.ready_file}). Its log, {self.log_path}, ends:\n{tail}"
        )


def _flag(args: tuple[str, ...], name: str) -> str | None:
    """The last value given to ``name`` in ``args`` (``NAME VALUE`` or ``NAME=VALUE``)."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value
