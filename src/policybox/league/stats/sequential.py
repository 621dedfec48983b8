"""The sequential A/B test of ``policybox versus``: is B better than A, from paired episodes?

Each pair of episodes (the same seed and opponents, once with A, once with B) gives one difference
``d = score(B) - score(A)``. The test asks whether the mean of ``d`` is above 0, and calls an effect
worth finding ``effect`` standard deviations **of d** (not of the reward: the pairing removes the
seed's share of the variance, so ``d``'s spread is what the data measure).

**The rule: an anytime-valid confidence sequence, the verdict read from it.** After n pairs, with
mean ``m`` and sample standard deviation ``s`` of the differences::

    low  = m - s * u(n, alpha) / n        high = m + s * u(n, beta) / n
    u(n, a) = sqrt(2 (n + rho) log(sqrt((n + rho) / rho) / (2 a) + 1))

``u`` is the one-sided normal-mixture boundary (Robbins 1970; Howard, Ramdas, McAuliffe and Sekhon
2021, eq. 14): a sum of n standardised zero-mean steps crosses it at *any* n with probability at most
``a``. With the running ``s`` plugged in it is the asymptotic confidence sequence of Waudby-Smith et
al. (2021). ``rho`` makes the boundary tightest at ``fixed_pairs()``. The verdict, from
``MIN_PAIRS`` pairs on (fewer give no usable ``s``):

- ``B better`` when ``low > 0``: wrong, under equal policies, with probability at most ``alpha``;
- ``B not better`` when ``high <= effect * s``: wrong, when B is better by ``effect``, with
  probability at most ``beta``.
  Both exactly so for a known spread; with the running ``s``, asymptotically -- measured below.
- ``undecided`` otherwise (and always before ``MIN_PAIRS``, when ``low`` and ``high`` are infinite).

Late in a long test both can hold (B is better, by less than ``effect``): the verdict is then
``B better``.

Because each bound holds at every n at once, the verdict may be read after every pair and the test
stopped at any moment -- early, late, or when the caller's patience ends -- without raising either
error above its level. ``(low, high)`` is the printed interval of B - A: each end holds at its level,
so together at least ``1 - alpha - beta`` (90% for the defaults).

**Why not Wald's SPRT**, which fishtest runs (the GSPRT on the normalised effect, the sample variance
plugged in, bounds ``log((1 - beta) / alpha)`` and ``log(beta / (1 - alpha))``)? It needs fewer pairs
(a median of about 41% of the fixed test's pairs, against about 56% here), but its guarantee is
approximate and for a test that stops at its first bound. Simulated on equal policies
(``benchmarks/bench_stats.py``, 2000 runs of normal differences per effect) it said ``B better`` in
5.2%, 5.8% and 6.3% of runs at effects 0.1, 0.2 and 0.5 -- above ``alpha = 0.05``; in a simulation of
4000 runs at effect 0.2, in 5.7% of win/draw/loss runs, and in 6% when read on past its lower bound.
This test said it in 2.8-3.8% of those runs, and found a real effect in 97.6-97.8%; it keeps both
errors below their levels however it is read (``tests/test_stats_sequential.py`` measures it), and
its interval never contradicts its verdict. The price: its 90th percentile of pairs is about 1.25
times the fixed test's.

The state's ``statistic`` is the test statistic in standard-deviation units, the standardised sum
``n * m / s``; ``B better`` is ``statistic > upper`` with ``upper = u(n, alpha)``, and ``B not better``
is ``statistic <= lower`` with ``lower = effect * n - u(n, beta)``. When every difference so far is the
same value (``s = 0``, e.g. two copies of a bot in a deterministic game) the statistic is +inf for a
positive value and -inf otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np

Verdict = Literal["B better", "B not better", "undecided"]
VERDICTS: tuple[Verdict, Verdict, Verdict] = ("B not better", "undecided", "B better")  # by code + 1
MIN_PAIRS = 10  # no verdict and an unbounded interval before this many pairs: s needs a few to mean anything
# tuned_rho's search: points of each of its two grids over log(rho). Two passes find the minimum to within
# 1e-5 of log(rho) for any test up to 10^9 pairs (the tolerance of scipy's bounded optimiser, which cost
# versus 0.4 s of imports at every start), where the boundary is so flat that no verdict changes.
RHO_GRID = 4097


@dataclass(frozen=True)
class TestState:
    """The test after ``pairs`` paired differences."""

    __test__ = False  # not a pytest test class

    pairs: int
    estimate: float  # mean difference B - A (nan before the first pair)
    low: float  # anytime-valid lower bound at level 1 - alpha (-inf before MIN_PAIRS)
    high: float  # anytime-valid upper bound at level 1 - beta (+inf before MIN_PAIRS)
    statistic: float  # the test statistic: the standardised sum n * mean / sd
    lower: float  # B not better at or below it: effect * n - u(n, beta)
    upper: float  # B better at or above it: u(n, alpha)
    verdict: Verdict


@dataclass(frozen=True)
class Running:
    """The running test over many runs at once: arrays of shape (runs, pairs), column j after j + 1 pairs."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    statistic: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    verdict: np.ndarray  # +1 B better, -1 B not better, 0 undecided (int8)


class SequentialTest:
    """The paired A/B test at error levels ``alpha`` (B found better when it is not) and ``beta`` (B
    found not better when it is better by ``effect`` standard deviations of the paired difference)."""

    __test__ = False

    def __init__(self, alpha: float = 0.05, beta: float = 0.05, effect: float = 0.2):
        if not (0 < alpha < 0.5 and 0 < beta < 0.5 and effect > 0):
            raise ValueError(f"need 0 < alpha, beta < 0.5 and effect > 0, got {alpha}, {beta}, {effect}")
        self.alpha, self.beta, self.effect = alpha, beta, effect
        self.rho = tuned_rho(self.fixed_pairs(), alpha)

    def fixed_pairs(self) -> int:
        """Pairs a fixed-n one-sided paired z-test needs for the same alpha, beta and effect."""
        z = NormalDist().inv_cdf
        return math.ceil(((z(1 - self.alpha) + z(1 - self.beta)) / self.effect) ** 2)

    def state(self, diffs: Sequence[float]) -> TestState:
        """The test after the differences so far (call it after each pair; it is cheap)."""
        n = len(diffs)
        if n == 0:
            upper = float(boundary(np.zeros(1), self.alpha, self.rho)[0])
            lower = -float(boundary(np.zeros(1), self.beta, self.rho)[0])
            return TestState(0, math.nan, -math.inf, math.inf, 0.0, lower, upper, "undecided")
        run = self.running(np.asarray(diffs, dtype=float)[None, :])
        last = {field: float(getattr(run, field)[0, -1]) for field in ("estimate", "low", "high", "lower", "upper")}
        return TestState(
            pairs=n,
            statistic=float(run.statistic[0, -1]),
            verdict=VERDICTS[int(run.verdict[0, -1]) + 1],
            **last,
        )

    def running(self, diffs: np.ndarray) -> Running:
        """The test after every prefix of every run: ``diffs`` has shape (runs, pairs)."""
        n = np.arange(1, diffs.shape[1] + 1, dtype=float)
        total = np.cumsum(diffs, axis=1)
        mean = total / n
        squares = np.cumsum((diffs - mean[:, :1]) ** 2, axis=1)  # shifted by the first value: no cancellation
        shifted = total - n * mean[:, :1]
        sd = np.sqrt(np.maximum(squares - shifted**2 / n, 0.0) / np.maximum(n - 1, 1))
        up, down = boundary(n, self.alpha, self.rho), boundary(n, self.beta, self.rho)
        early = n < MIN_PAIRS
        low = np.where(early, -np.inf, mean - sd * up / n)
        high = np.where(early, np.inf, mean + sd * down / n)
        with np.errstate(divide="ignore", invalid="ignore"):
            statistic = np.where(sd > 0, total / sd, np.where(total > 0, np.inf, -np.inf))
        statistic = np.where(n < 2, 0.0, statistic)
        lower = np.broadcast_to(self.effect * n - down, diffs.shape)
        upper = np.broadcast_to(up, diffs.shape)
        verdict = np.where(statistic > upper, 1, np.where(statistic <= lower, -1, 0)).astype(np.int8)
        verdict[:, early] = 0
        return Running(mean, low, high, statistic, lower, upper, verdict)

    def stops(self, diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each run's verdict and the pairs it took when stopped at its first verdict: the verdict is
        +1/-1, or 0 with every pair used when none came within ``diffs.shape[1]`` pairs."""
        verdict = self.running(diffs).verdict
        decided = verdict != 0
        first = np.where(decided.any(axis=1), decided.argmax(axis=1), diffs.shape[1] - 1)
        return verdict[np.arange(len(diffs)), first], first + 1


def boundary(n: np.ndarray, alpha: float, rho: float | np.ndarray) -> np.ndarray:
    """The one-sided normal-mixture boundary for a sum of n unit-variance steps, crossing level ``alpha``."""
    return np.sqrt(2 * (n + rho) * np.log(np.sqrt((n + rho) / rho) / (2 * alpha) + 1))


def tuned_rho(pairs: int, alpha: float) -> float:
    """The mixture's rho that makes the boundary, as a bound on the mean, tightest at ``pairs``: the
    least boundary over a grid of log(rho), then over a finer grid around it (``RHO_GRID``)."""
    low, high = -5.0, math.log(pairs) + 5.0
    for _ in range(2):
        log_rho = np.linspace(low, high, RHO_GRID)
        best = int(np.argmin(boundary(np.full(RHO_GRID, float(pairs)), alpha, np.exp(log_rho))))
        step = log_rho[1] - log_rho[0]
        low, high = log_rho[best] - step, log_rho[best] + step
    return math.exp(float(log_rho[best]))
