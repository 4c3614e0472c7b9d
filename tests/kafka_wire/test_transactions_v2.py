"""Transactions V2 (KIP-890 part 2) over the Kafka protocol, driven with kio in the order
Kafka's Java producer runs it once ApiVersions finalizes ``transaction.version`` at 2:
InitProducerId, Produce v12 with no AddPartitionsToTxn, TxnOffsetCommit v5 with no
AddOffsetsToTxn, EndTxn v5 answering the bumped epoch, the next transaction at that
epoch. The old epoch fenced; a V1 client beside; the epoch and the client's transaction
version surviving a coordinator failover; UpdateFeatures taking ``transaction.version``
back to 1 (and what it refuses)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode as KioError
from test_transactions import add, call, coordinator, settled
from test_transactions import init as init_request

from purgatory.errors import ErrorCode
from purgatory.kafka.coordinator.txn_metadata import EXHAUSTED_EPOCH
from purgatory.kafka.embedded import AsyncEmbeddedKafka, EmbeddedKafka
from purgatory.kafka.protocol import ApiKey
from purgatory.service.cli import add_arguments, settings_from_args
from purgatory.sim import TxnMarker
from purgatory.testing import ServeProcess

TXN = "txn-v2"
GROUP = "g"


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[AsyncEmbeddedKafka]:
    async with AsyncEmbeddedKafka(
        brokers=3,
        seed=1,
        topics={"t": (2, 3), "in": (1, 3)},
        configs={"transaction.state.log.num.partitions": 5},
        cluster_options={"replica_lag_time_max_ms": 1000, "replica_fetch_wait_max_ms": 100},
    ) as kafka:
        yield kafka


async def transaction_version(kafka: AsyncEmbeddedKafka, broker: int = 0) -> tuple[int, int]:
    """ApiVersions v4's finalized ``transaction.version`` (0: not finalized) and the
    features' epoch, as the Java producer reads them to choose V2."""
    answer = await call(
        kafka,
        broker,
        ApiKey.API_VERSIONS,
        4,
        client_software_name="t",
        client_software_version="1",
    )
    levels = {f.name: f.max_version_level for f in answer.finalized_features}
    return levels.get("transaction.version", 0), answer.finalized_features_epoch


async def init(kafka: AsyncEmbeddedKafka, broker: int) -> tuple[int, int]:
    """InitProducerId v5 of the V2 transactional id: its producer id and epoch."""
    answer = await init_request(kafka, broker, transactional_id=TXN)
    assert answer.error_code == KioError.none
    return answer.producer_id, answer.producer_epoch


async def produce(
    kafka: AsyncEmbeddedKafka,
    index: int,
    pid: int,
    epoch: int,
    sequence: int,
    value: bytes,
    version: int = 12,
) -> KioError:
    """One transactional record to t-``index`` through its leader, Produce v``version``
    (v12: the partition joins the transaction with it): the partition's error."""
    builder = DefaultRecordBatchBuilder(2, 0, True, pid, epoch, sequence, 1 << 20)
    builder.append(0, 1_700_000_000_000, None, value, [])
    p = kafka.cluster.partition("t", index)
    assert p is not None
    assert p.leader is not None
    answer = await call(
        kafka,
        p.leader,
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


async def commit_offset(
    kafka: AsyncEmbeddedKafka, pid: int, epoch: int, offset: int, version: int = 5
) -> KioError:
    """TxnOffsetCommit of in-0 at ``offset`` for group g, to the group's coordinator."""
    answer = await call(
        kafka,
        await coordinator(kafka, GROUP, 0),
        ApiKey.TXN_OFFSET_COMMIT,
        version,
        transactional_id=TXN,
        group_id=GROUP,
        producer_id=pid,
        producer_epoch=epoch,
        topics=[
            {
                "name": "in",
                "partitions": [
                    {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}
                ],
            }
        ],
    )
    return answer.topics[0].partitions[0].error_code  # type: ignore[no-any-return]


async def end(
    kafka: AsyncEmbeddedKafka, broker: int, pid: int, epoch: int, commit: bool, version: int = 5
) -> Any:
    return await call(
        kafka,
        broker,
        ApiKey.END_TXN,
        version,
        transactional_id=TXN,
        producer_id=pid,
        producer_epoch=epoch,
        committed=commit,
    )


async def read_committed(kafka: AsyncEmbeddedKafka) -> tuple[list[bytes], int | None]:
    """Every record of t a read_committed consumer reads, and group g's committed
    offset of in-0."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=GROUP,
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        partitions = [TopicPartition("t", 0), TopicPartition("t", 1)]
        consumer.assign(partitions)
        committed = await consumer.committed(TopicPartition("in", 0))
        await consumer.seek_to_beginning()
        ends = await consumer.end_offsets(partitions)  # read_committed: the LSO
        got: list[bytes] = []
        while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                got += [r.value for r in records if r.value is not None]
        return got, committed
    finally:
        await consumer.stop()


def _stable(kafka: AsyncEmbeddedKafka, indexes: tuple[int, ...] = (0, 1)) -> None:
    """Every marker written: nothing open on these partitions of t, each written to."""
    for index in indexes:
        p = kafka.cluster.partition("t", index)
        assert p is not None
        assert p.last_stable_offset() == p.hw > 0


@pytest.mark.asyncio
async def test_a_v2_producer_runs_the_java_producers_sequence(kafka: AsyncEmbeddedKafka) -> None:
    assert await transaction_version(kafka) == (2, 0)
    broker = await coordinator(kafka, TXN)
    pid, epoch = await init(kafka, broker)
    assert epoch == 0
    # no AddPartitionsToTxn: the produce adds each partition
    assert await produce(kafka, 0, pid, 0, 0, b"c0") == KioError.none
    assert await produce(kafka, 1, pid, 0, 0, b"c1") == KioError.none
    assert await produce(kafka, 0, pid, 0, 1, b"c2") == KioError.none
    # no AddOffsetsToTxn: TxnOffsetCommit v5 adds the group
    assert await commit_offset(kafka, pid, 0, 7) == KioError.none
    described = await settled(kafka, "Ongoing", TXN)
    assert [(t.topic, list(t.partitions)) for t in described.topics] == [("t", [0, 1])]
    committed = await end(kafka, broker, pid, 0, commit=True)
    assert committed.error_code == KioError.none
    assert (committed.producer_id, committed.producer_epoch) == (pid, 1)
    # the next transaction at the bumped epoch, sequences from 0 again, at once (its
    # produce waits for the last one's markers)
    assert await produce(kafka, 0, pid, 1, 0, b"a0") == KioError.none
    assert await commit_offset(kafka, pid, 1, 9) == KioError.none
    aborted = await end(kafka, broker, pid, 1, commit=False)
    assert (aborted.error_code, aborted.producer_epoch) == (KioError.none, 2)
    done = await settled(kafka, "CompleteAbort", TXN)
    assert (done.producer_id, done.producer_epoch) == (pid, 2)
    _stable(kafka)
    records, offset = await read_committed(kafka)
    assert (sorted(records), offset) == ([b"c0", b"c1", b"c2"], 7)
    # a retry of the last EndTxn (at the epoch before) is answered as the first was
    retried = await end(kafka, broker, pid, 1, commit=False)
    assert (retried.error_code, retried.producer_epoch) == (KioError.none, 2)
    wrong = await end(kafka, broker, pid, 1, commit=True)
    assert wrong.error_code == KioError.invalid_txn_state


@pytest.mark.asyncio
async def test_the_epoch_before_the_bump_is_fenced(kafka: AsyncEmbeddedKafka) -> None:
    broker = await coordinator(kafka, TXN)
    pid, _ = await init(kafka, broker)
    assert await produce(kafka, 0, pid, 0, 0, b"c0") == KioError.none
    assert (await end(kafka, broker, pid, 0, commit=True)).producer_epoch == 1
    await settled(kafka, "CompleteCommit", TXN)
    # a zombie at epoch 0: its produce, offsets and a new transaction are refused
    assert await produce(kafka, 1, pid, 0, 1, b"z") == KioError.invalid_producer_epoch
    assert await commit_offset(kafka, pid, 0, 3) == KioError.producer_fenced
    assert await produce(kafka, 1, pid, 1, 0, b"n") == KioError.none
    assert (await end(kafka, broker, pid, 0, commit=True)).error_code == KioError.producer_fenced
    # two epochs behind: no retry of anything
    assert (await end(kafka, broker, pid, 1, commit=True)).producer_epoch == 2
    await settled(kafka, "CompleteCommit", TXN)
    assert (await end(kafka, broker, pid, 0, commit=True)).error_code == KioError.producer_fenced
    # V2 aborts a transaction nothing was added to (at the epoch EndTxn gave)
    empty = await end(kafka, broker, pid, 2, commit=False)
    assert (empty.error_code, empty.producer_epoch) == (KioError.none, 3)
    await settled(kafka, "CompleteAbort", TXN)
    nothing = await end(kafka, broker, pid, 3, commit=True)
    assert nothing.error_code == KioError.invalid_txn_state


@pytest.mark.asyncio
async def test_a_v1_client_runs_beside_a_v2_one(kafka: AsyncEmbeddedKafka) -> None:
    """aiokafka (EndTxn v1, AddPartitionsToTxn first) keeps its epoch across
    transactions while the kio V2 producer's moves on, on the same partitions."""
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers, transactional_id="v1-client"
    )
    await producer.start()
    try:
        broker = await coordinator(kafka, TXN)
        pid, _ = await init(kafka, broker)
        for n in range(3):
            async with producer.transaction():
                await producer.send_and_wait("t", b"v1-%d" % n, partition=n % 2)
                assert await produce(kafka, n % 2, pid, n, 0, b"v2-%d" % n) == KioError.none
                answer = await end(kafka, broker, pid, n, commit=True)
                assert (answer.error_code, answer.producer_epoch) == (KioError.none, n + 1)
        v1 = kafka.front_door.transactions.owner("v1-client")
        assert v1 is not None
        txn = v1.owned_txn("v1-client")
        assert txn is not None
        assert (txn.producer_epoch, txn.client_txn_version) == (0, 0)
    finally:
        await producer.stop()
    await settled(kafka, "CompleteCommit", TXN)
    _stable(kafka)
    got, _ = await read_committed(kafka)
    assert sorted(got) == sorted(
        [b"v1-%d" % n for n in range(3)] + [b"v2-%d" % n for n in range(3)]
    )


@pytest.mark.asyncio
async def test_the_epoch_and_version_survive_a_coordinator_failover(
    kafka: AsyncEmbeddedKafka,
) -> None:
    broker = await coordinator(kafka, TXN)
    pid, _ = await init(kafka, broker)
    assert await produce(kafka, 0, pid, 0, 0, b"c0") == KioError.none
    assert (await end(kafka, broker, pid, 0, commit=True)).producer_epoch == 1
    await settled(kafka, "CompleteCommit", TXN)
    await kafka.crash_broker(broker)
    new = await coordinator(kafka, TXN)
    assert new != broker
    owner = kafka.front_door.transactions.owner(TXN)
    assert owner is not None
    txn = owner.owned_txn(TXN)  # loaded from __transaction_state
    assert txn is not None
    assert (txn.producer_epoch, txn.client_txn_version) == (1, 2)
    # the retry of the EndTxn answered before the failover is still known as one
    retried = await end(kafka, new, pid, 0, commit=True)
    assert (retried.error_code, retried.producer_epoch) == (KioError.none, 1)
    assert await produce(kafka, 1, pid, 1, 0, b"c1") == KioError.none
    answer = await end(kafka, new, pid, 1, commit=True)
    assert (answer.error_code, answer.producer_epoch) == (KioError.none, 2)
    await settled(kafka, "CompleteCommit", TXN)


@pytest.mark.asyncio
async def _at_the_last_epoch(kafka: AsyncEmbeddedKafka) -> tuple[int, int]:
    """A V2 transaction on t-0 at the exhausted epoch (as if its id had run 32766
    transactions: set in the coordinator's state only): its coordinator and producer id."""
    broker = await coordinator(kafka, TXN)
    pid, _ = await init(kafka, broker)
    loaded = kafka.front_door.transactions[broker].state.owned(TXN)
    assert not isinstance(loaded, ErrorCode)
    loaded.txns[TXN] = loaded.txns[TXN].copy(producer_epoch=EXHAUSTED_EPOCH)
    assert await produce(kafka, 0, pid, EXHAUSTED_EPOCH, 0, b"c0") == KioError.none
    return broker, pid


@pytest.mark.asyncio
async def test_a_retry_of_the_end_txn_that_used_up_the_epoch_gets_the_new_id(
    kafka: AsyncEmbeddedKafka,
) -> None:
    broker, pid = await _at_the_last_epoch(kafka)
    answer = await end(kafka, broker, pid, EXHAUSTED_EPOCH, commit=True)
    new_pid = answer.producer_id
    assert (answer.error_code, answer.producer_epoch) == (KioError.none, 0)
    done = await settled(kafka, "CompleteCommit", TXN)
    assert (done.producer_id, done.producer_epoch) == (new_pid, 0)
    retried = await end(kafka, broker, pid, EXHAUSTED_EPOCH, commit=True)
    assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (
        KioError.none,
        new_pid,
        0,
    )
    other = await end(kafka, broker, pid, EXHAUSTED_EPOCH, commit=False)
    assert other.error_code == KioError.invalid_txn_state
    stale = await end(kafka, broker, pid, EXHAUSTED_EPOCH - 1, commit=True)
    assert stale.error_code == KioError.invalid_producer_id_mapping


@pytest.mark.asyncio
async def test_a_used_up_epoch_goes_on_under_a_new_producer_id(
    kafka: AsyncEmbeddedKafka, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EndTxn v5 at the last epoch: the markers at Short.MAX_VALUE, and the answer a new
    producer id at epoch 0 (Kafka's nextProducerId), which the next transaction uses:
    at once, its produce waiting for the last transaction's markers."""
    broker, pid = await _at_the_last_epoch(kafka)
    real = kafka.cluster.write_txn_markers
    release = asyncio.Event()
    markers: list[TxnMarker] = []

    async def held(batch: Sequence[TxnMarker], timeout_ms: int = 30_000) -> Any:
        markers.extend(batch)
        await release.wait()
        return await real(batch, timeout_ms)

    monkeypatch.setattr(kafka.cluster, "write_txn_markers", held)
    answer = await end(kafka, broker, pid, EXHAUSTED_EPOCH, commit=True)
    assert answer.error_code == KioError.none
    new_pid = answer.producer_id
    assert (new_pid != pid, answer.producer_epoch) == (True, 0)
    # a retry while the markers are written: the old id at the old epoch
    retried = await end(kafka, broker, pid, EXHAUSTED_EPOCH, commit=True)
    assert retried.error_code == KioError.concurrent_transactions
    first = asyncio.ensure_future(produce(kafka, 1, new_pid, 0, 0, b"c1"))
    await asyncio.sleep(0.2)
    assert not first.done()  # the new id's transaction waits for the old one's
    release.set()
    assert await first == KioError.none
    assert [(m.producer_id, m.producer_epoch) for m in markers] == [(pid, EXHAUSTED_EPOCH + 1)]
    assert (await end(kafka, broker, new_pid, 0, commit=False)).producer_epoch == 1
    done = await settled(kafka, "CompleteAbort", TXN)
    assert (done.producer_id, done.producer_epoch) == (new_pid, 1)
    _stable(kafka)
    assert (await read_committed(kafka))[0] == [b"c0"]


async def update(
    kafka: AsyncEmbeddedKafka, version: int, level: int, *, broker: int = 0, **values: Any
) -> Any:
    entry: dict[str, Any] = {"feature": values.pop("feature", "transaction.version")}
    entry["max_version_level"] = level
    for key in ("upgrade_type", "allow_downgrade"):
        if key in values:
            entry[key] = values.pop(key)
    return await call(
        kafka, broker, ApiKey.UPDATE_FEATURES, version, feature_updates=[entry], **values
    )


@pytest.mark.asyncio
async def test_update_features_takes_transactions_back_to_v1(kafka: AsyncEmbeddedKafka) -> None:
    checked = await update(kafka, 1, 1, upgrade_type=2, validate_only=True)
    assert checked.error_code == KioError.none
    assert await transaction_version(kafka) == (2, 0)  # validate_only: nothing changed
    done = await update(kafka, 1, 1, upgrade_type=2)
    assert (done.error_code, [(r.feature, r.error_code) for r in done.results]) == (
        KioError.none,
        [("transaction.version", KioError.none)],
    )
    for broker in range(3):
        assert await transaction_version(kafka, broker) == (1, 1)
    again = await update(kafka, 2, 1, upgrade_type=2)  # no change: the epoch stays
    assert again.error_code == KioError.none
    assert await transaction_version(kafka) == (1, 1)
    # TV1: a produce adds nothing, so one without AddPartitionsToTxn is refused (as
    # abortable: from Produce v11 Kafka keeps the coordinator's TRANSACTION_ABORTABLE)
    broker = await coordinator(kafka, TXN)
    pid, _ = await init(kafka, broker)
    assert await produce(kafka, 0, pid, 0, 0, b"x") == KioError.transaction_abortable
    assert await commit_offset(kafka, pid, 0, 1) == KioError.invalid_txn_state
    # and back to 2 (an upgrade), the same request now adds the partition
    assert (await update(kafka, 0, 2)).error_code == KioError.none
    assert await transaction_version(kafka) == (2, 2)
    assert await produce(kafka, 0, pid, 0, 0, b"x") == KioError.none


@pytest.mark.asyncio
async def test_update_features_refuses_what_kafka_refuses(kafka: AsyncEmbeddedKafka) -> None:
    refused = [
        await update(kafka, 1, 1, feature="no.such.feature"),
        await update(kafka, 1, 1),  # a downgrade without saying so
        await update(kafka, 0, 1, allow_downgrade=False),
        await update(kafka, 1, 3),  # past the supported range
        await update(kafka, 2, -1, upgrade_type=3),
        await update(kafka, 1, 1, upgrade_type=9),  # no such upgrade type
        await update(kafka, 2, 1, upgrade_type=2, feature="no.such.feature"),
    ]
    for answer in refused:
        assert answer.error_code == KioError.invalid_update_version, answer
        assert "transaction.version" in answer.error_message or "no.such" in answer.error_message
        assert not getattr(answer, "results", ())
    assert await transaction_version(kafka) == (2, 0)
    # v0's allow_downgrade is a safe downgrade
    assert (await update(kafka, 0, 1, allow_downgrade=True)).error_code == KioError.none
    assert await transaction_version(kafka) == (1, 1)
    upgrade = await update(kafka, 1, 2, upgrade_type=2)  # an upgrade said to be a downgrade
    assert upgrade.error_code == KioError.invalid_update_version
    assert await transaction_version(kafka) == (1, 1)


@pytest.mark.asyncio
async def test_update_features_needs_alter_on_the_cluster() -> None:
    async with AsyncEmbeddedKafka(
        brokers=1,
        configs={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        },
    ) as kafka:
        answer = await update(kafka, 1, 1, upgrade_type=2)
        assert answer.error_code == KioError.cluster_authorization_failed
        assert await transaction_version(kafka) == (2, 0)


@pytest.mark.asyncio
async def test_the_next_transactions_produce_waits_for_the_last_ones_markers(
    kafka: AsyncEmbeddedKafka, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The producer's transaction is still open on t-0 (its marker not written yet) when
    its next transaction's first batch comes at the bumped epoch: that batch is not part
    of the open one (Kafka's hasOngoingTransaction asks the epoch too), it waits for the
    marker and joins the next transaction."""
    broker = await coordinator(kafka, TXN)
    pid, _ = await init(kafka, broker)
    assert await produce(kafka, 0, pid, 0, 0, b"c0") == KioError.none
    real = kafka.cluster.write_txn_markers
    release = asyncio.Event()

    async def held(batch: Sequence[TxnMarker], timeout_ms: int = 30_000) -> Any:
        await release.wait()
        return await real(batch, timeout_ms)

    monkeypatch.setattr(kafka.cluster, "write_txn_markers", held)
    assert (await end(kafka, broker, pid, 0, commit=True)).producer_epoch == 1
    next_one = asyncio.ensure_future(produce(kafka, 0, pid, 1, 0, b"a0"))
    await asyncio.sleep(0.2)
    assert not next_one.done()  # waiting for the marker, not appended into the open one
    release.set()
    assert await next_one == KioError.none
    assert (await end(kafka, broker, pid, 1, commit=False)).producer_epoch == 2
    await settled(kafka, "CompleteAbort", TXN)
    _stable(kafka, (0,))
    assert (await read_committed(kafka))[0] == [b"c0"]


@pytest.mark.asyncio
async def test_a_fenced_v2_transactions_producer_cannot_pass_for_a_retry(
    kafka: AsyncEmbeddedKafka,
) -> None:
    """A new InitProducerId fences and aborts the ongoing V2 transaction, bumping the
    epoch twice as Kafka does (the fence, then V2's bump of the abort): the old
    producer's EndTxn, at its epoch, is fenced rather than taken for a retry."""
    broker = await coordinator(kafka, TXN)
    pid, _ = await init(kafka, broker)
    assert await produce(kafka, 0, pid, 0, 0, b"c0") == KioError.none
    again = await init_request(kafka, broker, transactional_id=TXN)
    assert again.error_code == KioError.concurrent_transactions
    done = await settled(kafka, "CompleteAbort", TXN)
    assert done.producer_epoch == 2
    for commit in (False, True):
        fenced = await end(kafka, broker, pid, 0, commit=commit)
        assert fenced.error_code == KioError.producer_fenced
    assert await init(kafka, broker) == (pid, 3)


@pytest.mark.kafka_cluster(topics={"t": 1})
def test_kafka_pythons_admin_describes_and_updates_the_features(
    kafka_cluster: EmbeddedKafka,
) -> None:
    """A real client's KIP-584 admin calls: describe_features reads ApiVersions',
    update_features sends UpdateFeatures to the controller."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import InvalidUpdateVersionError

    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    try:
        assert admin.describe_features()["transaction.version"] == {
            "supported": (0, 2),
            "finalized": (2, 2),
            "finalized_epoch": 0,
        }
        with pytest.raises(InvalidUpdateVersionError):
            admin.update_features({"transaction.version": 1})  # a downgrade, unsaid
        update = {"transaction.version": ("SAFE_DOWNGRADE", 1)}
        assert admin.update_features(update, validate_only=True) == {"transaction.version": "OK"}
        assert admin.describe_features()["transaction.version"]["finalized"] == (2, 2)
        assert admin.update_features(update) == {"transaction.version": "OK"}
        described = admin.describe_features()["transaction.version"]
        assert (described["finalized"], described["finalized_epoch"]) == ((1, 1), 1)
    finally:
        admin.close()


@pytest.mark.asyncio
async def test_a_cluster_formatted_at_tv1_serves_transactions_v1() -> None:
    """``features`` finalizes levels at start, as ``kafka-storage format --feature``: at
    ``transaction.version`` 1 a produce adds nothing to a transaction until UpdateFeatures
    raises the level."""
    async with AsyncEmbeddedKafka(
        brokers=3,
        seed=1,
        topics={"t": (2, 3)},
        configs={"transaction.state.log.num.partitions": 5},
        features={"transaction.version": 1},
    ) as kafka:
        assert await transaction_version(kafka) == (1, 0)
        broker = await coordinator(kafka, TXN)
        pid, _ = await init(kafka, broker)
        assert await produce(kafka, 0, pid, 0, 0, b"x") == KioError.transaction_abortable
        assert (await update(kafka, 0, 2)).error_code == KioError.none
        assert await transaction_version(kafka) == (2, 1)
        assert await produce(kafka, 0, pid, 0, 0, b"x") == KioError.none


@pytest.mark.parametrize(
    ("features", "error", "match"),
    [
        ({"group.version": 1}, ValueError, "unknown feature 'group.version'; supported: "),
        ({"transaction.version": 3}, ValueError, "level 3 is outside 0-2"),
        ({"transaction.version": True}, TypeError, "must be an int"),
    ],
)
def test_a_feature_level_no_broker_supports_is_refused(
    features: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        EmbeddedKafka(features=features)


def test_serve_kafka_feature_finalizes_a_level_at_start() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = settings_from_args(parser.parse_args(["--kafka-feature", "transaction.version=1"]))
    assert settings.kafka_features == (("transaction.version", 1),)
    for bad, match in (
        ("transaction.version=one", "the level must be an int, got 'one'"),
        ("transaction.version=5", "level 5 is outside 0-2"),
        ("metadata.version=20", "unknown feature 'metadata.version'"),
    ):
        with pytest.raises(ValueError, match=match):
            settings_from_args(parser.parse_args(["--kafka-feature", bad]))
    with ServeProcess("--kafka-port", "0", "--kafka-feature", "transaction.version=1") as server:
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers)
        try:
            described = admin.describe_features()["transaction.version"]
            assert (described["finalized"], described["finalized_epoch"]) == ((1, 1), 0)
        finally:
            admin.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [3, 4, 5])
async def test_a_broker_adding_partitions_marks_the_transaction_v2(
    kafka: AsyncEmbeddedKafka, version: int
) -> None:
    """AddPartitionsToTxn v4+ comes from a partition leader verifying a produce: Kafka's
    ``transactionVersionForAddPartitionsToTxn`` takes it as a V2 client's (version > 3),
    so its EndTxn bumps the epoch. v3 is a V1 client's own request."""
    broker = await coordinator(kafka, TXN)
    pid, _ = await init(kafka, broker)
    if version <= 3:
        errors = await add(kafka, broker, pid, 0, [0], version, transactional_id=TXN)
    else:
        txn = {
            "transactional_id": TXN,
            "producer_id": pid,
            "producer_epoch": 0,
            "verify_only": False,
            "topics": [{"name": "t", "partitions": [0]}],
        }
        answer = await call(
            kafka, broker, ApiKey.ADD_PARTITIONS_TO_TXN, version, transactions=[txn]
        )
        ((topic,),) = (r.topic_results for r in answer.results_by_transaction)
        errors = [p.partition_error_code for p in topic.results_by_partition]
    assert errors == [KioError.none]
    owner = kafka.front_door.transactions.owner(TXN)
    assert owner is not None
    txn_now = owner.owned_txn(TXN)
    assert txn_now is not None
    assert txn_now.client_txn_version == (2 if version > 3 else 0)
