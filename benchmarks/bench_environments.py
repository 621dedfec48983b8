"""Side-by-side benchmark: cells of a submission with its own environment against cells in the host's.

    .venv/bin/python benchmarks/bench_environments.py             # 5 interleaved repetitions
    .venv/bin/python benchmarks/bench_environments.py --reps 9 --agents 24

The same policy (``package_policy.ImportsPackage``: MettaGrid's random policy after one import) plays
MettaGrid's arena, every agent in its own zygote-forked cell, repetition by repetition in one run:

* from the host's environment, importing ``json`` (already in the zygote: no import at all);
* importing ``more_itertools`` from a copy of its files in the submission's own folder (what a team
  does without requirements: vendoring) -- the baseline of the ratios, the same import from files;
* importing it from the environment built for ``more-itertools==10.8.0``.

Reported: the medians of the cells' start-up (``startup_s``: until every cell is ready) and of steps/s,
and their ratios; and the time to build the environment the first time and to find it the second
(``policybox.files.environments``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from policybox.episode import run_episode
from policybox.files.environments import environment, with_environment
from policybox.files.package_source import package_source
from policybox.host.zygote import Zygote
from policybox.settings import EpisodeSettings, zygote_preload
from policybox.spec import PolicySpec

BENCH = Path(__file__).resolve().parent
REQUIREMENT = "more-itertools==10.8.0"
console = Console()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--index-url", default=None, help="Default: what this machine's pip install reaches")
    args = parser.parse_args()
    source = package_source(EpisodeSettings(index_url=args.index_url))
    settings = EpisodeSettings(steps=args.steps, seed=1)
    with tempfile.TemporaryDirectory() as scratch, Zygote(zygote_preload(settings)) as zygote:
        folder = Path(scratch) / "environments"
        started = time.perf_counter()
        environment([REQUIREMENT], folder, source, "bench")
        built_s = time.perf_counter() - started
        started = time.perf_counter()
        host = PolicySpec(class_path=f"{BENCH / 'package_policy.py'}:ImportsPackage", init_kwargs={"module": "json"})
        own = host.model_copy(update={"init_kwargs": {"module": "more_itertools"}, "requirements": [REQUIREMENT]})
        own = with_environment(own, folder, source)
        found_s = time.perf_counter() - started
        vendored = Path(scratch) / "vendored"  # the same files, shipped in the submission's own folder
        shutil.copytree(own.python_path[-1], vendored)
        shipped = host.model_copy(update={"init_kwargs": {"module": "more_itertools"}, "python_path": [str(vendored)]})
        cases = {"host's (json)": host, "its files (vendored)": shipped, "its own environment": own}
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for rep in range(args.reps):
            for name, spec in cases.items():
                result = run_episode([spec], settings, Path(scratch) / f"logs-{rep}", agents=args.agents, zygote=zygote)
                assert all(agent.status == "ok" for agent in result.agents), [a.failure for a in result.agents]
                measured[name].append((result.startup_s, result.steps / result.play_s))
    table = Table(title=f"{args.agents} agents, {args.steps} steps, medians of {args.reps} interleaved runs")
    for column in ("cells in", "start-up (s)", "steps/s", "start-up vs vendored", "steps/s vs vendored"):
        table.add_column(column, justify="right")
    base_start = statistics.median(s for s, _ in measured["its files (vendored)"])
    base_rate = statistics.median(r for _, r in measured["its files (vendored)"])
    for name, runs in measured.items():
        start, rate = statistics.median(s for s, _ in runs), statistics.median(r for _, r in runs)
        table.add_row(name, f"{start:.3f}", f"{rate:,.0f}", f"{start / base_start:.2f}×", f"{rate / base_rate:.2f}×")
    console.print(table)
    console.print(f"environment built in {built_s:.2f} s the first time, found in {found_s * 1000:.1f} ms the second")


if __name__ == "__main__":
    sys.exit(main())
