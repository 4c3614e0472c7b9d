"""An independent, plain-Python analysis of trace files, to check the Spark results against.

It shares no code with ``purgatory.analyze``: parsing uses ``json``, statistics use sorting.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from purgatory._outcomes import Outcome

OUTCOMES = set(Outcome)  # the product's vocabulary (not the analysis' code)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and not isinstance(v, bool)


def valid_event(line: str) -> dict[str, Any] | None:
    try:
        e = json.loads(line)
    except ValueError:
        return None
    if not isinstance(e, dict):
        return None
    ok = (
        all(isinstance(e.get(k), str) for k in ("purgatory", "op_id", "kind", "outcome"))
        and isinstance(e.get("keys"), list)
        and all(isinstance(k, str) for k in e["keys"])
        and _is_int(e.get("created_at_ms"))
        and _is_num(e.get("duration_ms"))
        and _is_int(e.get("timeout_ms"))
        and _is_int(e.get("checks"))
        and e.get("outcome") in OUTCOMES
    )
    if not ok or e["duration_ms"] < 0 or math.isnan(e["duration_ms"]):
        return None
    return e


def _files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    found = []
    for root, _, names in os.walk(path):
        found += [os.path.join(root, n) for n in names if not n.startswith((".", "_"))]
    return sorted(found)


@dataclass
class Reference:
    events: list[dict[str, Any]] = field(default_factory=list)
    malformed: int = 0
    blank: int = 0

    def groups(self, by_kind: bool) -> dict[tuple[str, ...], list[dict[str, Any]]]:
        out: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
        for e in self.events:
            out[(e["purgatory"], e["kind"]) if by_kind else (e["purgatory"],)].append(e)
        return dict(out)

    def per_second(self) -> dict[tuple[str, int], dict[str, int]]:
        """(purgatory, second) -> arrivals, finishes by outcome, in flight at end of second."""
        rows: dict[tuple[str, int], Counter[str]] = defaultdict(Counter)
        names = {"completed": "completions", "expired": "expirations"}
        names |= {"cancelled": "cancellations", "error": "errors"}
        for e in self.events:
            created = math.floor(e["created_at_ms"] / 1000)
            finished = math.floor((e["created_at_ms"] + e["duration_ms"]) / 1000)
            rows[(e["purgatory"], created)]["arrivals"] += 1
            rows[(e["purgatory"], finished)][names[e["outcome"]]] += 1
        result = {}
        for (name, second), c in rows.items():
            created_by = sum(
                1
                for e in self.events
                if e["purgatory"] == name and math.floor(e["created_at_ms"] / 1000) <= second
            )
            finished_by = sum(
                1
                for e in self.events
                if e["purgatory"] == name
                and math.floor((e["created_at_ms"] + e["duration_ms"]) / 1000) <= second
            )
            result[(name, second)] = {
                "arrivals": c["arrivals"],
                "completions": c["completions"],
                "expirations": c["expirations"],
                "cancellations": c["cancellations"],
                "errors": c["errors"],
                "in_flight": created_by - finished_by,
            }
        return result

    def hot_keys(self, top_n: int) -> dict[str, list[tuple[str, int, int]]]:
        """purgatory -> [(key, operations, expired)] by operations desc, key asc."""
        ops: dict[str, Counter[str]] = defaultdict(Counter)
        expired: dict[str, Counter[str]] = defaultdict(Counter)
        for e in self.events:
            for key in set(e["keys"]):
                ops[e["purgatory"]][key] += 1
                expired[e["purgatory"]][key] += e["outcome"] == "expired"
        return {
            name: [
                (k, n, expired[name][k])
                for k, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:top_n]
            ]
            for name, counter in ops.items()
        }


def load(*paths: str) -> Reference:
    ref = Reference()
    for path in paths:
        for name in _files(path):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(name, "rt", encoding="utf-8") as fh:
                for line in fh.read().splitlines():
                    if not line.strip():
                        ref.blank += 1
                    elif (e := valid_event(line)) is None:
                        ref.malformed += 1
                    else:
                        ref.events.append(e)
    return ref


def rank_within(values: list[float], value: float, q: float, accuracy: int) -> bool:
    """True if ``value`` is a sample whose rank is within n/accuracy (+1) of rank q*n.

    This is the guarantee of Spark's percentile_approx; comparing ranks, not values, keeps
    the check meaningful on skewed data.
    """
    ordered = sorted(values)
    n = len(ordered)
    lo = bisect.bisect_left(ordered, value) + 1  # 1-based ranks held by ``value``
    hi = bisect.bisect_right(ordered, value)
    if hi < lo:
        return False  # not a sample at all
    target = q * n
    slack = n / accuracy + 1
    return lo - slack <= target <= hi + slack
