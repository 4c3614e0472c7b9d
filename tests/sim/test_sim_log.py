"""The replica log: append, read, truncate, delete, divergence."""

from __future__ import annotations

import pytest

from purgatory.sim.batches import RECORD_OVERHEAD, Record, RecordBatch
from purgatory.sim.errors import SimulationError
from purgatory.sim.log import Log


def _log(*batches: tuple[int, int]) -> Log:
    """A log with batches of (records, epoch)."""
    log = Log()
    for count, epoch in batches:
        log.append([(None, b"v%d" % i) for i in range(count)], epoch)
    return log


def test_append_assigns_offsets_and_sizes() -> None:
    log = Log()
    batch = log.append([(b"k", b"abc"), (None, b"")], epoch=3)
    assert (batch.base_offset, batch.end_offset, batch.epoch) == (0, 2, 3)
    assert [r.offset for r in batch.records] == [0, 1]
    assert batch.size == 2 * RECORD_OVERHEAD + 4
    assert log.leo == 2
    assert log.record_at(1) is not None
    assert log.record_at(1).key is None
    assert log.record_at(2) is None


def test_bytes_between_counts_partial_batches_exactly() -> None:
    log = _log((4, 0), (4, 0))
    per = RECORD_OVERHEAD + 2
    assert log.bytes_between(0, 8) == 8 * per
    assert log.bytes_between(1, 7) == 6 * per
    assert log.bytes_between(5, 5) == 0
    assert log.bytes_between(8, 9) == 0


def test_read_records_respects_end_and_reads_whole_batches_within_max_bytes() -> None:
    log = _log((5, 0), (5, 0))
    assert [r.offset for r in log.read_records(1, 4, 1 << 20)] == [1, 2, 3]
    assert [r.offset for r in log.read_records(1, 10, 1 << 20)] == list(range(1, 10))
    # the first batch always comes whole (Kafka's rule: a fetch always makes progress)
    assert [r.offset for r in log.read_records(2, 10, 1)] == [2, 3, 4]


def test_append_batch_must_not_overlap_but_may_follow_a_cleaners_gap() -> None:
    log = _log((2, 0))
    with pytest.raises(ValueError, match="starts at 1"):
        log.append_batch(RecordBatch(1, 0, (Record(1, None, b"x"),), 9))
    log.append_batch(RecordBatch(5, 0, (Record(5, None, b"x"),), 9))  # a gap: 2 to 4 cleaned
    assert (log.leo, [r.offset for r in log.read_records(2, 6, 1 << 20)]) == (6, [5])


def test_truncate_splits_a_batch() -> None:
    log = _log((3, 0), (3, 1))
    log.truncate_to(4)
    assert log.leo == 4
    assert log.epoch_at(3) == 1
    assert log.epoch_at(4) is None
    assert log.bytes_between(0, 4) == 4 * (RECORD_OVERHEAD + 2)
    log.append([(None, b"x")], 2)
    assert log.leo == 5
    assert log.epoch_at(4) == 2


def test_delete_before_moves_log_start_and_rejects_beyond_end() -> None:
    log = _log((3, 0), (3, 0))
    log.delete_before(4)
    assert log.log_start_offset == 4
    assert log.record_at(3) is None
    assert log.record_at(4) is not None
    assert log.batches == 1
    with pytest.raises(ValueError, match="beyond log end"):
        log.delete_before(7)


def test_divergence_offset_follows_epochs() -> None:
    leader = Log()
    follower = Log()
    shared = leader.append([(None, b"a"), (None, b"b")], 0)
    follower.append_batch(shared)
    follower.append([(None, b"stale")], 0)  # written by the old leader, never replicated
    leader.append([(None, b"new")], 1)
    assert follower.divergence_offset(leader) == 2
    follower.truncate_to(follower.divergence_offset(leader))
    assert follower.leo == 2


def test_an_emptied_log_holds_no_bytes() -> None:
    log = _log((2, 0), (3, 0))
    log.delete_before(5)  # every batch goes
    assert (log.batches, log.size_bytes) == (0, 0)
    log.append([(None, b"ab")], 0)
    assert log.size_bytes == RECORD_OVERHEAD + 2
    log.reset_to(9)
    assert log.size_bytes == 0


class _UndecodableWire:
    """A client's batch whose records do not decode (forged under a valid checksum)."""

    buf = bytearray(50)
    record_count = 4
    producer_id, producer_epoch, base_sequence = -1, -1, -1
    transactional = False

    def assign(self, base_offset: int, leader_epoch: int) -> None:
        pass

    def key_values(self) -> list[tuple[bytes | None, bytes]]:
        raise ValueError("record field runs past its record")


def test_a_client_batch_is_decoded_when_read_and_an_undecodable_one_goes_whole() -> None:
    log = _log((2, 0))
    log.append((), 0, _UndecodableWire())
    with pytest.raises(SimulationError, match="CORRUPT_MESSAGE"):
        log.read_records(2, 6, 1 << 20)
    assert log.bytes_between(2, 4) == 25  # its 50 bytes, shared by its 4 records
    log.truncate_to(4)  # inside it: its records cannot be split, so all of them go
    assert (log.leo, log.batches) == (2, 1)
