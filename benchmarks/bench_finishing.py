"""What a worker gains by stopping a played episode's cells while it starts the next: paired, in one process.

    .venv/bin/python benchmarks/bench_finishing.py [--episodes 5] [--rounds 10] [--cells per-agent|per-policy]

One ``Player`` (an ``evaluate`` worker's), pinned to one core as a worker is, plays rounds of
``--episodes`` episodes of the arena (4 agents, MettaGrid's random policy, 1000 steps), alternately
finishing each episode in line (``PlayedEpisode.finish`` before the next starts) and on a thread of its
own while the next starts (as ``worker.Replies`` does); the medians over rounds of the wall time per
episode, each way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

from policybox.league.play.runner import EpisodeJob
from policybox.league.play.worker import Player
from policybox.settings import EpisodeSettings
from policybox.spec import parse_policy_arg


def job(seed: int, cells: str, logs: str) -> EpisodeJob:
    settings = EpisodeSettings.model_validate({"steps": 1000, "seed": seed, "cells": cells})
    return EpisodeJob(name=f"episode-{seed}", specs=[parse_policy_arg("random")] * 4, entrants=["random"] * 4,
                      settings=settings, log_dir=f"{logs}/{seed}")  # fmt: skip


def one_round(player: Player, jobs: list[EpisodeJob], overlapped: bool) -> float:
    """Wall seconds per episode to play ``jobs`` and finish every one."""
    started, finishing = time.perf_counter(), None
    for each in jobs:
        played = player.played(each)
        if not overlapped:
            played.finish()
            continue
        if finishing is not None:
            finishing.join()
        finishing = threading.Thread(target=played.finish)
        finishing.start()
    if finishing is not None:
        finishing.join()
    return (time.perf_counter() - started) / len(jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cells", choices=["per-agent", "per-policy"], default="per-agent")
    parser.add_argument("--logs", default="/tmp/policybox-bench-finishing")
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    jobs = [job(seed, args.cells, args.logs) for seed in range(args.episodes)]
    player = Player()
    times: dict[str, list[float]] = {"in line": [], "overlapped": []}
    try:
        player.play(jobs[0])  # its zygote started
        for index in range(args.rounds):
            for overlapped in (False, True) if index % 2 == 0 else (True, False):
                times["overlapped" if overlapped else "in line"].append(one_round(player, jobs, overlapped))
    finally:
        player.close()
    for way, samples in times.items():
        each = " / ".join(f"{sample * 1000:.0f}" for sample in samples)
        print(f"{way:>10}: median {statistics.median(samples) * 1000:.0f} ms per episode ({each})")


if __name__ == "__main__":
    main()
