"""What a command costs before it does anything (issue 41): each command's CPU and wall time beside
``python -c pass``, the interpreter's own start.

    .venv/bin/python benchmarks/bench_cli.py [--reps 5]

Each row is a fresh process, ``python -m policybox ARGS`` run the way the ``policybox`` script runs it,
``--reps`` times in turn with the others (interleaved, so that a noisy moment hits every row alike): the
median of its CPU time (user + system, from ``getrusage`` of the children: the process and anything
it started) and of its wall time, and both as multiples of ``python -c pass``'s. ``ladder status``
reads a ladder of two names this script makes first (not timed); ``run`` plays 5 steps of the arena
inline, for what a command that does work pays to start (the game, numpy). The import budget the suite checks
(``tests/test_cli_imports.py``) is which modules each command loads; this is what they cost here.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table


def commands(ladder: Path) -> dict[str, list[str]]:
    policybox = [sys.executable, "-m", "policybox"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "policybox --help": [*policybox, "--help"],
        "policybox run --help": [*policybox, "run", "--help"],
        "policybox ladder --help": [*policybox, "ladder", "--help"],
        "policybox ladder status DIR": [*policybox, "ladder", "status", str(ladder)],
        "policybox --version": [*policybox, "--version"],
        "policybox run (inline, 5 steps)": [
            *policybox,
            "run",
            "-p",
            "random",
            "-n",
            "2",
            "--steps",
            "5",
            "--mode",
            "inline",
            "--log-dir",
            str(ladder.parent / "logs"),
        ],
    }


def measured(command: list[str]) -> tuple[float, float]:
    """The CPU seconds (the process and its children) and wall seconds of one run of ``command``."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def made_ladder(folder: Path) -> Path:
    from policybox import EpisodeSettings, Ladder, LadderSettings

    with Ladder.create(folder / "cup", LadderSettings(settings=EpisodeSettings(steps=5), agents=2)) as ladder:
        ladder.submit("idle", "noop", check=False)
        ladder.submit("wanderer", "random", check=False)
    return folder / "cup"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="runs of each command, interleaved (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as folder:
        rows = commands(made_ladder(Path(folder)))
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
        for _ in range(args.reps):
            for name, command in rows.items():
                times[name].append(measured(command))
    cpu = {name: statistics.median(t[0] for t in found) for name, found in times.items()}
    wall = {name: statistics.median(t[1] for t in found) for name, found in times.items()}
    base = "python -c pass"
    table = Table(title=f"a command's start, median of {args.reps} interleaved runs")
    for column in ("command", "CPU s", "x python", "wall s", "x python"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for name in rows:
        table.add_row(
            name,
            f"{cpu[name]:.3f}",
            f"{cpu[name] / max(cpu[base], 1e-3):.1f}",
            f"{wall[name]:.3f}",
            f"{wall[name] / wall[base]:.1f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
