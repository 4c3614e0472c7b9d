"""Cluster.create_partitions (Kafka's CreatePartitions): new partitions round-robin with
the topic's replication factor or as assigned, each with a leader, in the metadata at
once; Kafka's refusals with its codes and reasons."""

from __future__ import annotations

import pytest

from purgatory.errors import ErrorCode
from purgatory.sim import Cluster, FetchRequest, ProduceRequest
from purgatory.sim.errors import SimulationError
from purgatory.testing import run_virtual


def test_new_partitions_get_replicas_round_robin_leaders_and_take_records() -> None:
    async def main() -> None:
        async with Cluster(3, seed=7) as cluster:
            await cluster.create_topic("t", 2, 2, assignment=[[1, 2], [2, 0]])
            await cluster.create_partitions("t", 5)
            parts = cluster.topics["t"]
            # continuing the topic's own rotation (partition 0 starts at broker 1)
            assert [p.replicas for p in parts[2:]] == [(0, 1), (1, 2), (2, 0)]
            assert [p.leader for p in parts[2:]] == [0, 1, 2]
            meta = {t.name: t for t in cluster.metadata().topics}["t"]
            assert [p.partition for p in meta.partitions] == [0, 1, 2, 3, 4]
            assert cluster.topic_config("t") == parts[2].logs[0].config
            r = await cluster.produce(ProduceRequest("t", 4, [(None, b"x")], acks=-1))
            assert (r.error, r.base_offset) == (ErrorCode.NONE, 0)
            f = await cluster.fetch(FetchRequest("t", 4, 0, min_bytes=0, max_wait_ms=0))
            assert f.error is ErrorCode.NONE

    run_virtual(main())


def test_an_assignment_places_the_new_partitions_and_a_dead_preferred_leader_is_passed_over() -> (
    None
):
    async def main() -> None:
        async with Cluster(3, seed=7) as cluster:
            await cluster.create_topic("t", 1, 2)
            await cluster.crash_broker(2)
            await cluster.create_partitions("t", 3, [[2, 0], [1, 0]])
            parts = cluster.topics["t"]
            assert [p.replicas for p in parts[1:]] == [(2, 0), (1, 0)]
            assert [p.leader for p in parts[1:]] == [0, 1]

    run_virtual(main())


@pytest.mark.parametrize(
    ("count", "assignment", "code", "message"),
    [
        (2, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partition(s)."),
        (
            1,
            None,
            ErrorCode.INVALID_PARTITIONS,
            "The topic t currently has 2 partition(s); 1 would not be an increase.",
        ),
        (
            4,
            [[0, 1]],
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (3, [[0]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, None),
        (3, [[0, 0]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, None),
        (3, [[0, 7]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, None),
    ],
)
def test_refusals_carry_kafkas_codes_and_change_nothing(
    count: int, assignment: list[list[int]] | None, code: ErrorCode, message: str | None
) -> None:
    async def main() -> None:
        async with Cluster(3, seed=7) as cluster:
            await cluster.create_topic("t", 2, 2)
            with pytest.raises(SimulationError) as refused:
                await cluster.create_partitions("t", count, assignment)
            assert refused.value.code is code
            if message is not None:
                assert refused.value.message == message
            assert len(cluster.topics["t"]) == 2

    run_virtual(main())


def test_an_unknown_topic_and_validate_only() -> None:
    async def main() -> None:
        async with Cluster(3, seed=7) as cluster:
            await cluster.create_topic("t", 1, 3)
            with pytest.raises(SimulationError) as refused:
                await cluster.create_partitions("nope", 2)
            assert refused.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            await cluster.create_partitions("t", 4, validate_only=True)
            assert len(cluster.topics["t"]) == 1
            with pytest.raises(SimulationError):
                await cluster.create_partitions("t", 1, validate_only=True)

    run_virtual(main())
