"""The bus's message format (purgatory/bus/_envelope.py): keys and values in one JSON
list, split over messages and never truncated, and what is not a bus message refused."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from purgatory.bus._envelope import Item, decode, encode

items = st.lists(
    st.text(min_size=1, max_size=20)
    | st.tuples(st.text(min_size=1, max_size=20), st.integers(-(2**63), 2**63 - 1)),
    min_size=1,
    max_size=30,
)


@given(items)
def test_what_is_encoded_decodes_to_the_same_keys_and_values_in_order(
    sent: list[Item],
) -> None:
    sent = [i for i in sent if _encodable(i)]
    keys: list[str] = []
    values: list[tuple[str, int]] = []
    for message in encode("s", sent, 200):
        assert len(message.encode()) <= 200
        sender, some_keys, some_values = decode(message)
        assert sender == "s"
        keys += some_keys
        values += some_values
    assert keys == [i for i in sent if isinstance(i, str)]
    assert values == [i for i in sent if not isinstance(i, str)]


def _encodable(item: Item) -> bool:
    key = item if isinstance(item, str) else item[0]
    try:
        key.encode()
    except UnicodeEncodeError:
        return False
    return True


@pytest.mark.parametrize(
    "items",
    [
        ["s", ["k", True]],  # a bool is no value
        ["s", ["k", 1.5]],
        ["s", ["k", 1, 2]],
        ["s", [1, 2]],
        ["s", ["k"]],
        ["s", 3],
        [["s"], "k"],
        ["s"],
    ],
)
def test_what_no_bus_wrote_is_refused(items: list[object]) -> None:
    with pytest.raises(ValueError, match="not a bus message"):
        decode(json.dumps(items))
