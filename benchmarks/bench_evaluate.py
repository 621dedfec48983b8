"""policybox evaluate against MettaGrid's own multi-episode runner: whole commands, side by side.

    .venv/bin/python benchmarks/bench_evaluate.py [--episodes 40] [--steps 1000] [--agents 4] [--reps 3]

Both contenders play the same tournament -- MettaGrid's arena (``make_arena``), MettaGrid's random
policy in every seat, the same episode count, steps and agents -- as a whole command from a fresh
interpreter, so start-up, imports and writing results are inside the time:

* **MettaGrid**: ``mettagrid.runner.rollout.run_multi_episode_rollout``, every policy in-process,
  one episode after another (``benchmarks/bench_evaluate.py --mettagrid``);
* **policybox**: ``policybox evaluate -p random`` with its full standard sandbox (every agent in its
  own cell), into a fresh results folder, with the default worker count (the machine's cores).

Each repetition runs both, in turn; the table shows the median wall time of each and the ratio of
throughputs (MettaGrid's time over policybox's), so a noisy machine shifts both sides alike.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

VENV_BIN = Path(sys.executable).parent


def mettagrid_command(episodes: int, steps: int, agents: int) -> list[str]:
    return [sys.executable, __file__, "--mettagrid", "--episodes", str(episodes), "--steps", str(steps),
            "--agents", str(agents)]  # fmt: skip


def policybox_command(episodes: int, steps: int, agents: int, out: Path) -> list[str]:
    return [str(VENV_BIN / "policybox"), "evaluate", "-p", "random", "--episodes", str(episodes), "--steps",
            str(steps), "--agents", str(agents), "--seed", "1", "--out", str(out)]  # fmt: skip


def run_mettagrid(episodes: int, steps: int, agents: int) -> None:
    """The baseline, as a MettaGrid user runs it."""
    from mettagrid.builder.envs import make_arena
    from mettagrid.policy.policy import PolicySpec
    from mettagrid.runner.rollout import run_multi_episode_rollout

    config = make_arena(agents)
    config.game.max_steps = steps
    random_policy = PolicySpec(class_path="mettagrid.policy.random_agent.RandomMultiAgentPolicy")
    results, _ = run_multi_episode_rollout(
        policy_specs=[random_policy],
        assignments=[0] * agents,
        env_cfg=config,
        episodes=episodes,
        seed=1,
        max_action_time_ms=10_000,
    )
    assert len(results.episodes) == episodes


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--mettagrid", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mettagrid:
        run_mettagrid(args.episodes, args.steps, args.agents)
        return
    times: dict[str, list[float]] = {"MettaGrid run_multi_episode_rollout": [], "policybox evaluate": []}
    for _ in range(args.reps):
        times["MettaGrid run_multi_episode_rollout"].append(
            timed(mettagrid_command(args.episodes, args.steps, args.agents))
        )
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "results"
            times["policybox evaluate"].append(timed(policybox_command(args.episodes, args.steps, args.agents, out)))
    baseline = statistics.median(times["MettaGrid run_multi_episode_rollout"])
    table = Table(
        title=f"{args.episodes} episodes × {args.steps} steps, {args.agents} agents, random policy: whole commands "
        f"(median of {args.reps})"
    )
    for column in ("runner", "seconds", "episodes/s", "throughput vs MettaGrid"):
        table.add_column(column, justify="left" if column == "runner" else "right")
    for runner, samples in times.items():
        median = statistics.median(samples)
        table.add_row(runner, f"{median:.1f}", f"{args.episodes / median:.2f}", f"{baseline / median:.2f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
