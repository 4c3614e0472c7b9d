"""DelayedProduce and DelayedFetch on the simulated broker, step by step.

python examples/broker_walkthrough.py
"""

from __future__ import annotations

import asyncio

from purgatory.sim import Cluster, FetchRequest, Latency, ProduceRequest


async def main() -> None:
    loop = asyncio.get_running_loop()
    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("orders", partitions=1, replication_factor=3)
        # Followers take ~50 ms per replication round, so acks=all has to wait.
        for broker in (1, 2):
            cluster.set_replication_latency(broker, Latency(50.0))

        # Broker 0 leads orders-0: requests for it park in broker 0's purgatories.
        leader = cluster.brokers[0].replica_manager

        # A consumer long-polls at the end of the log: it parks in DelayedFetch.
        fetch = loop.create_task(
            cluster.fetch(FetchRequest("orders", 0, offset=0, min_bytes=1, max_wait_ms=2000))
        )
        await asyncio.sleep(0.01)
        print("parked fetches (the consumer + 2 followers):", leader.purgatories["Fetch"].watched)

        start = loop.time()
        result = await cluster.produce(
            ProduceRequest("orders", 0, [(b"id-1", b"2 apples")], acks=1)
        )
        elapsed = 1000 * (loop.time() - start)
        print(f"acks=1   -> {result.error} offset {result.base_offset} in {elapsed:.1f} ms")

        start = loop.time()
        pending = loop.create_task(
            cluster.produce(ProduceRequest("orders", 0, [(b"id-2", b"3 pears")], acks=-1))
        )
        await asyncio.sleep(0.001)
        print("parked produces:", leader.purgatories["Produce"].watched)
        result = await pending
        elapsed = 1000 * (loop.time() - start)
        print(f"acks=all -> {result.error} offset {result.base_offset} after {elapsed:.1f} ms")

        # The consumer woke when the HW covered the first record.
        fetched = await fetch
        print(
            "consumer got",
            [(r.offset, r.value) for r in fetched.records],
            "HW",
            fetched.high_watermark,
        )
        print(cluster.metadata().topics[0].partitions[0])


if __name__ == "__main__":
    asyncio.run(main())
