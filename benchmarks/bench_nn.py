"""Neural-network policies side by side: MettaGrid's LSTM policy, with a real checkpoint, under MettaGrid's
Rollout, MettaGrid's policy server and policybox.

    .venv/bin/python benchmarks/bench_nn.py                 # both cases and the batching measurement, 3 reps
    .venv/bin/python benchmarks/bench_nn.py --reps 5 --only 4 --only lookup

The policy is ``mettagrid.policy.lstm.LSTMPolicy`` (shorthand ``lstm``): a two-layer MLP over the observation's
500x3 token buffer, a 128-unit LSTM and an action head, sampling its action from the logits. Its checkpoint is
made here, once per agent count, by MettaGrid itself: ``torch.manual_seed(0)``, then
``LSTMPolicy(PolicyEnvInterface.from_mg_cfg(config)).save_policy_data(path)`` for the benchmark's game
(``baselines.arena_config``: the arena on a 10x10 map, seed 1). Each repetition runs every contender once, in
turn; the tables show medians and ratios. Contenders (env steps/s of the stepping phase, start-up excluded):

* MettaGrid Rollout: one ``LSTMPolicy`` with the checkpoint, ``agent_policy(i)`` per agent, ``Rollout``'s
  ``run_until_done()`` timed; torch seeded and with its default thread count, as a MettaGrid user runs it; once
  more with torch on one thread, for reference;
* MettaGrid policy server: ``run_episode_isolated`` with the checkpoint in a submission folder
  (``baselines.policy_uri``), all agents on one server, one WebSocket request per step;
* policybox inline, and policybox process: default settings (MettaGrid's default, forked seats: a loader of the
  LSTM forks its 4 agents; every agent plays for one entrant, as ``policybox run -p lstm -n 4``; once more
  with ``--cells per-agent``; the LSTM's cells fork from the zygote's sibling with
  torch, found unasked: ``policybox.host.torch_use``), with ``preload=["torch"]`` (the zygote imports torch
  once; cells are forked from it), and with the lookup switched off (every cell imports torch itself, as
  before it looked); timed by the result's ``play_s``. All with each cell's default thread budget; and once
  with every cell given as many threads as cores (``threads_per_cell``), as before the budget existed.

policybox runs with MettaGrid's deadlines instead of its own (an act deadline of 10 s, as ``Rollout`` and the
runner's ``max_action_time_ms``; 300 s to start, as the policy server's ``startup_timeout``), so that a slow step
is measured rather than dropped; any timeout is reported. A start-up table follows each case, and a
micro-measurement of what batching one policy's 24 agents into one forward pass would win. ``--only grouped``
measures that batching end to end: 24 agents of ``batched_lstm.BatchedLSTMPolicy`` (MettaGrid's LSTM, its
agents stepped as one batch by ``step_group``) under MettaGrid's Rollout with all agents in one group, and
under policybox with a cell per policy and a cell per agent, with the cells' memory; then the memory of
MettaGrid's stock LSTM at 24 agents with a cell per policy, forked seats and a cell per agent. ``--only lookup``
measures what looking for torch costs a run whose policies never import it: a random policy's start-up with
the lookup and without, side by side, and one lookup's time.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import psutil
import torch
from mettagrid.policy.lstm import LSTMPolicy, obs_to_obs_tensor
from mettagrid.policy.policy_env_interface import PolicyEnvInterface
from mettagrid.simulator import Action
from mettagrid.simulator.rollout import Rollout
from rich.console import Console
from rich.table import Table

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import baselines  # noqa: E402
from bench_episode import SEED, Bench, interleaved, same_every_rep  # noqa: E402

from policybox.envs.mettagrid import resolve_shorthand  # noqa: E402
from policybox.episode import run_episode  # noqa: E402
from policybox.host import torch_use  # noqa: E402
from policybox.host.zygote import Zygote  # noqa: E402
from policybox.limits import Limits  # noqa: E402
from policybox.results import EpisodeResult  # noqa: E402
from policybox.settings import EpisodeSettings  # noqa: E402
from policybox.spec import PolicySpec, parse_policy_arg  # noqa: E402

STEPS = {4: 300, 24: 300}
UNFOUND = "policybox process, torch not looked for"
LOOKUP_AGENTS, LOOKUP_STEPS, LOOKUP_CALLS = 8, 50, 1000
LOOKUP_SPECS = {"random": "random", "lstm": "lstm", "a torch file": f"{BENCH / 'torch_policy.py'}:TorchPolicy"}
CORES = os.cpu_count() or 1
LIMITS = Limits(act_timeout_ms=10_000, init_timeout_s=300)
ROLLOUT, SERVER = "MettaGrid Rollout (in-process)", "MettaGrid policy server (batched)"
BATCH_AGENTS, BATCH_ROUNDS, WARM_STEPS = 24, 200, 20
GROUPED_CLASS = "batched_lstm.BatchedLSTMPolicy"  # benchmarks/ is on sys.path
ROLLOUT_GROUP = "MettaGrid Rollout, one group (step_group)"
PER_POLICY, PER_AGENT = "policybox process, cells per policy", "policybox process, cells per agent"
PROCESS_PER_AGENT = "policybox process, --cells per-agent"
console = Console(width=120)  # wide enough that the runners' names are not wrapped


def make_checkpoint(agents: int, folder: Path) -> Path:
    """MettaGrid's own LSTM checkpoint for the benchmark's game with ``agents`` agents (seeded: reproducible)."""
    path = folder / f"lstm-{agents}.pt"
    config = baselines.arena_config(agents, STEPS[agents], SEED)
    saved = torch.random.get_rng_state()
    torch.manual_seed(0)
    LSTMPolicy(PolicyEnvInterface.from_mg_cfg(config)).save_policy_data(str(path))
    torch.random.set_rng_state(saved)
    return path


class Outcomes:
    """What the policybox runs leave besides steps/s: start-up, action digests, timeouts and failures."""

    def __init__(self) -> None:
        self.startup: dict[str, list[float]] = defaultdict(list)
        self.digests: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        self.problems: dict[str, list[str]] = defaultdict(list)

    def record(self, name: str, result: EpisodeResult) -> float:
        self.startup[name].append(result.startup_s)
        self.digests[name].append(tuple(agent.action_digest for agent in result.agents))
        timeouts = sum(agent.timeouts for agent in result.agents)
        failed = [agent.agent_id for agent in result.agents if agent.status != "ok"]
        if timeouts or failed or result.aborted:
            self.problems[name].append(f"{timeouts} timeouts, agents not ok: {failed}, aborted: {result.aborted}")
        return result.steps / result.play_s

    def repeat(self, name: str) -> str:
        return same_every_rep(self.digests.get(name))


def contenders(bench: Bench, agents: int, checkpoint: Path, outcomes: Outcomes) -> dict[str, Callable[[], float]]:
    steps = STEPS[agents]
    spec = parse_policy_arg(f"lstm,data={checkpoint}")

    def policybox(name: str, mode: str, launcher: str = "zygote", policy=spec, **extra) -> Callable[[], float]:
        def run() -> float:
            result = one_entrant(bench, agents, steps, policy, mode, launcher, limits=LIMITS, **extra)
            return outcomes.record(name, result)

        return run

    runs = {
        ROLLOUT: lambda: baselines.rollout_run(agents, steps, SEED, "lstm", checkpoint).steps_per_s,
        "MettaGrid Rollout, torch 1 thread": lambda: (
            baselines.rollout_run(agents, steps, SEED, "lstm", checkpoint, torch_threads=1).steps_per_s
        ),
        SERVER: lambda: baselines.policy_server_steps_per_s(agents, steps, SEED, "lstm", checkpoint),
    }
    named = {
        "policybox inline": {"mode": "inline"},
        "policybox process": {"mode": "process"},
        PROCESS_PER_AGENT: {"mode": "process", "cells": "per-agent"},
        "policybox process, preload torch": {"mode": "process", "preload": ["torch"]},
    }
    # Every cell with as many threads as the machine has cores: what cells did before the thread budget.
    named[f"policybox process, threads-per-cell={CORES}"] = {"mode": "process", "threads_per_cell": CORES}
    for name, settings in named.items():
        runs[name] = policybox(name, **settings)
    runs[UNFOUND] = unfound(policybox(UNFOUND, mode="process"))
    return runs


def one_entrant(
    bench: Bench, agents: int, steps: int, policy: PolicySpec, mode: str, launcher: str = "zygote", **extra
) -> EpisodeResult:
    """``bench.episode`` as ``policybox run -p POLICY -n AGENTS`` plays it: every agent for one entrant, so
    that ``--cells forked`` (MettaGrid's default) and ``per-policy`` group them (``bench.episode`` makes each
    agent an entrant of its own)."""
    config = baselines.arena_config(agents, steps, SEED)
    env_file = bench.folder / f"arena-{agents}.json"
    env_file.write_text(config.model_dump_json())
    settings = EpisodeSettings(env=str(env_file), steps=steps, seed=SEED, mode=mode, launcher=launcher, **extra)
    zygote = bench.torch_zygote if "torch" in extra.get("preload", []) else bench.zygote
    given = zygote if launcher == "zygote" else None
    return run_episode([policy], settings, bench.folder / "logs", zygote=given, agents=agents)


def unfound(run: Callable[[], float]) -> Callable[[], float]:
    """``run`` with policybox not looking for torch (``policybox.host.torch_use``): every cell imports it
    itself, as before it looked."""

    def without_lookup() -> float:
        with mock.patch.object(torch_use, "needs_torch", lambda *_: False):
            return run()

    return without_lookup


def lookup(bench: Bench) -> None:
    """What looking for torch costs a run whose policies never import it: start-up of a random policy's
    episode with the lookup and without, side by side, and the lookup itself per agent."""
    spec = PolicySpec(class_path="random")
    outcomes = Outcomes()

    def run(name: str) -> float:
        return outcomes.record(name, bench.episode(LOOKUP_AGENTS, LOOKUP_STEPS, spec, "process"))

    with_lookup, without = "policybox process (looks for torch)", "policybox process, not looking"
    torch_zygotes = _torch_zygotes()  # the LSTM cases' (the benchmark's own, and its zygote's sibling)
    interleaved(bench.reps * 3, {with_lookup: lambda: run(with_lookup), without: unfound(lambda: run(without))})
    specs = {name: parse_policy_arg(arg) for name, arg in LOOKUP_SPECS.items()}
    table = Table(title=f"{LOOKUP_AGENTS} agents, random policy, {LOOKUP_STEPS} steps: what looking for torch costs")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for name in (with_lookup, without):
        table.add_row(
            f"start-up (s), {name}: median of {bench.reps * 3}", f"{statistics.median(outcomes.startup[name]):.3f}"
        )
    for name, looked_up in specs.items():
        started = time.perf_counter_ns()
        for _ in range(LOOKUP_CALLS):
            found = torch_use.needs_torch(looked_up, resolve_shorthand)
        table.add_row(
            f"one lookup, {name} (needs torch: {found})",
            f"{(time.perf_counter_ns() - started) / LOOKUP_CALLS / 1e3:.1f} µs",
        )
    console.print(table)
    console.print(f"  zygotes with torch started by the random runs: {_torch_zygotes() - torch_zygotes}")


def _torch_zygotes() -> int:
    zygotes = [child.cmdline() for child in psutil.Process().children() if "policybox.cell.zygote" in child.cmdline()]
    return sum("torch" in command for command in zygotes)


def case(bench: Bench, agents: int, checkpoint: Path) -> None:
    """Steps/s of every contender side by side, then their start-up, for ``agents`` agents."""
    outcomes = Outcomes()
    samples = interleaved(bench.reps, contenders(bench, agents, checkpoint, outcomes))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    table = Table(
        title=f"{agents} agents, MettaGrid LSTM policy, {STEPS[agents]} steps: env steps/s (median of {bench.reps})"
    )
    for column in ("runner", "steps/s", "vs Rollout", "vs policy server", "same actions every rep"):
        table.add_column(column, justify="left" if column == "runner" else "right")
    for name, value in medians.items():
        table.add_row(
            name,
            f"{value:,.1f}",
            f"{value / medians[ROLLOUT]:.2f}x",
            f"{value / medians[SERVER]:.2f}x",
            outcomes.repeat(name),
        )
    console.print(table)
    console.print(f"  per rep: {', '.join(f'{name}: {_rounded(values)}' for name, values in samples.items())}")
    for name, problems in outcomes.problems.items():
        console.print(f"  [bold red]{name}[/]: {'; '.join(problems)}")

    server_startup = interleaved(
        bench.reps, {"server": lambda: baselines.policy_server_startup_s(agents, "lstm", checkpoint)}
    )["server"]
    table = Table(title=f"{agents} agents, MettaGrid LSTM policy: start-up until every agent can step (median)")
    table.add_column("runner")
    table.add_column("seconds", justify="right")
    table.add_row("MettaGrid policy server: launch + prepare", f"{statistics.median(server_startup):.2f}")
    for name, values in outcomes.startup.items():
        if name != "policybox inline":
            table.add_row(name, f"{statistics.median(values):.2f}")
    console.print(table)


def _rounded(values: list[float]) -> str:
    return "/".join(f"{value:.0f}" if value >= 10 else f"{value:.1f}" for value in values)


def batching(reps: int, checkpoint: Path) -> None:
    """24 agents of one LSTM policy, one thread: 24 batch-1 steps (what Rollout, the policy server and
    policybox's cells do) against one batch-24 step, with real observations from the game and the checkpoint."""
    config = baselines.arena_config(BATCH_AGENTS, 1000, SEED)
    env_info = PolicyEnvInterface.from_mg_cfg(config)
    policy = baselines.make_policy("lstm", env_info, checkpoint)
    net, shape = policy.network(), env_info.observation_space.shape
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rollout = Rollout(config, [policy.agent_policy(i) for i in range(BATCH_AGENTS)], seed=SEED)
    try:
        for _ in range(WARM_STEPS):  # observations of a game under way, not the first frame
            rollout.step()
        # Their raw tokens are views of the game's buffer: the game stays open (and still) until the end.
        observations = rollout._sim.observations()
        agent_policies = [policy.agent_policy(i) for i in range(BATCH_AGENTS)]
        tensors = [obs_to_obs_tensor(obs, shape, torch.device("cpu")) for obs in observations]
        batch = torch.cat(tensors)
        zeros = torch.zeros(BATCH_AGENTS, 1, net.hidden_size)  # PufferLib's state layout: (batch, layers, hidden)
        state = {"lstm_h": zeros.clone(), "lstm_c": zeros.clone()}
        singles = [{"lstm_h": zeros[i].clone(), "lstm_c": zeros[i].clone()} for i in range(BATCH_AGENTS)]
        net.eval()
        with torch.no_grad():  # the batched network computes what the per-agent calls do
            each = [net.forward_eval(tensor, {"lstm_h": zeros[:1], "lstm_c": zeros[:1]})[0] for tensor in tensors]
            batched = net.forward_eval(batch, {"lstm_h": zeros.clone(), "lstm_c": zeros.clone()})[0]
        difference = float((torch.cat(each) - batched).abs().max())

        def step_each() -> None:  # exactly what Rollout and the policy server call per agent
            for agent_policy, obs in zip(agent_policies, observations, strict=True):
                agent_policy.step(obs)

        def step_batched() -> None:  # the same work for all agents at once: convert, one forward, one sample
            obs = torch.cat([obs_to_obs_tensor(o, shape, torch.device("cpu")) for o in observations])
            with torch.no_grad():
                logits, _ = net.forward_eval(obs, state)
                sampled = torch.distributions.Categorical(logits=logits).sample().tolist()
            _ = [Action(name=env_info.action_names[index]) for index in sampled]

        def forward_each() -> None:
            with torch.no_grad():
                for tensor, single in zip(tensors, singles, strict=True):
                    net.forward_eval(tensor, single)

        def forward_batched() -> None:
            with torch.no_grad():
                net.forward_eval(batch, state)

        def convert_only() -> None:
            for obs in observations:
                obs_to_obs_tensor(obs, shape, torch.device("cpu"))

        def timed(work: Callable[[], None]) -> Callable[[], float]:
            def run() -> float:
                times = []
                for _ in range(BATCH_ROUNDS):
                    started = time.perf_counter_ns()
                    work()
                    times.append(time.perf_counter_ns() - started)
                return statistics.median(times) / 1e3

            return run

        samples = interleaved(
            reps,
            {
                "step_each": timed(step_each),
                "step_batched": timed(step_batched),
                "forward_each": timed(forward_each),
                "forward_batched": timed(forward_batched),
                "convert": timed(convert_only),
            },
        )
    finally:
        torch.set_num_threads(saved_threads)
        rollout._simulator.close()
    us = {name: statistics.median(values) for name, values in samples.items()}
    table = Table(
        title=f"{BATCH_AGENTS} agents of one LSTM policy, torch on 1 thread: one env step's policy work "
        f"(median of {reps} x {BATCH_ROUNDS} rounds)"
    )
    for column in ("what", "us per env step", "us per agent", "batch-1 / batch-24"):
        table.add_column(column, justify="left" if column == "what" else "right")
    rows = [
        (f"{BATCH_AGENTS} x AgentPolicy.step() (convert obs, forward batch 1, sample)", "step_each", "step_batched"),
        ("one batched step (convert each obs, forward batch 24, sample 24)", "step_batched", None),
        (f"{BATCH_AGENTS} x forward_eval, batch 1 (network only)", "forward_each", "forward_batched"),
        ("1 x forward_eval, batch 24 (network only)", "forward_batched", None),
        (f"  of each step: {BATCH_AGENTS} x obs_to_obs_tensor (Python, per token)", "convert", None),
    ]
    for label, key, versus in rows:
        ratio = f"{us[key] / us[versus]:.2f}x" if versus else ""
        table.add_row(label, f"{us[key]:,.0f}", f"{us[key] / BATCH_AGENTS:,.1f}", ratio)
    console.print(table)
    console.print(f"  batched logits vs one-by-one logits, max abs difference: {difference:.1e}")


def grouped(bench: Bench, checkpoint: Path) -> None:
    """24 agents of one policy that steps them as a batch (``batched_lstm.BatchedLSTMPolicy``: MettaGrid's
    LSTM, one forward pass for a group): MettaGrid's Rollout with the agents in one ``policy_group_keys``
    group (``step_group``), against policybox with a cell per policy (the cell calls ``step_group``) and a
    cell per agent; steps/s side by side. Then, in one more episode of each that is not timed (reading
    24 cells' memory takes CPU), the cells' memory: their summed PSS at the most, sampled every 0.5 s."""
    agents, steps = BATCH_AGENTS, STEPS[BATCH_AGENTS]
    spec = parse_policy_arg(f"{BENCH / 'batched_lstm.py'}:BatchedLSTMPolicy,data={checkpoint}")
    outcomes = Outcomes()

    def rollout() -> float:
        config = baselines.arena_config(agents, steps, SEED)
        multi = baselines.make_policy(GROUPED_CLASS, PolicyEnvInterface.from_mg_cfg(config), checkpoint)
        return baselines.run_rollout(config, multi, SEED, group_keys=[0] * agents).steps_per_s

    def policybox(name: str, mode: str, cells: str) -> Callable[[], float]:
        def run() -> float:
            return outcomes.record(name, one_entrant(bench, agents, steps, spec, mode, limits=LIMITS, cells=cells))

        return run

    def memory_mib(cells: str, policy: PolicySpec = spec) -> float:
        with CellMemory() as memory:
            one_entrant(bench, agents, steps, policy, "process", limits=LIMITS, cells=cells)
        return memory.peak_mib

    runs = {
        ROLLOUT_GROUP: rollout,
        PER_POLICY: policybox(PER_POLICY, "process", "per-policy"),
        PER_AGENT: policybox(PER_AGENT, "process", "per-agent"),
        "policybox inline, cells per policy": policybox("policybox inline, cells per policy", "inline", "per-policy"),
    }
    medians = {name: statistics.median(values) for name, values in interleaved(bench.reps, runs).items()}
    memory = {PER_POLICY: memory_mib("per-policy"), PER_AGENT: memory_mib("per-agent")}
    table = Table(
        title=f"{agents} agents of one batched LSTM policy, {steps} steps: env steps/s (median of {bench.reps})"
    )
    for column in ("runner", "steps/s", "vs Rollout step_group", "vs cells per agent", "cells' memory (MiB)"):
        table.add_column(column, justify="left" if column == "runner" else "right")
    for name, value in medians.items():
        peak = f"{memory[name]:,.0f}" if name in memory else ""
        table.add_row(
            name, f"{value:,.1f}", f"{value / medians[ROLLOUT_GROUP]:.2f}x", f"{value / medians[PER_AGENT]:.2f}x", peak
        )
    console.print(table)
    console.print(f"  same actions every rep: {', '.join(f'{n}: {outcomes.repeat(n)}' for n in outcomes.digests)}")
    for name, problems in outcomes.problems.items():
        console.print(f"  [bold red]{name}[/]: {'; '.join(problems)}")
    stock_memory(memory_mib, parse_policy_arg(f"lstm,data={checkpoint}"))


def stock_memory(memory_mib: Callable[[str, PolicySpec], float], stock: PolicySpec) -> None:
    """MettaGrid's stock LSTM (it cannot batch) at 24 agents: the cells' memory with a cell per policy, forked
    seats and a cell per agent, each against a cell per policy."""
    memory = {cells: memory_mib(cells, stock) for cells in ("per-policy", "forked", "per-agent")}
    table = Table(title=f"{BATCH_AGENTS} agents of MettaGrid's stock LSTM policy: the cells' summed PSS at the most")
    for column in ("--cells", "cells' memory (MiB)", "vs a cell per policy"):
        table.add_column(column, justify="left" if column == "--cells" else "right")
    for cells, mib in memory.items():
        table.add_row(cells, f"{mib:,.0f}", f"{mib / memory['per-policy']:.2f}x")
    console.print(table)


class CellMemory:
    """The most memory this process's cells held at once while the block ran: their summed PSS (a page
    shared by n processes counts 1/n), sampled every 0.5 s by a thread. Cells are the zygotes' children, and
    forked seats their loaders'."""

    def __init__(self) -> None:
        self.peak_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> CellMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            total = 0
            for zygote in psutil.Process().children():
                for cell in zygote.children(recursive=True):  # a forked seat is its loader's child
                    with contextlib.suppress(psutil.Error):
                        total += cell.memory_full_info().pss
            self.peak_mib = max(self.peak_mib, total / 2**20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions (medians are reported)")
    sections = ["4", "24", "batching", "grouped", "lookup"]
    parser.add_argument("--only", choices=sections, action="append", help="run only these sections")
    args = parser.parse_args()
    chosen = args.only or sections
    logging.getLogger("mettagrid").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="policybox-bench-nn-") as folder:
        started = time.perf_counter()
        bench = Bench(args.reps, Path(folder))
        zygote_s = time.perf_counter() - started
        try:
            started = time.perf_counter()
            bench.torch_zygote = Zygote(("torch",))
            torch_zygote_s = time.perf_counter() - started
            console.print(
                f"policybox NN benchmark: {psutil.cpu_count()} CPUs, {bench.reps} repetitions, seed {SEED}, "
                f"torch {torch.__version__} ({torch.get_num_threads()} threads by default); "
                f"zygote started in {zygote_s:.2f} s, zygote with torch in {torch_zygote_s:.2f} s (once per host)"
            )
            checkpoints = {agents: make_checkpoint(agents, Path(folder)) for agents in (4, 24)}
            for agents in (4, 24):
                if str(agents) in chosen:
                    case(bench, agents, checkpoints[agents])
            if "batching" in chosen:
                batching(bench.reps, checkpoints[BATCH_AGENTS])
            if "grouped" in chosen:
                grouped(bench, checkpoints[BATCH_AGENTS])
            if "lookup" in chosen:
                lookup(bench)
        finally:
            bench.close()


if __name__ == "__main__":
    main()
