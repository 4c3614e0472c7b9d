"""A real redis-server for the tests: on a free 127.0.0.1 port, in a temp dir, no
persistence; stopped (or killed, for outages) by its PID and restartable on the same port."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

REDIS_SERVER = os.environ.get("PURGATORY_REDIS_SERVER", "/usr/bin/redis-server")


def redis_server_binary() -> str:
    """The redis-server to run; fails under CI=true when there is none, skips elsewhere."""
    found = shutil.which(REDIS_SERVER) or shutil.which("redis-server")
    if found is None:
        reason = (
            f"redis-server not found ({REDIS_SERVER}, nor on PATH): apt-get install redis-server"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process; ``start`` again after ``stop``/``kill`` reuses the port."""

    def __init__(self, binary: str, directory: Path, *extra_args: str) -> None:
        self.binary = binary
        self.directory = directory
        self.extra_args = extra_args
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, within_s: float = 10.0) -> None:
        assert self.process is None, "already running"
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.directory),
                "--daemonize", "no",
                "--loglevel", "warning",
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            try:
                if self.command("PING") in ("+PONG", "-NOAUTH Authentication required."):
                    return
            except OSError:
                pass
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"redis-server did not answer PING within {within_s} s")

    def command(self, *args: str) -> str:
        """Send one command, return the first line of its reply (enough for these tests)."""
        request = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(request.encode())
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
        return reply.decode().split("\r\n")[0]

    def stop(self) -> None:
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """kill -9: no goodbye to the clients."""
        self._end(signal.SIGKILL)

    def _end(self, how: signal.Signals) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(how)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
