"""One agent's step, placed: its host-measured p50 latency, the episode's steps/s and the CPU each side spent.

    .venv/bin/python benchmarks/bench_step.py --pin one --reps 5           # host and cell on one CPU
    /other/tree/.venv/bin/python benchmarks/bench_step.py --pin two ...     # the same, another commit's source

It imports only what every policybox since cells per agent has (``run_episode``, ``EpisodeSettings``,
``Zygote``), so that this one file measures any commit's tree when run by an interpreter whose path holds
that tree's ``src`` -- the way paired runs against an older commit are made (``benchmarks/README.md``).
Placement: ``--pin one`` puts the host, its zygote and so its cells on the first CPU; ``--pin two`` the
host on the first and the zygote (whose forks are the cells) on the second, and -- for a tree whose
zygote forks cells on the CPUs of the host that asks -- tells the zygote the second; ``none`` leaves
it to the scheduler. Per repetition it prints one JSON line: ``p50_us`` (agent 0's), ``steps_per_s``
(play only), ``host_cpu_us`` and ``cell_cpu_us`` per step (on-CPU time from ``/proc/*/schedstat``; a
20-step episode's is subtracted, and the cells' is per observation they waited for, times the agents),
and the voluntary context switches per step of each side.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import sys
import tempfile
import threading
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import baselines  # noqa: E402

from policybox.episode import run_episode  # noqa: E402
from policybox.host.zygote import Zygote  # noqa: E402
from policybox.settings import EpisodeSettings  # noqa: E402
from policybox.spec import PolicySpec  # noqa: E402


def on_cpu(pid: int) -> tuple[int, int]:
    """(ns on a CPU, voluntary context switches) summed over the threads of ``pid``; zeros once it is gone."""
    ns = switches = 0
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            ns += int(Path(f"{task}/schedstat").read_text().split()[0])
            for line in Path(f"{task}/sched").read_text().splitlines():
                if line.startswith("nr_voluntary_switches"):
                    switches += int(line.split(":")[1])
        except OSError:
            continue
    return ns, switches


class CellWatch:
    """Samples the on-CPU time of the zygote's children (the cells) every 20 ms while an episode plays;
    a cell's last sample is kept (it is gone once the episode ends)."""

    def __init__(self, zygote_pid: int) -> None:
        self._zygote = zygote_pid
        self.cells: dict[str, tuple[int, int]] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CellWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        children = Path(f"/proc/{self._zygote}/task/{self._zygote}/children")
        while not self._done.wait(0.02):
            for pid in children.read_text().split():
                self.cells[pid] = on_cpu(int(pid))


def episode(zygote: Zygote, folder: Path, args: argparse.Namespace, steps: int) -> tuple[float, float, list[int]]:
    """(p50 us, steps/s, [host ns, host switches, cells' ns, cells' switches]) of one episode."""
    env_file = folder / "arena.json"
    env_file.write_text(baselines.arena_config(args.agents, steps, 1).model_dump_json())
    settings = EpisodeSettings(env=str(env_file), steps=steps, seed=1, launcher="zygote", sandbox=args.sandbox)
    host_before = on_cpu(os.getpid())
    with CellWatch(zygote._popen.pid) as watch:  # noqa: SLF001 - its pid, to find its children
        result = run_episode([PolicySpec(class_path=args.policy)] * args.agents, settings, folder / "logs", zygote)
    host_after = on_cpu(os.getpid())
    cells = [sum(sample[i] for sample in watch.cells.values()) for i in (0, 1)]
    counts = [host_after[0] - host_before[0], host_after[1] - host_before[1], *cells]
    return 1e3 * result.agents[0].latency.p50_ms, result.steps / result.play_s, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pin", choices=["none", "one", "two"], default="none")
    parser.add_argument("--agents", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--policy", default="random")
    parser.add_argument("--sandbox", default="standard")
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    logging.getLogger("mettagrid").setLevel(logging.WARNING)
    cpus = sorted(os.sched_getaffinity(0))
    host_cpu, cell_cpu = cpus[0], cpus[-1] if args.pin == "two" else cpus[0]
    if args.pin != "none":
        os.sched_setaffinity(0, {cell_cpu})  # the zygote starts here, and its forks with it
    zygote = Zygote()
    if args.pin != "none":
        os.sched_setaffinity(0, {host_cpu})
        os.sched_getaffinity = lambda pid: {cell_cpu}  # what a newer host tells the zygote for each fork
    try:
        with tempfile.TemporaryDirectory(prefix="policybox-bench-") as folder:
            for _ in range(args.reps):
                _, _, short = episode(zygote, Path(folder), args, 20)
                p50, steps_per_s, long = episode(zygote, Path(folder), args, args.steps)
                steps = args.steps - 20
                waits = max(1, long[3] - short[3])  # a cell's voluntary switches: one per observation it waits for
                line = {
                    "p50_us": round(p50, 1),
                    "steps_per_s": round(steps_per_s),
                    "host_cpu_us": round((long[0] - short[0]) / 1e3 / steps, 1),
                    "cell_cpu_us": round((long[2] - short[2]) / 1e3 / waits * args.agents, 1),
                    "host_switches": round((long[1] - short[1]) / steps, 2),
                    "cell_switches": round((long[3] - short[3]) / steps, 2),
                }
                print(json.dumps(line), flush=True)
    finally:
        zygote.close()


if __name__ == "__main__":
    main()
