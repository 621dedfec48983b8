"""The league's statistics at speed (issue 28): the final ranking's fit and bootstrap at 100,000
matches, and the pairs the sequential A/B test of ``versus`` needs.

    .venv/bin/python benchmarks/bench_stats.py [--matches 100000] [--names 16] [--resamples 1000]
        [--reps 3] [--runs 2000] [--only ranking|pairs ...]

**Ranking.** ``--matches`` placings drawn from Plackett-Luce itself (strengths evenly spaced over
[-1.5, 1.5], each match's names a random table, no ties), once with 2 seats and once with 4, among
``--names`` names; ``final_ranking(matches, resamples=--resamples)`` timed whole and by part
(encoding the placings, the fit, the bootstrap), wall-clock and this process's CPU time, median of
``--reps``. The placings are built before the clock starts.

**Pairs.** ``--runs`` simulated runs of the test per row (paired differences normal with standard
deviation 1, mean 0 for equal policies or ``effect`` for a better B), each stopped at its first
verdict or at 10 x ``fixed_pairs()``: the share found ``B better``, and the median and 90th
percentile of the pairs used, against ``fixed_pairs()``, the fixed-n paired z-test's pairs. Beside
it, the same runs through Wald's GSPRT with the sample variance plugged in (what fishtest runs: the
alternative ``league/stats/sequential.py`` explains it did not choose), for comparison.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from policybox.league.stats.placings import stages
from policybox.league.stats.plackett_luce import bootstrap, final_ranking, fit
from policybox.league.stats.sequential import MIN_PAIRS, SequentialTest

RUNS_AT_ONCE = 250  # bounds memory: runs x pairs floats per block


def placings(matches: int, names: int, seats: int, seed: int) -> list[list[list[str]]]:
    rng = np.random.default_rng(seed)
    strengths = np.linspace(-1.5, 1.5, names)
    tables = np.argsort(rng.random((matches, names)), axis=1)[:, :seats]
    noisy = strengths[tables] + rng.gumbel(size=(matches, seats))
    order = np.take_along_axis(tables, np.argsort(-noisy, axis=1), axis=1)
    labels = [f"name{i:02d}" for i in range(names)]
    return [[[labels[i]] for i in row] for row in order.tolist()]


def timed(call) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = call()
    return time.perf_counter() - wall, time.process_time() - cpu, value


def bench_ranking(args, console: Console) -> None:
    table = Table(title=f"final ranking: {args.matches:,} matches, {args.names} names, {args.resamples} resamples")
    for column in ("seats", "encode s", "fit s", "bootstrap s", "final_ranking s (wall)", "its CPU s"):
        table.add_column(column, justify="right")
    for seats in (2, 4):
        matches = placings(args.matches, args.names, seats, seed=seats)
        parts, whole, cpu = [], [], []
        for _ in range(args.reps):
            encode, _, data = timed(lambda m=matches: stages(m))
            solve, _, theta = timed(lambda d=data: fit(d))
            resample, _, _ = timed(lambda d=data, t=theta: bootstrap(d, t, args.resamples, seed=0))
            parts.append((encode, solve, resample))
            wall, used, _ = timed(lambda m=matches: final_ranking(m, resamples=args.resamples))
            whole.append(wall)
            cpu.append(used)
        medians = [statistics.median(part) for part in zip(*parts, strict=True)]
        table.add_row(
            str(seats),
            *(f"{value:.2f}" for value in medians),
            f"{statistics.median(whole):.2f}",
            f"{statistics.median(cpu):.2f}",
        )
    console.print(table)


def gsprt_stops(test: SequentialTest, diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wald's GSPRT on the normalised effect (H0 mean 0, H1 mean effect x sd, sd plugged in), from
    MIN_PAIRS pairs on: +1 at the upper bound, -1 at the lower, 0 at the cap; and the pairs used."""
    n = np.arange(1, diffs.shape[1] + 1)
    total = np.cumsum(diffs, axis=1)
    sd = np.sqrt(np.maximum(np.cumsum(diffs**2, axis=1) - total**2 / n, 0) / np.maximum(n - 1, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        llr = np.nan_to_num(test.effect * total / sd - n * test.effect**2 / 2, nan=0.0)
    upper, lower = math.log((1 - test.beta) / test.alpha), math.log(test.beta / (1 - test.alpha))
    verdict = np.where(llr >= upper, 1, np.where(llr <= lower, -1, 0))
    verdict[:, n < MIN_PAIRS] = 0
    decided = verdict != 0
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), diffs.shape[1] - 1)
    return verdict[np.arange(len(diffs)), first], first + 1


def simulate(stop, test: SequentialTest, mean: float, runs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    cap = 10 * test.fixed_pairs()
    verdicts, pairs = [], []
    for start in range(0, runs, RUNS_AT_ONCE):
        verdict, used = stop(test, rng.normal(mean, 1.0, (min(RUNS_AT_ONCE, runs - start), cap)))
        verdicts.append(verdict)
        pairs.append(used)
    return np.concatenate(verdicts), np.concatenate(pairs)


def bench_pairs(args, console: Console) -> None:
    table = Table(title=f"paired episodes to a verdict (alpha = beta = 0.05; {args.runs} simulated runs per row)")
    for column in ("effect (sd of d)", "B is", "fixed test", "test: B better", "median", "90th pct",
                   "GSPRT: B better", "median", "90th pct"):  # fmt: skip
        table.add_column(column, justify="right")
    for effect in (0.1, 0.2, 0.5):
        test = SequentialTest(alpha=0.05, beta=0.05, effect=effect)
        for mean, label in ((0.0, "equal"), (effect, "better")):
            cells = []
            for stop in (SequentialTest.stops, gsprt_stops):
                verdict, pairs = simulate(stop, test, mean, args.runs, seed=int(effect * 100) + int(mean > 0))
                share = (verdict == 1).mean()
                cells += [f"{share:.1%}", f"{np.median(pairs):.0f}", f"{np.percentile(pairs, 90):.0f}"]
            table.add_row(f"{effect}", label, str(test.fixed_pairs()), *cells)
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matches", type=int, default=100_000)
    parser.add_argument("--names", type=int, default=16)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--only", action="append", choices=["ranking", "pairs"])
    args = parser.parse_args()
    console = Console(width=120)
    only = set(args.only or ["ranking", "pairs"])
    if "ranking" in only:
        bench_ranking(args, console)
    if "pairs" in only:
        bench_pairs(args, console)


if __name__ == "__main__":
    main()
