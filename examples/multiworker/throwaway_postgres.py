"""A throwaway PostgreSQL server for the example (and its test): ``initdb`` in a temporary
directory, ``postgres`` on a free loopback port, stopped by its PID on the way out.

Needs PostgreSQL's server binaries (Debian: ``apt-get install postgresql``). Run as root,
the server runs as the ``postgres`` user if there is one, else ``nobody`` (initdb refuses
root).
"""

from __future__ import annotations

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
from dataclasses import dataclass
from pathlib import Path


def find_binary(name: str) -> str:
    """``name`` from PATH, else from Debian's versioned directories (newest first)."""
    found = shutil.which(name)
    if found:
        return found
    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        candidate = Path(directory) / name
        if candidate.is_file():
            return str(candidate)
    raise FileNotFoundError(
        f"PostgreSQL's {name} is not installed (Debian: apt-get install postgresql)"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """One server; :meth:`kill` and :meth:`start` play a crash and a restart."""

    data_dir: Path
    port: int
    user: pwd.struct_passwd | None  # whom the server runs as, when we are root
    process: subprocess.Popen[bytes] | None = None

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _demote(self) -> None:
        if self.user is not None:
            os.setgid(self.user.pw_gid)
            os.setuid(self.user.pw_uid)

    def initdb(self) -> None:
        subprocess.run(
            [find_binary("initdb"), "-D", str(self.data_dir), "-U", "postgres", "-A", "trust"],
            check=True,
            capture_output=True,
            preexec_fn=self._demote,
        )

    def start(self, ready_within_s: float = 30.0) -> None:
        self.process = subprocess.Popen(
            [
                find_binary("postgres"),
                "-D",
                str(self.data_dir),
                "-p",
                str(self.port),
                "-h",
                "127.0.0.1",
                "-k",
                str(self.data_dir),
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=self._demote,
        )
        deadline = time.monotonic() + ready_within_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}")
            ready = subprocess.run(
                [find_binary("pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                capture_output=True,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError(f"postgres did not accept connections within {ready_within_s} s")

    def kill(self) -> None:
        """A crash: SIGKILL, no shutdown."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        # Its backends lose their postmaster and exit; wait so the port is free again.
        time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[PostgresServer]:
    """A started server in a temporary directory, stopped and removed on the way out."""
    user = None
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            user = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory(prefix="purgatory-pg-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        if user is not None:
            os.chown(tmp, user.pw_uid, user.pw_gid)
            os.chown(data_dir, user.pw_uid, user.pw_gid)
        server = PostgresServer(data_dir, free_port(), user)
        server.initdb()
        server.start()
        try:
            yield server
        finally:
            server.stop()
