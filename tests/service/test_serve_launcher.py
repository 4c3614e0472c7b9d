"""``purgatory serve --ready-file`` and :class:`purgatory.testing.ServeProcess`, the one
owner of a running server: free ports, addresses from the ready file, a timeout that names
what did not come up, stop by PID, the log kept."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from purgatory.service import ready_file
from purgatory.testing import READY_FILE_VERSION, ServeAddresses, ServeNotReady, ServeProcess


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def test_the_ready_file_names_every_listener_and_each_accepts(tmp_path: Path) -> None:
    with ServeProcess(
        "--kafka-port", "0", "--brokers", "2", "--topic", "t:1:2", directory=tmp_path
    ) as server:
        document = json.loads(server.ready_file.read_text())
        addresses = server.addresses
        assert document["version"] == READY_FILE_VERSION == ready_file.READY_FILE_VERSION
        assert document["pid"] == addresses.pid == server.pid
        [(host, port)] = addresses.http
        assert document["http"] == {
            "url": f"http://{host}:{port}",
            "addresses": [{"host": host, "port": port}],
        }
        assert server.url == f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(server.url + "/healthz", timeout=5) as response:
            assert response.status == 200
        brokers = document["kafka"]["brokers"]
        assert [b["id"] for b in brokers] == [0, 1]
        first = brokers[0]["port"]
        assert [b["port"] for b in brokers] == [first, first + 1]  # --kafka-port 0: in a row
        assert document["kafka"]["bootstrap_servers"] == server.bootstrap_servers
        assert server.bootstrap_servers == f"127.0.0.1:{first},127.0.0.1:{first + 1}"
        assert addresses.brokers == {0: ("127.0.0.1", first), 1: ("127.0.0.1", first + 1)}
        assert all(_accepts(*address) for address in addresses.brokers.values())
    assert server.process is not None
    assert server.process.returncode == 0
    assert not server.ready_file.exists()  # removed at shutdown
    assert "shutting down" in server.log()


def test_without_kafka_the_ready_file_says_none(tmp_path: Path) -> None:
    with ServeProcess(directory=tmp_path) as server:
        assert json.loads(server.ready_file.read_text())["kafka"] is None
        assert server.addresses.bootstrap_servers is None
        with pytest.raises(RuntimeError, match="--kafka-port"):
            _ = server.bootstrap_servers


def test_the_ready_file_is_written_only_once_every_listener_is_up(tmp_path: Path) -> None:
    """Watched from the moment the process starts: the file appears whole, and every
    address in it accepts connections at once."""
    ready = tmp_path / "ready.json"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "purgatory", "serve", "--port", "0", "--kafka-port", "0"),
            *("--ready-file", str(ready), "--log-level", "WARNING"),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert process.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.001)
        addresses = ServeAddresses.parse(ready.read_text())
        assert _accepts(*addresses.http[0])
        assert len(addresses.brokers) == 3
        assert all(_accepts(*address) for address in addresses.brokers.values())
        assert [p.name for p in tmp_path.iterdir()] == ["ready.json"]  # no temporary left
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
    assert not ready.exists()


def test_a_server_that_cannot_listen_writes_no_ready_file_and_the_error_says_so(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = ServeProcess("--port", str(port), directory=tmp_path)
        with pytest.raises(ServeNotReady) as raised:
            server.start()
    message = str(raised.value)
    assert "exited with status 1" in message
    assert "the HTTP listener did not all come up" in message
    assert str(server.log_path) in message
    assert "address already in use" in message.lower()  # the tail of its log
    assert not server.ready_file.exists()


def test_a_timeout_names_what_did_not_come_up_and_kills_it(tmp_path: Path) -> None:
    server = ServeProcess("--kafka-port", "0", "--brokers", "2", directory=tmp_path)
    with pytest.raises(ServeNotReady) as raised:
        server.start(timeout_s=0.0)
    message = str(raised.value)
    assert "was not ready within 0.0 s" in message
    assert "the HTTP listener and the Kafka listeners of 2 brokers" in message
    assert f"no ready file at {server.ready_file}" in message
    assert not server.running
    assert server.process is not None
    assert server.process.returncode == -signal.SIGKILL


def test_stop_sends_sigterm_then_sigkill_by_pid_and_keeps_the_log(tmp_path: Path) -> None:
    log = tmp_path / "elsewhere.log"
    server = ServeProcess(directory=tmp_path / "run", log_path=log)
    server.start()
    pid = server.pid
    os.kill(pid, signal.SIGSTOP)  # deaf to SIGTERM until killed
    started = time.monotonic()
    assert server.stop(grace_s=0.5) == -signal.SIGKILL
    assert 0.5 <= time.monotonic() - started < 5
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone and reaped
    assert "listening on http://127.0.0.1:" in log.read_text() == server.log()

    server.start()  # again, on a new free port; the log is appended to
    assert server.pid != pid
    assert server.stop() == 0
    assert log.read_text().count("listening on") == 2
    assert server.stop() == 0  # stopped already: its status
