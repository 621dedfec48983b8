"""``benchmarks/bench_ladder.py`` at tiny sizes, so that it keeps running: its every section, on SQLite (its
PostgreSQL side starts the same server as the suite's database tests), and its synthetic ladder
consistent (``rerate`` finds its stored ratings a replay of its matches)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parents[1] / "benchmarks" / "bench_ladder.py"


def test_the_ladder_benchmark_runs_at_tiny_sizes() -> None:
    sizes = ["--matches", "3", "--steps", "20", "--workers", "1", "--reps", "1", "--synthetic", "120", "--calls", "1"]
    run = subprocess.run(
        [sys.executable, BENCH, *sizes, "--driver-matches", "10", "--slots", "4", "--db", "sqlite"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for title in ("matches per minute", "where the time goes", "filling the database", "ms per call", "instant"):
        assert title in run.stdout, run.stdout
    rerate = next(line for line in run.stdout.splitlines() if "ladder rerate" in line)
    assert rerate.count("0 differ") == 1, rerate
