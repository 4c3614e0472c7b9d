"""``__transaction_state``'s records in Kafka's binary format (TransactionLogKey v0,
TransactionLogValue v0 and v1): fixed byte vectors worked out from Kafka's message specs,
round trips of any transaction, and a coordinator loading what the one before it wrote."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from purgatory import ManualClock
from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.offsets import OffsetStore
from purgatory.kafka.coordinator.offsets_topic import partition_for
from purgatory.kafka.coordinator.producer_ids import ProducerIds
from purgatory.kafka.coordinator.transactions import TransactionCoordinators
from purgatory.kafka.coordinator.txn_log import key_bytes, read_key, read_value, value_bytes
from purgatory.kafka.coordinator.txn_metadata import (
    TRANSACTION_STATE_TOPIC,
    TxnMetadata,
    TxnSettings,
    TxnState,
)
from purgatory.kafka.record_batches import WireBatch, encode_batch
from purgatory.sim import Cluster


def test_the_key_is_version_0_and_the_id_as_a_string() -> None:
    # int16 version 0, int16 length 4, "txn1"
    assert key_bytes("txn1") == bytes.fromhex("0000 0004 74786e31")
    assert read_key(bytes.fromhex("0000 0004 74786e31")) == "txn1"
    assert read_key(bytes.fromhex("0001 0004 74786e31")) is None  # Kafka's UnknownKey


def test_an_ongoing_transaction_is_a_v0_value() -> None:
    txn = TxnMetadata(
        "t", 1, 0, 60_000, TxnState.ONGOING, partitions={("a", 2), ("a", 0), ("b", 1)}
    )
    txn.start_ms, txn.last_update_ms = 4, 5
    expected = bytes.fromhex(
        "0000"  # version 0
        "0000000000000001"  # producer id
        "0000"  # producer epoch
        "0000ea60"  # transaction timeout 60000
        "01"  # status: Ongoing
        "00000002"  # two topics
        "0001 61"
        "00000002"
        "00000000"
        "00000002"  # a: [0, 2]
        "0001 62"
        "00000001"
        "00000001"  # b: [1]
        "0000000000000005"  # last update
        "0000000000000004"  # start
    )
    assert value_bytes(txn) == expected
    assert read_value("t", expected) == txn


def test_an_empty_transaction_has_null_partitions() -> None:
    txn = TxnMetadata("t", 7, 3, 1000, TxnState.EMPTY, last_update_ms=9)
    expected = bytes.fromhex(
        "000000000000000000070003000003e800ffffffff0000000000000009ffffffffffffffff"
    )
    assert value_bytes(txn) == expected
    assert read_value("t", expected) == txn


def test_tagged_fields_make_a_v1_value() -> None:
    txn = TxnMetadata(
        "t",
        2,
        0,
        1000,
        TxnState.PREPARE_COMMIT,
        last_producer_epoch=32_766,
        previous_producer_id=1,
        partitions={("a", 0)},
        groups={"g"},
        start_ms=1,
        last_update_ms=2,
    )
    expected = bytes.fromhex(
        "0001"  # version 1
        "0000000000000002"
        "0000"
        "000003e8"
        "02"  # PrepareCommit
        "02"  # compact array: one topic
        "0261"
        "02"
        "00000000"
        "00"  # "a", [0], no tags
        "0000000000000002"
        "0000000000000001"
        "03"  # three tagged fields, by tag
        "00"
        "08"
        "0000000000000001"  # 0: previous producer id
        "904e"
        "03"
        "02"
        "0267"  # 10000: groups ["g"]
        "914e"
        "02"
        "7ffe"  # 10001: last producer epoch
    )
    assert value_bytes(txn) == expected
    assert read_value("t", expected) == txn


def test_kafkas_own_v1_tags_are_read_and_unknown_ones_skipped() -> None:
    value = bytes.fromhex(
        "0001"
        "0000000000000002"
        "0001"
        "000003e8"
        "04"
        "01"  # CompleteCommit, no topics
        "0000000000000002"
        "0000000000000001"
        "03"
        "01"
        "08"
        "0000000000000009"  # next producer id
        "02"
        "02"
        "0002"  # client transaction version
        "05"
        "01"
        "ff"  # a tag nobody here knows
    )
    txn = read_value("t", value)
    assert (txn.next_producer_id, txn.client_txn_version) == (9, 2)
    assert (txn.state, txn.partitions, txn.previous_producer_id) == (
        TxnState.COMPLETE_COMMIT,
        set(),
        -1,
    )


@pytest.mark.parametrize(
    "value",
    [
        "0002",  # an unknown version
        "000000000000000000010000000003e809",  # status 9, and cut short
        "000000000000000000010000000003e800ffffffff00",  # cut short
        "0000"
        "0000000000000001"
        "0000"
        "000003e8"
        "00"
        "ffffffff"
        "0000000000000000"
        "0000000000000000"
        "00",  # a byte past the end
    ],
)
def test_a_value_that_does_not_decode_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=r"version|status|ends at|past the"):
        read_value("t", bytes.fromhex(value))


def test_an_empty_transaction_with_partitions_is_refused() -> None:
    with pytest.raises(ValueError, match="Empty"):
        value_bytes(TxnMetadata("t", 1, 0, 1, TxnState.EMPTY, partitions={("a", 0)}))


_names = st.text(min_size=0, max_size=12)
_int16 = st.integers(-1, (1 << 15) - 1)
_int64 = st.integers(-1, (1 << 63) - 1)


@st.composite
def _txns(draw: st.DrawFn) -> TxnMetadata:
    state = draw(st.sampled_from(TxnState))
    empty = state is TxnState.EMPTY
    partitions = set() if empty else draw(st.sets(st.tuples(_names, st.integers(0, (1 << 31) - 1))))
    return TxnMetadata(
        draw(_names),
        draw(_int64),
        draw(_int16),
        draw(st.integers(0, (1 << 31) - 1)),
        state,
        last_producer_epoch=draw(_int16),
        previous_producer_id=draw(_int64),
        partitions=partitions,
        groups=set() if empty else draw(st.sets(_names, max_size=3)),
        start_ms=draw(_int64),
        last_update_ms=draw(_int64),
        next_producer_id=draw(_int64),
        client_txn_version=draw(st.integers(0, 2)),
    )


@given(_txns())
def test_any_transaction_round_trips(txn: TxnMetadata) -> None:
    assert read_key(key_bytes(txn.transactional_id)) == txn.transactional_id
    assert read_value(txn.transactional_id, value_bytes(txn)) == txn


def _batch(key: bytes, value: bytes | None) -> WireBatch:
    return WireBatch(bytearray(encode_batch(0, -1, [(key, value)], 1)))


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("never so")


@pytest.mark.asyncio
async def test_the_next_coordinator_loads_what_the_last_one_wrote() -> None:
    """What a coordinator writes is Kafka's records, read back with Kafka's format; the
    next leader of the partition loads the same transaction from them, and an expired
    id's tombstone (a null value, as Kafka writes it) removes it there too."""
    clock = ManualClock(1_700_000_000_000)
    async with Cluster(3, seed=1) as cluster:
        await cluster.create_topic("t", 2, 3)
        txns = TransactionCoordinators(
            cluster,
            ProducerIds(),
            OffsetStore(),
            TxnSettings(num_partitions=3, id_expiration_ms=60_000),
            clock=clock,
            wall_ms=lambda: int(clock()),
            reaper_enabled=False,
            batch=_batch,
        )
        try:
            assert await txns.ensure_topic() is ErrorCode.NONE
            owner = txns.owner("tx")
            assert owner is not None
            _, pid, epoch = await owner.init_producer_id("tx", 10_000, None)
            assert await owner.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)]) is (
                ErrorCode.NONE
            )
            ongoing = owner.describe("tx")
            assert isinstance(ongoing, TxnMetadata)
            index = partition_for("tx", 3)

            def stored() -> list[tuple[str | None, bytes | None]]:
                described = cluster.describe_partition(TRANSACTION_STATE_TOPIC, index)
                assert described is not None
                batches = cluster.stored_batches(
                    TRANSACTION_STATE_TOPIC, index, 0, described.high_watermark
                )
                return [
                    (read_key(r.key or b""), r.value)
                    for b in batches
                    if b.wire is not None
                    for r in WireBatch(bytearray(b.wire)).records()
                ]

            records = stored()
            assert [key for key, _ in records] == ["tx", "tx"]
            assert records[-1][1] is not None
            assert read_value("tx", records[-1][1]) == ongoing
            await cluster.fail_over(TRANSACTION_STATE_TOPIC, index)
            successor = txns.owner("tx")
            assert successor is not None
            assert successor is not owner
            assert successor.describe("tx") == ongoing
            assert (await successor.end_txn("tx", pid, epoch, commit=False))[0] is ErrorCode.NONE
            await _until(
                lambda: (
                    getattr(successor.describe("tx"), "state", None) is (TxnState.COMPLETE_ABORT)
                )
            )
            clock.advance(60_000)
            assert txns.expirations.timer.run_due() == 1
            await _until(lambda: stored()[-1][1] is None)  # the tombstone
            await cluster.fail_over(TRANSACTION_STATE_TOPIC, index)
            third = txns.owner("tx")
            assert third is not None
            assert third is not successor
            assert third.describe("tx") is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        finally:
            await txns.close()
