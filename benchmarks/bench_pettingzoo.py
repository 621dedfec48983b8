"""PettingZoo games in policybox's cells, side by side with the same policies in a plain PettingZoo loop.

    .venv/bin/python benchmarks/bench_pettingzoo.py            # every case, 3 interleaved repetitions
    .venv/bin/python benchmarks/bench_pettingzoo.py --reps 5

Contenders, one after another within each repetition (env steps/s over the played steps, the game
made and reset before the clock starts, as policybox's ``play_s`` counts them):

* PettingZoo loop (in-process): the same policy classes built with the env's own spaces, the loop of
  PettingZoo's documentation (``env.step({agent: act(obs)})`` for Parallel games, ``agent_iter``/``last``
  for AEC games) -- what a user runs without isolation;
* policybox inline: ``run_episode(mode="inline")``: the same runtime and codec, all in this process;
* policybox process: a sandboxed cell per agent (standard sandbox), forked from one zygote shared by
  every repetition.

Cases: ``mpe2.simple_spread_v3`` (3 agents, Parallel, ``max_cycles=500``) with policybox's ``random``
and with ``busy_policy.Busy1msAct`` (1 ms of CPU per act); ``connect_four_v3`` (2 players, AEC) with
``random``, 20 games of different seeds per run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

from rich.console import Console
from rich.table import Table

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_episode import interleaved  # noqa: E402
from busy_policy import Busy1msAct  # noqa: E402
from policybox.settings import EpisodeSettings, zygote_preload  # noqa: E402

from policybox.envs import pettingzoo  # noqa: E402
from policybox.envs.pettingzoo_policies import RandomPolicy  # noqa: E402
from policybox.episode import run_episode  # noqa: E402
from policybox.host.zygote import Zygote  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)  # pettingzoo.classic's own warning
console = Console()
SPREAD = "mpe2.simple_spread_v3:parallel_env"
CONNECT_FOUR = "pettingzoo.classic.connect_four_v3:env"
BUSY = f"{BENCH / 'busy_policy.py'}:Busy1msAct"
# (title, game, env kwargs, policy spec, policy class for the plain loop, episodes per run)
CASES = [
    ("simple_spread, 3 agents, random", SPREAD, {"max_cycles": 500}, "random", RandomPolicy, 1),
    ("simple_spread, 3 agents, busy 1 ms", SPREAD, {"max_cycles": 200}, BUSY, Busy1msAct, 1),
    ("connect_four, 2 players, random, 20 games", CONNECT_FOUR, {}, "random", RandomPolicy, 20),
]


def plain_loop(game: str, kwargs: dict, policy_class: type, episodes: int) -> float:
    """Steps/s of the PettingZoo documentation's loop, policies in this process."""
    steps, elapsed = 0, 0.0
    for seed in range(episodes):
        env = pettingzoo.make_env(game, kwargs)
        agents = {a: policy_class(env.observation_space(a), env.action_space(a)) for a in env.possible_agents}
        if hasattr(env, "agent_iter"):
            env.reset(seed=seed)
            started = time.perf_counter()
            for agent in env.agent_iter():
                observation, _, termination, truncation, _ = env.last()
                env.step(None if termination or truncation else agents[agent].act(observation))
                steps += 1
        else:
            observations, _ = env.reset(seed=seed)
            started = time.perf_counter()
            while env.agents:
                observations, *_ = env.step({a: agents[a].act(observations[a]) for a in env.agents})
                steps += 1
        elapsed += time.perf_counter() - started
        env.close()
    return steps / elapsed


def policybox_run(game: str, kwargs: dict, spec: str, episodes: int, mode: str, zygote: Zygote | None) -> float:
    steps, elapsed = 0, 0.0
    with tempfile.TemporaryDirectory() as logs:
        for seed in range(episodes):
            settings = EpisodeSettings(env=f"pettingzoo:{game}", env_kwargs=kwargs, mode=mode, seed=seed, steps=10**6)
            result = run_episode([spec], settings, logs, zygote=zygote)
            assert all(agent.status == "ok" for agent in result.agents), result.agents
            steps, elapsed = steps + result.steps, elapsed + result.play_s
    return steps / elapsed


def _runs(game: str, kwargs: dict, spec: str, policy_class: type, episodes: int, zygote: Zygote) -> dict:
    runs = {"PettingZoo loop (in-process)": lambda: plain_loop(game, kwargs, policy_class, episodes)}
    runs["policybox inline"] = lambda: policybox_run(game, kwargs, spec, episodes, "inline", None)
    runs["policybox process (sandboxed cells)"] = lambda: policybox_run(game, kwargs, spec, episodes, "process", zygote)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    reps = parser.parse_args().reps
    with Zygote(zygote_preload(EpisodeSettings(env="pettingzoo:x:y"))) as zygote:
        for title, game, kwargs, spec, policy_class, episodes in CASES:
            runs = _runs(game, kwargs, spec, policy_class, episodes, zygote)
            medians = {name: statistics.median(v) for name, v in interleaved(reps, runs).items()}
            reference = medians["PettingZoo loop (in-process)"]
            table = Table(title=f"{title}: env steps/s (median of {reps})")
            for column in ("runner", "steps/s", "vs PettingZoo loop"):
                table.add_column(column, justify="left" if column == "runner" else "right")
            for name, value in medians.items():
                table.add_row(name, f"{value:,.0f}", f"{value / reference:.2f}x")
            console.print(table)


if __name__ == "__main__":
    main()
