"""Measure `purgatory serve --kafka-port` with one aiokafka producer (acks=all, 100-byte
records, default batching): records/s, and the broker's and this client's CPU per record.

    python examples/kafka_throughput.py [--records 50000]

Starts the server as a child process on loopback, produces, reads the server's CPU time
from /proc (Linux), and stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time

from aiokafka import AIOKafkaProducer


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def produce(bootstrap: str, records: int) -> float:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        value = b"x" * 100
        await producer.send_and_wait("t", value, partition=0)  # connections and metadata
        start = time.perf_counter()
        futures = [await producer.send("t", value, partition=0) for _ in range(records)]
        await asyncio.gather(*futures)
        return time.perf_counter() - start
    finally:
        await producer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    args = parser.parse_args()
    command = ["serve", "--port", "0", "--kafka-port", "0", "--topic", "t:1:3"]
    server = subprocess.Popen(
        [sys.executable, "-m", "purgatory", *command, "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()
        bootstrap = server.stdout.readline().split("=", 1)[1].strip()
        broker_before = cpu_seconds(server.pid)
        client_before = time.process_time()
        elapsed = asyncio.run(produce(bootstrap, args.records))
        broker_cpu = cpu_seconds(server.pid) - broker_before
        client_cpu = time.process_time() - client_before
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)
    n = args.records
    print(f"records:            {n}")
    print(f"records/s:          {n / elapsed:,.0f}")
    print(f"broker CPU/record:  {broker_cpu / n * 1e6:.1f} us")
    print(f"client CPU/record:  {client_cpu / n * 1e6:.1f} us")


if __name__ == "__main__":
    main()
