"""CPU per completed acks=all produce in the broker simulation with many in flight on one
partition: threshold waits on the HW (the simulation's path) against watcher lists (every
HW advance re-checks every parked produce), same run, alternating rounds.

A 3-broker cluster, one partition replicated 3 times; the followers' fetchers are stopped,
``--produces`` acks=all produces of one record are parked on the leader, then the HW is
advanced ``--step`` offsets at a time by the followers' fetches (the leader's side of a
replica fetch, as the fetchers send it) until every produce is answered. The figure is the
process CPU of the advance phase over the produces it completed. Virtual time: nothing
sleeps.

    python tools/sim_produce_bench.py --produces 10000 --step 10 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from purgatory.sim import Cluster, ProduceRequest
from purgatory.sim.messages import ProduceResult
from purgatory.sim.replica_manager import ReplicaManager
from purgatory.testing import run_virtual


def one_run(produces: int, step: int, thresholds: bool) -> tuple[float, int, int]:
    """(CPU seconds of the advance phase, produces completed, try_complete calls)."""
    original = ReplicaManager._watch_threshold

    def watcher_lists(self: ReplicaManager, op: Any) -> bool:
        return False

    async def main() -> tuple[float, int, int]:
        async with Cluster(3, seed=1) as c:
            await c.create_topic("t", 1, 3)
            await asyncio.sleep(1.0)
            p = c.partition("t", 0)
            assert p is not None
            assert p.leader is not None
            leader = c.brokers[p.leader].replica_manager
            followers = [b for b in p.replicas if b != p.leader]
            for b in followers:
                c.brokers[b].replica_manager.stop_fetchers()
            await asyncio.sleep(1.0)  # their last parked fetches expire
            answered: list[ProduceResult] = []
            for i in range(produces):
                c.send_produce(
                    ProduceRequest("t", 0, [(None, b"%d" % i)], -1, 600_000), answered.append
                )
            checks_before = sum(op.checks for op in leader.produce_purgatory.pending_operations())
            start = time.process_time()
            offset = 0
            while offset < produces:
                offset = min(offset + step, produces)
                for b in followers:
                    leader.replica_fetch(
                        b, [(p, p.leader_epoch, offset, p.leader_log.log_start_offset)], None
                    )
            cpu = time.process_time() - start
            assert len(answered) == produces
            stats = leader.produce_purgatory.statistics()
            return cpu, stats.completed, checks_before

    if not thresholds:
        ReplicaManager._watch_threshold = watcher_lists  # type: ignore[method-assign]
    try:
        return run_virtual(main())
    finally:
        ReplicaManager._watch_threshold = original  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--produces", type=int, default=10_000)
    parser.add_argument("--step", type=int, default=10, help="offsets per HW advance")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--only", choices=("thresholds", "watcher-lists"), help="run one side (timed whole)"
    )
    args = parser.parse_args()
    sides = [args.only] if args.only else ["thresholds", "watcher-lists"]
    per_op: dict[str, list[float]] = {side: [] for side in sides}
    for r in range(args.rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            cpu, completed, _ = one_run(args.produces, args.step, side == "thresholds")
            per_op[side].append(cpu / completed * 1e6)
    advances = -(-args.produces // args.step)
    print(f"{args.produces} acks=all produces in flight on one partition, {advances} HW advances")
    for side, values in per_op.items():
        print(
            f"{side:>14}: {statistics.median(values):9.2f} us CPU per completed produce"
            f" (median of {len(values)}; {min(values):.2f}-{max(values):.2f})"
        )
    if len(sides) == 2:
        ratios = [w / t for t, w in zip(per_op["thresholds"], per_op["watcher-lists"], strict=True)]
        print(f"watcher lists / thresholds, per round: median {statistics.median(ratios):.1f}x")


if __name__ == "__main__":
    main()
