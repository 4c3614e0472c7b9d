"""Leader failover: parked acks=all produces get NOT_LEADER_OR_FOLLOWER, the client retries
on the new leader, and no acknowledged record is lost.

    python examples/failover_demo.py
"""

from __future__ import annotations

import asyncio

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster, Latency, ProduceRequest


async def produce_with_retry(cluster: Cluster, value: bytes) -> tuple[int, int]:
    """Produce with acks=all, retrying on leadership changes; (attempts, offset)."""
    for attempt in range(1, 6):
        result = await cluster.produce(
            ProduceRequest("payments", 0, [(None, value)], acks=-1, timeout_ms=5000)
        )
        if result.error is ErrorCode.NONE:
            return attempt, result.base_offset
        print(f"  {value.decode()}: {result.error}, retrying")
        await asyncio.sleep(0.05)
    raise RuntimeError("gave up")


async def main() -> None:
    loop = asyncio.get_running_loop()
    async with Cluster(brokers=3, seed=3) as cluster:
        await cluster.create_topic("payments", partitions=1, replication_factor=3)
        acked = {}
        for i in range(5):
            value = b"payment-%d" % i
            acked[value] = (await produce_with_retry(cluster, value))[1]
        # Slow replication so that the next produces are still parked when the leader dies.
        for broker in (1, 2):
            cluster.set_replication_latency(broker, Latency(200.0))
        inflight = [
            loop.create_task(produce_with_retry(cluster, b"payment-%d" % i)) for i in range(5, 8)
        ]
        await asyncio.sleep(0.05)
        old = cluster.metadata().topics[0].partitions[0]
        print(
            f"leader {old.leader} epoch {old.leader_epoch}; crashing it with "
            f"{cluster.brokers[old.leader].replica_manager.purgatories['Produce'].watched} "  # type: ignore[index]
            "produces parked"
        )
        await cluster.crash_broker(old.leader)  # type: ignore[arg-type]
        new = cluster.metadata().topics[0].partitions[0]
        print(
            f"controller elected broker {new.leader} from ISR {old.isr}, epoch {new.leader_epoch}"
        )
        for i, task in zip(range(5, 8), inflight, strict=True):
            attempts, offset = await task
            acked[b"payment-%d" % i] = offset
            print(f"  payment-{i} acked at offset {offset} after {attempts} attempt(s)")
        await cluster.restart_broker(old.leader)  # type: ignore[arg-type]
        p = cluster.partition("payments", 0)
        assert p is not None
        lost = [
            v
            for v, off in acked.items()
            if (r := p.leader_log.record_at(off)) is None or r.value != v
        ]
        print(f"{len(acked)} acked records, lost: {lost or 'none'}")


if __name__ == "__main__":
    asyncio.run(main())
