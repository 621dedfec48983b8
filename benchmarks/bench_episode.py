"""Side-by-side benchmark: MettaGrid's in-process Rollout and policy server against policybox.

    .venv/bin/python benchmarks/bench_episode.py            # every section, 3 interleaved repetitions
    .venv/bin/python benchmarks/bench_episode.py --reps 5 --only throughput

Everything is measured in this one run, interleaved repetition by repetition, on MettaGrid's arena
game on a 10x10 random map (``baselines.arena_config``), and reported as medians and ratios, so a
noisy shared machine shifts both sides of each ratio alike. Sections:

* throughput: env steps/s of the stepping phase (start-up excluded) for 4 and 24 agents, with
  MettaGrid's random policy and with a policy that burns ~1 ms of CPU per step; the zygote runner
  once more without the seccomp filter (on by default), for the filter's cost per syscall;
* start-up: seconds until every cell is ready (policy constructed, handshake done), numpy-only and
  with torch preloaded (when torch is installed: ``pip install torch==2.13.0``);
* memory: peak RSS and unique (USS) memory per cell, spawned vs forked from the zygote;
* floor: the raw socketpair round trip on this machine vs policybox's per-agent step overhead (one
  agent's host-measured p50 step latency minus the same step's work timed inside one process), with
  both unpinned (the scheduler places them) and, like with like, both pinned to one CPU and to two.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
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

import psutil
from rich.console import Console
from rich.table import Table

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import baselines  # noqa: E402

from policybox.episode import run_episode  # noqa: E402
from policybox.host.process_pool import ProcessPool  # noqa: E402
from policybox.host.zygote import Zygote  # noqa: E402
from policybox.results import EpisodeResult  # noqa: E402
from policybox.settings import EpisodeSettings  # noqa: E402
from policybox.spec import PolicySpec  # noqa: E402

SEED = 1
POLICY_SPECS = {"random": "random", "busy1ms": f"{BENCH / 'busy_policy.py'}:Busy1msPolicy"}
TORCH_SPEC = f"{BENCH / 'torch_policy.py'}:TorchPolicy"
console = Console()


class Bench:
    def __init__(self, reps: int, folder: Path) -> None:
        self.reps = reps
        self.folder = folder
        self.zygote = Zygote()
        self.torch_zygote: Zygote | None = None

    def episode(
        self, agents: int, steps: int, policy: str | PolicySpec, mode: str, launcher: str = "zygote", **extra
    ) -> EpisodeResult:
        """One episode, every agent playing ``policy`` (a class path, or a whole spec); ``extra``: more
        ``EpisodeSettings``. With ``preload=["torch"]`` the cells fork from ``torch_zygote`` (start it first)."""
        config = baselines.arena_config(agents, steps, SEED)
        env_file = self.folder / f"arena-{agents}.json"
        env_file.write_text(config.model_dump_json())
        settings = EpisodeSettings(env=str(env_file), steps=steps, seed=SEED, mode=mode, launcher=launcher, **extra)
        zygote = self.torch_zygote if "torch" in extra.get("preload", []) else self.zygote
        specs = [policy if isinstance(policy, PolicySpec) else PolicySpec(class_path=policy)] * agents
        return run_episode(specs, settings, self.folder / "logs", zygote=zygote if launcher == "zygote" else None)

    def close(self) -> None:
        self.zygote.close()
        if self.torch_zygote is not None:
            self.torch_zygote.close()


def same_every_rep(runs: list | None) -> str:
    """ "yes" when every repetition of a contender played the same episode (``runs``: one hashable
    fingerprint per repetition), else how many distinct ones; "-" when there is nothing to compare."""
    if not runs:
        return "-"
    distinct = len(set(runs))
    return "yes" if distinct == 1 else f"no ({distinct} distinct of {len(runs)})"


def interleaved(reps: int, runs: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    """Each run once per repetition, in turn, so that machine noise falls on all of them alike."""
    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(reps):
        for name, run in runs.items():
            samples[name].append(run())
    return samples


def throughput(bench: Bench) -> None:
    """Steps/s of every runner, side by side, for 4 and 24 agents and both policies."""
    for agents, policy, steps in [(4, "random", 1000), (24, "random", 300), (4, "busy1ms", 200), (24, "busy1ms", 60)]:
        samples = interleaved(bench.reps, _throughput_runs(bench, agents, policy, steps))
        medians = {name: statistics.median(values) for name, values in samples.items()}
        rollout, server = medians["MettaGrid Rollout (in-process)"], medians["MettaGrid policy server (batched)"]
        inline = medians["policybox inline"]
        table = Table(title=f"{agents} agents, {policy} policy, {steps} steps: env steps/s (median of {bench.reps})")
        for column in ("runner", "steps/s", "vs Rollout", "vs policy server", "vs inline"):
            table.add_column(column, justify="left" if column == "runner" else "right")
        for name, value in medians.items():
            table.add_row(
                name, f"{value:,.0f}", f"{value / rollout:.2f}x", f"{value / server:.2f}x", f"{value / inline:.2f}x"
            )
        console.print(table)


def _throughput_runs(bench: Bench, agents: int, policy: str, steps: int) -> dict[str, Callable[[], float]]:
    def policybox(mode: str, launcher: str = "zygote", **extra) -> float:
        result = bench.episode(agents, steps, POLICY_SPECS[policy], mode, launcher, **extra)
        return result.steps / result.play_s

    return {
        "MettaGrid Rollout (in-process)": lambda: baselines.rollout_run(agents, steps, SEED, policy).steps_per_s,
        "MettaGrid policy server (batched)": lambda: baselines.policy_server_steps_per_s(agents, steps, SEED, policy),
        "policybox inline": lambda: policybox("inline"),
        "policybox process, spawn": lambda: policybox("process", "spawn"),
        "policybox process, zygote": lambda: policybox("process", "zygote"),
        "policybox process, zygote, --no-seccomp": lambda: policybox("process", "zygote", seccomp=False),
    }


def startup(bench: Bench) -> None:
    table = Table(title=f"start-up until every cell is ready (median of {bench.reps})")
    for column in ("cells", "policy", "launcher", "seconds"):
        table.add_column(column, justify="left" if column in ("policy", "launcher") else "right")
    started = time.perf_counter()
    bench.zygote.close()
    bench.zygote = Zygote()
    table.add_row("-", "-", "zygote itself (once per host)", f"{time.perf_counter() - started:.2f}")
    cases = [(agents, "numpy", "random", launcher, ()) for agents in (4, 24) for launcher in ("spawn", "zygote")]
    if importlib.util.find_spec("torch") is not None:
        started = time.perf_counter()
        bench.torch_zygote = Zygote(("torch",))
        table.add_row("-", "-", "zygote with torch (once per host)", f"{time.perf_counter() - started:.2f}")
        cases += [(4, "torch", TORCH_SPEC, "spawn", ())]
        cases += [(agents, "torch", TORCH_SPEC, "zygote", ("torch",)) for agents in (4, 24)]
    else:
        table.add_row("-", "torch", "not installed: pip install torch==2.13.0", "-")
    runs = {
        case: (
            lambda case=case: bench.episode(case[0], 1, case[2], "process", case[3], preload=list(case[4])).startup_s
        )
        for case in cases
    }
    for (agents, kind, _, launcher, preload), values in interleaved(bench.reps, runs).items():
        name = f"{launcher} (preload {', '.join(preload)})" if preload else launcher
        table.add_row(str(agents), kind, name, f"{statistics.median(values):.2f}")
    console.print(table)


def memory(bench: Bench) -> None:
    table = Table(title="memory per cell (24 agents, random policy, 300 steps; median over cells)")
    for column in ("launcher", "peak RSS MB", "peak unique (USS) MB"):
        table.add_column(column, justify="left" if column == "launcher" else "right")
    for launcher in ("spawn", "zygote"):
        peaks = _sample_cells(lambda launcher=launcher: bench.episode(24, 300, "random", "process", launcher))
        rss = statistics.median(p[0] for p in peaks.values()) / 2**20
        uss = statistics.median(p[1] for p in peaks.values()) / 2**20
        table.add_row(launcher, f"{rss:.1f}", f"{uss:.1f}")
    console.print(table)


def _sample_cells(run: Callable[[], object]) -> dict[int, tuple[int, int]]:
    """Peak (RSS, USS) of every cell process seen while ``run`` plays (sampled from another thread)."""
    peaks: dict[int, tuple[int, int]] = {}
    done = threading.Event()
    me = psutil.Process()
    zygotes = {child.pid for child in me.children() if "policybox.cell.zygote" in child.cmdline()}

    def sample() -> None:
        while not done.is_set():
            for proc in me.children(recursive=True):
                if proc.pid in zygotes:
                    continue
                try:
                    info = proc.memory_full_info()
                except psutil.Error:
                    continue
                old = peaks.get(proc.pid, (0, 0))
                peaks[proc.pid] = (max(old[0], info.rss), max(old[1], info.uss))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        run()
    finally:
        done.set()
        sampler.join()
    return peaks


def floor(bench: Bench) -> None:
    """One agent (no queueing for a core): its host-measured step latency minus the same step's work
    timed inside one process, against the raw socketpair round trip measured alongside -- unpinned, and
    with the host and the cell placed as the round trip's two processes are: on one CPU, on two."""
    cpus = sorted(os.sched_getaffinity(0))
    placements = {"unpinned": None, "one CPU": (cpus[0], cpus[0])}
    if len(cpus) > 1:
        placements["two CPUs"] = (cpus[0], cpus[1])
    runs: dict[str, Callable[[], float]] = {"work": _step_work_us, "send": _send_cost_us}
    for name, pin in placements.items():
        runs[f"floor {name}"] = lambda pin=pin: baselines.socketpair_round_trip_payload_us(pin=pin)
        runs[f"process {name}"] = lambda pin=pin: _process_step_us(bench, pin)
    medians = {name: statistics.median(values) for name, values in interleaved(bench.reps, runs).items()}
    work_us = medians["work"]
    table = Table(title=f"one agent's step: the raw round-trip floor vs policybox (median of {bench.reps})")
    table.add_column("what")
    table.add_column("us", justify="right")
    for name in placements:
        floor_us, process_us = medians[f"floor {name}"], medians[f"process {name}"]
        table.add_row(f"socketpair round trip, 1500 B -> 4 B, two processes ({name})", f"{floor_us:.1f}")
        if name == "unpinned":
            table.add_row("  of which the sender's send() of the 1500 B request", f"{medians['send']:.1f}")
        table.add_row(f"policybox process step, host-measured p50 (noop policy, 1 agent, {name})", f"{process_us:.1f}")
        table.add_row("  of which the step's own work (decode, policy, encode) in one process", f"{work_us:.1f}")
        table.add_row("  = policybox's per-agent overhead", f"{process_us - work_us:.1f}")
        table.add_row("  overhead / floor", f"{(process_us - work_us) / floor_us:.2f}x")
    console.print(table)


def _process_step_us(bench: Bench, pin: tuple[int, int] | None) -> float:
    """One agent's host-measured p50 step latency (noop policy, 2000 steps); ``pin``: (host CPU, cell CPU)."""
    with placed(pin):
        return 1e3 * bench.episode(1, 2000, "noop", "process").agents[0].latency.p50_ms


@contextlib.contextmanager
def placed(pin: tuple[int, int] | None):
    """Within: the host plays on CPU ``pin[0]`` and its cells on ``pin[1]`` (None: wherever the scheduler
    puts them). A cell runs on the CPUs of the host that starts it, so the host starts its cells on the
    cell CPU and moves to its own once they are ready."""
    if pin is None:
        yield
        return
    host_cpu, cell_cpu = pin
    before, start = os.sched_getaffinity(0), ProcessPool.start

    def start_there(pool: ProcessPool, setups: list) -> None:
        os.sched_setaffinity(0, {cell_cpu})
        try:
            start(pool, setups)
        finally:
            os.sched_setaffinity(0, {host_cpu})

    ProcessPool.start = start_there  # type: ignore[method-assign]
    try:
        yield
    finally:
        ProcessPool.start = start  # type: ignore[method-assign]
        os.sched_setaffinity(0, before)


def _send_cost_us(round_trips: int = 2000) -> float:
    """Median time the sender spends in send() of a 1500 B frame to a peer blocked in recv(): what a
    shared-memory transport could save at most, since the peer's wake-up costs the same either way."""
    import os
    import socket

    ours, theirs = socket.socketpair()
    child = os.fork()
    if child == 0:
        ours.close()
        while theirs.recv(4096):
            theirs.send(b"ok!!")
        os._exit(0)
    theirs.close()
    payload, times = b"x" * 1500, []
    for _ in range(round_trips):
        started = time.perf_counter_ns()
        ours.send(payload)
        times.append(time.perf_counter_ns() - started)
        ours.recv(16)
    ours.close()
    os.waitpid(child, 0)
    return statistics.median(times) / 1e3


def _step_work_us() -> float:
    """Median time of CellRuntime.step (observation bytes -> action bytes) for a noop policy, in-process."""
    from policybox.cell.runtime import CellRuntime
    from policybox.envs.mettagrid import MettaGridHost
    from policybox.wire import PROTOCOL_VERSION

    host = MettaGridHost(baselines.arena_config(1, 100, SEED), SEED)
    setup = {"protocol": PROTOCOL_VERSION, "agents": [0], "seed": SEED, "env": host.cell_setup(0)}
    runtime = CellRuntime({**setup, "spec": PolicySpec(class_path="noop").model_dump()}, owns_process=True)
    runtime.start()
    payload = bytes(host.observation(0))
    times = []
    for _ in range(2000):
        started = time.perf_counter_ns()
        runtime.step([(0, payload)])
        times.append(time.perf_counter_ns() - started)
    host.close()
    return statistics.median(times) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions (medians are reported)")
    sections = ["throughput", "startup", "memory", "floor"]
    parser.add_argument("--only", choices=sections, action="append", help="run only these sections")
    args = parser.parse_args()
    chosen = args.only or sections
    logging.getLogger("mettagrid").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="policybox-bench-") as folder:
        bench = Bench(args.reps, Path(folder))
        try:
            console.print(f"policybox benchmark: {psutil.cpu_count()} CPUs, {bench.reps} repetitions, seed {SEED}")
            if "throughput" in chosen:
                throughput(bench)
            if "startup" in chosen:
                startup(bench)
            if "memory" in chosen:
                memory(bench)
            if "floor" in chosen:
                floor(bench)
        finally:
            bench.close()


if __name__ == "__main__":
    main()
