"""A real PostgreSQL server for the bus tests: ``initdb`` + ``postgres`` in a temp dir,
listening on 127.0.0.1 on a free port, ``trust`` auth, stopped by its PID.

PostgreSQL refuses to run as root, and CI runs as root: there the server runs as the
unprivileged ``nobody`` user (its data dir is a temp dir owned by that user).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


def find_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``: on PATH, or Debian's
    /usr/lib/postgresql/<version>/bin (not on PATH there), newest version first."""
    on_path = shutil.which("initdb")
    if on_path is not None:
        directory = Path(on_path).resolve().parent
        if (directory / "postgres").exists():
            return directory
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
        reverse=True,
    )
    for candidate in versions:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "postgres").exists():
            return Path(candidate)
    return None


def _make_root() -> Path:
    # As root the server runs as nobody, who must reach the dir: /tmp, not a TMPDIR that
    # may sit under a root-only home.
    where = "/tmp" if os.geteuid() == 0 and os.path.isdir("/tmp") else None
    return Path(tempfile.mkdtemp(prefix="purgatory-pg-", dir=where))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    """One server; :meth:`kill` and :meth:`start` play a crash and a restart on the same
    port and data dir."""

    binaries: Path
    root: Path = field(default_factory=lambda: _make_root())
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        # As root, run as nobody: chown the temp dir to it (0700 from mkdtemp).
        self._user: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            self._user = pwd.getpwnam("nobody")
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)
        self.data = self.root / "data"
        self.log = self.root / "server.log"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run_as(self) -> dict[str, object]:
        if self._user is None:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}

    def init(self) -> None:
        subprocess.run(
            [
                str(self.binaries / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            check=True,
            capture_output=True,
            timeout=120,
            cwd=self.root,
            **self._run_as(),  # type: ignore[arg-type]
        )

    def start(self, ready_within_s: float = 30.0) -> None:
        """Start the server and wait until it takes connections. After a kill -9 the old
        shared memory may take a moment to be released: retry until the deadline."""
        deadline = time.monotonic() + ready_within_s
        while True:
            with open(self.log, "ab") as log:  # the server inherits its own copy
                self.process = subprocess.Popen(
                    [
                        str(self.binaries / "postgres"),
                        "-D",
                        str(self.data),
                        "-p",
                        str(self.port),
                        "-c",
                        "listen_addresses=127.0.0.1",
                        "-c",
                        f"unix_socket_directories={self.root}",
                        "-c",
                        "fsync=off",
                        "-c",
                        "max_connections=200",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.root,
                    start_new_session=True,  # its own process group: kill() takes the backends too
                    **self._run_as(),  # type: ignore[arg-type]
                )
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break  # exited: retry (a stale lock or shared memory), or give up
                if self._accepts():
                    return
                time.sleep(0.05)
            if time.monotonic() >= deadline:
                self.stop()
                raise RuntimeError(f"postgres did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)

    def _accepts(self) -> bool:
        result = subprocess.run(
            [str(self.binaries / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)],
            check=False,
            timeout=10,
        )
        return result.returncode == 0

    def kill(self) -> None:
        """A crash: SIGKILL the postmaster and every backend (its process group)."""
        if self.process is None:
            return
        group = self.process.pid
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)
        self.process = None
        # the backends, reparented to init, are gone once the group is empty
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)

    def stop(self) -> None:
        """A fast shutdown (SIGINT), then SIGKILL if it lingers."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self.process = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
