"""HW, ISR and leader-epoch logic of a partition, without an event loop."""

from __future__ import annotations

from purgatory.sim.partition import Partition


def _partition() -> tuple[Partition, list[tuple[int, int]]]:
    changes: list[tuple[int, int]] = []
    p = Partition(
        "t", 0, [0, 1, 2], now_ms=0.0, hw_listeners=[lambda _p, o, n: changes.append((o, n))]
    )
    return p, changes


def _replicate(p: Partition, follower: int, now: float) -> tuple[bool, bool, bool]:
    """The follower fetches everything, applies it, and reports its new LEO."""
    log = p.logs[follower]
    batches = p.leader_log.read_batches(log.leo, p.leo, 1 << 20)
    p.apply_fetch(follower, batches, p.hw, p.leader_log.log_start_offset)
    return p.update_follower(follower, log.leo, log.log_start_offset, now)


def test_hw_is_min_leo_over_isr_and_only_moves_forward() -> None:
    p, changes = _partition()
    p.append([(None, b"a"), (None, b"b")])
    assert p.hw == 0  # followers have not fetched
    _replicate(p, 1, 1.0)
    assert p.hw == 0  # follower 2's LEO is still unknown
    hw_advanced, _, _ = _replicate(p, 2, 2.0)
    assert hw_advanced
    assert p.hw == 2
    assert changes == [(0, 2)]
    # a stale fetch offset from a follower cannot pull the HW back
    p.update_follower(1, 0, 0, 3.0)
    assert p.hw == 2


def test_isr_shrinks_after_lag_and_hw_then_advances_without_the_laggard() -> None:
    p, _ = _partition()
    _replicate(p, 1, 0.0)
    _replicate(p, 2, 0.0)
    p.append([(None, b"a")])
    _replicate(p, 1, 100.0)
    _replicate(p, 1, 100.0)
    assert p.hw == 0  # follower 2 has not fetched the new record
    assert p.shrink_isr(now_ms=500.0, lag_max_ms=1000) == []
    _replicate(p, 1, 1400.0)
    assert p.shrink_isr(now_ms=1500.0, lag_max_ms=1000) == [2]
    assert p.isr == {0, 1}
    assert p.maybe_increment_hw()
    assert p.hw == 1


def test_a_follower_at_the_leaders_leo_stays_in_the_isr_however_long_it_waits() -> None:
    """Kafka's isCaughtUp: a follower whose LEO is the leader's is in sync, even when its
    last fetch (a long poll on an idle partition) is older than the lag bound."""
    p, _ = _partition()
    p.append([(None, b"a")])
    _replicate(p, 1, 100.0)
    _replicate(p, 1, 100.0)
    _replicate(p, 2, 100.0)
    _replicate(p, 2, 100.0)
    assert p.shrink_isr(now_ms=5000.0, lag_max_ms=1000) == []
    assert p.isr == {0, 1, 2}
    p.append([(None, b"b")])  # now behind, and its last catch-up is old: out
    assert p.shrink_isr(now_ms=5000.0, lag_max_ms=1000) == [1, 2]


def test_caught_up_follower_rejoins_isr() -> None:
    p, _ = _partition()
    p.isr.discard(2)
    p.append([(None, b"a")])
    _replicate(p, 1, 1.0)
    _replicate(p, 1, 1.0)
    _, _, expanded = _replicate(p, 2, 2.0)
    assert expanded
    assert 2 in p.isr


def test_election_bumps_epoch_and_truncates_divergent_follower() -> None:
    p, _ = _partition()
    p.append([(None, b"a")])
    for _ in range(2):
        _replicate(p, 1, 1.0)
        _replicate(p, 2, 1.0)
    assert p.hw == 1
    p.append([(None, b"unreplicated")])  # only on broker 0
    p.isr.discard(0)
    p.elect(1, 2.0)
    assert (p.leader, p.leader_epoch) == (1, 1)
    p.append([(None, b"from-1")])
    p.become_follower(0)
    assert p.logs[0].leo == 1  # the unreplicated record is gone
    _replicate(p, 0, 3.0)
    assert p.logs[0].record_at(1).value == b"from-1"  # type: ignore[union-attr]


def test_offline_partition_has_no_hw_and_new_epoch() -> None:
    p, _ = _partition()
    p.elect(None, 1.0)
    assert p.leader is None
    assert p.hw == 0
    assert p.leader_epoch == 1
    assert not p.maybe_increment_hw()
