"""``__share_group_state``'s records in Kafka's binary format: ShareSnapshot and
ShareUpdate keys and values, decoded here by their JSON schemas' field layout
(share-coordinator/src/main/resources/common/message/Share*.json), fixed byte vectors,
round trips of any state, and an update merged over its snapshot."""

from __future__ import annotations

import struct
import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from purgatory.kafka.coordinator.offsets_topic import partition_for
from purgatory.kafka.coordinator.share_log import (
    ShareKey,
    ShareState,
    StateBatch,
    combine,
    key_bytes,
    read_key,
    read_value,
    value_bytes,
)

# -- the records against Kafka's schemas -------------------------------------------------

#: the fields of share-coordinator/src/main/resources/common/message/Share*.json, in order
#: (name, type; a list: an array of structs with these fields), and whether flexible
_STATE_BATCH = [
    ("FirstOffset", "int64"),
    ("LastOffset", "int64"),
    ("DeliveryState", "int8"),
    ("DeliveryCount", "int16"),
]
SCHEMAS: dict[str, tuple[bool, list[tuple[str, Any]]]] = {
    "ShareSnapshotKey": (
        False,
        [("GroupId", "string"), ("TopicId", "uuid"), ("Partition", "int32")],
    ),
    "ShareUpdateKey": (
        False,
        [("GroupId", "string"), ("TopicId", "uuid"), ("Partition", "int32")],
    ),
    "ShareSnapshotValue": (
        True,
        [
            ("SnapshotEpoch", "uint16"),
            ("StateEpoch", "int32"),
            ("LeaderEpoch", "int32"),
            ("StartOffset", "int64"),
            ("StateBatches", _STATE_BATCH),
        ],
    ),
    "ShareUpdateValue": (
        True,
        [
            ("SnapshotEpoch", "uint16"),
            ("LeaderEpoch", "int32"),
            ("StartOffset", "int64"),
            ("StateBatches", _STATE_BATCH),
        ],
    ),
}
_FIXED = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "int64": ">q"}


class _Decoder:
    """Kafka's generated readers, for the types these schemas use."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            n |= (byte & 0x7F) << shift
            if byte < 0x80:
                return n
            shift += 7

    def struct(self, flexible: bool, fields: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, kind in fields:
            if isinstance(kind, list):
                count = self.uvarint() - 1 if flexible else self.fixed(">i")
                out[name] = [self.struct(flexible, kind) for _ in range(count)]
            elif kind == "string":
                size = self.uvarint() - 1 if flexible else self.fixed(">h")
                out[name] = self.data[self.pos : self.pos + size].decode()
                self.pos += size
            elif kind == "uuid":
                out[name] = uuid.UUID(bytes=self.data[self.pos : self.pos + 16])
                self.pos += 16
            else:
                out[name] = self.fixed(_FIXED[kind])
        if flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.pos += self.uvarint()
        return out

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)


def decode(schema: str, data: bytes) -> tuple[int, dict[str, Any]]:
    """A key or value as Kafka's serde reads it: the int16 version, then the message."""
    flexible, fields = SCHEMAS[schema]
    decoder = _Decoder(data)
    version = decoder.fixed(">h")
    message = decoder.struct(flexible, fields)
    assert decoder.pos == len(data), f"{len(data) - decoder.pos} bytes left over"
    return version, message


TOPIC = uuid.UUID("8d4e7b36-2f1a-4c6b-9a0e-3b5c1d2e4f60")


def test_a_snapshot_key_and_value_are_kafkas_bytes() -> None:
    key = ShareKey("g", TOPIC, 3)
    assert key_bytes(key) == bytes.fromhex("0000 0001 67") + TOPIC.bytes + bytes.fromhex("00000003")
    assert decode("ShareSnapshotKey", key_bytes(key)) == (
        0,
        {"GroupId": "g", "TopicId": TOPIC, "Partition": 3},
    )
    assert decode("ShareUpdateKey", key_bytes(key, update=True))[0] == 1
    state = ShareState(2, 1, 7, 10, (StateBatch(10, 12, 2, 1), StateBatch(13, 13, 0, 3)))
    assert value_bytes(state) == bytes.fromhex(
        "0000"  # version 0
        "0002"  # snapshot epoch
        "00000001"  # state epoch
        "00000007"  # leader epoch
        "000000000000000a"  # start offset
        "03"  # two batches (compact: n + 1)
        "000000000000000a 000000000000000c 02 0001 00"
        "000000000000000d 000000000000000d 00 0003 00"
        "00"  # no tagged fields
    )
    assert decode("ShareSnapshotValue", value_bytes(state)) == (
        0,
        {
            "SnapshotEpoch": 2,
            "StateEpoch": 1,
            "LeaderEpoch": 7,
            "StartOffset": 10,
            "StateBatches": [
                {"FirstOffset": 10, "LastOffset": 12, "DeliveryState": 2, "DeliveryCount": 1},
                {"FirstOffset": 13, "LastOffset": 13, "DeliveryState": 0, "DeliveryCount": 3},
            ],
        },
    )
    version, update = decode("ShareUpdateValue", value_bytes(state, update=True))
    assert version == 0
    assert update["LeaderEpoch"] == 7
    assert "StateEpoch" not in update
    assert read_key(bytes.fromhex("0002 0001 67") + TOPIC.bytes + bytes(4)) is None


def test_the_coordinator_key_places_a_share_partition_as_kafka_does() -> None:
    # Kafka prints a Uuid as unpadded URL-safe base64: "group:topicId:partition"
    key = ShareKey("g", uuid.UUID(int=0), 0)
    assert key.coordinator_key() == "g:AAAAAAAAAAAAAAAAAAAAAA:0"
    assert partition_for(key.coordinator_key(), 50) == partition_for(
        "g:AAAAAAAAAAAAAAAAAAAAAA:0", 50
    )


_batches = st.lists(
    st.builds(
        lambda first, size, state, count: StateBatch(first, first + size, state, count),
        st.integers(0, 1 << 40),
        st.integers(0, 100),
        st.sampled_from([0, 2, 4]),
        st.integers(0, 1 << 15 - 1),
    ),
    max_size=5,
).map(tuple)


@given(
    st.builds(
        ShareState,
        st.integers(0, (1 << 16) - 1),
        st.integers(-(1 << 31), (1 << 31) - 1),
        st.integers(-(1 << 31), (1 << 31) - 1),
        st.integers(-1, 1 << 62),
        _batches,
    ),
    st.text(max_size=20),
    st.integers(0, (1 << 31) - 1),
)
def test_any_state_round_trips_and_decodes_by_the_schemas(
    state: ShareState, group: str, partition: int
) -> None:
    key = ShareKey(group, TOPIC, partition)
    assert read_key(key_bytes(key)) == (key, False)
    assert read_key(key_bytes(key, update=True)) == (key, True)
    assert read_value(value_bytes(state)) == state
    _, decoded = decode("ShareSnapshotValue", value_bytes(state))
    assert decoded["StartOffset"] == state.start_offset
    assert [
        (b["FirstOffset"], b["LastOffset"], b["DeliveryState"], b["DeliveryCount"])
        for b in decoded["StateBatches"]
    ] == [(b.first, b.last, b.state, b.count) for b in state.batches]
    update = read_value(value_bytes(state, update=True), update=True)
    assert (update.leader_epoch, update.start_offset, update.batches) == (
        state.leader_epoch,
        state.start_offset,
        state.batches,
    )


def test_an_update_is_merged_over_the_snapshot_and_the_start_prunes() -> None:
    snapshot = (StateBatch(0, 9, 0, 1),)
    merged = combine(snapshot, (StateBatch(2, 4, 2, 1), StateBatch(9, 9, 4, 5)), 1)
    assert merged == (
        StateBatch(1, 1, 0, 1),
        StateBatch(2, 4, 2, 1),
        StateBatch(5, 8, 0, 1),
        StateBatch(9, 9, 4, 5),
    )
