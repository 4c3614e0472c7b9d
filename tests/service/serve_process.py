"""``purgatory serve`` as a child process on a free loopback port, for the process tests:
:class:`purgatory.testing.ServeProcess`, started at once, its files removed when stopped."""

from __future__ import annotations

import shutil
import subprocess

from purgatory.testing import ServeProcess


class Server(ServeProcess):
    """A started :class:`ServeProcess` with ``.url``, ``.address`` (its HTTP listener's
    (host, port)) and ``.proc``; :meth:`log` still reads the log after :meth:`stop`, which
    removes its directory. ``open_files`` lowers the child's RLIMIT_NOFILE (soft and hard)
    before it starts."""

    def __init__(self, *args: str, open_files: int | None = None) -> None:
        super().__init__(*args, open_files=open_files)
        self._final_log: str | None = None
        try:
            addresses = self.start()
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self.address = addresses.http[0]

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        assert self.process is not None
        return self.process

    def log(self) -> str:
        return super().log() if self._final_log is None else self._final_log

    def stop(self, grace_s: float = 10.0) -> int | None:
        try:
            return super().stop(grace_s)
        finally:
            if self._final_log is None:
                self._final_log = super().log()
                shutil.rmtree(self.directory, ignore_errors=True)
