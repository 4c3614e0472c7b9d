"""Purgatory labels: checked once at construction, read-only, the same on both builds."""

from __future__ import annotations

from typing import Any

import pytest

from purgatory import DelayedOperationPurgatory


@pytest.mark.parametrize(
    ("labels", "error", "match"),
    [
        (["broker"], TypeError, "mapping"),
        ({"broker": 1}, TypeError, "must be a str"),
        ({"bro ker": "1"}, ValueError, "identifier"),
        ({"purgatory": "x"}, ValueError, "reserved"),
        ({"kind": "x"}, ValueError, "reserved"),
        ({"__name": "x"}, ValueError, "reserved"),
    ],
)
def test_bad_labels_are_refused(labels: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        DelayedOperationPurgatory("P", labels=labels)


def test_labels_are_read_only_and_shown() -> None:
    purgatory: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory(
        "P", labels={"broker": "2"}
    )
    with pytest.raises(TypeError):
        purgatory.labels["broker"] = "3"  # type: ignore[index]
    assert "broker=2" in repr(purgatory)
