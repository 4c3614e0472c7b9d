"""OffsetForLeaderEpoch: where an epoch ended in the leader's log (KIP-101), which
kafka-python's consumer asks after a leader change (KIP-320) once it sees a Kafka 4 broker."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer

from purgatory.kafka.handlers.log_offsets import LogOffsetHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type


def _ask(version: int, epoch: int, current: int = -1) -> object:
    return build(
        request_type(ApiKey.OFFSET_FOR_LEADER_EPOCH, version),
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": "t",
                    "partitions": [
                        {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
                    ],
                }
            ],
        },
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [2, 3, 4])
async def test_the_current_epoch_ends_at_the_log_end_and_older_ones_are_unknown(
    door, version: int
) -> None:
    async with asyncio.timeout(30):
        producer = AIOKafkaProducer(bootstrap_servers=door.bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait("t", b"v%d" % i, partition=0)
        finally:
            await producer.stop()
    p = door.cluster.describe_partition("t", 0)
    assert p is not None
    assert p.leader is not None
    leader = LogOffsetHandlers(door.cluster, p.leader)
    header = RequestHeader(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, 1, "c")

    def answer(epoch: int, current: int = -1) -> tuple[int, int, int]:
        [topic] = leader.offset_for_leader_epoch(header, _ask(version, epoch, current)).topics
        [part] = topic.partitions
        return int(part.error_code), part.leader_epoch, part.end_offset

    assert answer(p.leader_epoch) == (0, p.leader_epoch, 3)
    # an epoch older than every batch kept: Kafka's UNDEFINED_EPOCH and offset
    assert answer(p.leader_epoch - 1) == (0, -1, -1)
    assert answer(p.leader_epoch, current=p.leader_epoch + 1)[0] == 75  # UNKNOWN_LEADER_EPOCH
    follower = next(b for b in door.addresses if b != p.leader)
    other = LogOffsetHandlers(door.cluster, follower)
    [topic] = other.offset_for_leader_epoch(header, _ask(version, p.leader_epoch)).topics
    assert int(topic.partitions[0].error_code) == 6  # NOT_LEADER_OR_FOLLOWER
