"""The transaction coordinator over the Kafka protocol, request by request with kio:
FindCoordinator for a transactional id, InitProducerId (new id, epoch bumps, KIP-360,
fencing of an ongoing transaction), AddPartitionsToTxn (v3 and v4+ batched/verify_only),
AddOffsetsToTxn, TxnOffsetCommit (pending offsets), EndTxn, DescribeTransactions,
ListTransactions, each version's fenced error; the coordinator's state rebuilt from
``__transaction_state`` by the next leader, which finishes a prepared commit."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import pytest_asyncio
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.offsets_topic import java_string_hash, partition_for
from purgatory.kafka.coordinator.txn_metadata import TRANSACTION_STATE_TOPIC, TxnState
from purgatory.kafka.embedded import AsyncEmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import build, request_type
from purgatory.sim import TxnMarker

TXN = "txn-a"


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(
        brokers=3,
        seed=1,
        topics={"t": (2, 3)},
        configs={"transaction.state.log.num.partitions": 5},
        # a crashed follower leaves the ISR within a second (acks=all waits till then);
        # followers long-poll well within that, so that a live one never leaves it
        cluster_options={"replica_lag_time_max_ms": 1000, "replica_fetch_wait_max_ms": 100},
    ) as kafka:
        yield kafka


async def call(
    kafka: AsyncEmbeddedKafka, broker: int, api: ApiKey, version: int, /, **values: Any
) -> Any:
    request = build(request_type(api, version), values)
    frame = await round_trip(kafka.front_door.addresses[broker], request)
    return read_response(frame, api, version).body


async def coordinator(kafka: AsyncEmbeddedKafka, txn: str = TXN, key_type: int = 1) -> int:
    """The coordinator of ``txn`` (``key_type`` 0: of that group), asked as a client asks
    (again while there is none: a partition that lost its leader gets one an election round
    trip later)."""
    asked = min(b for b in range(3) if kafka.front_door.listening(b))
    for _ in range(100):
        found = await call(kafka, asked, ApiKey.FIND_COORDINATOR, 3, key=txn, key_type=key_type)
        if found.error_code != KioError.coordinator_not_available:
            break
        await asyncio.sleep(0.01)
    assert found.error_code == KioError.none
    return int(found.node_id)


async def init(kafka: AsyncEmbeddedKafka, broker: int, version: int = 5, **values: Any) -> Any:
    values.setdefault("transactional_id", TXN)
    values.setdefault("transaction_timeout", 60_000)
    values.setdefault("producer_id", -1)
    values.setdefault("producer_epoch", -1)
    return await call(kafka, broker, ApiKey.INIT_PRODUCER_ID, version, **values)


async def add(
    kafka: AsyncEmbeddedKafka,
    broker: int,
    pid: int,
    epoch: int,
    parts: Sequence[int],
    version: int = 3,
    topic: str = "t",
    transactional_id: str = TXN,
) -> list[KioError]:
    answer = await call(
        kafka,
        broker,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        version,
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": topic, "partitions": list(parts)}],
    )
    return [
        p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]


async def add_offsets(
    kafka: AsyncEmbeddedKafka, broker: int, pid: int, *, version: int, epoch: int = 0
) -> KioError:
    """AddOffsetsToTxn of group "g" to the producer's transaction."""
    answer = await call(
        kafka,
        broker,
        ApiKey.ADD_OFFSETS_TO_TXN,
        version,
        transactional_id=TXN,
        producer_id=pid,
        producer_epoch=epoch,
        group_id="g",
    )
    return answer.error_code  # type: ignore[no-any-return]


async def end(
    kafka: AsyncEmbeddedKafka, broker: int, pid: int, epoch: int, commit: bool, version: int = 4
) -> KioError:
    answer = await call(
        kafka,
        broker,
        ApiKey.END_TXN,
        version,
        transactional_id=TXN,
        producer_id=pid,
        producer_epoch=epoch,
        committed=commit,
    )
    return answer.error_code  # type: ignore[no-any-return]


async def describe(kafka: AsyncEmbeddedKafka, broker: int, txn: str = TXN) -> Any:
    answer = await call(kafka, broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[txn])
    return answer.transaction_states[0]


async def settled(kafka: AsyncEmbeddedKafka, state: str, txn: str = TXN) -> Any:
    """DescribeTransactions from the coordinator until the transaction is in ``state``."""
    for _ in range(500):
        described = await describe(kafka, await coordinator(kafka, txn), txn)
        if described.transaction_state == state:
            return described
        await asyncio.sleep(0.01)
    raise AssertionError(f"{txn} never reached {state}: {described}")


def test_the_partition_of_an_id_is_javas_string_hash_as_kafka_takes_it() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    # Integer.MIN_VALUE: Kafka's Utils.abs makes it 0, not a negative partition
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    # a surrogate pair is two code units: 0xD83D * 31 + 0xDE00
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


@pytest.mark.asyncio
async def test_find_coordinator_names_the_leader_of_the_ids_partition(
    kafka: AsyncEmbeddedKafka,
) -> None:
    assert TRANSACTION_STATE_TOPIC not in kafka.cluster.topics
    answers = []
    for broker in range(3):
        v1 = await call(kafka, broker, ApiKey.FIND_COORDINATOR, 1, key=TXN, key_type=1)
        v4 = await call(
            kafka, broker, ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=[TXN, ""]
        )
        answers += [v1.node_id, v4.coordinators[0].node_id]
        assert v4.coordinators[1].error_code == KioError.invalid_request
    topic = kafka.cluster.topics[TRANSACTION_STATE_TOPIC]
    assert len(topic) == 5
    assert len(topic[0].replicas) == 3
    leader = topic[partition_for(TXN, 5)].leader
    assert set(answers) == {leader}
    bad = await call(kafka, 0, ApiKey.FIND_COORDINATOR, 3, key=TXN, key_type=7)
    assert bad.error_code == KioError.invalid_request
    listed = await call(kafka, 0, ApiKey.METADATA, 12, topics=None)
    assert {t.name: t.is_internal for t in listed.topics} == {
        "t": False,
        TRANSACTION_STATE_TOPIC: True,  # as Kafka lists it: clients' patterns skip it
    }


@pytest.mark.asyncio
async def test_a_transaction_commits_and_its_retry_is_answered_the_same(
    kafka: AsyncEmbeddedKafka,
) -> None:
    broker = await coordinator(kafka)
    other = (broker + 1) % 3
    assert (await init(kafka, other)).error_code == KioError.not_coordinator
    first = await init(kafka, broker)
    assert first.error_code == KioError.none
    assert first.producer_epoch == 0
    pid = first.producer_id
    assert await add(kafka, broker, pid, 0, [0, 1]) == [KioError.none, KioError.none]
    described = await describe(kafka, broker)
    assert described.transaction_state == "Ongoing"
    assert [(t.topic, list(t.partitions)) for t in described.topics] == [("t", [0, 1])]
    assert described.transaction_timeout.total_seconds() == 60
    assert await end(kafka, broker, pid, 0, commit=True) == KioError.none
    await settled(kafka, "CompleteCommit")
    assert await end(kafka, broker, pid, 0, commit=True) == KioError.none  # a retry
    assert await end(kafka, broker, pid, 0, commit=False) == KioError.invalid_txn_state
    # the markers are in both partitions' logs: nothing of pid's is open there
    for index in (0, 1):
        p = kafka.cluster.partition("t", index)
        assert p is not None
        assert p.last_stable_offset() == p.hw > 0


@pytest.mark.asyncio
async def test_errors_of_unknown_ids_bad_timeouts_and_states(kafka: AsyncEmbeddedKafka) -> None:
    broker = await coordinator(kafka)
    assert await end(kafka, broker, 1, 0, commit=True) == KioError.invalid_producer_id_mapping
    described = await describe(kafka, broker)
    assert described.error_code == KioError.transactional_id_not_found
    too_long = await init(kafka, broker, transaction_timeout=900_001)
    assert too_long.error_code == KioError.invalid_transaction_timeout
    assert (
        await init(kafka, broker, transaction_timeout=0)
    ).error_code == KioError.invalid_transaction_timeout
    assert (await init(kafka, broker, transactional_id="")).error_code == KioError.invalid_request
    first = await init(kafka, broker)
    pid = first.producer_id
    assert await end(kafka, broker, pid, 0, commit=True) == KioError.invalid_txn_state  # Empty
    assert await add(kafka, broker, pid, 0, [0, 9]) == [
        KioError.operation_not_attempted,
        KioError.unknown_topic_or_partition,
    ]
    assert await add(kafka, broker, pid + 1, 0, [0]) == [KioError.invalid_producer_id_mapping]
    assert await add_offsets(kafka, broker, pid, version=0) == KioError.none
    assert (await describe(kafka, broker)).transaction_state == "Ongoing"


@pytest.mark.asyncio
async def test_a_new_epoch_fences_the_old_one_with_each_versions_error(
    kafka: AsyncEmbeddedKafka,
) -> None:
    broker = await coordinator(kafka)
    first = await init(kafka, broker)
    pid = first.producer_id
    second = await init(kafka, broker, version=2)
    assert (second.producer_id, second.producer_epoch) == (pid, 1)
    assert await add(kafka, broker, pid, 0, [0], version=1) == [KioError.invalid_producer_epoch]
    assert await add(kafka, broker, pid, 0, [0], version=3) == [KioError.producer_fenced]
    assert await end(kafka, broker, pid, 0, True, version=1) == KioError.invalid_producer_epoch
    assert await end(kafka, broker, pid, 0, True, version=3) == KioError.producer_fenced
    # KIP-360: a producer bumping its own epoch names it; a stale one is fenced
    bumped = await init(kafka, broker, producer_id=pid, producer_epoch=1)
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, 2)
    stale = await init(kafka, broker, producer_id=pid + 5, producer_epoch=0)
    assert stale.error_code == KioError.producer_fenced
    assert (
        await init(kafka, broker, version=3, producer_id=pid + 5, producer_epoch=0)
    ).error_code == (KioError.invalid_producer_epoch)
    retried = await init(kafka, broker, producer_id=pid, producer_epoch=1)  # its answer was lost
    assert (retried.producer_id, retried.producer_epoch) == (pid, 2)


@pytest.mark.asyncio
async def test_init_aborts_an_ongoing_transaction_first(kafka: AsyncEmbeddedKafka) -> None:
    broker = await coordinator(kafka)
    pid = (await init(kafka, broker)).producer_id
    assert await add(kafka, broker, pid, 0, [0]) == [KioError.none]
    again = await init(kafka, broker)
    assert again.error_code == KioError.concurrent_transactions
    aborted = await settled(kafka, "CompleteAbort")
    assert aborted.producer_epoch == 1  # fenced: the old producer's epoch is over
    assert await end(kafka, broker, pid, 0, commit=True) == KioError.producer_fenced
    after = await init(kafka, broker)
    assert (after.error_code, after.producer_id, after.producer_epoch) == (KioError.none, pid, 2)
    # (DescribeTransactions would say so with start time -1, as Kafka's, which kio cannot read)
    described = kafka.front_door.transactions[broker].describe(TXN)
    assert not isinstance(described, ErrorCode)
    assert described.state is TxnState.EMPTY
    assert described.start_ms == -1


@pytest.mark.asyncio
async def test_batched_add_partitions_and_verify_only(kafka: AsyncEmbeddedKafka) -> None:
    broker = await coordinator(kafka)
    pid = (await init(kafka, broker)).producer_id

    async def batch(verify: bool, parts: list[int], version: int = 5) -> Any:
        txn = {
            "transactional_id": TXN,
            "producer_id": pid,
            "producer_epoch": 0,
            "verify_only": verify,
            "topics": [{"name": "t", "partitions": parts}],
        }
        answer = await call(
            kafka, broker, ApiKey.ADD_PARTITIONS_TO_TXN, version, transactions=[txn]
        )
        assert answer.error_code == KioError.none
        (result,) = answer.results_by_transaction
        return {
            p.partition_index: p.partition_error_code
            for t in result.topic_results
            for p in t.results_by_partition
        }

    assert await batch(True, [0]) == {0: KioError.transaction_abortable}
    assert await batch(False, [0], version=4) == {0: KioError.none}
    assert await batch(True, [0, 1]) == {0: KioError.none, 1: KioError.transaction_abortable}


@pytest.mark.asyncio
async def test_txn_offsets_are_pending_until_the_commit(kafka: AsyncEmbeddedKafka) -> None:
    broker = await coordinator(kafka)
    pid = (await init(kafka, broker)).producer_id

    async def commit_offset(offset: int, epoch: int = 0) -> KioError:
        answer = await call(
            kafka,
            broker,
            ApiKey.TXN_OFFSET_COMMIT,
            3,
            transactional_id=TXN,
            group_id="g",
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            topics=[
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                        }
                    ],
                }
            ],
        )
        return answer.topics[0].partitions[0].error_code  # type: ignore[no-any-return]

    async def fetched(stable: bool) -> tuple[int, KioError]:
        answer = await call(
            kafka,
            broker,
            ApiKey.OFFSET_FETCH,
            7,
            group_id="g",
            topics=[{"name": "t", "partition_indexes": [0]}],
            require_stable=stable,
        )
        p = answer.topics[0].partitions[0]
        return p.committed_offset, p.error_code

    assert await commit_offset(5) == KioError.invalid_txn_state  # AddOffsetsToTxn first
    for expected, commit in ((5, True), (5, False)):
        assert await add_offsets(kafka, broker, pid, version=3) == KioError.none
        assert await commit_offset(5 if commit else 9) == KioError.none
        assert await fetched(stable=True) == (-1, KioError.unstable_offset_commit)
        assert (await fetched(stable=False))[1] == KioError.none
        assert await end(kafka, broker, pid, 0, commit=commit) == KioError.none
        await settled(kafka, "CompleteCommit" if commit else "CompleteAbort")
        assert await fetched(stable=True) == (expected, KioError.none)  # 9 was aborted


@pytest.mark.asyncio
async def test_list_transactions_filters(kafka: AsyncEmbeddedKafka) -> None:
    for txn in ("a-1", "a-2", "b-1"):
        broker = await coordinator(kafka, txn)
        found = await call(
            kafka,
            broker,
            ApiKey.INIT_PRODUCER_ID,
            4,
            transactional_id=txn,
            transaction_timeout=60_000,
            producer_id=-1,
            producer_epoch=-1,
        )
        assert found.error_code == KioError.none

    async def listed(version: int, **filters: Any) -> set[tuple[str, str]]:
        out = set()
        for broker in range(3):
            answer = await call(kafka, broker, ApiKey.LIST_TRANSACTIONS, version, **filters)
            assert answer.error_code == KioError.none
            out |= {(s.transactional_id, s.transaction_state) for s in answer.transaction_states}
        return out

    everything = {("a-1", "Empty"), ("a-2", "Empty"), ("b-1", "Empty")}
    assert await listed(0) == everything
    assert await listed(0, state_filters=["Ongoing"]) == set()
    assert await listed(2, transactional_id_pattern="a-.*", duration_filter=-1) == everything - {
        ("b-1", "Empty")
    }
    answer = await call(kafka, 0, ApiKey.LIST_TRANSACTIONS, 0, state_filters=["Nope", "Empty"])
    assert list(answer.unknown_state_filters) == ["Nope"]
    assert await listed(0, state_filters=["Dead"]) == set()  # Kafka's, never seen here
    answer = await call(kafka, 0, ApiKey.LIST_TRANSACTIONS, 0, state_filters=["Nope"])
    assert (list(answer.unknown_state_filters), answer.transaction_states) == (["Nope"], ())


@pytest.mark.asyncio
async def test_the_next_coordinator_rebuilds_the_state_and_finishes_a_prepared_commit(
    kafka: AsyncEmbeddedKafka, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = await coordinator(kafka)
    pid = (await init(kafka, broker)).producer_id
    assert await add(kafka, broker, pid, 0, [0, 1]) == [KioError.none, KioError.none]
    # The first coordinator's markers never get through: PrepareCommit is durable, the
    # commit is answered, and the coordinator dies with the markers unwritten.
    real = kafka.cluster.write_txn_markers
    written: list[TxnMarker] = []
    stuck = asyncio.Event()

    async def markers(
        batch: Sequence[TxnMarker], timeout_ms: int = 30_000
    ) -> dict[tuple[str, int], ErrorCode]:
        written.extend(batch)
        if len(written) == 1:
            stuck.set()
            await asyncio.Event().wait()  # never
        return await real(batch, timeout_ms)

    monkeypatch.setattr(kafka.cluster, "write_txn_markers", markers)
    assert await end(kafka, broker, pid, 0, commit=True) == KioError.none
    await stuck.wait()
    assert (await describe(kafka, broker)).transaction_state == "PrepareCommit"
    await kafka.crash_broker(broker)
    done = await settled(kafka, "CompleteCommit")
    assert done.producer_id == pid
    new = await coordinator(kafka)
    assert new != broker
    assert [m.commit for m in written] == [True, True]
    assert written[1].partitions == (("t", 0), ("t", 1))
    assert written[1].coordinator_epoch > written[0].coordinator_epoch
    for index in (0, 1):
        p = kafka.cluster.partition("t", index)
        assert p is not None
        assert p.last_stable_offset() == p.hw > 0
    # the old epoch is still known: the producer goes on where it was
    assert await add(kafka, new, pid, 0, [1]) == [KioError.none]


@pytest.mark.asyncio
async def test_txn_timeout_purgatory_is_exposed(kafka: AsyncEmbeddedKafka) -> None:
    purgatories = kafka.front_door.purgatories
    assert purgatories["TxnTimeout"].labels == {"broker": "all"}
    broker = await coordinator(kafka)
    pid = (await init(kafka, broker)).producer_id
    assert await add(kafka, broker, pid, 0, [0]) == [KioError.none]
    assert purgatories["TxnTimeout"].num_delayed == 1
    assert await end(kafka, broker, pid, 0, commit=False) == KioError.none
    assert purgatories["TxnTimeout"].num_delayed == 0
    assert TxnState.ONGOING.value == "Ongoing"


@pytest.mark.asyncio
async def test_an_add_waiting_for_markers_is_answered_when_the_cluster_closes() -> None:
    """The next transaction's AddPartitionsToTxn waits in TxnSettle while the last one's
    marker cannot be written (its partition's only replica is down); closing the cluster
    then ends the wait with an answer, not a handler error."""
    kafka = AsyncEmbeddedKafka(
        brokers=3, seed=1, configs={"transaction.state.log.num.partitions": 5}
    )
    await kafka.start()
    try:
        broker = await coordinator(kafka)
        down = next(b for b in range(3) if b != broker)
        await kafka.cluster.create_topic("lone", 1, 1, assignment=[[down]])
        await kafka.cluster.create_topic("t", 1, 3)
        pid = (await init(kafka, broker)).producer_id
        assert await add(kafka, broker, pid, 0, [0], topic="lone") == [KioError.none]
        await kafka.cluster.crash_broker(down)
        assert await end(kafka, broker, pid, 0, commit=True) == KioError.none
        waiting = asyncio.ensure_future(add(kafka, broker, pid, 0, [0]))
        settling = kafka.front_door.purgatories["TxnSettle"]
        for _ in range(200):
            if settling.num_delayed:
                break
            await asyncio.sleep(0.005)
        assert settling.num_delayed == 1
    finally:
        await kafka.close()
    assert not kafka.front_door.stats.bad_input
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        assert await waiting == [KioError.concurrent_transactions]


@pytest.mark.asyncio
async def test_a_configured_transactional_id_expiration_removes_an_idle_id() -> None:
    async with AsyncEmbeddedKafka(
        brokers=3,
        seed=1,
        configs={
            "transaction.state.log.num.partitions": 5,
            "transactional.id.expiration.ms": 200,
        },
    ) as kafka:
        assert kafka.front_door.purgatories["TxnIdExpiration"].labels == {"broker": "all"}
        broker = await coordinator(kafka)
        pid = (await init(kafka, broker)).producer_id
        # (Empty: DescribeTransactions says start time -1, as Kafka's, which kio cannot read)
        coordinator_of = kafka.front_door.transactions[broker]
        assert not isinstance(coordinator_of.describe(TXN), ErrorCode)
        for _ in range(300):
            if coordinator_of.describe(TXN) is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                break
            await asyncio.sleep(0.01)
        gone = await call(kafka, broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[TXN])
        assert gone.transaction_states[0].error_code == KioError.transactional_id_not_found
        again = await init(kafka, broker)
        assert (again.error_code, again.producer_epoch) == (KioError.none, 0)
        assert again.producer_id != pid


async def _produce_batch(
    kafka: AsyncEmbeddedKafka,
    index: int,
    producer_id: int,
    epoch: int,
    sequence: int = 0,
    version: int = 9,
) -> KioError:
    """A transactional batch (kafka-python's framing) produced to t-``index`` through its
    leader (Produce ``version``): the partition's error."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, True, producer_id, epoch, sequence, 1 << 20)
    builder.append(0, 1_700_000_000_000, None, b"v", [])
    leader = kafka.cluster.partition("t", index)
    assert leader is not None
    assert leader.leader is not None
    answer = await call(
        kafka,
        leader.leader,
        ApiKey.PRODUCE,
        version,
        transactional_id=TXN,
        acks=-1,
        timeout=10_000,
        topic_data=[
            {"name": "t", "partition_data": [{"index": index, "records": bytes(builder.build())}]}
        ],
    )
    return answer.responses[0].partition_responses[0].error_code  # type: ignore[no-any-return]


@pytest.mark.asyncio
async def test_a_transactional_produce_is_verified_with_the_coordinator(
    kafka: AsyncEmbeddedKafka,
) -> None:
    """KIP-890: the first batch of a transaction on a partition is accepted only if the
    partition was added to the producer's ongoing transaction at its epoch."""
    broker = await coordinator(kafka)  # creates __transaction_state
    assert await _produce_batch(kafka, 0, 4242, 0) == KioError.invalid_producer_id_mapping
    pid = (await init(kafka, broker)).producer_id
    assert await _produce_batch(kafka, 0, pid, 0) == KioError.invalid_txn_state  # nothing added
    assert await add(kafka, broker, pid, 0, [0]) == [KioError.none]
    assert await _produce_batch(kafka, 1, pid, 0) == KioError.invalid_txn_state  # not t-1
    assert await _produce_batch(kafka, 0, pid, 0) == KioError.none
    assert await _produce_batch(kafka, 0, pid, 0, sequence=1) == KioError.none  # within it
    assert await end(kafka, broker, pid, 0, commit=True) == KioError.none
    await settled(kafka, "CompleteCommit")
    bumped = await init(kafka, broker)
    assert bumped.producer_epoch == 1
    assert await add(kafka, broker, pid, 1, [1]) == [KioError.none]
    assert await _produce_batch(kafka, 1, pid, 0) == KioError.invalid_producer_epoch  # a zombie
    assert await _produce_batch(kafka, 1, pid, 1) == KioError.none


@pytest.mark.asyncio
async def test_a_produce_from_v11_is_told_its_unverified_transaction_is_abortable(
    kafka: AsyncEmbeddedKafka,
) -> None:
    """Kafka's AddPartitionsToTxnManager keeps the coordinator's TRANSACTION_ABORTABLE for
    a partition not in the transaction from Produce v11 (KIP-890's generic error
    supported) and answers older versions INVALID_TXN_STATE."""
    broker = await coordinator(kafka)
    pid = (await init(kafka, broker)).producer_id
    assert await _produce_batch(kafka, 0, pid, 0, version=10) == KioError.invalid_txn_state
    assert await _produce_batch(kafka, 0, pid, 0, version=11) == KioError.transaction_abortable
    assert await add(kafka, broker, pid, 0, [0]) == [KioError.none]
    assert await _produce_batch(kafka, 1, pid, 0, version=11) == KioError.transaction_abortable
    assert await _produce_batch(kafka, 0, pid, 0, version=11) == KioError.none


@pytest.mark.asyncio
async def test_no_coordinator_while_the_partition_has_no_leader() -> None:
    """Every replica of the id's ``__transaction_state`` partition down: FindCoordinator
    answers COORDINATOR_NOT_AVAILABLE (from the broker left); the last leader back, the
    transaction is where it was."""
    async with AsyncEmbeddedKafka(
        brokers=4, seed=1, topics={"t": (2, 3)}, configs={"transaction.state.log.num.partitions": 5}
    ) as kafka:
        broker = await coordinator(kafka)
        pid = (await init(kafka, broker)).producer_id
        assert await add(kafka, broker, pid, 0, [0]) == [KioError.none]
        state = kafka.cluster.partition(TRANSACTION_STATE_TOPIC, partition_for(TXN, 5))
        assert state is not None
        last = state.leader
        assert last is not None
        for replica in [r for r in state.replicas if r != last] + [last]:
            await kafka.crash_broker(replica)
        (left,) = (b for b in range(4) if kafka.front_door.listening(b))
        found = await call(kafka, left, ApiKey.FIND_COORDINATOR, 3, key=TXN, key_type=1)
        assert found.error_code == KioError.coordinator_not_available
        await kafka.restart_broker(last)
        described = await settled(kafka, "Ongoing")
        assert (described.producer_id, described.producer_epoch) == (pid, 0)
        assert await coordinator(kafka) == last


@pytest.mark.asyncio
async def test_a_hung_coordinator_does_nothing_until_it_is_fenced(
    kafka: AsyncEmbeddedKafka,
) -> None:
    """``crash_broker_unfenced``: the controller does not know yet, so the broker still
    leads the id's partition and FindCoordinator still names it (as Kafka's until the
    broker's session expires), but its coordinator neither answers nor acts."""
    broker = await coordinator(kafka)
    pid = (await init(kafka, broker)).producer_id
    assert await add(kafka, broker, pid, 0, [0]) == [KioError.none]
    transactions = kafka.front_door.transactions
    assert transactions.verify_produce(pid, 0, "t", 0) is ErrorCode.NONE
    await kafka.crash_broker_unfenced(broker)
    assert await coordinator(kafka) == broker
    assert transactions[broker].describe(TXN) is ErrorCode.NOT_COORDINATOR
    # a partition leader asking about the producer's batch is told to retry
    assert transactions.verify_produce(pid, 0, "t", 0) is ErrorCode.NOT_ENOUGH_REPLICAS
