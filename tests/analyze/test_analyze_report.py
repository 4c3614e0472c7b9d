"""Report and progress display: plots from small rows, the live progress line."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest

from purgatory.analyze import report
from purgatory.analyze.progress import Progress
from purgatory.analyze.summary import AnalysisSummary, LineCounts
from purgatory.trace import FaultMarker


def test_plots_from_aggregated_rows(tmp_path: Path) -> None:
    durations = [
        {"purgatory": "Fetch", "outcome": "completed", "bin": b, "operations": 5 + b,
         "lower_ms": 10 ** (b / 10), "upper_ms": 10 ** ((b + 1) / 10)}
        for b in (-3, 0, 4, 20)
    ]  # fmt: skip
    series = [
        {"purgatory": "Fetch", "t": 100 + s, "arrivals": 9, "completions": 5, "expirations": 2,
         "cancellations": 1, "errors": 0, "in_flight": s}
        for s in range(30)
    ]  # fmt: skip
    lateness = [
        {"purgatory": "Fetch", "bin": b, "operations": 3, "lower_ms": b * 0.5,
         "upper_ms": (b + 1) * 0.5}
        for b in (0, 1, 5)
    ]  # fmt: skip
    report.plot_durations(durations, str(tmp_path / "d.png"))
    report.plot_in_flight(series, str(tmp_path / "i.png"), 1)
    report.plot_outcomes(series, str(tmp_path / "o.png"), 10)
    report.plot_lateness(lateness, str(tmp_path / "l.png"))
    for name in ("d", "i", "o", "l"):
        assert (tmp_path / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


def test_error_code_rows_do_not_follow_the_tables_order(tmp_path: Path) -> None:
    """The error codes reach the report in the order Spark reads the table back (its
    shuffle's partitions): the report sorts them, so the same figures make the same page."""
    summary = AnalysisSummary(LineCounts(3, 3, 0, 0, None, None), 100, "", {}, [], [], [], {}, 0.0)
    errors = [
        {"purgatory": p, "kind": k, "outcome": o, "error": e, "operations": n}
        for p, k, o, e, n in (
            ("Produce", "produce", "expired", "REQUEST_TIMED_OUT", 7),
            ("Fetch", "fetch-consumer", "error", "NOT_LEADER_OR_FOLLOWER", 3),
            ("Produce", "produce", "error", "UNKNOWN_TOPIC_OR_PARTITION", 2),
            ("Produce", "produce", "error", "NOT_LEADER_OR_FOLLOWER", 1),
        )
    ]
    pages = []
    for i, rows in enumerate((errors, errors[::-1])):
        out = tmp_path / str(i)
        out.mkdir()
        pages.append(Path(report.write_report(str(out), summary, [], [], rows, False)).read_text())
    assert pages[0] == pages[1]
    order = [pages[0].index(f"<td class='int'>{n}</td>") for n in (3, 1, 2, 7)]
    assert order == sorted(order)  # by purgatory, kind, outcome, error code


def test_plots_with_no_data(tmp_path: Path) -> None:
    report.plot_durations([], str(tmp_path / "d.png"))
    report.plot_in_flight([], str(tmp_path / "i.png"), 1)
    report.plot_outcomes([], str(tmp_path / "o.png"), 1)
    report.plot_lateness([], str(tmp_path / "l.png"))
    assert all((tmp_path / f"{n}.png").stat().st_size > 0 for n in ("d", "i", "o", "l"))


@pytest.mark.spark
def test_progress_reports_stages_on_a_pipe(spark: Any) -> None:
    stream = io.StringIO()  # not a TTY: plain lines
    slow = spark.range(0, 4, numPartitions=4).rdd.map(lambda x: time.sleep(1.5) or x)
    with Progress(spark, stream=stream, poll_interval=0.1, plain_interval=0.0) as bar:
        bar.step("sleeping tasks")
        assert slow.count() == 4
    lines = stream.getvalue().splitlines()
    assert "sleeping tasks" in lines[0]
    assert any("tasks" in line and "stage" in line for line in lines)
    assert all("\r" not in line for line in lines)


@pytest.mark.spark
def test_progress_disabled_prints_nothing(spark: Any) -> None:
    stream = io.StringIO()
    with Progress(spark, enabled=False, stream=stream) as bar:
        bar.step("quiet")
        spark.range(10).count()
    assert stream.getvalue() == ""


def test_fault_lines_are_drawn_and_keyed(tmp_path: Path) -> None:
    series = [
        {"purgatory": "Produce", "t": 100 + s, "arrivals": 9, "completions": 5,
         "expirations": 2, "cancellations": 1, "errors": 0, "in_flight": s}
        for s in range(10)
    ]  # fmt: skip
    faults = [(103_000, "crash leader broker 0"), (106_500, "restart broker 0")]
    report.plot_in_flight(series, str(tmp_path / "i.png"), 1, faults)
    report.plot_outcomes(series, str(tmp_path / "o.png"), 1, faults)
    assert (tmp_path / "i.png").read_bytes()[:4] == b"\x89PNG"
    key = report.fault_key([FaultMarker(fault=f, at_ms=a) for a, f in faults])
    assert key == "1: crash leader broker 0; 2: restart broker 0"


def test_the_trace_writer_marks_faults(tmp_path: Path) -> None:
    import json

    from purgatory.trace import TraceWriter

    with TraceWriter(tmp_path / "t.jsonl") as trace:
        trace.mark_fault("crash leader broker 0")
    [line] = (tmp_path / "t.jsonl").read_text().splitlines()
    marker = json.loads(line)
    assert marker["fault"] == "crash leader broker 0"
    assert abs(marker["at_ms"] / 1000 - time.time()) < 60


@pytest.mark.parametrize("plot", ["in_flight", "outcomes"])
def test_time_series_legends_never_cover_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plot: str
) -> None:
    """The legend sits beside the plot: in the demo it hid the first seconds' points."""
    import matplotlib.pyplot as plt

    figures: list[Any] = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to measure it
    series = [
        {"purgatory": p, "t": 100 + s, "arrivals": 9, "completions": 5000 - 100 * s,
         "expirations": 2, "cancellations": 1, "errors": 0, "in_flight": 5000 - 100 * s}
        for p in ("Fetch", "Produce")
        for s in range(30)
    ]  # fmt: skip
    draw = report.plot_in_flight if plot == "in_flight" else report.plot_outcomes
    draw(series, str(tmp_path / "p.png"), 1)
    (fig,) = figures
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        inside = ax.get_window_extent(renderer)
        assert legend.get_window_extent(renderer).x0 >= inside.x1  # right of the axes
        assert fig.bbox.contains(*legend.get_window_extent(renderer).max)  # not cut off
    monkeypatch.undo()
    plt.close(fig)
