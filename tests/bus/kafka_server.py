"""A real Kafka broker for the KafkaBus tests: ``purgatory serve --kafka-port`` in a
subprocess on fixed free 127.0.0.1 ports, so that it can be killed and started again where
the buses left it (its log is in memory: a restart loses every record and the topic)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from contextlib import ExitStack

import pytest

BROKERS = 3
TOPIC = "purgatory"
PARTITIONS = 3


def require_kafka_client() -> None:
    """Skip (fail under CI=true) when aiokafka or the service's aiohttp is missing."""
    for module in ("aiokafka", "aiohttp"):
        try:
            __import__(module)
        except ImportError:
            reason = f"{module} is not installed (pip install 'purgatory-aio[kafka,service]')"
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)


def _free_ports(count: int) -> list[int]:
    """``count`` consecutive free ports (broker i listens on KAFKA_PORT + i)."""
    for _ in range(50):
        with ExitStack() as held:
            first = socket.socket()
            held.callback(first.close)
            first.bind(("127.0.0.1", 0))
            ports = [first.getsockname()[1]]
            try:
                for port in range(ports[0] + 1, ports[0] + count):
                    sock = socket.socket()
                    held.callback(sock.close)
                    sock.bind(("127.0.0.1", port))
                    ports.append(port)
            except OSError:
                continue
            return ports
    raise RuntimeError(f"no {count} consecutive free ports")


class KafkaServer:
    """``purgatory serve`` on the same ports across restarts."""

    def __init__(self) -> None:
        self.http_port = _free_ports(1)[0]
        self.kafka_ports = _free_ports(BROKERS)
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.kafka_ports)
        self.process: subprocess.Popen[str] | None = None

    def start(self, *, topic: bool = True) -> None:
        """Start the server (with the bus's topic unless ``topic=False``); return once
        it listens."""
        assert self.process is None, "already running"
        command = [
            sys.executable,
            "-m",
            "purgatory",
            "serve",
            "--port",
            str(self.http_port),
            "--kafka-port",
            str(self.kafka_ports[0]),
            "--brokers",
            str(BROKERS),
            "--log-level",
            "WARNING",
        ]
        if topic:
            command += ["--topic", f"{TOPIC}:{PARTITIONS}:{BROKERS}"]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert self.process.stdout is not None
        for _ in range(2):
            line = self.process.stdout.readline()
            if line.startswith("kafka bootstrap.servers="):
                return
        self.kill()
        raise AssertionError("purgatory serve did not start (see its stderr above)")

    def create_topic(self, name: str = TOPIC, partitions: int = PARTITIONS) -> None:
        body = {"name": name, "partitions": partitions, "replication_factor": BROKERS}
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}/v1/topics",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 201, response.read()

    def kill(self) -> None:
        """kill -9: no goodbye to any client."""
        if self.process is not None:
            self.process.kill()
            self._reap()

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
            self._reap()

    def _reap(self) -> None:
        assert self.process is not None
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None
