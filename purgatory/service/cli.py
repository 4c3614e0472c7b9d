"""``purgatory serve``: run the HTTP long-poll API over a simulated cluster.

Prints ``listening on http://HOST:PORT`` once it accepts connections (for people to read).
With ``--ready-file PATH`` it writes, once every listener is up, the addresses it bound
(so ``--port 0`` and ``--kafka-port 0`` are usable by scripts and tests) as JSON
(:mod:`purgatory.service.ready_file`; the format is in docs/serve.md). SIGTERM or SIGINT
stops it gracefully: listeners close, every parked request gets an answer, reapers stop,
and it exits 0. :class:`ServeSettings` is everything it runs with; the ``--kafka-*`` flags
are :mod:`purgatory.service.kafka_arguments`'.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import signal
import sys
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from purgatory.event_loops import available_loops, default_loop, loop_factory
from purgatory.kafka.broker_configs import BrokerConfigs
from purgatory.kafka.sasl import MECHANISMS
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
from purgatory.service.kafka_arguments import (
    STORAGE_CONFIGS,
    add_kafka_arguments,
    check_kafka_listeners,
    check_ssl_anonymous,
    checked_configs,
    checked_features,
    checked_racks,
    checked_users,
)
from purgatory.service.ready_file import TlsListeners, ready_document, write_ready_file
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
    add_kafka_arguments(parser)
    parser.add_argument(
        "--trace",
        metavar="PATH",
        help="write every finished operation, HTTP and Kafka alike, as a trace line "
        "(JSON Lines, .gz ok), as `purgatory simulate --trace` does",
    )
    parser.add_argument(
        "--ready-file",
        metavar="PATH",
        help="once every listener is up, write what they bound (the HTTP URL, the Kafka "
        "bootstrap and each broker's address) to PATH as JSON, atomically; removed at "
        "shutdown (see docs/serve.md)",
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
class ServeSettings:
    """Everything ``purgatory serve`` runs with; :func:`settings_from_args` builds it from
    the flags, checked. ``port`` 0 picks a free port; ``kafka_port`` None serves no Kafka,
    0 picks consecutive free ports (broker i on the first + i); ``ready_file`` is where to
    write the bound addresses once every listener is up
    (:func:`~purgatory.service.ready_file.ready_document`);
    ``kafka_configs`` are the broker configs by Kafka's names (``--kafka-config``), those
    the cluster keeps (``log.retention.*``, ``min.insync.replicas``) applied whether or
    not Kafka is served."""

    host: str = "127.0.0.1"
    port: int = 8080
    brokers: int = 3
    topics: tuple[tuple[str, int, int], ...] = ()
    config: ServiceConfig = field(default_factory=ServiceConfig)
    backlog: int = 4096
    access: AccessPolicy | None = None
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    storage: StorageLimits | None = None
    replica_rtt_ms: float | None = None
    kafka_port: int | None = None
    kafka_sasl_port: int | None = None
    kafka_ssl_port: int | None = None
    kafka_sasl_ssl_port: int | None = None
    kafka_users: tuple[tuple[str, str], ...] = ()
    kafka_limits: ListenerLimits | None = None
    kafka_auto_create_topics: bool = False
    kafka_configs: BrokerConfigs = field(default_factory=BrokerConfigs)
    kafka_racks: tuple[str | None, ...] | None = None
    #: ``--kafka-feature``: feature levels finalized at start
    kafka_features: tuple[tuple[str, int], ...] = ()
    trace: TraceWriter | None = None
    ready_file: str | None = None


def settings_from_args(args: argparse.Namespace) -> ServeSettings:
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
    topics = tuple(_topic_spec(spec) for spec in args.topic)
    access = AccessPolicy.for_bind(
        args.host,
        token=args.token,
        public_metrics=args.public_metrics,
        allowed_hosts=args.allowed_host,
    )
    _check_cluster_flags(args)
    users = checked_users(args)
    kafka_configs = checked_configs(args, storage)
    check_ssl_anonymous(args, kafka_configs)
    racks = checked_racks(args)
    features = checked_features(args)
    _check_ready_file(args.ready_file)
    trace = None if args.trace is None else TraceWriter(args.trace)  # last: nothing to undo
    return ServeSettings(
        host=args.host,
        port=args.port,
        brokers=args.brokers,
        topics=topics,
        config=config,
        backlog=args.backlog,
        access=access,
        connections=connections,
        storage=storage,
        replica_rtt_ms=args.replica_rtt_ms,
        kafka_port=args.kafka_port,
        kafka_sasl_port=args.kafka_sasl_port,
        kafka_ssl_port=args.kafka_ssl_port,
        kafka_sasl_ssl_port=args.kafka_sasl_ssl_port,
        kafka_users=users,
        kafka_limits=kafka_limits,
        kafka_auto_create_topics=args.kafka_auto_create_topics,
        kafka_configs=kafka_configs,
        kafka_racks=racks,
        kafka_features=tuple(features.items()),
        trace=trace,
        ready_file=args.ready_file,
    )


def _effective_configs(settings: ServeSettings) -> tuple[BrokerConfigs, StorageLimits]:
    """The broker configs, with ``--kafka-auto-create-topics`` as
    ``auto.create.topics.enable``, and the storage limits with the retention they set."""
    explicit = dict(settings.kafka_configs.explicit)
    if settings.kafka_auto_create_topics:
        explicit.setdefault("auto.create.topics.enable", True)
    storage = StorageLimits() if settings.storage is None else settings.storage
    for name, (_, attribute) in STORAGE_CONFIGS.items():
        value = explicit.get(name)
        if isinstance(value, int):
            storage = replace(storage, **{attribute: value})
    return BrokerConfigs(explicit), storage


def _check_ready_file(path: str | None) -> None:
    if path is None:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory) or os.path.isdir(path):
        raise ValueError(f"--ready-file {path!r}: no directory {directory!r} to write it in")


def _check_cluster_flags(args: argparse.Namespace) -> None:
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0..65535, got {args.port}")
    if args.brokers < 1:
        raise ValueError(f"--brokers must be >= 1, got {args.brokers}")
    rtt = args.replica_rtt_ms
    if rtt is not None and not (math.isfinite(rtt) and rtt >= 0):
        raise ValueError(f"--replica-rtt-ms must be a finite number >= 0, got {rtt}")
    check_kafka_listeners(args)


def _serves_kafka(settings: ServeSettings) -> bool:
    return any(
        port is not None
        for port in (
            settings.kafka_port,
            settings.kafka_sasl_port,
            settings.kafka_ssl_port,
            settings.kafka_sasl_ssl_port,
        )
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s %(message)s")
    try:
        settings = settings_from_args(args)
    except (TypeError, ValueError, OSError) as exc:
        print(f"purgatory serve: {exc}", file=sys.stderr)
        return 2
    max_pending = settings.config.max_pending
    kafka_limits = settings.kafka_limits or ListenerLimits()
    logging.getLogger("purgatory.service").info(
        "serving at most %d connections, %d parked requests (%d of them fetches)%s",
        settings.connections.max_connections,
        max_pending,
        max_pending - write_reserve(max_pending),
        f", {kafka_limits.max_connections} Kafka connections" if _serves_kafka(settings) else "",
    )
    try:
        with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
            return runner.run(serve(settings))
    finally:
        if settings.trace is not None:
            settings.trace.close()


async def serve(settings: ServeSettings) -> int:
    """Serve until SIGTERM/SIGINT; return the exit status. With ``kafka_port``, each
    broker also speaks the Kafka protocol (:mod:`purgatory.kafka`) over the same cluster,
    within ``kafka_limits``, with the broker configs ``kafka_configs``, creating the
    unknown topics a Metadata request names if ``kafka_auto_create_topics``.
    ``trace`` hears of every finished operation and of each fault injected over HTTP;
    ``replica_rtt_ms`` sets the replication network's round trip (None: the default);
    ``storage`` bounds what the logs hold (default: :class:`StorageLimits`)."""
    from purgatory.kafka.front_door import KafkaFrontDoor
    from purgatory.service.cluster import new_cluster
    from purgatory.service.connections import ServiceRunner

    configs, storage = _effective_configs(settings)
    cluster = await new_cluster(
        settings.brokers,
        settings.replica_rtt_ms,
        storage,
        min_insync_replicas=configs.number("min.insync.replicas"),
        broker_session_timeout_ms=configs.number("broker.session.timeout.ms"),
        producer_id_expiration_ms=configs.number("producer.id.expiration.ms"),
        log_cleaner_backoff_ms=configs.number("log.cleaner.backoff.ms"),
        racks=settings.kafka_racks,
        replica_selector_class=configs.optional_text("replica.selector.class"),
    )
    for name, partitions, replication_factor in settings.topics:
        await cluster.create_topic(name, partitions, replication_factor)
    kafka = None
    if _serves_kafka(settings):
        kafka = KafkaFrontDoor(
            cluster,
            settings.host,
            settings.kafka_port,
            settings.kafka_limits,
            configs=configs,
            users=dict(settings.kafka_users),
            sasl_port=settings.kafka_sasl_port,
            ssl_port=settings.kafka_ssl_port,
            sasl_ssl_port=settings.kafka_sasl_ssl_port,
            features=dict(settings.kafka_features),
        )
    app = _observed_app(cluster, settings.config, settings.access, kafka, settings.trace)
    runner = ServiceRunner(
        app, settings.connections, shutdown_timeout=settings.config.shutdown_timeout_s
    )
    await runner.setup()
    return await _serve_until_signalled(runner, settings, kafka)


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
    from purgatory.service.http_metrics import FaultHitsCollector, StorageMetrics

    registry = CollectorRegistry()
    ProcessCollector(registry=registry)  # process_resident_memory_bytes, process_open_fds
    StorageMetrics(registry, cluster.log_space)
    if kafka is not None:
        registry.register(ProtocolCollector(kafka.stats, kafka.quotas))
        registry.register(FaultHitsCollector(kafka.faults))
    app = create_app(
        cluster,
        config,
        access=access,
        registry=registry,
        on_fault=None if trace is None else trace.mark_fault,
        kafka=kafka,
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
    runner: web.AppRunner, settings: ServeSettings, kafka: KafkaFrontDoor | None
) -> int:
    """Listen (HTTP, then Kafka) until SIGTERM or SIGINT, then close everything. The
    ready file, if asked for, is written once every listener is up and removed on the way
    out."""
    from aiohttp import web

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ready = settings.ready_file
    try:
        site = web.TCPSite(runner, settings.host, settings.port, backlog=settings.backlog)
        await site.start()
        http = [(str(address[0]), int(address[1])) for address in runner.addresses]
        for bound_host, bound_port in http:
            print(f"listening on http://{bound_host}:{bound_port}", flush=True)
        if kafka is not None:
            # the background work (offset expiry, share locks) starts either way
            await kafka.start(consecutive_ports=settings.kafka_port == 0)
            if settings.kafka_port is not None:
                print(f"kafka bootstrap.servers={kafka.bootstrap}", flush=True)
            if settings.kafka_sasl_port is not None:
                print(f"kafka sasl bootstrap.servers={kafka.sasl_bootstrap}", flush=True)
            if settings.kafka_ssl_port is not None:
                print(f"kafka ssl bootstrap.servers={kafka.ssl_bootstrap}", flush=True)
            if settings.kafka_sasl_ssl_port is not None:
                print(f"kafka sasl_ssl bootstrap.servers={kafka.sasl_ssl_bootstrap}", flush=True)
        if ready is not None:
            mechanisms = MECHANISMS if kafka is None else kafka.sasl.mechanisms
            write_ready_file(
                ready, ready_document(http, *_kafka_listeners(settings, kafka), mechanisms)
            )
        await stop.wait()
        print("shutting down", flush=True)
    finally:
        if ready is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ready)
        if kafka is not None:
            await kafka.close()
        await runner.cleanup()  # closes listeners, answers parked requests, closes cluster
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return 0


def _kafka_listeners(
    settings: ServeSettings, kafka: KafkaFrontDoor | None
) -> tuple[
    dict[int, tuple[str, int]] | None,
    dict[int, tuple[str, int]] | None,
    TlsListeners | None,
    TlsListeners | None,
]:
    """The ready file's Kafka listeners: plaintext, SASL_PLAINTEXT, SSL and SASL_SSL
    (with their certificates' files), each None when not served."""
    if kafka is None:
        return None, None, None, None
    brokers = dict(kafka.addresses) if settings.kafka_port is not None else None
    sasl = dict(kafka.sasl_addresses) if settings.kafka_sasl_port is not None else None
    files = {} if kafka.tls is None else kafka.tls.files()
    tls = sasl_tls = None
    if settings.kafka_ssl_port is not None:
        tls = TlsListeners(dict(kafka.ssl_addresses), files)
    if settings.kafka_sasl_ssl_port is not None:
        sasl_tls = TlsListeners(dict(kafka.sasl_ssl_addresses), files)
    return brokers, sasl, tls, sasl_tls
