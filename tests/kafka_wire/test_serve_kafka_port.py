"""``purgatory serve --kafka-port``: the Kafka listeners and the HTTP API share one cluster."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


def _start(*args: str) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "purgatory", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    http = proc.stdout.readline()
    kafka = proc.stdout.readline()
    if not http.startswith("listening on ") or "bootstrap.servers=" not in kafka:
        proc.kill()
        raise AssertionError(f"server did not start: {http!r} {kafka!r}")
    return proc, http.split()[-1], kafka.split("=", 1)[1].strip()


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.asyncio
async def test_kafka_produce_is_fetched_over_http_and_the_reverse() -> None:
    proc, url, bootstrap = _start("--topic", "t:1:3", "--kafka-port", "0")
    try:
        assert len(bootstrap.split(",")) == 3
        async with asyncio.timeout(30):
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
            await producer.start()
            try:
                sent = await producer.send_and_wait("t", b"from-kafka", key=b"k", partition=0)
            finally:
                await producer.stop()
            async with aiohttp.ClientSession() as session:
                fetch = {"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 0}
                async with session.post(url + "/v1/fetch", json=fetch) as response:
                    fetched = await response.json()
                produce = {"topic": "t", "partition": 0, "acks": -1, "records": [{"value": "h"}]}
                async with session.post(url + "/v1/produce", json=produce) as response:
                    produced = await response.json()
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
            await consumer.start()
            try:
                consumer.assign([TopicPartition("t", 0)])
                consumer.seek(TopicPartition("t", 0), 1)
                message = await consumer.getone()
            finally:
                await consumer.stop()
    finally:
        assert _stop(proc) == 0
    assert sent.offset == 0
    assert fetched["records"] == [{"offset": 0, "key": "k", "value": "from-kafka"}]
    assert produced == {"error": None, "base_offset": 1}
    assert (message.offset, message.value) == (1, b"h")


@pytest.mark.asyncio
async def test_bad_input_is_counted_in_the_metrics() -> None:
    proc, url, bootstrap = _start("--kafka-port", "0", "--brokers", "1")
    try:
        host, port = bootstrap.split(":")
        async with asyncio.timeout(30):
            for garbage in (
                b"\xff\xff\xff\xff",
                b"\x00\x00\x00\x0a\x00\x63\x00\x00\x00\x00\x00\x01\xff\xff",
            ):
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(garbage)
                assert await reader.read() == b""  # closed by the server
                writer.close()
            async with aiohttp.ClientSession() as session:
                async with session.get(url + "/metrics") as response:
                    text = await response.text()
    finally:
        assert _stop(proc) == 0
    assert 'purgatory_kafka_bad_input_total{kind="frame size"} 1.0' in text
    assert 'purgatory_kafka_bad_input_total{kind="unknown api key"} 1.0' in text


def test_kafka_port_without_room_for_every_broker_is_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "purgatory", "serve", "--brokers", "3", "--kafka-port", "65535"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--kafka-port" in result.stderr
