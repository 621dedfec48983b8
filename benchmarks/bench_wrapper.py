"""policybox's drop-in ``SandboxedPolicy`` inside MettaGrid's own ``Rollout``, side by side with plain MettaGrid.

    .venv/bin/python benchmarks/bench_wrapper.py                 # every case, 3 interleaved repetitions
    .venv/bin/python benchmarks/bench_wrapper.py --reps 5 --only lstm

Contenders, each timed on ``Rollout.run_until_done()`` (env steps/s; the ``Rollout(...)`` constructor is
timed apart as start-up), one after another within each repetition:

* MettaGrid Rollout (in-process): the policy's own ``MultiAgentPolicy``, one ``agent_policy(i)`` per agent,
  no ``policy_group_keys`` -- what MettaGrid users run today (``baselines.run_rollout``);
* SandboxedPolicy, one by one: ``Rollout`` over ``SandboxedPolicy(policy_env_info, policy=<the same policy
  as a policybox spec>)``'s agent policies, no ``policy_group_keys``: each agent's step is its own round trip
  to its cell;
* SandboxedPolicy, grouped: the same with ``policy_group_keys=[0] * agents``, as MettaGrid's runner
  (``run_multi_episode_rollout``) calls it: every observation of a step goes out before any reply is awaited;
* SandboxedPolicy, grouped, preload torch (the LSTM case): the same, the zygote importing torch once;
* MettaGrid policy server (batched): ``baselines.policy_server_steps_per_s``.

A fresh ``SandboxedPolicy`` per run, closed after it; its zygote starts in the first ``reset()``, i.e. inside
the timed constructor. A second ``Rollout`` constructor on the same policy (its zygote running, fresh cells) is
timed as "next episode", then the policy is closed and any process it left behind is reported. policybox runs
with MettaGrid's deadlines (act 10 s as ``Rollout``'s ``max_action_time_ms``, start-up 300 s as the policy
server's ``startup_timeout``) so that a slow step is measured, not dropped.

Cases: MettaGrid's random policy (4 agents x 1000 steps, 24 x 300), ``busy_policy.Busy1msPolicy`` (4 x 200),
MettaGrid's LSTM with a checkpoint made as ``bench_nn.make_checkpoint`` makes it (4 x 300).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import psutil
from mettagrid.policy.policy_env_interface import PolicyEnvInterface
from rich.console import Console
from rich.table import Table

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import baselines  # noqa: E402
from bench_episode import SEED, interleaved, same_every_rep  # noqa: E402

from policybox.host.zygote import Zygote  # noqa: E402
from policybox.mettagrid import SandboxedPolicy  # noqa: E402

# (policy as baselines names it, agents, steps) per --only choice
CASES = {
    "random": [("random", 4, 1000), ("random", 24, 300)],
    "busy": [("busy1ms", 4, 200)],
    "lstm": [("lstm", 4, 300)],
}
# The same policies as policybox specs: busy_policy is importable in the cells through the spec's path= entry.
WRAPPER_SPECS = {"random": "random", "busy1ms": f"busy_policy.Busy1msPolicy,path={BENCH}", "lstm": "lstm,data={data}"}
DEADLINES = {"act_timeout_ms": 10_000, "init_timeout_s": 300}  # MettaGrid's, as in bench_nn
ROLLOUT, SERVER = "MettaGrid Rollout (in-process)", "MettaGrid policy server (batched)"
ONE_BY_ONE, GROUPED, PRELOADED = (
    "SandboxedPolicy, one by one",
    "SandboxedPolicy, grouped",
    "SandboxedPolicy, grouped, preload torch",
)
console = Console(width=140)  # wide enough that the runners' names are not wrapped


class Outcomes:
    """What the Rollout runs leave besides steps/s: start-up, the episodes played, problems, leftovers."""

    def __init__(self) -> None:
        self.startup: dict[str, list[float]] = defaultdict(list)
        self.next_startup: dict[str, list[float]] = defaultdict(list)
        self.episodes: dict[str, list[tuple[tuple[float, ...], str]]] = defaultdict(list)
        self.problems: dict[str, list[str]] = defaultdict(list)

    def record(self, name: str, run: baselines.RolloutRun) -> float:
        self.startup[name].append(run.startup_s)
        self.episodes[name].append((run.rewards, run.stats))
        if run.timeouts:
            self.problems[name].append(f"{run.timeouts} agent steps over Rollout's max_action_time_ms")
        return run.steps_per_s

    def repeat(self, name: str) -> str:
        return same_every_rep(self.episodes.get(name))

    def same_as_rollout(self, name: str) -> str:
        runs, reference = self.episodes.get(name), set(self.episodes.get(ROLLOUT, []))
        if not runs or not reference:
            return "-"
        equal = sum(run in reference for run in runs)
        return "yes" if equal == len(runs) else f"no ({equal} of {len(runs)})"


def child_processes() -> dict[int, str]:
    """This process's descendants: pid -> command line and status."""
    found = {}
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            found[child.pid] = f"{' '.join(child.cmdline())[:80]} ({child.status()})"
    return found


def wrapper_run(
    name: str, agents: int, steps: int, spec: str, grouped: bool, outcomes: Outcomes, folder: Path, **options
) -> float:
    """Env steps/s of one ``Rollout`` over a fresh ``SandboxedPolicy``; start-up, problems and leftovers to
    ``outcomes``."""
    config = baselines.arena_config(agents, steps, SEED)
    keys = [0] * agents if grouped else None
    before = child_processes()
    log_dir = Path(tempfile.mkdtemp(prefix="logs-", dir=folder))  # else SandboxedPolicy makes one in /tmp, kept
    multi = SandboxedPolicy(
        PolicyEnvInterface.from_mg_cfg(config), policy=spec, log_dir=log_dir, seed=SEED, **DEADLINES, **options
    )
    try:
        steps_per_s = outcomes.record(name, baselines.run_rollout(config, multi, SEED, keys))
        for agent in range(agents):
            infos = multi.agent_infos(agent)
            if infos.get("policybox_status") != "ok":
                outcomes.problems[name].append(f"agent {agent}: {infos or 'no cell'}")
        # The next episode on the same policy: the zygote is running, the cells are fresh.
        rollout, next_s = baselines.start_rollout(config, multi, SEED, keys)
        rollout._simulator.close()
        outcomes.next_startup[name].append(next_s)
    finally:
        multi.close()
    left = {pid: line for pid, line in child_processes().items() if pid not in before}
    if left:
        outcomes.problems[name].append(f"left running after close(): {left}")
    return steps_per_s


def contenders(
    policy: str, agents: int, steps: int, data: Path | None, outcomes: Outcomes, folder: Path
) -> dict[str, Callable[[], float]]:
    spec = WRAPPER_SPECS[policy].format(data=data)
    config = baselines.arena_config(agents, steps, SEED)

    def plain() -> float:
        multi = baselines.make_policy(policy, PolicyEnvInterface.from_mg_cfg(config), data)
        return outcomes.record(ROLLOUT, baselines.run_rollout(config, multi, SEED))

    def wrapped(name: str, grouped: bool, **options) -> Callable[[], float]:
        return lambda: wrapper_run(name, agents, steps, spec, grouped, outcomes, folder, **options)

    runs = {ROLLOUT: plain, ONE_BY_ONE: wrapped(ONE_BY_ONE, False), GROUPED: wrapped(GROUPED, True)}
    if policy == "lstm":
        runs[PRELOADED] = wrapped(PRELOADED, True, preload=["torch"])
    runs[SERVER] = lambda: baselines.policy_server_steps_per_s(agents, steps, SEED, policy, data)
    return runs


def case(reps: int, policy: str, agents: int, steps: int, data: Path | None, folder: Path) -> None:
    outcomes = Outcomes()
    samples = interleaved(reps, contenders(policy, agents, steps, data, outcomes, folder))
    server_startup = interleaved(reps, {SERVER: lambda: baselines.policy_server_startup_s(agents, policy, data)})
    medians = {name: statistics.median(values) for name, values in samples.items()}
    table = Table(title=f"{agents} agents, {policy} policy, {steps} steps: env steps/s (median of {reps})")
    columns = ("runner", "steps/s", "vs Rollout", "vs one by one", "vs policy server", "same every rep", "= Rollout's")
    for column in columns:
        table.add_column(column, justify="left" if column == "runner" else "right")
    for name, value in medians.items():
        table.add_row(
            name,
            f"{value:,.1f}" if value < 100 else f"{value:,.0f}",
            f"{value / medians[ROLLOUT]:.2f}x",
            f"{value / medians[ONE_BY_ONE]:.2f}x",
            f"{value / medians[SERVER]:.2f}x",
            outcomes.repeat(name),
            outcomes.same_as_rollout(name) if name != ROLLOUT else "",
        )
    console.print(table)
    per_rep = (f"{name}: {'/'.join(f'{value:.0f}' for value in values)}" for name, values in samples.items())
    console.print(f"  per rep: {', '.join(per_rep)}")
    for name, problems in outcomes.problems.items():
        console.print(f"  [bold red]{name}[/]: {'; '.join(problems)}")

    table = Table(title=f"{agents} agents, {policy} policy: start-up, seconds (median of {reps})")
    for column in ("runner", "Rollout(...) constructor", "next episode (zygote running)"):
        table.add_column(column, justify="left" if column == "runner" else "right")
    for name, values in outcomes.startup.items():
        following = outcomes.next_startup.get(name)
        following = f"{statistics.median(following):.3f}" if following else ""
        table.add_row(name, f"{statistics.median(values):.3f}", following)
    table.add_row(f"{SERVER}: launch + prepare", f"{statistics.median(server_startup[SERVER]):.3f}", "")
    console.print(table)


def zygote_start_s(preload: tuple[str, ...] = ()) -> float:
    """Seconds to start (and make ready) a zygote on its own: part of a fresh SandboxedPolicy's start-up."""
    started = time.perf_counter()
    zygote = Zygote(preload)
    elapsed = time.perf_counter() - started
    zygote.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions (medians are reported)")
    parser.add_argument("--only", choices=list(CASES), action="append", help="run only these cases")
    args = parser.parse_args()
    chosen = args.only or list(CASES)
    logging.getLogger("mettagrid").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="policybox-bench-wrapper-") as tmp:
        folder = Path(tmp)
        zygotes = f"zygote alone {zygote_start_s():.2f} s"
        data = None
        if "lstm" in chosen:
            from bench_nn import make_checkpoint  # imports torch

            data = make_checkpoint(4, folder)
            zygotes += f", with torch {zygote_start_s(('torch',)):.2f} s"
        console.print(
            f"policybox SandboxedPolicy benchmark: {psutil.cpu_count()} CPUs, {args.reps} repetitions, seed {SEED}; "
            f"{zygotes} (in a fresh SandboxedPolicy's start-up)"
        )
        for name in chosen:
            for policy, agents, steps in CASES[name]:
                case(args.reps, policy, agents, steps, data if policy == "lstm" else None, folder)


if __name__ == "__main__":
    main()
