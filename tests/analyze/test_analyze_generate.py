"""The synthetic trace generator: its announced answers match what a JSON parser reads."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from analyze_reference import load

from purgatory.analyze.generate import generate, generate_file, main


def test_stats_match_an_independent_parse(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    stats = generate_file(str(path), 2000, seed=11, malformed=10)
    ref = load(str(path))
    assert len(ref.events) == stats.events == 2000
    assert ref.malformed == stats.malformed == 10
    assert Counter((e["purgatory"], e["outcome"]) for e in ref.events) == stats.outcomes
    assert len({e["op_id"] for e in ref.events}) == 2000
    expired = [e for e in ref.events if e["outcome"] == "expired"]
    assert expired
    assert all(e["lateness_ms"] is not None for e in expired)
    # as in the product: an expired fetch carries no error, an expired produce or delete
    # REQUEST_TIMED_OUT
    assert {e["error"] for e in expired if e["purgatory"] == "Fetch"} == {None}
    assert {e["error"] for e in expired if e["purgatory"] != "Fetch"} == {"REQUEST_TIMED_OUT"}


def test_same_seed_same_trace(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    generate_file(str(a), 300, seed=1, malformed=3)
    generate_file(str(b), 300, seed=1, malformed=3)
    generate_file(str(c), 300, seed=2, malformed=3)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_parts_are_one_continuous_gzip_trace(tmp_path: Path) -> None:
    out = tmp_path / "parts"
    stats = generate(str(out), 1000, seed=3, malformed=7, parts=3, jobs=1, gzip_parts=True)
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"part-0000{i}.jsonl.gz" for i in range(3)]
    ref = load(str(out))
    assert (len(ref.events), ref.malformed) == (stats.events, stats.malformed) == (1000, 7)
    ids = sorted(int(e["op_id"].split("-")[1]) for e in ref.events)
    assert ids == list(range(1000))  # parts continue each other's numbering
    with gzip.open(files[0], "rt") as fh:
        json.loads(fh.readline())


def test_command_line(tmp_path: Path) -> None:
    path = tmp_path / "cli.jsonl.gz"
    assert main(["--events", "50", "--out", str(path), "--seed", "4", "--malformed", "2"]) == 0
    ref = load(str(path))
    assert (len(ref.events), ref.malformed) == (50, 2)
