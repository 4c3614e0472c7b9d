"""One definition of a percentile for every report in the package.

The **nearest-rank** percentile: the smallest sample such that at least ``q`` percent of the
samples are less than or equal to it, i.e. the value of rank ``ceil(q / 100 * n)`` (at least
1) among the ``n`` sorted samples. It is always one of the samples (no interpolation), so a
p99 of whole-millisecond latencies is a whole number of milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``ordered``, which must be
    sorted ascending and non-empty (callers decide what an empty series reports)."""
    if not ordered:
        raise ValueError("percentile of no samples")
    if not 0 < q <= 100:
        raise ValueError(f"q must be in (0, 100], got {q!r}")
    # q * n / 100, not q / 100 * n: 7 / 100 * 100 is 7.000000000000001, whose ceiling
    # would skip a rank (the copies this module replaced all did)
    rank = max(1, math.ceil(q * len(ordered) / 100))
    return float(ordered[rank - 1])
