"""report.html as a person sees it: rendered by headless Chromium in a 1280 px window, the
page must not need a horizontal scrollbar and every image must load."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from purgatory.analyze import report
from purgatory.analyze.summary import AnalysisSummary, LineCounts
from purgatory.analyze.tables import ZERO_DURATION_BIN

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Appended to a copy of the report: measures the page once everything has loaded.
PROBE = """<script>
window.addEventListener('load', () => {
  const out = {
    width: document.documentElement.scrollWidth,
    images: [...document.images].map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]),
  };
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _stat_row(level: str, purgatory: str, kind: str | None, n: int) -> dict[str, object]:
    return {
        "level": level, "purgatory": purgatory, "kind": kind, "operations": n,
        "completed": n - 12_345, "expired": 12_000, "cancelled": 300, "errors": 45,
        "expiration_rate": 12_000 / n, "duration_p50_ms": 471.32, "duration_p99_ms": 2_248.66,
        "duration_p999_ms": 2_378.38, "duration_max_ms": 123_456.78, "lateness_p99_ms": 12.5,
        "checks_mean": 2.25, "checks_max": 17,
    }  # fmt: skip


def _write_sample_report(out: Path) -> Path:
    stats = [_stat_row("all", "", None, 9_876_543)]
    for name in ("DeleteRecords", "Fetch", "Produce"):
        stats.append(_stat_row("purgatory", name, None, 3_456_789))
        for kind in ("fetch-consumer", "fetch-follower-replication"):
            stats.append(_stat_row("kind", name, kind, 1_234_567))
    durations = [
        {"purgatory": "Fetch", "outcome": "completed", "bin": b, "operations": 50 + b,
         "lower_ms": 10 ** (b / 10), "upper_ms": 10 ** ((b + 1) / 10)}
        for b in (-3, 0, 4, 20)
    ] + [{"purgatory": "Fetch", "outcome": "completed", "bin": ZERO_DURATION_BIN,
          "operations": 400, "lower_ms": 0.0, "upper_ms": 0.0}]  # fmt: skip
    series = [
        {"purgatory": "Fetch", "t": 100 + s, "arrivals": 9, "completions": 5, "expirations": 2,
         "cancellations": 1, "errors": 0, "in_flight": s}
        for s in range(30)
    ]  # fmt: skip
    lateness = [
        {"purgatory": "Fetch", "bin": b, "operations": 3 + b, "lower_ms": b * 0.5,
         "upper_ms": (b + 1) * 0.5}
        for b in (0, 1, 5)
    ]  # fmt: skip
    report.plot_durations(durations, str(out / "durations.png"))
    report.plot_in_flight(series, str(out / "in_flight.png"), 1)
    report.plot_outcomes(series, str(out / "outcomes.png"), 1)
    report.plot_lateness(lateness, str(out / "lateness.png"))
    counts = LineCounts(
        lines=9_876_645, events=9_876_543, malformed_lines=100, blank_lines=2,
        first_event_unix_ms=1_795_413_857_772.0, last_event_unix_ms=1_795_413_917_772.0,
    )  # fmt: skip
    summary = AnalysisSummary(
        counts=counts, percentile_accuracy=10000,
        percentile_error="percentile_approx(accuracy=10000)", purgatories={},
        malformed_samples=[], faults=[],
        inputs=[f"/data/traces/part-{i:05d}.jsonl.gz" for i in range(8)], tables={},
        elapsed_s=0.0,
    )  # fmt: skip
    errors = [
        {"purgatory": "Produce", "kind": "produce", "outcome": "error",
         "error": "NOT_LEADER_OR_FOLLOWER", "operations": 2_125}
    ]  # fmt: skip
    hot = [
        {"purgatory": "Fetch", "rank": 1, "key": "events-" + "x" * 40, "operations": 3_675,
         "expired": 725, "expiration_rate": 0.1973}
    ]  # fmt: skip
    return Path(report.write_report(str(out), summary, stats, hot, errors, plots=True))


def _render(page: Path) -> dict[str, object]:
    assert CHROMIUM is not None
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--window-size=1280,900",
             "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
    found = re.search(r'<pre id="probe">(.+?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    result: dict[str, object] = json.loads(found.group(1).replace("&quot;", '"'))
    return result


def test_the_report_reads_top_down(tmp_path: Path) -> None:
    text = _write_sample_report(tmp_path).read_text()
    assert "9,876,543" in text  # thousands separators
    assert ">0.3%<" in text  # rates as percentages
    assert text.index(">all<") < text.index(">fetch-consumer<")  # the total row first
    assert text.index(">DeleteRecords<") < text.index(">Fetch<") < text.index(">Produce<")
    assert "<td class='text'>-</td>" not in text
    assert "8 files" in text
    assert "percentile_approx" in text.split("Latency")[-1]  # accuracy in a footnote
    for _, title, caption in report.PLOTS:
        assert title in text
        assert caption in text


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_report_fits_1280_px_and_every_image_loads(tmp_path: Path) -> None:
    seen = _render(_write_sample_report(tmp_path))
    assert isinstance(seen["width"], int)
    assert seen["width"] <= 1280, seen
    images = seen["images"]
    assert isinstance(images, list)
    assert len(images) == len(report.PLOTS)
    for src, complete, natural_width in images:
        assert complete, src
        assert natural_width > 0, src
