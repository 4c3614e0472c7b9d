"""Synthetic operation traces with known answers, for tests and the scale benchmark.

``python -m purgatory.analyze.generate --events N --out PATH [--seed S] [--malformed K]``
writes N valid events (plus K malformed lines at random positions) as JSON Lines, gzipped
if PATH ends in ``.gz``. With ``--parts P`` PATH is a directory of P files written by
``--jobs`` processes. The lines are what the product writes (kinds, labels, error codes,
the bytes of :meth:`purgatory.trace.TraceEvent.to_json`), formatted with
:func:`purgatory.trace.line_template` rather than json.dumps, for speed. The returned
``TraceStats`` holds the exact counts the analysis must reproduce.
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import random
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Final

from purgatory._outcomes import Outcome
from purgatory.errors import ErrorCode
from purgatory.trace import line_template

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
# purgatory -> (share of ops, timeout ms, P(expired), kinds); the kinds are the
# simulation's (purgatory.sim.operations)
PURGATORIES: tuple[tuple[str, float, int, float, tuple[str, ...]], ...] = (
    ("Produce", 0.45, 1500, 0.05, ("produce",)),
    ("Fetch", 0.45, 500, 0.30, ("fetch-consumer", "fetch-follower")),
    ("DeleteRecords", 0.10, 3000, 0.10, ("delete-records",)),
)
#: an expired fetch is an answer without records, not an error; an expired produce or
#: delete answers REQUEST_TIMED_OUT for its undecided partitions
EXPIRY_ERROR: Final = {"Fetch": None, "Produce": ErrorCode.REQUEST_TIMED_OUT}
BROKERS = 3
TOPICS = ("orders", "payments", "clicks", "logs", "metrics", "users", "audit", "events")
PARTITIONS = 16
ERROR_CODES = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
MALFORMED_KINDS = ("bad_json", "missing_field", "wrong_type", "bad_outcome", "null_field")
_LINE: Final = line_template(("broker",))


@dataclass
class TraceStats:
    """Exact answers for a generated trace."""

    events: int = 0
    malformed: int = 0
    outcomes: Counter[tuple[str, Outcome]] = field(default_factory=Counter)

    def merge(self, other: TraceStats) -> None:
        self.events += other.events
        self.malformed += other.malformed
        self.outcomes.update(other.outcomes)


def _malformed(rng: random.Random, good_line: str, index: int) -> str:
    kind = MALFORMED_KINDS[index % len(MALFORMED_KINDS)]
    if kind == "bad_json":
        return good_line[: rng.randrange(1, len(good_line) - 2)] + "\n"
    if kind == "missing_field":
        return good_line.replace('"checks":', '"checkz":')
    if kind == "wrong_type":
        start = good_line.index('"created_at_ms":') + len('"created_at_ms":')
        end = good_line.index(",", start)
        return good_line[:start] + '"yesterday"' + good_line[end:]
    if kind == "bad_outcome":
        start = good_line.index('"outcome":"') + len('"outcome":"')
        end = good_line.index('"', start)
        return good_line[:start] + "exploded" + good_line[end:]
    return good_line.replace('"kind":"', '"kind":null,"was":"')


def write_events(
    out: IO[str],
    events: int,
    *,
    seed: int = 0,
    malformed: int = 0,
    first_index: int = 0,
    rate_per_s: float = 20_000.0,
    prefix: str = "op",
) -> TraceStats:
    """Write ``events`` valid lines and ``malformed`` bad ones to ``out``; return the answers.

    Events ``first_index ..`` are spaced ``1/rate_per_s`` apart on average, so parts written
    separately with consecutive ``first_index`` form one continuous trace.
    """
    rng = random.Random(seed)
    rand = rng.random
    stats = TraceStats(events=events, malformed=malformed)
    bad_at = set(rng.sample(range(events + malformed), malformed)) if malformed else set()
    gap_ms = 1000.0 / rate_per_s
    t = START_MS + first_index * gap_ms
    counts: Counter[tuple[str, Outcome]] = stats.outcomes
    buf: list[str] = []
    written = 0
    line = ""
    for position in range(events + malformed):
        t += 2.0 * gap_ms * rand()
        name, timeout, p_expired, kinds = _pick_purgatory(rand())
        kind = kinds[int(rand() * len(kinds))]
        o = rand()
        error = lateness = "null"
        if o < p_expired:
            outcome = Outcome.EXPIRED
            late = round(-2.0 * _log(rand()), 3)
            lateness = str(late)
            duration = timeout + late
            code = EXPIRY_ERROR.get(name, ErrorCode.REQUEST_TIMED_OUT)
            error = "null" if code is None else f'"{code}"'
        elif o < p_expired + 0.05:
            outcome = Outcome.CANCELLED
            duration = timeout * rand()
        elif o < p_expired + 0.08:
            outcome = Outcome.ERROR
            duration = 0.1 * timeout * rand()
            error = f'"{ERROR_CODES[int(rand() * 2)]}"'
        else:
            outcome = Outcome.COMPLETED
            duration = timeout * rand() ** 3
        n_keys = 1 + int(4 * rand() ** 2)
        keys = ",".join(
            f'"{TOPICS[int(len(TOPICS) * rand() ** 2)]}-{int(PARTITIONS * rand() ** 2)}"'
            for _ in range(n_keys)
        )
        broker = int(rand() * BROKERS)
        line = _LINE % (
            name, broker, f"{prefix}-{first_index + written}", kind, keys, int(t),
            round(duration, 3), timeout, outcome, error, lateness, 1 + int(20 * rand() * rand()),
        )  # fmt: skip
        if position in bad_at:
            line = _malformed(rng, line, len(buf) + position)
        else:
            counts[(name, outcome)] += 1
            written += 1
        buf.append(line)
        if len(buf) >= 20_000:
            out.write("".join(buf))
            buf.clear()
    out.write("".join(buf))
    return stats


def _pick_purgatory(r: float) -> tuple[str, int, float, tuple[str, ...]]:
    """Map a uniform draw to (name, timeout, P(expired), kinds) by share."""
    for name, share, timeout, p_expired, kinds in PURGATORIES:
        if r < share:
            return name, timeout, p_expired, kinds
        r -= share
    name, _, timeout, p_expired, kinds = PURGATORIES[-1]
    return name, timeout, p_expired, kinds


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -700.0


def _open(path: str) -> IO[str]:
    if path.endswith(".gz"):
        # Level 1: compression would otherwise dominate the generation time.
        return gzip.open(path, "wt", encoding="utf-8", compresslevel=1)
    return open(path, "w", encoding="utf-8")


def generate_file(
    path: str,
    events: int,
    *,
    seed: int = 0,
    malformed: int = 0,
    first_index: int = 0,
    rate_per_s: float = 20_000.0,
) -> TraceStats:
    """Write one trace file (gzipped if ``path`` ends in ``.gz``)."""
    with _open(path) as out:
        return write_events(
            out,
            events,
            seed=seed,
            malformed=malformed,
            first_index=first_index,
            rate_per_s=rate_per_s,
        )


def _part(args: tuple[str, int, int, int, int, float]) -> TraceStats:
    path, events, seed, malformed, first_index, rate = args
    return generate_file(
        path, events, seed=seed, malformed=malformed, first_index=first_index, rate_per_s=rate
    )


def generate(
    out: str,
    events: int,
    *,
    seed: int = 0,
    malformed: int = 0,
    parts: int = 1,
    jobs: int = 1,
    gzip_parts: bool = False,
    rate_per_s: float = 20_000.0,
) -> TraceStats:
    """Write a trace to ``out``: one file, or with ``parts > 1`` a directory of parts."""
    if parts <= 1:
        return generate_file(out, events, seed=seed, malformed=malformed, rate_per_s=rate_per_s)
    os.makedirs(out, exist_ok=True)
    suffix = ".jsonl.gz" if gzip_parts else ".jsonl"
    tasks = []
    for p in range(parts):
        lo, hi = events * p // parts, events * (p + 1) // parts
        bad = malformed * (p + 1) // parts - malformed * p // parts
        path = os.path.join(out, f"part-{p:05d}{suffix}")
        tasks.append((path, hi - lo, seed * 1_000_003 + p, bad, lo, rate_per_s))
    total = TraceStats()
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        for stats in pool.map(_part, tasks):
            total.merge(stats)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m purgatory.analyze.generate")
    parser.add_argument("--events", type=int, required=True, help="valid events to write")
    parser.add_argument("--out", required=True, help="file (.gz = gzip) or, with --parts, dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--malformed", type=int, default=0, help="malformed lines to add")
    parser.add_argument("--parts", type=int, default=1, help="files to split the trace into")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    parser.add_argument(
        "--gzip", dest="gzip_parts", action="store_true", help="gzip the parts (with --parts)"
    )
    parser.add_argument(
        "--rate",
        dest="rate_per_s",
        metavar="RATE",
        type=float,
        default=20_000.0,
        help="arrivals per second",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    stats = generate(**vars(args))  # each flag's dest is an argument of generate()
    elapsed = time.monotonic() - started
    print(
        f"wrote {stats.events} events and {stats.malformed} malformed lines to {args.out}"
        f" in {elapsed:.1f}s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
