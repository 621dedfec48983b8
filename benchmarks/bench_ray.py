"""policybox evaluate's backends side by side, and how many results a driver can absorb.

    .venv/bin/python benchmarks/bench_ray.py [--episodes 12] [--steps 300] [--agents 4] [--reps 3]

Throughput (episodes/s of ``play_tournament``, the Ray cluster already up: its start-up is reported
apart), the same tournament each time -- MettaGrid's arena, ``random`` against ``noop``, seats
rotated, the standard sandbox -- one contender after another within each repetition, medians:

* local backend, ``--workers 1`` and ``--workers 2`` (worker processes pinned to cores);
* Ray backend on a local ``ray.cluster_utils.Cluster``: 1 node with 1 CPU, and 2 nodes with 1 CPU
  each (both on this machine: a node is a raylet with its own worker processes).

Driver capacity: what only the driver does, per result -- the evaluation loop (``runner.play_all``:
waiting on the futures in flight, parsing each record, appending it to ``results.jsonl``, flushed
and fsync'd) with a backend whose episodes are already played, at 2, 200 and 2,000 episodes in
flight, and the final summary -- on ``--records`` copies of a real record, as results per second.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

import ray
from ray.cluster_utils import Cluster
from rich.console import Console
from rich.table import Table

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_episode import interleaved  # noqa: E402
from policybox.settings import EpisodeSettings  # noqa: E402

from policybox.league.evaluate.journal import ResultsJournal, read_records  # noqa: E402
from policybox.league.evaluate.results_folder import episode_job, play_tournament  # noqa: E402
from policybox.league.play.runner import IN_FLIGHT_PER_WORKER, play_all  # noqa: E402
from policybox.league.play.tournament import Tournament, entrants  # noqa: E402
from policybox.league.views.summary import summarize  # noqa: E402

console = Console()


def tournament(episodes: int, steps: int, agents: int) -> Tournament:
    return Tournament(
        entrants=entrants(["random", "noop"]),
        episodes=episodes,
        agents=agents,
        seating="rotate",
        settings=EpisodeSettings(steps=steps, seed=1),
    )


def timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def start_cluster(nodes: int) -> tuple[Cluster, float]:
    started = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    return cluster, time.perf_counter() - started


def on_ray(board: Tournament, cluster: Cluster) -> float:
    """One run on the cluster (the driver connects and disconnects, as a command would)."""
    with tempfile.TemporaryDirectory() as out:
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            return board.episodes / timed(lambda: play_tournament(board, Path(out), backend="ray"))
        finally:
            ray.shutdown()


def locally(board: Tournament, workers: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        return board.episodes / timed(lambda: play_tournament(board, Path(out), workers=workers))


def throughput(board: Tournament, reps: int) -> None:
    clusters = {nodes: start_cluster(nodes) for nodes in (1, 2)}
    try:
        runs = {
            "local, 1 worker": lambda: locally(board, 1),
            "local, 2 workers": lambda: locally(board, 2),
            "ray, 1 node x 1 CPU": lambda: on_ray(board, clusters[1][0]),
            "ray, 2 nodes x 1 CPU": lambda: on_ray(board, clusters[2][0]),
        }
        medians = {name: statistics.median(values) for name, values in interleaved(reps, runs).items()}
    finally:
        for cluster, _ in clusters.values():
            cluster.shutdown()
    title = f"{board.episodes} episodes of {board.agents} agents x {board.settings.steps} steps (median of {reps})"
    table = Table(title=title)
    for column in ("backend", "episodes/s", "vs local, 1 worker"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for name, value in medians.items():
        table.add_row(name, f"{value:.2f}", f"{value / medians['local, 1 worker']:.2f}x")
    console.print(table)
    for nodes, (_, seconds) in clusters.items():
        console.print(f"starting a {nodes}-node local Ray cluster: {seconds:.1f} s")


def driver_capacity(board: Tournament, records: int) -> None:
    """Results per second the driver alone can write (journal, fsync'd) and summarize."""
    with tempfile.TemporaryDirectory() as folder:
        play_tournament(board.model_copy(update={"episodes": 1}), Path(folder) / "one", workers=1)
        sample = next(iter(read_records(Path(folder) / "one" / "results.jsonl")[0].values()))
        copies = [sample.model_copy(update={"episode": e}) for e in range(records)]
        for in_flight in (2, 200, 2000):
            out = Path(folder) / f"many-{in_flight}"
            out.mkdir()
            runner = _Instant(copies, in_flight)
            seats = board.seat_maps()
            jobs = {e: episode_job(board, seats[e % len(seats)], out, e, False) for e in range(records)}
            with ResultsJournal(out) as journal:

                def finished(episode, result, journal=journal):
                    journal.append(copies[episode].model_copy(update={"agents": result.agents}))

                loop_s = timed(lambda: play_all(runner, jobs, finished))  # noqa: B023
            console.print(
                f"driver loop, {in_flight:>4} episodes in flight: {records / loop_s:,.0f} results/s "
                f"(parsed, journaled with fsync, {len(sample.model_dump_json()):,} bytes each)"
            )
        keys = [(entrant.key, entrant.spec) for entrant in board.entrants]
        summary_s = timed(lambda: summarize(keys, copies, records))
    console.print(f"summary of {records:,} results: {summary_s:.2f} s")


class _Instant:
    """A backend whose episodes are already played: what is left is the driver's own work."""

    def __init__(self, records: list, in_flight: int) -> None:
        self._lines = [record.model_dump_json() for record in records]
        self.count = max(1, in_flight // IN_FLIGHT_PER_WORKER)

    def submit(self, job) -> Future[str]:
        future: Future[str] = Future()
        future.set_result(self._lines[int(job.name.split("-")[1])])
        return future


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--records", type=int, default=5000)
    args = parser.parse_args()
    board = tournament(args.episodes, args.steps, args.agents)
    driver_capacity(board, args.records)
    throughput(board, args.reps)


if __name__ == "__main__":
    main()
