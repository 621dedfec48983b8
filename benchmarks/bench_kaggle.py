"""policybox evaluate against kaggle-environments' own runner, on Kaggle's games: whole commands, side by side.

    .venv/bin/python benchmarks/bench_kaggle.py [--episodes 100] [--workers 2] [--reps 3]

Both contenders play the same episodes of each game -- ConnectX with ``negamax`` in both seats, Hungry
Geese with four ``greedy`` geese -- as a whole command from a fresh interpreter, so start-up, imports
and writing results are inside the time:

* **Kaggle**: ``kaggle_environments.make(GAME).run(agents)`` once per episode, one after another, every
  agent in its process, as a participant runs a batch locally (``bench_kaggle.py --kaggle GAME``);
* **policybox**: ``policybox evaluate --env kaggle:GAME`` with its full standard sandbox (every agent in
  its own cell), ``--workers`` of them, into a fresh results folder.

Each repetition runs both, in turn; the table shows the median wall time of each, the steps each
played a second (game steps over the whole command's time; the median over repetitions), and the ratio
of throughputs (Kaggle's time over policybox's), so a noisy machine shifts both sides alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from bench_evaluate import timed  # a whole command's wall time, as evaluate's benchmark measures it
from rich.console import Console
from rich.table import Table

VENV_BIN = Path(sys.executable).parent
GAMES = {"connectx": ["negamax"] * 2, "hungry_geese": ["greedy"] * 4}


def kaggle_command(game: str, episodes: int, steps_file: Path) -> list[str]:
    return [sys.executable, __file__, "--kaggle", game, "--episodes", str(episodes), "--steps-file", str(steps_file)]


def policybox_command(game: str, episodes: int, workers: int, out: Path) -> list[str]:
    agents = GAMES[game]
    return [str(VENV_BIN / "policybox"), "evaluate", "--env", f"kaggle:{game}", "-p", f"kaggle:{agents[0]}",
            "--agents", str(len(agents)), "--episodes", str(episodes), "--workers", str(workers), "--seed", "1",
            "--out", str(out)]  # fmt: skip


def run_kaggle(game: str, episodes: int, steps_file: Path) -> None:
    """The baseline, as a Kaggle participant runs a batch of games locally; the steps it played, to
    ``steps_file``."""
    from kaggle_environments import make

    steps = 0
    for _ in range(episodes):
        env = make(game)
        env.run(GAMES[game])
        steps += len(env.steps) - 1  # the first is the initial state
    steps_file.write_text(str(steps))


def policybox_steps(out: Path) -> int:
    return sum(json.loads(line)["steps"] for line in (out / "results.jsonl").read_text().splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--games", nargs="+", default=list(GAMES), choices=list(GAMES))
    parser.add_argument("--kaggle", help=argparse.SUPPRESS)
    parser.add_argument("--steps-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.kaggle:
        run_kaggle(args.kaggle, args.episodes, args.steps_file)
        return
    table = Table(title=f"{args.episodes} episodes a game, whole commands (median of {args.reps})")
    for column in ("game", "runner", "seconds", "steps/s", "episodes/min", "throughput vs Kaggle"):
        table.add_column(column, justify="left" if column in ("game", "runner") else "right")
    kaggle, ours = "kaggle env.run, in turn", f"policybox evaluate, {args.workers} workers"
    for game in args.games:
        times: dict[str, list[float]] = {kaggle: [], ours: []}
        rates: dict[str, list[float]] = {kaggle: [], ours: []}
        for _ in range(args.reps):
            with tempfile.TemporaryDirectory() as folder:
                steps_file, out = Path(folder) / "steps", Path(folder) / "results"
                times[kaggle].append(timed(kaggle_command(game, args.episodes, steps_file)))
                rates[kaggle].append(int(steps_file.read_text()) / times[kaggle][-1])
                times[ours].append(timed(policybox_command(game, args.episodes, args.workers, out)))
                rates[ours].append(policybox_steps(out) / times[ours][-1])
        baseline = statistics.median(times[kaggle])
        for runner, samples in times.items():
            median = statistics.median(samples)
            rate = args.episodes / median * 60
            steps = statistics.median(rates[runner])
            table.add_row(game, runner, f"{median:.1f}", f"{steps:.0f}", f"{rate:.0f}", f"{baseline / median:.2f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
