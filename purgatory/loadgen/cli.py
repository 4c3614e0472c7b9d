"""``purgatory load``: drive a running ``purgatory serve`` with long polls and producers.

Many consumers park fetches (``min_bytes=1``) on the partitions of one topic while an
open-loop producer stream appends at a fixed rate. Each value carries the producer's send
time, so a consumer that is woken measures the *wake-up latency*: from the produce request
that appended the first record of its response being sent, to that response arriving
(replication to the ISR included, since consumers read up to the high watermark).

Anything but a 200 answer, a broker error code or a transport error counts as a failed
request; the exit status is 1 if any request failed.

``--slowloris N``, ``--idle N``, ``--slow-bodies N`` and ``--flood`` run hostile clients instead
(:mod:`purgatory.loadgen.attacks`); the long-poll load is
:mod:`purgatory.loadgen.long_polls`.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from purgatory import event_loops
from purgatory.cli_types import int_at_least
from purgatory.json_types import Json
from purgatory.loadgen.long_polls import drive

if TYPE_CHECKING:
    from purgatory.loadgen.attacks import FloodReport, SocketsAttackReport


class _Option(NamedTuple):
    flag: str
    type: Callable[[str], Any]
    default: object
    help: str
    choices: tuple[int, ...] | None = None


# The long-poll load's options, in --help order.
_OPTIONS: Final = (
    _Option("--url", str, "http://127.0.0.1:8080", "server base URL"),
    _Option("--topic", str, "load", "topic to create (if missing) and use"),
    _Option("--partitions", int_at_least(1), 50, "partitions of the topic"),
    _Option(
        "--replication-factor",
        int_at_least(1),
        3,
        "replicas per partition when the topic is created",
    ),
    _Option("--fetchers", int, 5000, "concurrent parked fetches"),
    _Option("--produce-rate", float, 50.0, "produce requests/s"),
    _Option("--records", int, 1, "records per produce request"),
    _Option("--value-bytes", int_at_least(0), 100, "bytes per record value"),
    _Option(
        "--acks",
        int,
        -1,
        "produce acks: -1 waits for the in-sync replicas, 1 for the leader, 0 for nobody",
        choices=(-1, 0, 1),
    ),
    _Option(
        "--max-wait-ms", int_at_least(0), 5000, "how long each parked fetch may wait for records"
    ),
    _Option("--duration", float, 30.0, "seconds of steady load"),
    _Option("--ramp", float, 5.0, "seconds to open all fetchers"),
)


# The socket attacks: how many sockets of each kind (flag, help).
_SOCKET_ATTACKS: Final = (
    (
        "--slowloris",
        "N sockets sending a request head one byte per --trickle-s, never finishing it",
    ),
    ("--idle", "N sockets sending nothing"),
    ("--slow-bodies", "N sockets sending a produce whose body arrives but for its last byte"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for option in _OPTIONS:
        parser.add_argument(
            option.flag,
            type=option.type,
            default=option.default,
            choices=option.choices,
            help=option.help,
        )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    attack = parser.add_argument_group(
        "attack modes (loopback targets only; instead of the long-poll load; exit status 1 "
        "if /healthz failed during the attack)"
    )
    for flag, text in _SOCKET_ATTACKS:
        attack.add_argument(flag, type=int_at_least(0), default=0, metavar="N", help=text)
    attack.add_argument(
        "--slow-body-bytes",
        type=int_at_least(2),
        default=1 << 20,
        metavar="BYTES",
        help="the size of each --slow-bodies body (default: %(default)s, serve's --max-body-bytes)",
    )
    attack.add_argument(
        "--trickle-s", type=float, default=1.0, help="seconds between a slowloris' bytes"
    )
    attack.add_argument(
        "--flood",
        action="store_true",
        help="produce as fast as answered (--records of --value-bytes, --acks) for --duration",
    )
    attack.add_argument(
        "--flood-producers",
        type=int_at_least(1),
        default=32,
        help="concurrent producers of --flood (default: %(default)s)",
    )


def _raise_nofile(needed: int) -> None:
    """Each fetcher holds a socket: lift the soft open-files limit as far as allowed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard == resource.RLIM_INFINITY else min(hard, max(soft, needed))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise ValueError(f"{needed} open files needed, the limit is {soft} (raise ulimit -n)")


def _figure(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}".rstrip("0").rstrip(".")


def format_summary(summary: Mapping[str, Json]) -> str:
    """The summary as a person reads it: one labelled line per figure, thousands separated;
    a group of figures (percentiles, counts by error) on one line, ``none`` when empty."""
    width = max(len(key) for key in summary)
    lines = []
    for key, value in summary.items():
        if isinstance(value, dict):
            shown = "   ".join(f"{k} {_figure(v)}" for k, v in value.items()) or "none"
        else:
            shown = _figure(value)
        lines.append(f"{key.replace('_', ' '):<{width}}  {shown}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    sockets = args.slowloris + args.idle + args.slow_bodies
    attack = bool(sockets or args.flood)
    try:
        if attack:
            _check_attack(args)
        else:
            for name in ("partitions", "fetchers", "records", "max_wait_ms"):
                if getattr(args, name) < 1:
                    raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
            if not args.produce_rate > 0 or not args.duration > 0 or args.ramp < 0:
                raise ValueError("--produce-rate and --duration must be > 0, --ramp >= 0")
        _raise_nofile((sockets if attack else args.fetchers) + 256)
    except ValueError as exc:
        print(f"purgatory load: {exc}", file=sys.stderr)
        return 2
    try:
        report = event_loops.run(_attack(args) if attack else drive(args))
    except (OSError, RuntimeError) as exc:
        print(f"purgatory load: {exc}", file=sys.stderr)
        return 2
    document = report.to_dict()  # the JSON edge
    print(json.dumps(document) if args.json else format_summary(document))
    # attacks: 1 if /healthz failed during the attack; the load: 1 if a request failed
    return 0 if report.ok else 1


def _check_attack(args: argparse.Namespace) -> None:
    from purgatory.loadgen import attacks

    attacks.loopback_target(args.url)
    sockets = args.slowloris + args.idle + args.slow_bodies
    if args.flood and sockets:
        raise ValueError("--flood runs alone: not with --slowloris, --idle or --slow-bodies")
    if sockets > attacks.MAX_SOCKETS:
        raise ValueError(
            f"--slowloris, --idle and --slow-bodies open at most {attacks.MAX_SOCKETS} sockets"
        )
    if not 0 < args.duration <= attacks.MAX_DURATION_S:
        raise ValueError(f"--duration must be in (0, {attacks.MAX_DURATION_S:g}] s for attacks")
    if not 0 < args.trickle_s <= 60:
        raise ValueError("--trickle-s must be in (0, 60]")
    if args.records < 1:
        raise ValueError("--records must be >= 1")


async def _attack(args: argparse.Namespace) -> SocketsAttackReport | FloodReport:
    from purgatory.loadgen import attacks

    if args.flood:
        return await attacks.produce_flood(
            args.url,
            args.topic,
            args.partitions,
            args.flood_producers,
            args.records,
            args.value_bytes,
            args.acks,
            args.duration,
        )
    return await attacks.sockets_attack(
        args.url,
        args.slowloris,
        args.idle,
        args.trickle_s,
        args.duration,
        args.slow_bodies,
        args.slow_body_bytes,
    )
