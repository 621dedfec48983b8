"""The final ranking's Plackett-Luce fit and bootstrap (issue 28): the fit equals choix's on tie-free
placings and maximises the stated tie rule's likelihood; a clear order gives singleton groups in that
order, copies of one player share a group, rank probabilities sum to 1, and the bootstrap's intervals
cover the true strengths about as often as they say."""

from __future__ import annotations

import math

import choix
import numpy as np
import pytest
from scipy.optimize import minimize

from policybox.league.stats import plackett_luce
from policybox.league.stats.placings import stages
from policybox.league.stats.plackett_luce import final_ranking, fit, uncertain_pairs


def simulate(strengths: dict[str, float], matches: int, seats: int, seed: int) -> list[list[list[str]]]:
    """Placings drawn from Plackett-Luce itself (Gumbel noise on each strength), no ties."""
    rng = np.random.default_rng(seed)
    names = list(strengths)
    out = []
    for _ in range(matches):
        table = rng.choice(len(names), seats, replace=False)
        noisy = np.array([strengths[names[i]] for i in table]) + rng.gumbel(size=seats)
        out.append([[names[table[i]]] for i in np.argsort(-noisy)])
    return out


def centred(values: np.ndarray) -> np.ndarray:
    return values - values.mean()


@pytest.mark.parametrize("seats", [2, 4])
def test_the_fit_equals_choix_on_placings_without_ties(seats):
    strengths = {f"p{i}": s for i, s in enumerate(np.linspace(-1.5, 1.5, 7))}
    matches = simulate(strengths, 600, seats, seed=seats)
    data = stages(matches)
    ours = fit(data, prior=0.0)
    index = {name: i for i, name in enumerate(data.names)}
    theirs = choix.opt_rankings(len(data.names), [[index[g[0]] for g in m] for m in matches], alpha=0.0)
    assert np.abs(ours - centred(theirs)).max() < 1e-3


def breslow_log_likelihood(theta: np.ndarray, matches, index) -> float:
    """The stated tie rule, written out: each group drawn from those at its place or below."""
    total = 0.0
    for match in matches:
        for place, group in enumerate(match):
            remaining = [index[name] for later in match[place:] for name in later]
            total += sum(theta[index[name]] for name in group)
            total -= len(group) * math.log(sum(math.exp(theta[i]) for i in remaining))
    return total


def test_the_fit_with_ties_maximises_the_stated_likelihood():
    matches = [[["a"], ["b", "c"], ["d"]], [["b"], ["a"], ["c", "d"]], [["c", "a"], ["d"], ["b"]]] * 3
    matches += [[["d"], ["a"], ["b"], ["c"]], [["a", "b", "c", "d"]]]
    data = stages(matches)
    index = {name: i for i, name in enumerate(data.names)}
    ours = fit(data, prior=0.0)
    best = minimize(lambda t: -breslow_log_likelihood(t, matches, index), np.zeros(4), method="BFGS", tol=1e-10)
    assert np.abs(ours - centred(best.x)).max() < 1e-4


def test_a_clear_order_gives_singleton_groups_in_that_order():
    strengths = {"a": 3.0, "b": 1.5, "c": 0.0, "d": -1.5, "e": -3.0}
    ranking = final_ranking(simulate(strengths, 400, 2, seed=1), resamples=500)
    assert [row.name for row in ranking.names] == ["a", "b", "c", "d", "e"]
    assert [row.group for row in ranking.names] == [1, 2, 3, 4, 5]
    assert [row.rank for row in ranking.names] == [1, 2, 3, 4, 5]
    assert uncertain_pairs(ranking) == []


def test_copies_of_one_player_share_a_group_and_clearly_different_ones_do_not():
    strengths = {"bot": 1.0, "bot copy": 1.0, "weak": -1.0}
    ranking = final_ranking(simulate(strengths, 600, 2, seed=2), resamples=500)
    groups = {row.name: row.group for row in ranking.names}
    assert groups["bot"] == groups["bot copy"] == 1 and groups["weak"] == 2
    assert set(uncertain_pairs(ranking)[0]) == {"bot", "bot copy"}


def test_identical_players_make_one_group():
    ranking = final_ranking(simulate({n: 0.0 for n in "abcd"}, 400, 4, seed=3), resamples=500)
    assert {row.group for row in ranking.names} == {1}
    assert len(uncertain_pairs(ranking)) == 3


def test_rank_probabilities_sum_to_one_each_way():
    ranking = final_ranking(simulate({n: i / 3 for i, n in enumerate("abcdef")}, 300, 3, seed=4), resamples=400)
    shares = np.array([row.rank_probabilities for row in ranking.names])
    assert shares.shape == (6, 6)
    assert np.allclose(shares.sum(axis=1), 1) and np.allclose(shares.sum(axis=0), 1)


def test_the_intervals_cover_the_true_strengths_at_about_their_level():
    true = np.linspace(-1, 1, 6)
    strengths = {f"p{i}": s for i, s in enumerate(true)}
    covered = []
    for seed in range(40):
        ranking = final_ranking(simulate(strengths, 500, 4, seed=100 + seed), resamples=400, seed=seed)
        by_name = {row.name: row for row in ranking.names}
        covered += [by_name[f"p{i}"].low <= t <= by_name[f"p{i}"].high for i, t in enumerate(centred(true))]
    assert 0.88 <= np.mean(covered) <= 0.99


def test_a_name_that_never_loses_has_a_finite_strength_and_ties_share_a_group():
    matches = [[["champion"], ["x"]], [["champion"], ["y"]], [["x", "y"]]] * 5
    ranking = final_ranking(matches, resamples=200)
    top = ranking.names[0]
    assert top.name == "champion" and math.isfinite(top.strength) and math.isfinite(top.high)
    assert ranking.names[1].group == ranking.names[2].group


def test_the_ranking_is_reproducible_and_says_its_rule():
    matches = simulate({"a": 0.5, "b": 0.0, "c": -0.5}, 100, 2, seed=5)
    first, again = final_ranking(matches, seed=7), final_ranking(matches, seed=7)
    assert first == again and first.matches == 100 and first.resamples == 1000 and first.level == 0.95
    assert "97.5%" in first.rule


def test_edge_cases():
    assert final_ranking([]).names == []
    assert [row.rank_probabilities for row in final_ranking([[["solo"]]]).names] == [[1.0]]
    with pytest.raises(ValueError):
        final_ranking([[["a"], ["a"]]])
    with pytest.raises(ValueError):
        final_ranking([[["a"], ["b"]]], level=1.0)


def test_every_placing_shape_encodes_one_stage_per_group():
    matches = [[["a"], ["b", "c"], ["d"]], [["a", "b"]], [["c"], ["a"]]]
    data = stages(matches)
    assert len(data.stage_match) == 3 + 1 + 2
    assert data.wins.sum() == sum(len(group) for match in matches for group in match)
    assert data.names == ["a", "b", "c", "d"]


def test_resampling_blocks_of_matches_spreads_as_resampling_matches(monkeypatch):
    """Beyond BLOCKS matches the bootstrap resamples random blocks of matches: its spread matches
    the bootstrap that resamples each match (BLOCKS raised above the matches) within 15%."""
    data = stages(simulate({n: i / 4 for i, n in enumerate("abcdef")}, 6000, 3, seed=8))
    theta = fit(data)
    blocked = plackett_luce.bootstrap(data, theta, 1000, seed=1).std(axis=0)
    monkeypatch.setattr(plackett_luce, "BLOCKS", 10_000)
    single = plackett_luce.bootstrap(data, theta, 1000, seed=1).std(axis=0)
    assert np.abs(blocked / single - 1).max() < 0.15
