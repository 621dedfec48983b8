"""A final of 16 names (issue 28): the balanced schedule, the fit and the bootstrap, timed, and how
much of the true order the ranking recovers.

    .venv/bin/python benchmarks/bench_final.py [--names 16] [--rounds 1 4 16] [--trials 20] [--gap 0.2]

Each trial draws true strengths for ``--names`` names (evenly spaced, ``--gap`` apart in
Plackett-Luce log-strength, so neighbours are hard to tell apart and the ends easy), plays the
``balanced`` schedule (``seating.balanced_seats``, ``--rounds`` whole cycles: ``seating.cycle``)
with placings drawn from Plackett-Luce itself (Gumbel noise on the strengths, no ties), and ranks
them with ``final_ranking`` (1000 resamples) -- in games of 2 seats and of 4. Reported, median over
``--trials``: the time of the schedule and of the ranking (fit and bootstrap), the matches, the
groups found, Kendall's tau between the ranking and the truth, the share of names whose true place
lies inside their group (the group is the set of places the ranking does not decide between), and
the pairs of names in different groups whose order is wrong (the group rule's errors: at its level,
~2.5% of adjacent boundaries may be wrong in each trial).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.stats import kendalltau

from policybox.league.play.seating import balanced_seats, cycle
from policybox.league.stats.plackett_luce import FinalRanking, final_ranking


def play(truth: np.ndarray, seats: int, rounds: int, seed: int) -> tuple[list[list[list[str]]], float]:
    """The placings of a balanced final among names of strengths ``truth``, and the schedule's time."""
    names = len(truth)
    started = time.perf_counter()
    schedule = np.array(balanced_seats(names, seats, rounds * cycle(names, seats), seed))
    schedule_s = time.perf_counter() - started
    rng = np.random.default_rng(seed)
    noisy = truth[schedule] + rng.gumbel(size=schedule.shape)
    order = np.take_along_axis(schedule, np.argsort(-noisy, axis=1), axis=1)
    return [[[f"name{i:02d}"] for i in row] for row in order.tolist()], schedule_s


def judged(ranking: FinalRanking, truth: np.ndarray) -> tuple[float, float, int, int]:
    """Kendall's tau against the truth, the share of names whose true place is within their group's
    places, the groups, and the pairs in different groups ordered against the truth."""
    true_place = {f"name{i:02d}": place for place, i in enumerate(np.argsort(-truth))}
    ranked = [entry.name for entry in ranking.names]
    tau = float(kendalltau(range(len(ranked)), [true_place[name] for name in ranked]).statistic)
    places: dict[int, list[int]] = {}
    for place, entry in enumerate(ranking.names):
        places.setdefault(entry.group, []).append(place)
    inside = statistics.mean(true_place[e.name] in places[e.group] for e in ranking.names)
    wrong = sum(
        upper.group < lower.group and true_place[upper.name] > true_place[lower.name]
        for i, upper in enumerate(ranking.names)
        for lower in ranking.names[i + 1 :]
    )
    return tau, inside, len(places), wrong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=16)
    parser.add_argument("--rounds", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--gap", type=float, default=0.2)
    args = parser.parse_args()
    console = Console()
    truth = -args.gap * np.arange(args.names)
    table = Table(title=f"a final of {args.names} names, strengths {args.gap} apart: median of {args.trials} trials")
    for column in ("seats", "rounds", "matches", "schedule s", "ranking s", "groups", "tau", "true place in group"):
        table.add_column(column, justify="right")
    table.add_column("wrong pairs across groups (total)", justify="right")
    for seats in (2, 4):
        for rounds in args.rounds:
            rows = []
            for trial in range(args.trials):
                matches, schedule_s = play(truth, seats, rounds, seed=trial)
                started = time.perf_counter()
                ranking = final_ranking(matches, seed=trial)
                rows.append((len(matches), schedule_s, time.perf_counter() - started, *judged(ranking, truth)))
            median = [statistics.median(column) for column in zip(*rows, strict=True)]
            wrong = sum(row[-1] for row in rows)
            table.add_row(
                str(seats),
                str(rounds),
                f"{median[0]:,.0f}",
                f"{median[1]:.3f}",
                f"{median[2]:.3f}",
                f"{median[5]:.0f}",
                f"{median[3]:.3f}",
                f"{median[4]:.0%}",
                f"{median[6]:.0f} ({wrong})",
            )
    console.print(table)


if __name__ == "__main__":
    main()
