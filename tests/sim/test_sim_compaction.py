"""Log compaction on one replica's log (purgatory.sim.cleaner), as Kafka's log cleaner:
each rule with the broker's clock given, no sleeps."""

from __future__ import annotations

from purgatory.kafka.record_batches import WireBatch, encode_batch
from purgatory.sim.batches import TRANSACTIONAL
from purgatory.sim.cleaner import clean
from purgatory.sim.log import Log, LogConfig
from purgatory.sim.producers import EndTxnMarker

DAY = 86_400_000


def _log(**config: object) -> Log:
    return Log(LogConfig(compact=True, delete=False, **config))  # type: ignore[arg-type]


def put(
    log: Log,
    records: list[tuple[bytes | None, bytes | None]],
    now: float = 0.0,
    producer: tuple[int, int, int] = (-1, -1, -1),
    attributes: int = 0,
) -> None:
    wire = WireBatch(bytearray(encode_batch(0, 0, records, int(now), producer, attributes)))
    log.append([], 0, wire, now_ms=now)


def run(log: Log, now: float, *, upper: int | None = None, force: bool = False) -> None:
    for _ in clean(log, log.leo if upper is None else upper, now, force=force):
        pass


def view(log: Log) -> list[tuple[int, bytes | None, bool]]:
    out = []
    for batch in log.batches_between(0, log.leo):
        if not batch.control:
            out += batch.compaction_view()
    return out


def test_the_latest_value_of_each_key_stays_offsets_kept_and_fetches_cross_the_gaps() -> None:
    log = _log()
    put(log, [(b"a", b"1"), (b"b", b"1")])
    put(log, [(b"a", b"2")])
    put(log, [(b"c", b"1"), (b"b", b"2")])
    run(log, 0, force=True)
    assert view(log) == [(2, b"a", False), (3, b"c", False), (4, b"b", False)]
    assert log.leo == 5
    assert log.log_start_offset == 0
    assert [r.offset for r in log.read_records(0, 5, 1 << 20)] == [2, 3, 4]
    assert [r.offset for r in log.read_records(1, 5, 1)] == [2]  # from a gap: the next batch
    assert log.record_at(0) is None
    assert log.record_at(4) is not None


def test_tombstones_stay_for_delete_retention_ms_after_the_clean_then_go() -> None:
    log = _log(delete_retention_ms=DAY)
    put(log, [(b"a", b"1"), (b"b", b"1")])
    put(log, [(b"a", None)])
    run(log, 1000, force=True)
    assert view(log) == [(1, b"b", False), (2, b"a", True)]
    put(log, [(b"x", b"1")], now=2000)
    run(log, 1000 + DAY - 1, force=True)
    assert (2, b"a", True) in view(log)
    put(log, [(b"y", b"1")], now=3000)
    run(log, 1000 + DAY, force=True)
    assert [key for _, key, _ in view(log)] == [b"b", b"x", b"y"]


def test_the_active_segment_is_never_cleaned() -> None:
    log = _log(segment_bytes=10_000_000)
    put(log, [(b"a", b"1")])
    put(log, [(b"a", b"2")])
    run(log, 0)  # everything is in the active segment: nothing is cleanable
    assert len(view(log)) == 2
    assert log.segments == [0]


def test_segments_roll_by_segment_ms_and_the_dirty_ratio_decides() -> None:
    log = _log(segment_ms=100, min_cleanable_dirty_ratio=0.5)
    put(log, [(b"a", b"1")], now=0)
    put(log, [(b"a", b"2")], now=50)
    put(log, [(b"b", b"1")], now=200)  # rolls: [0, 2) is a closed segment
    assert log.segments == [0, 2]
    run(log, 200)  # all of the closed part is dirty: ratio 1 > 0.5
    assert [o for o, _, _ in view(log)] == [1, 2]
    put(log, [(b"b", b"2")], now=400)  # rolls again: [2, 3) is dirty, [0, 2) clean
    clean_bytes = log.bytes_between(0, 2)
    dirty_bytes = log.bytes_between(2, 3)
    assert dirty_bytes / (clean_bytes + dirty_bytes) <= 0.5
    run(log, 400, upper=log.leo)
    assert log.first_dirty == 2  # not due: below the ratio


def test_min_compaction_lag_holds_young_segments_back() -> None:
    log = _log(segment_ms=10, min_compaction_lag_ms=1000, min_cleanable_dirty_ratio=0.0)
    put(log, [(b"a", b"1")], now=0)
    put(log, [(b"a", b"2")], now=100)  # rolls
    put(log, [(b"a", b"3")], now=200)  # rolls
    run(log, 500)
    assert len(view(log)) == 3  # the closed segments are younger than the lag
    run(log, 1050)  # the first segment (last batch at 0) is old enough, the second not
    assert [o for o, _, _ in view(log)] == [0, 1, 2]  # its only record is the latest there
    assert log.first_dirty == 1
    run(log, 1150)
    assert [o for o, _, _ in view(log)] == [1, 2]


def test_max_compaction_lag_forces_a_clean_below_the_ratio() -> None:
    log = _log(segment_ms=10, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=5000)
    put(log, [(b"a", b"1")], now=1)
    put(log, [(b"a", b"2")], now=100)
    put(log, [(b"b", b"1")], now=200)
    run(log, 1000)
    assert len(view(log)) == 3  # ratio 1.0 is never passed
    run(log, 5002)
    assert [o for o, _, _ in view(log)] == [1, 2]


def test_compact_and_delete_together() -> None:
    log = Log(LogConfig(retention_ms=1000, compact=True, delete=True))
    put(log, [(b"a", b"1")], now=0)
    put(log, [(b"b", b"1")], now=2000)
    put(log, [(b"b", b"2")], now=2000)
    assert log.apply_retention(log.leo, 2500)  # retention drops the old batch
    assert log.log_start_offset == 1
    run(log, 2500, force=True)
    assert [o for o, _, _ in view(log)] == [2]
    only = _log(retention_ms=1)
    put(only, [(b"a", b"1")], now=0)
    assert not only.apply_retention(only.leo, 10_000)  # compact alone: no retention


def test_aborted_data_goes_markers_stay_until_their_data_is_gone_then_delete_retention() -> None:
    log = _log(delete_retention_ms=1000)
    put(log, [(b"a", b"1")], producer=(7, 0, 0), attributes=TRANSACTIONAL)
    log.append_marker(7, 0, EndTxnMarker(False, 0), 0)  # abort
    put(log, [(b"a", b"2")], producer=(8, 0, 0), attributes=TRANSACTIONAL)
    log.append_marker(8, 0, EndTxnMarker(True, 0), 0)  # commit
    put(log, [(b"z", b"1")])
    assert [t.aborted for t in log.txns.completed] == [True, False]
    run(log, 0, force=True)
    assert view(log) == [(2, b"a", False), (4, b"z", False)]  # aborted record gone
    markers = [b.base_offset for b in log.batches_between(0, log.leo) if b.control]
    assert markers == [1, 3]  # the commit's data is there; the abort marker waits its horizon
    put(log, [(b"a", b"3")], now=10)
    run(log, 10, force=True)  # the commit's data is gone now: its marker's horizon starts
    run(log, 2000, force=True)
    markers = [b.base_offset for b in log.batches_between(0, log.leo) if b.control]
    # each producer's last batch stays, empty, for its state (as Kafka keeps it), and
    # with it its transaction's marker: until the producer expires
    assert markers == [1, 3]
    assert [b.count for b in log.batches_between(0, 3)] == [0, 1, 0]


def test_an_open_transaction_stops_the_clean_at_the_lso() -> None:
    log = _log()
    put(log, [(b"a", b"1")])
    put(log, [(b"a", b"2")], producer=(9, 0, 0), attributes=TRANSACTIONAL)
    put(log, [(b"a", b"3")])
    lso = log.txns.first_unstable(log.leo)
    assert lso == 1
    run(log, 0, upper=lso, force=True)
    assert [o for o, _, _ in view(log)] == [0, 1, 2]  # nothing at or past the LSO mapped
    assert log.first_dirty <= 1


def test_cleaning_keeps_the_producer_state_and_its_last_batch() -> None:
    log = _log()
    put(log, [(b"a", b"1")], producer=(5, 0, 0))
    put(log, [(b"a", b"2")])
    put(log, [(b"b", b"1")])
    before = log.producers.active()
    run(log, 0, force=True)
    assert log.producers.active() == before
    first = log.batches_between(0, 1)
    assert first
    assert first[0].base_offset == 0
    assert first[0].count == 0
    assert log.producers.check(5, 0, 0, 1) is not None  # its retry is still recognised
