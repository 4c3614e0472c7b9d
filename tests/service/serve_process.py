"""``purgatory serve`` as a child process on a free loopback port, for the process tests."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile


class Server:
    """``python -m purgatory serve --port 0``; the URL is read from its first line. Its
    stderr (the log) goes to a file, read by :meth:`log`. ``open_files`` lowers the child's
    RLIMIT_NOFILE (soft and hard) before it starts."""

    def __init__(self, *args: str, open_files: int | None = None) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._stderr = tempfile.TemporaryFile("w+")
        self._final_log = ""

        def limit_files() -> None:
            if open_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "purgatory", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
            preexec_fn=limit_files,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            self.stop()
            raise AssertionError(f"server did not start: {line!r} {self.log()!r}")
        self.url = line.split()[-1]
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        self.address = (host, int(port))

    def log(self) -> str:
        if self._stderr.closed:
            return self._final_log
        self._stderr.seek(0)
        return self._stderr.read()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            if not self._stderr.closed:
                self._final_log = self.log()
                self._stderr.close()
