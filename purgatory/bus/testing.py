"""Throwaway Redis, PostgreSQL and Kafka servers, for testing a multi-process app against
the real thing. Each runs on free loopback ports with its files in a temporary directory,
is stopped by its PID on the way out, and can be killed (SIGKILL) and started again on the
same ports to play an outage::

    with throwaway_redis() as redis:
        ...  # RedisBus(redis.url)
        redis.kill()  # a crash: returns once the port is free
        redis.start()  # the same port; returns once it answers

- :func:`throwaway_redis` yields a :class:`RedisServer` (``.url``; ``.command(*args)``
  sends one command, e.g. ``CONFIG SET``). Extra arguments go to ``redis-server``.
- :func:`throwaway_postgres` yields a :class:`PostgresServer` (``.dsn``, ``trust``
  authentication for the ``postgres`` role, fsync off). Run as root, the server runs as the
  ``postgres`` user (else ``nobody``) in a directory under ``/tmp``: initdb refuses root.
- :func:`throwaway_kafka` yields a :class:`KafkaServer`: ``purgatory serve --kafka-port``
  in a child process (:class:`purgatory.testing.ServeProcess`, which learns the ports the
  server picked from its ready file) with ``brokers`` brokers on consecutive ports
  (``.bootstrap_servers``) and ``topic`` created; its log is in memory, so a restart
  comes back empty: ``start(topic=False)`` then ``create_topic()`` plays a broker that
  lost its topic.

Every server has ``.start()``, ``.kill()``, ``.stop()`` (clean, by PID) and ``.process``;
a server that does not start raises RuntimeError with the end of its log (``.log``).
The binaries come from Debian's ``redis-server`` and ``postgresql`` packages
(:func:`find_binary` looks on PATH, then in ``/usr/lib/postgresql/*/bin``); Kafka needs the
``service`` and ``kafka`` extras. :func:`free_port` gives a port free on 127.0.0.1.
"""

from __future__ import annotations

import abc
import contextlib
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from purgatory.testing import ServeProcess

__all__ = [
    "KafkaServer",
    "LocalServer",
    "PostgresServer",
    "RedisServer",
    "find_binary",
    "free_port",
    "throwaway_kafka",
    "throwaway_postgres",
    "throwaway_redis",
]


def find_binary(name: str, package: str) -> str:
    """``name`` from PATH, else from PostgreSQL's versioned directories (newest first);
    FileNotFoundError naming the Debian package otherwise."""
    found = shutil.which(name)
    if found:
        return found
    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True):
        candidate = Path(directory) / name
        if candidate.is_file():
            return str(candidate)
    raise FileNotFoundError(f"{name} is not installed (Debian: apt-get install {package})")


def _version(binaries: str) -> tuple[int, ...]:
    """(15,) for /usr/lib/postgresql/15/bin, so that 15 sorts above 9.6."""
    name = Path(binaries).parent.name
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive_in_group(group: int) -> bool:
    try:
        os.killpg(group, 0)  # children reparented to init count until it reaps them
    except ProcessLookupError:
        return False
    return True


def _bound(port: int) -> bool:
    """Whether a socket listens on ``port`` (connections closing in TIME_WAIT do not
    count: servers rebind with SO_REUSEADDR)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


class LocalServer(abc.ABC):
    """A server process on 127.0.0.1:``port`` with its files (and its ``server.log``) in
    ``directory``, run as ``user`` (None: as we are), in a process group of its own so that
    :meth:`kill` takes its children too."""

    #: what :meth:`stop` sends for a clean shutdown
    stop_signal = signal.SIGTERM
    #: start again while it exits at once (a restart waiting for resources to be released)
    retry_early_exit = False

    def __init__(self, directory: Path, port: int, user: pwd.struct_passwd | None = None) -> None:
        self.directory = directory
        self.port = port
        self.user = user
        self.log = directory / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def ports(self) -> tuple[int, ...]:
        """Every port it listens on: :meth:`kill` returns once they are all free."""
        return (self.port,)

    @abc.abstractmethod
    def _command(self) -> list[str]: ...

    @abc.abstractmethod
    def _ready(self) -> bool:
        """True once the server answers."""

    def _environment(self) -> dict[str, str] | None:
        return None  # ours

    def _credentials(self) -> tuple[int | None, int | None, list[int] | None]:
        """Popen's user, group and extra_groups: ``user``'s, without root's groups."""
        if self.user is None:
            return None, None, None
        return self.user.pw_uid, self.user.pw_gid, []

    @contextlib.contextmanager
    def running(self) -> Iterator[Self]:
        """Started for the ``with`` block and stopped after it, a failed start included
        (the process may be up but not answering)."""
        try:
            self.start()
            yield self
        finally:
            self.stop()

    def start(self, ready_within_s: float = 30.0) -> None:
        """Start (again, after :meth:`kill` or :meth:`stop`) and wait until it answers."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"{self} is already running")
        deadline = time.monotonic() + ready_within_s
        uid, gid, groups = self._credentials()
        while True:
            with open(self.log, "ab") as log:  # the server keeps its own copy
                self.process = subprocess.Popen(
                    self._command(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.directory,
                    env=self._environment(),
                    start_new_session=True,
                    user=uid,
                    group=gid,
                    extra_groups=groups,
                )
            while time.monotonic() < deadline and self.process.poll() is None:
                if self._ready():
                    return
                time.sleep(0.02)
            if self.process.poll() is None:
                self.kill()
                raise RuntimeError(
                    f"{self} did not answer within {ready_within_s} s:\n{self._log_tail()}"
                )
            if not self.retry_early_exit or time.monotonic() >= deadline:
                raise RuntimeError(
                    f"{self} exited with {self.process.returncode}:\n{self._log_tail()}"
                )
            time.sleep(0.2)

    def kill(self) -> None:
        """A crash: SIGKILL to its process group, no shutdown; returns once every process
        of the group has exited and its ports are free again."""
        if self.process is None:
            return
        group = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        self.process.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if not _alive_in_group(group) and not any(_bound(port) for port in self.ports):
                return
            time.sleep(0.02)

    def stop(self) -> None:
        """A clean shutdown (:attr:`stop_signal` to its PID); :meth:`kill` after 10 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(self.stop_signal)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError as exc:
            return f"(no log: {exc})"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} on 127.0.0.1:{self.port} in {self.directory}>"


class RedisServer(LocalServer):
    """``redis-server`` without persistence; ``args`` are more of its arguments."""

    def __init__(self, directory: Path, port: int, *args: str) -> None:
        super().__init__(directory, port)
        self.args = args

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self, *args: str) -> str:
        """Send one command; the first line of its reply (``+PONG``, ``:1``, ``-ERR ...``)."""
        request = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(request.encode())
            reply = b""
            while b"\r\n" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
        return reply.decode(errors="replace").split("\r\n")[0]

    def _command(self) -> list[str]:
        return [
            find_binary("redis-server", "redis-server"),
            *("--port", str(self.port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", str(self.directory)),
            *("--daemonize", "no", "--loglevel", "warning"),
            *self.args,
        ]

    def _ready(self) -> bool:
        try:
            reply = self.command("PING")
        except OSError:
            return False
        return reply == "+PONG" or reply.startswith("-NOAUTH")  # up, with a password


class PostgresServer(LocalServer):
    """``postgres`` with ``trust`` authentication for the ``postgres`` role, fsync off."""

    stop_signal = signal.SIGINT  # a fast shutdown: SIGTERM waits for clients to leave
    retry_early_exit = True  # after a kill, its shared memory may take a moment to go

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def initdb(self) -> None:
        """Create its database cluster (once, before the first :meth:`start`)."""
        uid, gid, groups = self._credentials()
        subprocess.run(
            [
                find_binary("initdb", "postgresql"),
                *("-D", str(self.directory / "data"), "-U", "postgres", "--auth=trust"),
                *("--no-sync", "-E", "UTF8", "--locale=C"),
            ],
            check=True,
            capture_output=True,
            timeout=120,
            cwd=self.directory,
            user=uid,
            group=gid,
            extra_groups=groups,
        )

    def _command(self) -> list[str]:
        return [
            find_binary("postgres", "postgresql"),
            *("-D", str(self.directory / "data"), "-p", str(self.port)),
            *("-c", "listen_addresses=127.0.0.1"),
            *("-c", f"unix_socket_directories={self.directory}"),
            *("-c", "fsync=off", "-c", "max_connections=200"),
        ]

    def _ready(self) -> bool:
        isready = find_binary("pg_isready", "postgresql")
        answer = subprocess.run(
            [isready, "-q", "-h", "127.0.0.1", "-p", str(self.port)], check=False, timeout=10
        )
        return answer.returncode == 0


class KafkaServer(LocalServer):
    """``purgatory serve`` (run by :class:`purgatory.testing.ServeProcess`): ``brokers``
    Kafka brokers on consecutive ports from ``port``, the HTTP API on ``http_port``,
    ``topic`` with ``partitions`` partitions. Ports 0 (the default) let the server pick
    free ones at its first start (read from its ready file); a restart reuses them."""

    def __init__(
        self,
        directory: Path,
        port: int = 0,
        http_port: int = 0,
        *,
        brokers: int = 3,
        topic: str = "purgatory",
        partitions: int = 3,
    ) -> None:
        super().__init__(directory, port)
        self.http_port = http_port
        self.brokers = brokers
        self.topic = topic
        self.partitions = partitions
        self._with_topic = True
        self._serve: ServeProcess | None = None

    @property
    def kafka_ports(self) -> list[int]:
        return [self.port + broker for broker in range(self.brokers)]

    @property
    def ports(self) -> tuple[int, ...]:
        return (*self.kafka_ports, self.http_port)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.kafka_ports)

    def start(self, ready_within_s: float = 30.0, *, topic: bool = True) -> None:
        """Start with its topic, or with none (``topic=False``: :meth:`create_topic` later),
        and wait for its ready file; :class:`purgatory.testing.ServeNotReady` (a
        RuntimeError) names what did not come up."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"{self} is already running")
        self._with_topic = topic
        self._serve = self._launcher()
        try:
            addresses = self._serve.start(ready_within_s)
        finally:
            self.process = self._serve.process
        self.http_port = addresses.http[0][1]
        self.port = addresses.brokers[min(addresses.brokers)][1]

    def stop(self) -> None:
        """A clean shutdown: SIGTERM to its PID, SIGKILL 10 s later."""
        if self._serve is not None:
            self._serve.stop()

    def create_topic(self, name: str | None = None, partitions: int | None = None) -> None:
        """Create a topic (default: its own) through the HTTP API, replicated on every
        broker."""
        body = {
            "name": self.topic if name is None else name,
            "partitions": self.partitions if partitions is None else partitions,
            "replication_factor": self.brokers,
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}/v1/topics",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            if response.status != 201:
                raise RuntimeError(f"creating {body} answered {response.status}")

    def _launcher(self) -> ServeProcess:
        arguments = [
            *("--log-level", "WARNING", "--port", str(self.http_port)),
            *("--kafka-port", str(self.port), "--brokers", str(self.brokers)),
        ]
        if self._with_topic:
            arguments += ["--topic", f"{self.topic}:{self.partitions}:{self.brokers}"]
        return ServeProcess(*arguments, directory=self.directory, log_path=self.log)

    def _command(self) -> list[str]:
        return self._launcher().command()

    def _ready(self) -> bool:
        return self._serve is not None and self._serve.ready_file.exists()


def _unprivileged_user() -> pwd.struct_passwd | None:
    """Whom to run PostgreSQL as: None unless we are root, which initdb refuses."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        return pwd.getpwnam("nobody")


@contextlib.contextmanager
def throwaway_redis(*args: str) -> Iterator[RedisServer]:
    """A started Redis server (``args``: more ``redis-server`` arguments, e.g.
    ``"--requirepass", "secret"``), stopped and removed on the way out."""
    with tempfile.TemporaryDirectory(prefix="purgatory-redis-") as tmp:
        with RedisServer(Path(tmp), free_port(), *args).running() as server:
            yield server


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[PostgresServer]:
    """A started PostgreSQL server, stopped and removed on the way out."""
    user = _unprivileged_user()
    # run as another user, it must reach its directory: /tmp, not a TMPDIR under a
    # home only root may enter
    where = "/tmp" if user is not None else None
    with tempfile.TemporaryDirectory(prefix="purgatory-pg-", dir=where) as tmp:
        if user is not None:
            os.chown(tmp, user.pw_uid, user.pw_gid)
        server = PostgresServer(Path(tmp), free_port(), user)
        server.initdb()
        with server.running():
            yield server


@contextlib.contextmanager
def throwaway_kafka(
    brokers: int = 3, topic: str = "purgatory", partitions: int = 3
) -> Iterator[KafkaServer]:
    """A started ``purgatory serve`` with ``brokers`` Kafka brokers and ``topic``
    (``partitions`` partitions, on every broker), stopped on the way out."""
    if brokers < 1 or partitions < 1:
        raise ValueError(f"brokers and partitions must be >= 1, not {brokers} and {partitions}")
    with tempfile.TemporaryDirectory(prefix="purgatory-kafka-") as tmp:
        server = KafkaServer(Path(tmp), brokers=brokers, topic=topic, partitions=partitions)
        with server.running():
            yield server
