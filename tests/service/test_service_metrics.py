"""PurgatoryMetrics, read back through prometheus-client's own text parser (no HTTP)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Awaitable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from served import Served

from purgatory import DelayedOperation, DelayedOperationPurgatory, OperationRecord
from purgatory.metrics import PurgatoryMetrics, start_http_server
from purgatory.testing import run_virtual
from purgatory.trace import TraceWriter


class Flag(DelayedOperation):
    """Completes once its flag is set (an error code may be attached)."""

    def __init__(self, delay_ms: int, flag: dict[str, bool], error: str | None = None) -> None:
        super().__init__(delay_ms)
        self.flag = flag
        self.code = error

    def try_complete(self) -> bool:
        if self.flag["set"]:
            self.error = self.code
            return self.force_complete()
        return False


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return samples(registry)[(name, tuple(sorted(labels.items())))]


def test_gauges_and_counters_follow_statistics() -> None:
    async def main() -> None:
        registry = CollectorRegistry()
        metrics = PurgatoryMetrics(registry)
        flag = {"set": False}
        async with DelayedOperationPurgatory[Flag]("Fetch") as fetch:
            metrics.track(fetch)
            assert value(registry, "purgatory_watched_entries", purgatory="Fetch") == 0
            ops = [Flag(1000, flag) for _ in range(3)]
            for op in ops:
                assert not await fetch.try_complete_else_watch(op, ["t-0", "t-1"])
            expiring = Flag(50, {"set": False})
            await fetch.try_complete_else_watch(expiring, ["t-2"])
            assert value(registry, "purgatory_watched_entries", purgatory="Fetch") == 7
            assert value(registry, "purgatory_delayed_operations", purgatory="Fetch") == 4
            assert value(registry, "purgatory_watched_keys", purgatory="Fetch") == 3

            await asyncio.sleep(0.2)  # virtual time: the 50 ms op expires
            assert expiring.is_expired
            flag["set"] = True
            assert await fetch.check_and_complete("t-0") == 3
            got = samples(registry)
            label = (("purgatory", "Fetch"),)
            assert got[("purgatory_operations_completed_total", label)] == 3
            assert got[("purgatory_operations_expired_total", label)] == 1
            assert got[("purgatory_delayed_operations", label)] == 0
            assert got[("purgatory_operation_duration_seconds_count", label)] == 4
            assert got[("purgatory_expiration_lateness_seconds_count", label)] == 1
            duration = "purgatory_operation_duration_seconds"
            # The three completions took exactly 200 ms of virtual time.
            assert value(registry, f"{duration}_bucket", purgatory="Fetch", le="0.1") == 1
            assert value(registry, f"{duration}_bucket", purgatory="Fetch", le="0.25") == 4
            # The reaper runs expirations on the tick they are due: lateness under 1 ms.
            lateness = "purgatory_expiration_lateness_seconds_bucket"
            assert value(registry, lateness, purgatory="Fetch", le="0.001") == 1

    run_virtual(main())


def test_errors_cancellations_and_several_purgatories() -> None:
    async def main() -> None:
        registry = CollectorRegistry()
        metrics = PurgatoryMetrics(registry)
        flag = {"set": False}
        produce = DelayedOperationPurgatory[Flag]("Produce")
        fetch = DelayedOperationPurgatory[Flag]("Fetch")
        metrics.track(produce)
        metrics.track(fetch)
        failing = Flag(1000, flag, error="NOT_LEADER_OR_FOLLOWER")
        await produce.try_complete_else_watch(failing, ["p"])
        abandoned = Flag(1000, flag)
        await fetch.try_complete_else_watch(abandoned, ["f"])
        flag["set"] = True
        await produce.check_and_complete("p")
        assert abandoned.cancel()
        got = samples(registry)
        assert got[("purgatory_operation_errors_total", (("purgatory", "Produce"),))] == 1
        assert got[("purgatory_operation_errors_total", (("purgatory", "Fetch"),))] == 0
        assert got[("purgatory_operations_cancelled_total", (("purgatory", "Fetch"),))] == 1
        assert got[("purgatory_operations_cancelled_total", (("purgatory", "Produce"),))] == 0
        await produce.shutdown()
        await fetch.shutdown()

        metrics.untrack(fetch)
        names = {labels for (_, labels) in samples(registry)}
        assert (("purgatory", "Fetch"),) not in names
        assert (("purgatory", "Produce"),) in names

    run_virtual(main())


def test_registries_are_independent_and_names_unique() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    a, b = PurgatoryMetrics(first), PurgatoryMetrics(second)  # no clash across registries
    purgatory = DelayedOperationPurgatory[Flag]("Produce")
    a.track(purgatory)
    b.track(purgatory)
    with pytest.raises(ValueError, match="already tracked"):
        a.track(DelayedOperationPurgatory[Flag]("Produce"))
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        PurgatoryMetrics(first)  # the same names twice in one registry
    with pytest.raises(ValueError, match="not tracked"):
        a.untrack(DelayedOperationPurgatory[Flag]("Other"))
    with pytest.raises(ValueError, match="namespace"):
        PurgatoryMetrics(CollectorRegistry(), namespace="bad name")


def test_start_http_server_serves_the_registry() -> None:
    registry = CollectorRegistry()
    PurgatoryMetrics(registry).track(DelayedOperationPurgatory[Flag]("Produce"))
    server, thread = start_http_server(0, registry=registry)
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
        names = {f.name for f in text_string_to_metric_families(text)}
        assert {"purgatory_watched_entries", "purgatory_operations_expired"} <= names
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    with pytest.raises(ValueError, match="port"):
        start_http_server(70000, registry=registry)


@pytest.mark.asyncio
async def test_follower_and_consumer_fetches_show_apart_and_no_created_series(
    served: Served,
) -> None:
    async def pending(kind: str) -> float:
        return await served.total("purgatory_pending_operations", purgatory="Fetch", kind=kind)

    # replication parks follower fetches at once; no client waits yet
    await served.until(lambda: _positive(pending("fetch-follower")), "parked follower fetches")
    assert await pending("fetch-consumer") == 0
    poll = asyncio.create_task(
        served.post("/v1/fetch", {"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": 5000})
    )
    await served.until(lambda: _positive(pending("fetch-consumer")), "the parked consumer fetch")
    assert await pending("fetch-consumer") == 1
    await served.post(
        "/v1/produce", {"topic": "t", "partition": 0, "records": [{"value": "x"}], "acks": -1}
    )
    status, body = await poll
    assert (status, len(body["records"])) == (200, 1)
    # the consumer's fetch waited in the Fetch purgatory of the partition's leader, broker 0
    completed = "purgatory_operations_completed_total"
    assert await served.total(completed, purgatory="Fetch", broker="0") >= 1
    assert await served.total(completed, purgatory="Produce", broker="0") == 1
    assert await served.total(completed, purgatory="Produce", broker="1") == 0
    async with served.session.get(served.url + "/metrics") as response:
        assert "_created" not in await response.text()


async def _positive(value: Awaitable[float]) -> bool:
    return await value > 0


def test_labels_tell_purgatories_of_one_name_apart_in_metrics_records_and_traces(
    tmp_path: Path,
) -> None:
    registry = CollectorRegistry()
    metrics = PurgatoryMetrics(registry, labels=("broker",))
    brokers = [DelayedOperationPurgatory("Fetch", labels={"broker": b}) for b in "01"]
    for purgatory in brokers:
        metrics.track(purgatory)
    with pytest.raises(ValueError, match="already tracked"):
        metrics.track(DelayedOperationPurgatory("Fetch", labels={"broker": "1"}))
    with pytest.raises(ValueError, match="expect"):
        metrics.track(DelayedOperationPurgatory("Fetch"))
    records: list[OperationRecord] = []
    brokers[1].add_listener(records.append)

    async def main() -> None:
        flag = {"set": False}
        with TraceWriter(tmp_path / "t.jsonl") as trace:
            brokers[1].add_listener(trace)
            await brokers[1].try_complete_else_watch(Flag(1000, flag), ["k"])
            flag["set"] = True
            await brokers[1].check_and_complete("k")
        for purgatory in brokers:
            await purgatory.shutdown()

    run_virtual(main())
    completed = samples(registry)
    name = "purgatory_operations_completed_total"
    assert completed[(name, (("broker", "0"), ("purgatory", "Fetch")))] == 0
    assert completed[(name, (("broker", "1"), ("purgatory", "Fetch")))] == 1
    assert [dict(r.labels) for r in records] == [{"broker": "1"}]
    assert brokers[1].statistics().labels == {"broker": "1"}
    [event] = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert (event["purgatory"], event["broker"]) == ("Fetch", "1")
    metrics.untrack(brokers[0])
    assert (name, (("broker", "0"), ("purgatory", "Fetch"))) not in samples(registry)
