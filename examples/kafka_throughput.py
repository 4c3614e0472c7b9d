"""Measure `purgatory serve --kafka-port` with one producer (acks=all, 100-byte records
unless ``--record-bytes`` says, one partition of replication factor 3): records/s, and
the broker's and this client's CPU per record; with ``--consume``, one consumer reading
them back; then the wake-up latency of a parked consumer fetch (produce sent -> record
received), p50 and p99, over the Kafka protocol (aiokafka) and over the HTTP long poll.

    python examples/kafka_throughput.py [--client aiokafka|confluent] [--records 50000]
        [--idempotence] [--transactional N | --commit-interval-ms MS] [--record-bytes B]
        [--consume] [--wakeups 200] [--replica-rtt-ms MS] [--warmup 1000] [--ssl]
        [--max-stored-bytes BYTES]
    python examples/kafka_throughput.py --librdkafka-mock [--records 500000]
        [--idempotence] [--transactional N | --commit-interval-ms MS] [--record-bytes B]

``--client aiokafka`` (the default) produces with aiokafka's default batching; ``--client
confluent`` with librdkafka (confluent-kafka, ``linger.ms=5``) and consumes with it.
``--transactional N`` (confluent) then produces as many records again, to a topic of their
own, with a transactional producer that commits every N records (``--commit-interval-ms``:
every MS milliseconds, as Kafka's own figure for transactions is taken), and with ``--consume``
reads those back read_committed and read_uncommitted. Starts the server as a child process
on loopback (``purgatory.testing.ServeProcess``: its log is kept in a temporary
directory), produces, reads the server's CPU time from /proc (Linux), and stops it.
``--ssl`` serves and connects over the SSL listeners instead (``--kafka-ssl-port``; the
clients trust the server's CA from its ready file). ``--librdkafka-mock`` runs the same
librdkafka producer against librdkafka's own in-process mock cluster instead
(``test.mock.num.brokers=3``; partition 0 of a topic of replication factor 3): the same
figures, its brokers' CPU counted in this process's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import time
from typing import Any

import aiohttp
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from purgatory.percentiles import percentile
from purgatory.testing import ServeProcess

#: the clients' security settings: empty over plaintext; with ``--ssl``, the server's CA
CONFLUENT_SECURITY: dict[str, object] = {}
AIOKAFKA_SECURITY: dict[str, Any] = {}


def use_ssl(ca_file: str) -> None:
    CONFLUENT_SECURITY.update({"security.protocol": "SSL", "ssl.ca.location": ca_file})
    context = ssl.create_default_context(cafile=ca_file)
    AIOKAFKA_SECURITY.update({"security_protocol": "SSL", "ssl_context": context})


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def produce(bootstrap: str, records: int, size: int = 100) -> float:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **AIOKAFKA_SECURITY)
    await producer.start()
    try:
        value = b"x" * size
        await producer.send_and_wait("t", value, partition=0)  # connections and metadata
        start = time.perf_counter()
        futures = [await producer.send("t", value, partition=0) for _ in range(records)]
        await asyncio.gather(*futures)
        return time.perf_counter() - start
    finally:
        await producer.stop()


def confluent_produce(
    bootstrap: str,
    records: int,
    idempotence: bool,
    topic: str = "t",
    transaction: Commits | None = None,
    size: int = 100,
) -> float:
    """Seconds one librdkafka producer takes for ``records`` of ``size`` bytes; with
    ``transaction``, a transactional one (idempotent too) committing as it says (its
    InitProducerId is not timed: a warm-up produces first)."""
    from confluent_kafka import KafkaException, Producer

    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "enable.idempotence": idempotence,
        "message.timeout.ms": 30_000,  # a refused record fails instead of retrying on
        **CONFLUENT_SECURITY,
    }
    if transaction:
        config["transactional.id"] = f"throughput-{topic}"
    producer = Producer(config)
    if transaction:
        producer.init_transactions(30)
        producer.begin_transaction()
    failed: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failed.append(error)

    value = b"x" * size
    producer.produce(topic, value, partition=0, on_delivery=delivered)  # connections, metadata
    producer.flush(30)
    start = began = time.perf_counter()
    for i in range(records):
        if transaction and i and transaction.due(i, began):
            producer.commit_transaction(60)  # waits for every record of it, then the commit
            producer.begin_transaction()
            began = time.perf_counter()
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=delivered)
                break
            except BufferError:  # the client's queue is full: let deliveries drain it
                producer.poll(0.001)
    if transaction:
        producer.commit_transaction(60)
    elif producer.flush(60):
        raise KafkaException("records still undelivered after 60 s")
    elapsed = time.perf_counter() - start
    if failed:
        raise KafkaException(f"{len(failed)} records failed, first: {failed[0]}")
    return elapsed


async def aiokafka_consume(bootstrap: str, records: int) -> float:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, **AIOKAFKA_SECURITY
    )
    await consumer.start()
    try:
        tp = TopicPartition("t", 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        start = time.perf_counter()
        got = 0
        while got < records:
            batches = await consumer.getmany(tp, timeout_ms=1000, max_records=100_000)
            got += sum(len(messages) for messages in batches.values())
        return time.perf_counter() - start
    finally:
        await consumer.stop()


def confluent_consume(
    bootstrap: str, records: int, topic: str = "t", isolation: str = "read_uncommitted"
) -> float:
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka import TopicPartition as Tp

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "throughput",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            # librdkafka stops fetching for a second (its default) whenever its queue of
            # 100,000 records is full, which a broker faster than this loop fills: that
            # measures the pause, not the broker
            "fetch.queue.backoff.ms": 10,
            **CONFLUENT_SECURITY,
        }
    )
    try:
        consumer.assign([Tp(topic, 0, 0)])
        start = time.perf_counter()
        got = 0
        while got < records:
            # never more than are left: consume() waits its whole timeout for the rest
            messages = consumer.consume(min(10_000, records - got), 1.0)
            for message in messages:
                if message.error() is not None:
                    raise KafkaException(message.error())
            got += len(messages)
        return time.perf_counter() - start
    finally:
        consumer.close()


async def kafka_wakeups(bootstrap: str, rounds: int) -> list[float]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=0, **AIOKAFKA_SECURITY
    )
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=5000,
        **AIOKAFKA_SECURITY,
    )
    await producer.start()
    await consumer.start()
    latencies = []
    try:
        tp = TopicPartition("w", 0)
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        for _ in range(rounds):
            waiting = asyncio.ensure_future(consumer.getone())
            await asyncio.sleep(0.02)  # let the fetch park
            start = time.perf_counter()
            await producer.send("w", b"x", partition=0)
            await waiting
            latencies.append(time.perf_counter() - start)
    finally:
        await consumer.stop()
        await producer.stop()
    return latencies


async def http_wakeups(url: str, rounds: int) -> list[float]:
    latencies = []
    async with aiohttp.ClientSession() as session:
        async with session.post(
            url + "/v1/produce",
            json={"topic": "h", "partition": 0, "acks": 1, "records": [{"value": "x"}]},
        ) as response:
            offset: int = (await response.json())["base_offset"] + 1
        for _ in range(rounds):
            fetch = {"topic": "h", "partition": 0, "offset": offset, "max_wait_ms": 5000}
            waiting = asyncio.ensure_future(session.post(url + "/v1/fetch", json=fetch))
            await asyncio.sleep(0.02)
            start = time.perf_counter()
            produce = {"topic": "h", "partition": 0, "acks": 1, "records": [{"value": "x"}]}
            async with session.post(url + "/v1/produce", json=produce) as response:
                await response.read()
            async with await waiting as response:
                assert (await response.json())["records"]
            latencies.append(time.perf_counter() - start)
            offset += 1
    return latencies


class Commits:
    """When a transactional producer commits: every ``records`` records, or (with
    ``interval_ms``) once that long has passed since its transaction began."""

    def __init__(self, records: int = 0, interval_ms: float = 0.0) -> None:
        self.records = records
        self.interval_ms = interval_ms

    def __bool__(self) -> bool:
        return bool(self.records or self.interval_ms)

    def due(self, produced: int, began: float) -> bool:
        if self.interval_ms:
            return (time.perf_counter() - began) * 1000 >= self.interval_ms
        return produced % self.records == 0

    def __str__(self) -> str:
        return f"every {self.interval_ms:g} ms" if self.interval_ms else f"of {self.records}"


def summary(name: str, latencies: list[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    return f"{name} wake-up: p50 {percentile(ms, 50):.2f} ms, p99 {percentile(ms, 99):.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=("aiokafka", "confluent"), default="aiokafka")
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument(
        "--idempotence", action="store_true", help="produce with enable.idempotence (confluent)"
    )
    parser.add_argument(
        "--transactional",
        type=int,
        default=0,
        metavar="N",
        help="then as many records with a transactional producer committing every N (confluent)",
    )
    parser.add_argument(
        "--commit-interval-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="then as many records with a transactional producer committing every MS "
        "milliseconds (confluent), as Kafka measures transactions",
    )
    parser.add_argument(
        "--record-bytes",
        type=int,
        default=100,
        metavar="B",
        help="each record's value size in bytes (default: 100)",
    )
    parser.add_argument("--consume", action="store_true", help="read the records back")
    parser.add_argument(
        "--warmup",
        type=int,
        default=1000,
        help="records produced (and consumed) first, not measured: a server's first request "
        "of each API and version loads that version's schema, once per process "
        "(default: 1000)",
    )
    parser.add_argument("--wakeups", type=int, default=200)
    parser.add_argument(
        "--replica-rtt-ms",
        help="the server's simulated replication round trip (default: its own, 1 ms)",
    )
    parser.add_argument(
        "--max-stored-bytes",
        metavar="BYTES",
        help="the server's cap on stored records (default: its own, 256 MiB): long runs of "
        "large records need more",
    )
    parser.add_argument(
        "--ssl",
        action="store_true",
        help="serve and connect over the SSL listeners (--kafka-ssl-port) instead",
    )
    parser.add_argument(
        "--librdkafka-mock",
        action="store_true",
        help="librdkafka's own mock cluster instead of purgatory serve (confluent only)",
    )
    args = parser.parse_args()
    if args.transactional < 0 or args.commit_interval_ms < 0:
        parser.error("--transactional and --commit-interval-ms take a positive number")
    if args.transactional and args.commit_interval_ms:
        parser.error("give --transactional or --commit-interval-ms, not both")
    if args.record_bytes < 0:
        parser.error("--record-bytes takes a size of 0 or more")
    commits = Commits(args.transactional, args.commit_interval_ms)
    size = args.record_bytes
    if args.librdkafka_mock:
        librdkafka_mock(args.records, args.warmup, args.idempotence, commits, size)
        return
    listener = "--kafka-ssl-port" if args.ssl else "--kafka-port"
    command = [listener, "0", "--topic", "t:1:3", "--log-level", "WARNING"]
    if args.replica_rtt_ms is not None:
        command += ["--replica-rtt-ms", args.replica_rtt_ms]
    if args.max_stored_bytes is not None:
        command += ["--max-stored-bytes", args.max_stored_bytes]
    command += ["--topic", "w:1:3", "--topic", "h:1:3", "--topic", "x:1:3"]
    if commits and args.client != "confluent":
        parser.error("--transactional and --commit-interval-ms need --client confluent")
    with ServeProcess(*command) as server:
        url = server.url
        if args.ssl:
            tls = server.addresses.document["kafka_ssl"]
            bootstrap = tls["bootstrap_servers"]
            use_ssl(tls["ca_file"])
        else:
            bootstrap = server.bootstrap_servers
        n = args.records
        print(f"client:             {args.client}{' over SSL' if args.ssl else ''}")
        print(f"records:            {n}")
        produce_with = (
            (lambda count: confluent_produce(bootstrap, count, args.idempotence, size=size))
            if args.client == "confluent"
            else (lambda count: asyncio.run(produce(bootstrap, count, size)))
        )
        consume_with = (
            (lambda count: confluent_consume(bootstrap, count))
            if args.client == "confluent"
            else (lambda count: asyncio.run(aiokafka_consume(bootstrap, count)))
        )
        if args.warmup:
            produce_with(args.warmup)
            if args.consume:
                consume_with(args.warmup)
        broker_before = cpu_seconds(server.pid)
        client_before = time.process_time()
        elapsed = produce_with(n)
        report("produce", n, elapsed, cpu_seconds(server.pid) - broker_before, client_before)
        if args.consume:
            broker_before = cpu_seconds(server.pid)
            client_before = time.process_time()
            elapsed = consume_with(n)
            report("consume", n, elapsed, cpu_seconds(server.pid) - broker_before, client_before)
        if commits:
            transactional(bootstrap, server.pid, n, commits, size, args.warmup, args.consume)
        if args.wakeups:
            print(summary("kafka", asyncio.run(kafka_wakeups(bootstrap, args.wakeups))))
            print(summary("http ", asyncio.run(http_wakeups(url, args.wakeups))))


def transactional(
    bootstrap: str, pid: int, n: int, commits: Commits, size: int, warmup: int, consume: bool
) -> None:
    """``n`` records of ``size`` bytes to topic x, committed as ``commits`` says; then
    (``consume``) read back read_committed and read_uncommitted."""
    if warmup:  # creates __transaction_state and loads the transaction APIs' schemas
        confluent_produce(bootstrap, warmup, True, "x", commits, size)
    broker_before = cpu_seconds(pid)
    client_before = time.process_time()
    elapsed = confluent_produce(bootstrap, n, True, "x", commits, size)
    what = f"produce, transactions {commits}"
    report(what, n, elapsed, cpu_seconds(pid) - broker_before, client_before)
    if not consume:
        return
    for isolation in ("read_committed", "read_uncommitted"):
        total = n + 1 + (warmup + 1 if warmup else 0)  # each run's first record too
        broker_before = cpu_seconds(pid)
        client_before = time.process_time()
        elapsed = confluent_consume(bootstrap, total, "x", isolation)
        report(
            f"consume {isolation}", total, elapsed, cpu_seconds(pid) - broker_before, client_before
        )


def librdkafka_mock(
    records: int, warmup: int, idempotence: bool, transaction: Commits, size: int
) -> None:
    """The confluent producer's figures against librdkafka's in-process C mock cluster;
    the mock's brokers run on this process's threads, so their CPU is the client's here.
    With ``transaction``, then a transactional producer committing as it says: the mock
    answers the transaction APIs at once, without replicating anything, so this is what
    the client itself allows. (Its consumer is not measured: reading back 100,000 records
    from the mock stalled here, idle, with confluent-kafka 2.16.)"""
    from confluent_kafka import Producer

    holder = Producer({"test.mock.num.brokers": 3})  # the mock lives as long as it does
    brokers = holder.list_topics(timeout=10).brokers.values()
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers)
    # the mock answers no CreateTopics: "t" is created on first use, with its defaults
    # (4 partitions, replication factor 3); partition 0 is written
    print("client:             confluent, against librdkafka's mock cluster")
    print(f"records:            {records}")
    if warmup:
        confluent_produce(bootstrap, warmup, idempotence, size=size)
    client_before = time.process_time()
    elapsed = confluent_produce(bootstrap, records, idempotence, size=size)
    report("produce", records, elapsed, 0.0, client_before)
    if transaction:
        if warmup:
            confluent_produce(bootstrap, warmup, True, "x", transaction, size)
        client_before = time.process_time()
        elapsed = confluent_produce(bootstrap, records, True, "x", transaction, size)
        report(f"produce, transactions {transaction}", records, elapsed, 0.0, client_before)


def report(what: str, n: int, elapsed: float, broker_cpu: float, client_before: float) -> None:
    client_cpu = time.process_time() - client_before
    print(
        f"{what}: {n / elapsed:,.0f} records/s, broker CPU/record {broker_cpu / n * 1e6:.2f} us, "
        f"client CPU/record {client_cpu / n * 1e6:.2f} us"
    )


if __name__ == "__main__":
    main()
