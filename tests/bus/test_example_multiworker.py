"""examples/multiworker: four worker processes on one port, jobs in a real PostgreSQL,
long polls answered across workers through the bus (drive.py exits 1 otherwise)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DRIVE = Path(__file__).resolve().parents[2] / "examples" / "multiworker" / "drive.py"


@pytest.mark.usefixtures("start_postgres")  # drive.py starts a throwaway PostgreSQL
def test_every_client_parked_across_the_workers_is_answered() -> None:
    run = subprocess.run(
        [sys.executable, str(DRIVE), "--clients", "60", "--workers", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "answered 60 of 60 with the new version" in run.stdout
    # the updates landed in several workers, so some answers crossed the bus
    crossed = int(run.stdout.split("new version, ")[1].split()[0])
    assert crossed > 0
