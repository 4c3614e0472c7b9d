"""``purgatory serve``: run the HTTP long-poll API over a simulated cluster.

Prints ``listening on http://HOST:PORT`` (the bound port, so ``--port 0`` is usable by
scripts and tests) once it accepts connections. SIGTERM or SIGINT stops it gracefully:
listeners close, every parked request gets an answer, reapers stop, and it exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from purgatory.event_loops import available_loops, default_loop, loop_factory
from purgatory.kafka.server import ListenerLimits
from purgatory.service.config import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_PENDING,
    ConnectionLimits,
    ServiceConfig,
    StorageLimits,
    budget,
    descriptor_limit,
    kafka_budget,
    write_reserve,
)
from purgatory.service.guard import AccessPolicy
from purgatory.trace import TraceWriter

if TYPE_CHECKING:
    from aiohttp import web

    from purgatory import DelayedOperationPurgatory
    from purgatory.kafka.front_door import KafkaFrontDoor
    from purgatory.sim.cluster import Cluster


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # in --help order
    _add_cluster_arguments(parser)
    _add_request_limit_arguments(parser)
    _add_connection_arguments(parser)
    _add_kafka_arguments(parser)
    parser.add_argument(
        "--trace",
        metavar="PATH",
        help="write every finished operation, HTTP and Kafka alike, as a trace line "
        "(JSON Lines, .gz ok), as `purgatory simulate --trace` does",
    )
    _add_storage_arguments(parser)
    _add_access_arguments(parser)
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="logging threshold",
    )


def _add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: %(default)s)"
    )
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument(
        "--loop", choices=available_loops(), default=default_loop(), help="event loop to run on"
    )
    parser.add_argument("--brokers", type=int, default=3, help="brokers in the simulated cluster")
    parser.add_argument(
        "--replica-rtt-ms",
        type=float,
        default=None,
        metavar="MS",
        help="median round trip of the simulated replication network, which every "
        "acks=all produce waits for twice (default: the simulation's, 1 ms; 0: instant)",
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME:PARTITIONS:RF",
        help="create a topic at startup (repeatable), e.g. events:3:3",
    )


def _add_request_limit_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = ServiceConfig()
    parser.add_argument(
        "--max-timeout-ms",
        type=int,
        default=defaults.max_timeout_ms,
        help="ceiling for timeout_ms and max_wait_ms (default: %(default)s)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=defaults.max_body_bytes,
        help="largest request body accepted; larger ones get 413",
    )
    parser.add_argument(
        "--max-body-bytes-in-flight",
        type=int,
        default=defaults.max_body_bytes_in_flight,
        metavar="BYTES",
        help="request body bytes being read at once, all connections together (each "
        "counts its Content-Length); more get 503 (default: %(default)s, 64 MiB)",
    )
    parser.add_argument(
        "--max-pending",
        type=int,
        default=None,
        help="parked requests at once before 503; long polls may not take the last tenth, "
        "kept for the produces that wake them (default: --max-connections less 5%%, "
        f"at most {DEFAULT_MAX_PENDING:,})",
    )


def _add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    limits = ConnectionLimits()
    parser.add_argument(
        "--max-connections",
        type=int,
        default=None,
        help="connections served at once; more get 503 (default: the open-files limit, "
        f"raised to the hard limit, less 10%%, at most {DEFAULT_MAX_CONNECTIONS:,})",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=limits.header_timeout_s,
        help="seconds for a request head to arrive, from its first byte or a new "
        "connection's start; then 408 and close (default: %(default)s)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=limits.body_timeout_s,
        help="seconds for a request body to arrive after its head (default: %(default)s)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=limits.idle_timeout_s,
        help="seconds a keep-alive connection may wait for its next request; a parked "
        "long poll is not idle (default: %(default)s)",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=ServiceConfig().shutdown_timeout_s,
        help="seconds SIGTERM waits for in-flight requests before closing",
    )
    parser.add_argument("--backlog", type=int, default=4096, help="listen() backlog")


def _add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kafka-port",
        type=int,
        default=None,
        help="also speak the Kafka protocol: broker i listens on HOST:KAFKA_PORT+i "
        "(0 picks free ports; default: off)",
    )
    parser.add_argument(
        "--kafka-max-connections",
        type=int,
        default=None,
        metavar="N",
        help="Kafka connections open at once, all brokers; more are closed at once "
        "(default: half the descriptors kept free of HTTP connections)",
    )
    parser.add_argument(
        "--kafka-idle-timeout",
        type=float,
        default=ListenerLimits().idle_timeout_s,
        metavar="S",
        help="seconds a Kafka connection with nothing in flight may stay silent, as "
        "Kafka's connections.max.idle.ms (default: %(default)s)",
    )
    parser.add_argument(
        "--kafka-auto-create-topics",
        action="store_true",
        help="a Kafka Metadata request naming an unknown topic creates it, with 1 "
        "partition and replication factor 1 (Kafka's auto.create.topics.enable, on by "
        "default in Kafka; default here: off)",
    )


def _add_storage_arguments(parser: argparse.ArgumentParser) -> None:
    storage = parser.add_argument_group("storage (records live in memory)")
    stored = StorageLimits()
    storage.add_argument(
        "--max-stored-bytes",
        type=int,
        default=stored.max_stored_bytes,
        metavar="BYTES",
        help="memory the stored records may hold, bookkeeping included; a produce past "
        "it gets KAFKA_STORAGE_ERROR (HTTP 507) (default: %(default)s, 256 MiB)",
    )
    storage.add_argument(
        "--retention-bytes",
        type=int,
        default=stored.retention_bytes,
        metavar="BYTES",
        help="bytes each partition keeps at least before its oldest records go, for "
        "topics that set none (-1: no limit; default: %(default)s)",
    )
    storage.add_argument(
        "--retention-ms",
        type=int,
        default=stored.retention_ms,
        metavar="MS",
        help="how long records are kept, for topics that set none (-1: forever; "
        "default: %(default)s, one hour)",
    )


def _add_access_arguments(parser: argparse.ArgumentParser) -> None:
    access = parser.add_argument_group("access control")
    access.add_argument(
        "--token",
        default=os.environ.get("PURGATORY_TOKEN") or None,
        help="require 'Authorization: Bearer TOKEN' on every route but /healthz "
        "(default: $PURGATORY_TOKEN, else no token)",
    )
    access.add_argument(
        "--public-metrics",
        action="store_true",
        help="serve /metrics without the token",
    )
    access.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST",
        help="a host name clients may use in the Host header (repeatable; default: the "
        "loopback names when bound to loopback, else any)",
    )


def _topic_spec(spec: str) -> tuple[str, int, int]:
    parts = spec.split(":")
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f"--topic wants NAME:PARTITIONS:RF, got {spec!r}")
    return parts[0], int(parts[1]), int(parts[2])


@dataclass(frozen=True)
class _Settings:
    """What ``run`` serves with, checked: every flag that can be wrong has been."""

    topics: list[tuple[str, int, int]]
    config: ServiceConfig
    connections: ConnectionLimits
    kafka_limits: ListenerLimits
    storage: StorageLimits
    access: AccessPolicy
    trace: TraceWriter | None


def _settings(args: argparse.Namespace) -> _Settings:
    """The checked settings; raises ValueError (or OSError for the trace file) with the
    flag and the figures."""
    # every connection holds a descriptor: read (and raise) the limit, fit the budget in
    descriptors = descriptor_limit()
    max_connections, max_pending = budget(descriptors, args.max_connections, args.max_pending)
    kafka_limits = ListenerLimits(
        kafka_budget(descriptors, args.kafka_max_connections), args.kafka_idle_timeout
    )
    connections = ConnectionLimits(
        max_connections=max_connections,
        header_timeout_s=args.header_timeout,
        body_timeout_s=args.body_timeout,
        idle_timeout_s=args.idle_timeout,
    )
    config = ServiceConfig(
        max_timeout_ms=args.max_timeout_ms,
        max_body_bytes=args.max_body_bytes,
        max_body_bytes_in_flight=args.max_body_bytes_in_flight,
        max_pending=max_pending,
        shutdown_timeout_s=args.shutdown_timeout,
    )
    storage = StorageLimits(args.max_stored_bytes, args.retention_bytes, args.retention_ms)
    topics = [_topic_spec(spec) for spec in args.topic]
    access = AccessPolicy.for_bind(
        args.host,
        token=args.token,
        public_metrics=args.public_metrics,
        allowed_hosts=args.allowed_host,
    )
    _check_cluster_flags(args)
    trace = None if args.trace is None else TraceWriter(args.trace)  # last: nothing to undo
    return _Settings(topics, config, connections, kafka_limits, storage, access, trace)


def _check_cluster_flags(args: argparse.Namespace) -> None:
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0..65535, got {args.port}")
    if args.brokers < 1:
        raise ValueError(f"--brokers must be >= 1, got {args.brokers}")
    rtt = args.replica_rtt_ms
    if rtt is not None and not (math.isfinite(rtt) and rtt >= 0):
        raise ValueError(f"--replica-rtt-ms must be a finite number >= 0, got {rtt}")
    if args.kafka_port is not None and not (
        args.kafka_port == 0 or 1 <= args.kafka_port <= 65536 - args.brokers
    ):
        raise ValueError(
            f"--kafka-port must leave room for {args.brokers} ports below 65536, "
            f"got {args.kafka_port}"
        )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s %(message)s")
    try:
        settings = _settings(args)
    except (TypeError, ValueError, OSError) as exc:
        print(f"purgatory serve: {exc}", file=sys.stderr)
        return 2
    max_pending = settings.config.max_pending
    logging.getLogger("purgatory.service").info(
        "serving at most %d connections, %d parked requests (%d of them fetches)%s",
        settings.connections.max_connections,
        max_pending,
        max_pending - write_reserve(max_pending),
        ""
        if args.kafka_port is None
        else f", {settings.kafka_limits.max_connections} Kafka connections",
    )
    try:
        with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
            return runner.run(
                serve(
                    args.host,
                    args.port,
                    args.brokers,
                    settings.topics,
                    settings.config,
                    args.backlog,
                    settings.access,
                    kafka_port=args.kafka_port,
                    kafka_limits=settings.kafka_limits,
                    kafka_auto_create_topics=args.kafka_auto_create_topics,
                    trace=settings.trace,
                    replica_rtt_ms=args.replica_rtt_ms,
                    connections=settings.connections,
                    storage=settings.storage,
                )
            )
    finally:
        if settings.trace is not None:
            settings.trace.close()


async def serve(
    host: str,
    port: int,
    brokers: int,
    topics: list[tuple[str, int, int]],
    config: ServiceConfig,
    backlog: int = 4096,
    access: AccessPolicy | None = None,
    *,
    kafka_port: int | None = None,
    kafka_limits: ListenerLimits | None = None,
    kafka_auto_create_topics: bool = False,
    trace: TraceWriter | None = None,
    replica_rtt_ms: float | None = None,
    connections: ConnectionLimits | None = None,
    storage: StorageLimits | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT; return the exit status. With ``kafka_port``, each
    broker also speaks the Kafka protocol (:mod:`purgatory.kafka`) over the same cluster,
    within ``kafka_limits``, creating the unknown topics a Metadata request names if
    ``kafka_auto_create_topics``.
    ``trace`` hears of every finished operation and of each fault injected over HTTP;
    ``replica_rtt_ms`` sets the replication network's round trip (None: the default);
    ``storage`` bounds what the logs hold (default: :class:`StorageLimits`)."""
    from purgatory.kafka.front_door import KafkaFrontDoor
    from purgatory.kafka.handlers.topics import TopicDefaults
    from purgatory.service.broker import new_cluster
    from purgatory.service.connections import ServiceRunner

    cluster = await new_cluster(brokers, replica_rtt_ms, storage)
    for name, partitions, replication_factor in topics:
        await cluster.create_topic(name, partitions, replication_factor)
    kafka = None
    if kafka_port is not None:
        auto_create = TopicDefaults(auto_create=kafka_auto_create_topics)
        kafka = KafkaFrontDoor(cluster, host, kafka_port, kafka_limits, topics=auto_create)
    app = _observed_app(cluster, config, access, kafka, trace)
    runner = ServiceRunner(
        app,
        ConnectionLimits() if connections is None else connections,
        shutdown_timeout=config.shutdown_timeout_s,
    )
    await runner.setup()
    return await _serve_until_signalled(runner, host, port, backlog, kafka)


def _observed_app(
    cluster: Cluster,
    config: ServiceConfig,
    access: AccessPolicy | None,
    kafka: KafkaFrontDoor | None,
    trace: TraceWriter | None,
) -> web.Application:
    """The app over ``cluster``, with process, storage and Kafka metrics in its registry
    and every purgatory (the cluster's and the Kafka group coordinator's) metered and,
    with ``trace``, traced."""
    from prometheus_client import CollectorRegistry, ProcessCollector

    from purgatory.kafka.metrics import ProtocolCollector
    from purgatory.service.app import STATE, create_app
    from purgatory.service.http_metrics import StorageMetrics

    registry = CollectorRegistry()
    ProcessCollector(registry=registry)  # process_resident_memory_bytes, process_open_fds
    StorageMetrics(registry, cluster.log_space)
    if kafka is not None:
        registry.register(ProtocolCollector(kafka.stats))
    app = create_app(
        cluster,
        config,
        access=access,
        registry=registry,
        on_fault=None if trace is None else trace.mark_fault,
    )
    # Kafka requests park in the same purgatories as HTTP ones; the group coordinator's
    # joins and heartbeats park in two more, metered and traced alike.
    purgatories: list[DelayedOperationPurgatory[Any]] = cluster.all_purgatories()
    if kafka is not None:
        for purgatory in kafka.purgatories.values():
            app[STATE].purgatory_metrics.track(purgatory)
            purgatories.append(purgatory)
    if trace is not None:
        for purgatory in purgatories:
            purgatory.add_listener(trace)
    return app


async def _serve_until_signalled(
    runner: web.AppRunner, host: str, port: int, backlog: int, kafka: KafkaFrontDoor | None
) -> int:
    """Listen (HTTP, then Kafka) until SIGTERM or SIGINT, then close everything."""
    from aiohttp import web

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        site = web.TCPSite(runner, host, port, backlog=backlog)
        await site.start()
        for address in runner.addresses:
            bound_host, bound_port = address[0], address[1]
            print(f"listening on http://{bound_host}:{bound_port}", flush=True)
        if kafka is not None:
            await kafka.start()
            print(f"kafka bootstrap.servers={kafka.bootstrap}", flush=True)
        await stop.wait()
        print("shutting down", flush=True)
    finally:
        if kafka is not None:
            await kafka.close()
        await runner.cleanup()  # closes listeners, answers parked requests, closes cluster
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return 0
