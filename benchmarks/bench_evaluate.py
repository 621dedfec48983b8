"""policybox evaluate against MettaGrid's own multi-episode runner: whole commands, side by side.

    .venv/bin/python benchmarks/bench_evaluate.py [--episodes 40] [--steps 1000] [--agents 4] [--reps 3]
                                                  [--cells per-agent|per-policy] [--only random|reading]

Both contenders play the same tournament -- MettaGrid's arena (``make_arena``), one policy in every
seat, the same episode count, steps and agents -- as a whole command from a fresh interpreter, so
start-up, imports and writing results are inside the time:

* **MettaGrid**: ``mettagrid.runner.rollout.run_multi_episode_rollout``, every policy in-process,
  one episode after another (``benchmarks/bench_evaluate.py --mettagrid``);
* **policybox**: ``policybox evaluate`` with its full standard sandbox, into a fresh results folder,
  with the default worker count (the machine's cores) and cells (``--cells`` passes one on).

Two pairs, each with the same policy class under both runners: MettaGrid's random policy
(``random``), which never reads its observation, and the same policy reading its observation's tokens
every step, as every trained network does (``reading``: ``benchmarks/reading_policy.py``).

Each repetition runs every contender, in turn; the table shows the median wall time of each and the
ratio of throughputs (its pair's MettaGrid time over policybox's), so a noisy machine shifts both sides
alike.
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
BENCHMARKS = Path(__file__).parent
# Each pair's policy: (MettaGrid's class path, with benchmarks/ on sys.path; policybox's -p)
POLICIES = {
    "random": ("mettagrid.policy.random_agent.RandomMultiAgentPolicy", "random"),
    "reading": ("reading_policy.ReadingRandomPolicy", f"{BENCHMARKS / 'reading_policy.py'}:ReadingRandomPolicy"),
}


def mettagrid_command(policy: str, episodes: int, steps: int, agents: int) -> list[str]:
    return [sys.executable, __file__, "--mettagrid", "--only", policy, "--episodes", str(episodes), "--steps",
            str(steps), "--agents", str(agents)]  # fmt: skip


def policybox_command(policy: str, episodes: int, steps: int, agents: int, cells: str | None, out: Path) -> list[str]:
    command = [str(VENV_BIN / "policybox"), "evaluate", "-p", POLICIES[policy][1], "--episodes", str(episodes),
               "--steps", str(steps), "--agents", str(agents), "--seed", "1", "--out", str(out)]  # fmt: skip
    return command if cells is None else [*command, "--cells", cells]


def run_mettagrid(policy: str, episodes: int, steps: int, agents: int) -> None:
    """The baseline, as a MettaGrid user runs it."""
    from mettagrid.builder.envs import make_arena
    from mettagrid.policy.policy import PolicySpec
    from mettagrid.runner.rollout import run_multi_episode_rollout

    sys.path.insert(0, str(BENCHMARKS))
    config = make_arena(agents)
    config.game.max_steps = steps
    results, _ = run_multi_episode_rollout(
        policy_specs=[PolicySpec(class_path=POLICIES[policy][0])],
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
    parser.add_argument("--cells", choices=["per-agent", "per-policy"], help="policybox's --cells (default: its own)")
    parser.add_argument("--only", choices=list(POLICIES), help="one pair only (default: both)")
    parser.add_argument("--mettagrid", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mettagrid:
        run_mettagrid(args.only or "random", args.episodes, args.steps, args.agents)
        return
    pairs = [args.only] if args.only else list(POLICIES)
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.reps):
        for policy in pairs:
            mettagrid = mettagrid_command(policy, args.episodes, args.steps, args.agents)
            times.setdefault((policy, "MettaGrid run_multi_episode_rollout"), []).append(timed(mettagrid))
            with tempfile.TemporaryDirectory() as folder:
                command = policybox_command(
                    policy, args.episodes, args.steps, args.agents, args.cells, Path(folder) / "results"
                )
                times.setdefault((policy, "policybox evaluate"), []).append(timed(command))
    cells = f", policybox --cells {args.cells}" if args.cells else ""
    table = Table(
        title=f"{args.episodes} episodes × {args.steps} steps, {args.agents} agents{cells}: whole commands "
        f"(median of {args.reps})"
    )
    for column in ("policy", "runner", "seconds", "episodes/s", "throughput vs MettaGrid"):
        table.add_column(column, justify="left" if column in ("policy", "runner") else "right")
    for (policy, runner), samples in times.items():
        baseline = statistics.median(times[policy, "MettaGrid run_multi_episode_rollout"])
        median = statistics.median(samples)
        table.add_row(policy, runner, f"{median:.1f}", f"{args.episodes / median:.2f}", f"{baseline / median:.2f}x")
    Console(width=120).print(table)  # never cut to a pipe's 80 columns


if __name__ == "__main__":
    main()
