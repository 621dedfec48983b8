"""The sequential A/B test's error rates, measured on simulated paired-difference streams (issue 28):
equal policies are found ``B better`` in at most alpha of runs, a real effect in at least 1 - beta,
and reading the verdict after every pair (stopping at the first ``B better``) keeps the error at alpha.

Each rate is asserted with its binomial interval: the Clopper-Pearson 95% interval of the observed
rate must reach the level (so a rate that is above alpha only by chance does not fail, and one that
is clearly above does). Fixed seeds: the same numbers every run."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from policybox.league.stats.sequential import MIN_PAIRS, SequentialTest

RUNS = 3000


def draws(kind: str, mean: float, runs: int, pairs: int, seed: int) -> np.ndarray:
    """Paired differences with standard deviation 1 and the given mean, of several shapes."""
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return rng.normal(0.0, 1.0, (runs, pairs)) + mean
    if kind == "win/draw/loss":  # B wins a pair, draws it or loses it: d in {-1, 0, 1}, sd 1 at p = 0.5 each side
        return rng.choice(np.array([-1.0, 0.0, 1.0]), size=(runs, pairs), p=[0.25, 0.5, 0.25]) * math.sqrt(2) + mean
    if kind == "skewed":
        return rng.exponential(1.0, (runs, pairs)) - 1.0 + mean
    if kind == "heavy":  # Student t, 3 degrees of freedom, scaled to sd 1
        return rng.standard_t(3, (runs, pairs)) / math.sqrt(3) + mean
    raise ValueError(kind)


def interval(hits: int, runs: int) -> tuple[float, float]:
    ci = binomtest(hits, runs).proportion_ci(0.95, method="exact")
    return ci.low, ci.high


KINDS = ["normal", "win/draw/loss", "skewed", "heavy"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("effect", [0.2, 0.5])
def test_equal_policies_are_found_better_in_at_most_alpha_of_runs(kind, effect):
    test = SequentialTest(alpha=0.05, beta=0.05, effect=effect)
    verdict, _ = test.stops(draws(kind, 0.0, RUNS, 4 * test.fixed_pairs(), seed=1))
    low, _ = interval(int((verdict == 1).sum()), RUNS)
    assert low <= test.alpha


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("effect", [0.2, 0.5])
def test_a_known_effect_is_found_better_in_at_least_one_minus_beta_of_runs(kind, effect):
    test = SequentialTest(alpha=0.05, beta=0.05, effect=effect)
    verdict, _ = test.stops(draws(kind, effect, RUNS, 4 * test.fixed_pairs(), seed=2))
    _, high = interval(int((verdict == 1).sum()), RUNS)
    assert high >= 1 - test.beta


@pytest.mark.parametrize("kind", KINDS)
def test_peeking_after_every_pair_keeps_the_error_at_alpha(kind):
    """The user who reads the verdict after every pair, ignores ``B not better`` and stops at the
    first ``B better`` (up to ten times the fixed test's pairs) is wrong in at most alpha of runs."""
    test = SequentialTest(alpha=0.05, beta=0.05, effect=0.5)
    verdict = test.running(draws(kind, 0.0, RUNS, 10 * test.fixed_pairs(), seed=3)).verdict
    low, _ = interval(int((verdict == 1).any(axis=1).sum()), RUNS)
    assert low <= test.alpha


@pytest.mark.parametrize("kind", KINDS)
def test_peeking_keeps_the_other_error_at_beta(kind):
    """The same for the other side: when B is better by the effect, reading after every pair and
    stopping at the first ``B not better`` is wrong in at most beta of runs."""
    test = SequentialTest(alpha=0.05, beta=0.05, effect=0.5)
    verdict = test.running(draws(kind, 0.5, RUNS, 10 * test.fixed_pairs(), seed=6)).verdict
    low, _ = interval(int((verdict == -1).any(axis=1).sum()), RUNS)
    assert low <= test.beta


def test_the_test_needs_fewer_pairs_than_the_fixed_test_on_average():
    test = SequentialTest(effect=0.2)
    for mean in (0.0, 0.2):
        _, pairs = test.stops(draws("normal", mean, 1000, 4 * test.fixed_pairs(), seed=4))
        assert np.median(pairs) < test.fixed_pairs()


def test_fixed_pairs_is_the_paired_z_tests_sample_size():
    assert SequentialTest(alpha=0.05, beta=0.05, effect=0.2).fixed_pairs() == 271  # ((1.645 + 1.645) / 0.2)^2
    assert SequentialTest(alpha=0.05, beta=0.1, effect=0.5).fixed_pairs() == 35


def test_state_agrees_with_the_vectorised_run_and_its_interval_with_its_verdict():
    test = SequentialTest(effect=0.5)
    diffs = draws("normal", 0.5, 1, 200, seed=5)[0]
    run = test.running(diffs[None, :])
    for n in (1, MIN_PAIRS - 1, MIN_PAIRS, 30, 200):
        state = test.state(list(diffs[:n]))
        assert state.pairs == n and state.estimate == pytest.approx(diffs[:n].mean())
        assert state.statistic == pytest.approx(run.statistic[0, n - 1])
        assert (state.verdict == "B better") == (state.low > 0)
        shown_not_better = n >= MIN_PAIRS and state.high <= 0.5 * diffs[:n].std(ddof=1)
        assert (state.verdict == "B not better") == (shown_not_better and state.low <= 0)


def test_no_verdict_before_the_minimum_pairs():
    test = SequentialTest()
    assert test.state([]).verdict == "undecided" and test.state([]).pairs == 0
    state = test.state([5.0] * (MIN_PAIRS - 1))
    assert state.verdict == "undecided" and (state.low, state.high) == (-math.inf, math.inf)


def test_identical_differences_decide_by_their_sign():
    """Two copies of a bot in a deterministic game differ by 0 in every pair: B is not better."""
    test = SequentialTest()
    assert test.state([0.0] * MIN_PAIRS).verdict == "B not better"
    assert test.state([0.5] * MIN_PAIRS).verdict == "B better"
    assert test.state([0.5] * MIN_PAIRS).low == 0.5


def test_bad_levels_are_refused():
    with pytest.raises(ValueError):
        SequentialTest(alpha=0.0)
    with pytest.raises(ValueError):
        SequentialTest(effect=-0.1)
