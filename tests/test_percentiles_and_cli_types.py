"""The package's one percentile definition and its shared command-line value types."""

from __future__ import annotations

import argparse
import math
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from purgatory.cli_types import int_at_least, non_negative_float, positive_float
from purgatory.percentiles import percentile


def test_nearest_rank_on_one_to_a_hundred_is_the_percent_itself() -> None:
    ordered = [float(v) for v in range(1, 101)]
    for q in range(1, 101):
        assert percentile(ordered, q) == q


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=200), st.integers(1, 99))
def test_nearest_rank_lies_beside_the_interpolated_quantile(values: list[float], q: int) -> None:
    # statistics.quantiles(method="inclusive") interpolates between the order statistics
    # at ranks floor(h) and ceil(h), h = 1 + (n - 1) q / 100; nearest rank is ceil(q n / 100),
    # which is never more than one rank away from that pair.
    ordered = sorted(values)
    n = len(ordered)
    interpolated = statistics.quantiles(ordered, n=100, method="inclusive")[q - 1]
    ours = percentile(ordered, q)
    rank = max(1, math.ceil(q * n / 100))  # not q / 100 * n: 28 / 100 * 25 is above 7
    assert ours == ordered[rank - 1]
    low = ordered[max(0, rank - 2)]
    high = ordered[min(n - 1, rank)]
    assert low - 1e-9 <= interpolated <= high + 1e-9


def test_percentile_refuses_empty_input_and_bad_q() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)
    with pytest.raises(ValueError, match="q must be"):
        percentile([1.0], 0)
    with pytest.raises(ValueError, match="q must be"):
        percentile([1.0], 101)


def test_max_is_the_hundredth_percentile() -> None:
    values = sorted(random.Random(1).random() for _ in range(1000))
    assert percentile(values, 100) == values[-1]


@pytest.mark.parametrize(
    ("parse", "text", "value"),
    [
        (int_at_least(0), "0", 0),
        (int_at_least(1), "12", 12),
        (positive_float, "0.5", 0.5),
        (non_negative_float, "0", 0.0),
    ],
)
def test_cli_types_accept(parse: object, text: str, value: float) -> None:
    assert callable(parse)
    assert parse(text) == value


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (int_at_least(1), "0", "must be >= 1"),
        (int_at_least(0), "1.5", "expected an integer"),
        (positive_float, "0", "positive finite"),
        (positive_float, "inf", "positive finite"),
        (positive_float, "nan", "positive finite"),
        (positive_float, "fast", "expected a number"),
        (non_negative_float, "-1", ">= 0"),
    ],
)
def test_cli_types_refuse_with_a_reason(parse: object, text: str, message: str) -> None:
    assert callable(parse)
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse(text)
