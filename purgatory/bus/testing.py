"""Throwaway Redis and PostgreSQL servers, for testing a multi-process app against the
real thing: each runs on a free loopback port in a temporary directory, is stopped by its
PID on the way out, and can be killed (SIGKILL) and started again on the same port to play
an outage::

    with throwaway_redis() as redis:
        ...  # RedisBus(redis.url)
        redis.kill()
        redis.start()

They need the servers' binaries: Debian's ``redis-server`` and ``postgresql`` packages
(``initdb``/``postgres`` are looked up on PATH, then in ``/usr/lib/postgresql/*/bin``).
Run as root, PostgreSQL runs as the ``postgres`` user, else ``nobody`` (initdb refuses root).
"""

from __future__ import annotations

import abc
import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def find_binary(name: str, package: str) -> str:
    """``name`` from PATH, else from PostgreSQL's versioned directories (newest first);
    FileNotFoundError naming the Debian package otherwise."""
    found = shutil.which(name)
    if found:
        return found
    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        candidate = Path(directory) / name
        if candidate.is_file():
            return str(candidate)
    raise FileNotFoundError(f"{name} is not installed (Debian: apt-get install {package})")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalServer(abc.ABC):
    """A server process on 127.0.0.1:``port`` with its files in ``directory``, run as
    ``user`` (None: as we are)."""

    #: what :meth:`stop` sends for a clean shutdown
    stop_signal = signal.SIGTERM

    def __init__(self, directory: Path, port: int, user: pwd.struct_passwd | None = None) -> None:
        self.directory = directory
        self.port = port
        self.user = user
        self.process: subprocess.Popen[bytes] | None = None

    @abc.abstractmethod
    def _command(self) -> list[str]: ...

    @abc.abstractmethod
    def _ready(self) -> bool:
        """True once the server answers."""

    def _as_user(self) -> None:
        """Runs in the child before exec."""
        if self.user is not None:
            os.setgid(self.user.pw_gid)
            os.setuid(self.user.pw_uid)

    def start(self, ready_within_s: float = 30.0) -> None:
        """Start (again, after :meth:`kill`) and wait until it answers."""
        self.process = subprocess.Popen(
            self._command(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=self._as_user,
        )
        deadline = time.monotonic() + ready_within_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self._command()[0]} exited with {self.process.returncode}")
            if self._ready():
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"{self._command()[0]} did not answer within {ready_within_s} s")

    def kill(self) -> None:
        """A crash: SIGKILL, no shutdown; returns once the port is free again."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._port_taken():
            time.sleep(0.02)

    def stop(self) -> None:
        """A clean shutdown (:attr:`stop_signal`; SIGKILL after 10 s)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def _port_taken(self) -> bool:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", self.port))
            except OSError:
                return True
            return False


class RedisServer(LocalServer):
    """``redis-server`` without persistence."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _command(self) -> list[str]:
        return [
            find_binary("redis-server", "redis-server"),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            "--daemonize",
            "no",
        ]

    def _ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


class PostgresServer(LocalServer):
    """``postgres`` with ``trust`` authentication for the ``postgres`` role, fsync off."""

    stop_signal = signal.SIGINT  # a fast shutdown: SIGTERM waits for clients to leave

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def initdb(self) -> None:
        subprocess.run(
            [
                find_binary("initdb", "postgresql"),
                *("-D", str(self.directory / "data"), "-U", "postgres", "-A", "trust"),
            ],
            check=True,
            capture_output=True,
            preexec_fn=self._as_user,
        )

    def _command(self) -> list[str]:
        return [
            find_binary("postgres", "postgresql"),
            *("-D", str(self.directory / "data"), "-p", str(self.port), "-h", "127.0.0.1"),
            *("-k", str(self.directory), "-c", "fsync=off", "-c", "max_connections=200"),
        ]

    def _ready(self) -> bool:
        isready = find_binary("pg_isready", "postgresql")
        answer = subprocess.run(
            [isready, "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True
        )
        return answer.returncode == 0


@contextlib.contextmanager
def throwaway_redis() -> Iterator[RedisServer]:
    """A started Redis server, stopped and removed on the way out."""
    with tempfile.TemporaryDirectory(prefix="purgatory-redis-") as tmp:
        server = RedisServer(Path(tmp), free_port())
        server.start()
        try:
            yield server
        finally:
            server.stop()


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[PostgresServer]:
    """A started PostgreSQL server, stopped and removed on the way out."""
    user = None
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            user = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory(prefix="purgatory-pg-") as tmp:
        if user is not None:
            os.chown(tmp, user.pw_uid, user.pw_gid)
        server = PostgresServer(Path(tmp), free_port(), user)
        server.initdb()
        server.start()
        try:
            yield server
        finally:
            server.stop()
