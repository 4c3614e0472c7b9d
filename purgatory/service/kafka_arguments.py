"""``purgatory serve``'s Kafka flags: the ``--kafka-*`` arguments, and the users, racks
and broker configs they give, checked against each other and the other flags."""

from __future__ import annotations

import argparse

from purgatory.kafka.broker_config_table import BROKER_CONFIGS
from purgatory.kafka.broker_configs import BrokerConfigs, broker_configs, parse_assignment
from purgatory.kafka.features import checked_levels
from purgatory.kafka.sasl import parse_user
from purgatory.kafka.server import ListenerLimits
from purgatory.loopback import is_loopback
from purgatory.service.config import StorageLimits


def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--kafka-*`` flags, in ``--help`` order."""
    _add_listener_arguments(parser)
    _add_broker_arguments(parser)


def _add_listener_arguments(parser: argparse.ArgumentParser) -> None:
    """The Kafka listeners: their ports, users and who may use them unauthenticated."""
    parser.add_argument(
        "--kafka-port",
        type=int,
        default=None,
        help="also speak the Kafka protocol: broker i listens on HOST:KAFKA_PORT+i "
        "(0 picks free ports; default: off). Plaintext, no authentication: only on a "
        "loopback HOST unless --kafka-allow-anonymous",
    )
    parser.add_argument(
        "--kafka-sasl-port",
        type=int,
        default=None,
        metavar="P",
        help="SASL_PLAINTEXT Kafka listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512): broker "
        "i on HOST:P+i, beside or instead of --kafka-port (0 picks free ports; default: off)",
    )
    parser.add_argument(
        "--kafka-ssl-port",
        type=int,
        default=None,
        metavar="P",
        help="SSL Kafka listeners: broker i on HOST:P+i, beside or instead of the others "
        "(0 picks free ports; default: off); the server makes a CA, broker certificates and "
        "a client certificate at start (the ready file names the files); mutual TLS with "
        "--kafka-config ssl.client.auth=required",
    )
    parser.add_argument(
        "--kafka-sasl-ssl-port",
        type=int,
        default=None,
        metavar="P",
        help="SASL_SSL Kafka listeners (SASL over TLS): broker i on HOST:P+i (0 picks free "
        "ports; default: off)",
    )
    parser.add_argument(
        "--kafka-user",
        action="append",
        default=[],
        metavar="NAME:PASSWORD",
        help="a user who may log in on the SASL (and SASL_SSL) listeners with every mechanism "
        "(repeatable); more SCRAM users by AlterUserScramCredentials",
    )
    parser.add_argument(
        "--kafka-allow-anonymous",
        action="store_true",
        help="allow the plaintext Kafka listeners (--kafka-port), and SSL ones without "
        "ssl.client.auth=required, which authenticate nobody, on a HOST that is not loopback",
    )


def _add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    """What the Kafka brokers allow and how they are configured."""
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
        help="a Kafka Metadata request naming an unknown topic creates it, with "
        "num.partitions partitions and default.replication.factor replicas (1 and 1 "
        "unless --kafka-config sets them): shorthand for --kafka-config "
        "auto.create.topics.enable=true (on by default in Kafka; default here: off)",
    )
    parser.add_argument(
        "--kafka-racks",
        default=None,
        metavar="RACK,RACK,...",
        help="each broker's rack, Kafka's broker.rack (which --kafka-config cannot set: it "
        "differs per broker), one per broker in order, e.g. a,b,c (an empty item: no rack): "
        "Metadata and DescribeCluster show them, replicas are placed across them, and with "
        "--kafka-config replica.selector.class=org.apache.kafka.common.replica."
        "RackAwareReplicaSelector consumers that set client.rack fetch from a follower in "
        "their rack (default: no racks)",
    )
    parser.add_argument(
        "--kafka-feature",
        action="append",
        default=[],
        metavar="NAME=LEVEL",
        help="a feature level the cluster is finalized at, as Kafka's kafka-storage format "
        "--feature (repeatable): transaction.version=1 serves Transactions V1 only "
        "(default: transaction.version=2, as Kafka 4 formats a cluster); UpdateFeatures "
        "changes it later",
    )
    parser.add_argument(
        "--kafka-config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a broker config by Kafka's name, as your test Kafka's server.properties "
        "sets it (repeatable), e.g. num.partitions=2 or group.min.session.timeout.ms=1000; "
        "DescribeConfigs reports it. Known: " + ", ".join(BROKER_CONFIGS) + " (see "
        "docs/kafka.md); log.retention.ms and log.retention.bytes replace --retention-ms "
        "and --retention-bytes",
    )


def check_kafka_listeners(args: argparse.Namespace) -> None:
    """The Kafka listeners' ports: in range, each protocol's run of ``--brokers`` ports
    apart from the others'; plaintext ones on a loopback host only, unless
    ``--kafka-allow-anonymous``."""
    ports = [
        ("--kafka-port", args.kafka_port),
        ("--kafka-sasl-port", args.kafka_sasl_port),
        ("--kafka-ssl-port", args.kafka_ssl_port),
        ("--kafka-sasl-ssl-port", args.kafka_sasl_ssl_port),
    ]
    for flag, port in ports:
        if port is not None and not (port == 0 or 1 <= port <= 65536 - args.brokers):
            raise ValueError(
                f"{flag} must leave room for {args.brokers} ports below 65536, got {port}"
            )
    for i, (flag, port) in enumerate(ports):
        for other, other_port in ports[i + 1 :]:
            if port and other_port and abs(port - other_port) < args.brokers:
                raise ValueError(
                    f"{flag} {port} and {other} {other_port} overlap: "
                    f"each takes {args.brokers} consecutive ports"
                )
    plain = args.kafka_port
    if plain is not None and not args.kafka_allow_anonymous and not is_loopback(args.host):
        raise ValueError(
            f"--kafka-port on --host {args.host}: a plaintext Kafka listener authenticates "
            "nobody, and anyone who reaches it may produce, consume and delete topics; "
            "serve Kafka on a loopback host, or on SASL listeners (--kafka-sasl-port with "
            "--kafka-user), or accept that with --kafka-allow-anonymous"
        )


def check_ssl_anonymous(args: argparse.Namespace, configs: BrokerConfigs) -> None:
    """SSL listeners that do not require a client certificate authenticate nobody: on a
    host that is not loopback only with ``--kafka-allow-anonymous``."""
    if args.kafka_ssl_port is None or args.kafka_allow_anonymous or is_loopback(args.host):
        return
    if configs.text("ssl.client.auth") != "required":
        raise ValueError(
            f"--kafka-ssl-port on --host {args.host} without --kafka-config "
            "ssl.client.auth=required: its clients are anonymous, and anyone who reaches "
            "it may produce, consume and delete topics; require client certificates, or "
            "accept that with --kafka-allow-anonymous"
        )


#: the broker configs that replace a storage flag: config -> (flag, StorageLimits field)
STORAGE_CONFIGS = {
    "log.retention.ms": ("--retention-ms", "retention_ms"),
    "log.retention.bytes": ("--retention-bytes", "retention_bytes"),
}


def checked_configs(args: argparse.Namespace, storage: StorageLimits) -> BrokerConfigs:
    """The ``--kafka-config`` settings checked, refusing one that contradicts another
    flag (or itself) or a replication factor the brokers cannot hold."""
    given: dict[str, str] = {}
    for text in args.kafka_config:
        name, value = parse_assignment(text)
        if name in given and given[name] != value:
            raise ValueError(f"--kafka-config {name} given twice: {given[name]!r}, {value!r}")
        given[name] = value
    try:
        configs = broker_configs(given)
    except ValueError as exc:
        raise ValueError(f"--kafka-config {exc}") from None
    auto = configs.explicit.get("auto.create.topics.enable")
    if args.kafka_auto_create_topics and auto is False:
        raise ValueError(
            "--kafka-auto-create-topics contradicts --kafka-config auto.create.topics.enable=false"
        )
    defaults = StorageLimits()
    for name, (flag, attribute) in STORAGE_CONFIGS.items():
        if configs.is_set(name) and getattr(storage, attribute) != getattr(defaults, attribute):
            raise ValueError(f"--kafka-config {name} and {flag} both set the same retention")
    factor = configs.explicit.get("default.replication.factor", 1)
    if factor > args.brokers:
        raise ValueError(
            f"--kafka-config default.replication.factor={factor} exceeds --brokers {args.brokers}"
        )
    return configs


def checked_features(args: argparse.Namespace) -> dict[str, int]:
    """The ``--kafka-feature`` levels, checked: each feature once, a supported level."""
    given: dict[str, int] = {}
    for text in args.kafka_feature:
        name, value = parse_assignment(text)
        try:
            level = int(value)
        except ValueError:
            raise ValueError(
                f"--kafka-feature {name}: the level must be an int, got {value!r}"
            ) from None
        if name in given and given[name] != level:
            raise ValueError(f"--kafka-feature {name} given twice: {given[name]}, {level}")
        given[name] = level
    try:
        return checked_levels(given)
    except ValueError as exc:
        raise ValueError(f"--kafka-feature {exc}") from None


def checked_racks(args: argparse.Namespace) -> tuple[str | None, ...] | None:
    """The ``--kafka-racks`` racks, one per broker (an empty item: none), checked."""
    text = getattr(args, "kafka_racks", None)
    if text is None:
        return None
    racks = tuple(item.strip() or None for item in text.split(","))
    if len(racks) != args.brokers:
        raise ValueError(
            f"--kafka-racks names {len(racks)} racks for --brokers {args.brokers}: give one "
            "per broker"
        )
    return racks


def checked_users(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The ``--kafka-user`` users, checked: each once, and only with SASL listeners."""
    users: dict[str, str] = {}
    for text in args.kafka_user:
        name, password = parse_user(text)
        if name in users:
            raise ValueError(f"--kafka-user {name} given twice")
        users[name] = password
    if users and args.kafka_sasl_port is None and args.kafka_sasl_ssl_port is None:
        raise ValueError(
            "--kafka-user needs --kafka-sasl-port or --kafka-sasl-ssl-port: users log in "
            "on SASL listeners"
        )
    return tuple(users.items())
