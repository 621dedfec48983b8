"""The final ranking: a Plackett-Luce fit of every match's placing, with a bootstrap over matches.

**The model.** Each name has a strength ``theta``; a match's placing is built from the top: the first
group is drawn from everyone, the next from those left, and so on, a name being drawn from a set
``R`` with probability ``exp(theta) / sum(exp(theta over R))``. In a two-player game this is
Bradley-Terry: ``P(a beats b) = 1 / (1 + exp(theta_b - theta_a))``. Strengths are reported centred
(the field's mean is 0).

**Ties** (a shared place): Breslow's rule, as in Cox regression: every member of a tied group is drawn
from the same set, the group's likelihood being ``prod(exp(theta over G)) / sum(exp(theta over R))^|G|``.
Two names that tie share evidence that they are alike; a tie at the bottom counts too.

**The prior**: every name also plays ``PRIOR_MATCHES`` virtual two-player match won and one lost
against a reference of strength 0 -- a logistic prior on ``theta`` (standard deviation 1.8) that
weighs as much as two two-player matches -- so a name that never loses, or never wins, keeps a
finite strength.

**The fit**: Newton's method on the log posterior (concave), steps capped at 1 per strength, to a
gradient below 1e-9 per match, over the distinct stages (``placings``).

**The bootstrap** resamples the matches with replacement and refits each resample by one Newton step
from the full fit -- the linearised (estimating-function) bootstrap of Hu and Kalbfleisch (2000): the
resample's score at the full fit, solved against the full fit's information. All resamples are one
matrix product and one solve. Up to ``BLOCKS`` matches each match is resampled on its own; beyond,
the matches are dealt at random (fixed seed) into ``BLOCKS`` blocks and the blocks are resampled:
the resampled score then has, on average over the deal, the covariance that resampling the matches
gives it, at a cost that does not grow with the matches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field

from policybox.league.stats.placings import Stages, stages

PRIOR_MATCHES = 1.0  # virtual wins and losses per name against a reference of strength 0
BLOCKS = 2000  # the bootstrap resamples at most this many blocks of matches
MAX_STEP = 1.0
TOLERANCE = 1e-9
SAME = 1e-9  # strengths closer than this are not told apart by the group rule


def kind_probabilities(data: Stages, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct stage's entries' probabilities of being drawn, and each distinct stage's total
    of exp(theta) (relative to exp(max theta))."""
    weight = np.exp(theta - theta.max())
    total = np.bincount(data.kind_entry, weight[data.kind_name], minlength=len(data.kind_weight))
    return weight[data.kind_name] / total[data.kind_entry], total


def prior_gradient(theta: np.ndarray, prior: float) -> np.ndarray:
    return np.asarray(prior * (1 - 2 / (1 + np.exp(-theta))))


def gradient(data: Stages, theta: np.ndarray, p: np.ndarray, prior: float) -> np.ndarray:
    expected = np.bincount(data.kind_name, data.kind_weight[data.kind_entry] * p, minlength=len(theta))
    return np.asarray(data.wins - expected + prior_gradient(theta, prior))


def information(data: Stages, theta: np.ndarray, p: np.ndarray, prior: float) -> np.ndarray:
    """Minus the log posterior's Hessian: sum over stages of |G| (diag(p) - p p^T), plus the prior's."""
    from scipy import sparse  # here, not at the top: the CLI and the board import this module, and scipy costs 0.3 s

    n = len(data.names)
    probabilities = sparse.csr_matrix((p, (data.kind_entry, data.kind_name)), shape=(len(data.kind_weight), n))
    outer = (probabilities.T @ sparse.diags(data.kind_weight) @ probabilities).toarray()
    diagonal = np.bincount(data.kind_name, data.kind_weight[data.kind_entry] * p, minlength=n)
    sigma = 1 / (1 + np.exp(-theta))
    matrix = np.diag(diagonal + 2 * prior * sigma * (1 - sigma)) - outer
    return np.asarray(matrix if prior > 0 else matrix + 1.0 / n)  # no prior: pin the free constant (mean step 0)


def fit(data: Stages, prior: float = PRIOR_MATCHES, iterations: int = 100) -> np.ndarray:
    """The maximum a posteriori strengths (maximum likelihood when ``prior`` is 0), centred."""
    theta = np.zeros(len(data.names))
    for _ in range(iterations):
        p, _ = kind_probabilities(data, theta)
        slope = gradient(data, theta, p, prior)
        if np.abs(slope).max() <= TOLERANCE * max(data.matches, 1):
            return np.asarray(theta - theta.mean())
        step = np.linalg.solve(information(data, theta, p, prior), slope)
        theta = theta + step * min(1.0, MAX_STEP / max(np.abs(step).max(), 1e-300))
    raise RuntimeError("the Plackett-Luce fit did not converge")


def bootstrap(data: Stages, theta: np.ndarray, resamples: int, seed: int, prior: float = PRIOR_MATCHES) -> np.ndarray:
    """``resamples`` x names strengths, each centred: the matches resampled with replacement, each
    resample refitted by one Newton step from ``theta`` (see the module's docstring)."""
    n = len(data.names)
    rng = np.random.default_rng(seed)
    blocks = min(data.matches, BLOCKS)
    block_of_match = rng.permutation(data.matches) % blocks
    p, total = kind_probabilities(data, theta)
    stage_total = total[data.stage_kind]
    drawn = np.bincount(data.entry_stage, data.entry_won)
    expected = np.exp(theta - theta.max())[data.entry_name] / stage_total[data.entry_stage]
    terms = data.entry_won - drawn[data.entry_stage] * expected
    block_of_entry = block_of_match[data.stage_match[data.entry_stage]]
    scores = np.bincount(block_of_entry * n + data.entry_name, terms, minlength=blocks * n).reshape(blocks, n)
    picks = rng.integers(0, blocks, size=(resamples, blocks))
    counts = np.bincount((picks + blocks * np.arange(resamples)[:, None]).ravel(), minlength=resamples * blocks)
    slope = counts.reshape(resamples, blocks).astype(float) @ scores + prior_gradient(theta, prior)
    steps = np.linalg.solve(information(data, theta, p, prior), slope.T).T
    refit = theta + steps
    return np.asarray(refit - refit.mean(axis=1, keepdims=True))


class NameRank(BaseModel):
    """One name's place in the final ranking."""

    name: str
    strength: float = Field(description="Plackett-Luce log-strength, the field's mean 0")
    low: float = Field(description="Lower end of the strength's bootstrap percentile interval at the ranking's level")
    high: float = Field(description="Upper end of that interval")
    rank: int = Field(description="Place by strength, 1 = best")
    group: int = Field(description="1 = top group; names the data cannot order share a group")
    rank_probabilities: list[float] = Field(description="Share of the bootstrap resamples placing it 1st, 2nd, ...")


class FinalRanking(BaseModel):
    """The final's ranking: every name, best first, with the bootstrap that measured it."""

    names: list[NameRank]
    matches: int
    resamples: int
    level: float
    rule: str = Field(description="The group rule in words")


def group_rule(level: float, resamples: int) -> str:
    return (
        f"two names next to each other are in different groups when the upper one is the stronger in at least "
        f"{(1 + level) / 2:.1%} of the {resamples} bootstrap resamples of the matches; a group is a run of names "
        "with no such boundary"
    )


def final_ranking(
    matches: Sequence[Sequence[Sequence[str]]], resamples: int = 1000, level: float = 0.95, seed: int = 0
) -> FinalRanking:
    """Rank the names of ``matches`` (each a placing: groups of names, best first) by a Plackett-Luce
    fit, with bootstrap intervals, rank probabilities and groups of names the data cannot order."""
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"need resamples >= 1 and 0 < level < 1, got {resamples} and {level}")
    rule = group_rule(level, resamples)
    if not matches:
        return FinalRanking(names=[], matches=0, resamples=resamples, level=level, rule=rule)
    data = stages(matches)
    theta = fit(data)
    draws = bootstrap(data, theta, resamples, seed)
    order = np.argsort(-theta, kind="stable")  # equal strengths: by name
    places = np.argsort(np.argsort(-draws, axis=1, kind="stable"), axis=1)  # 0 = first, per resample
    shares = np.stack([np.bincount(places[:, i], minlength=len(theta)) for i in range(len(theta))]) / resamples
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    # stronger by more than rounding: names every resample fits alike (copies that always tie) share a group
    ahead = (draws[:, order[:-1]] > draws[:, order[1:]] + SAME).mean(axis=0)
    group = 1 + np.concatenate([[0], np.cumsum(ahead >= (1 + level) / 2)])
    names = [
        NameRank(
            name=data.names[i],
            strength=float(theta[i]),
            low=float(low[i]),
            high=float(high[i]),
            rank=rank,
            group=int(group[rank - 1]),
            rank_probabilities=shares[i].tolist(),
        )
        for rank, i in enumerate(order, start=1)
    ]
    return FinalRanking(names=names, matches=len(matches), resamples=resamples, level=level, rule=rule)


def uncertain_pairs(ranking: FinalRanking) -> list[tuple[str, str]]:
    """The adjacent pairs whose order the data cannot tell: next to each other in one group."""
    pairs = zip(ranking.names, ranking.names[1:], strict=False)
    return [(upper.name, lower.name) for upper, lower in pairs if upper.group == lower.group]
