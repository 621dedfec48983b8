"""The ranking rules (policybox.league.ranking) as every leaderboard applies them: a failed agent forfeits,
equal ratings share a rank, and each row says whether its interval is clear of the next one's."""

from __future__ import annotations

import pytest
from conftest import policy
from helpers.records import entry, record

from policybox.league import ranking
from policybox.league.evaluate.results_folder import evaluate
from policybox.league.views.summary import summarize
from policybox.results import AgentStatus, Failure
from policybox.spec import PolicySpec

THREE = [(key, PolicySpec(class_path=key)) for key in ("alpha", "beta", "gamma")]
BROKEN = {"status": AgentStatus.ERROR, "failure": Failure(step=1, phase="step", kind="RuntimeError", message="boom")}


def broken_wins(rank_by: str = "forfeit"):
    """``broken`` ends every episode in error yet gets the higher reward (its fallback played well)."""
    policies = [("broken", PolicySpec(class_path="broken")), ("player", PolicySpec(class_path="player"))]
    records = [record(e, ["broken", "player"], [1.0, 0.0], a0=BROKEN) for e in range(8)]
    return summarize(policies, records, expected_episodes=8, rank_by=rank_by)


@pytest.mark.parametrize("status", [AgentStatus.ERROR, AgentStatus.CRASHED, AgentStatus.DISABLED])
def test_a_failed_agent_forfeits_whatever_reward_the_game_gave_it(status):
    policies = [("broken", PolicySpec(class_path="broken")), ("player", PolicySpec(class_path="player"))]
    failed = {"status": status, "failure": Failure(step=1, phase="step", kind="X", message="x")}
    records = [record(e, ["broken", "player"], [1.0, 0.0], a0=failed) for e in range(8)]
    summary = summarize(policies, records, expected_episodes=8)
    broken, player = entry(summary, "broken"), entry(summary, "player")
    assert summary.ranking == ["player", "broken"] and (player.rank, broken.rank) == (1, 2)
    assert broken.reward.mean == 1.0  # still shown as the game gave it
    assert (broken.forfeits, player.forfeits) == (8, 0)
    h2h = summary.head_to_head["player"]["broken"]
    assert (h2h.wins, h2h.draws, h2h.losses) == (8, 0, 0)
    assert summary.rank_by == "forfeit" and "forfeits its episode" in summary.rule


def test_ranking_by_reward_alone_is_an_option_and_says_so():
    summary = broken_wins("reward")
    assert summary.ranking == ["broken", "player"] and entry(summary, "broken").forfeits == 0
    assert summary.rank_by == "reward" and "reward alone" in summary.rule


@pytest.mark.parametrize(("faults", "forfeited"), [(1, False), (2, True)])
def test_timeouts_and_invalid_actions_past_their_share_of_turns_forfeit(faults, forfeited):
    """10 turns: one fault is 10% (allowed); two are more than FORFEIT_SHARE."""
    assert ranking.FORFEIT_SHARE == 0.10
    sloppy = {"status": AgentStatus.TIMEOUT, "turns": 10, "timeouts": faults - 1, "invalid_actions": 1}
    records = [record(e, ["alpha", "beta"], [1.0, 0.0], a0=sloppy) for e in range(4)]
    summary = summarize(THREE[:2], records, expected_episodes=4)
    assert entry(summary, "alpha").forfeits == (4 if forfeited else 0)
    assert summary.ranking[0] == ("beta" if forfeited else "alpha")


def test_two_forfeits_draw_and_a_policy_forfeits_if_any_of_its_agents_does():
    records = [record(0, ["alpha", "alpha", "beta"], [5.0, 5.0, 0.0], a1=BROKEN, a2=BROKEN)]
    summary = summarize(THREE[:2], records, expected_episodes=1)
    assert entry(summary, "alpha").forfeits == 1 and entry(summary, "beta").forfeits == 1
    assert summary.head_to_head["alpha"]["beta"].draws == 1


def test_equal_ratings_share_a_rank_and_the_next_rank_skips():
    """Three policies that always score the same are tied; a fourth that always loses is 4th."""
    policies = [*THREE, ("delta", PolicySpec(class_path="delta"))]
    seats = ["alpha", "beta", "gamma", "delta"]
    records = [record(e, seats[e % 4 :] + seats[: e % 4], [0.0] * 4) for e in range(8)]
    for r in records:  # delta scores below the others in every episode
        next(a for a in r.agents if r.seats[a.agent_id] == "delta").reward = -1.0
    summary = summarize(policies, records, expected_episodes=8)
    assert [e.rank for e in summary.policies] == [1, 1, 1, 4]
    assert summary.ranking[-1] == "delta"
    unplayed = ranking.Entry("epsilon", ranking.MODEL.rating(), None)
    entries = [*(ranking.Entry(e.policy, e.rating, e.reward) for e in summary.policies), unplayed]
    assert [p.rank for p in ranking.place(entries)] == [1, 1, 1, 4, None]


def test_each_row_says_whether_its_rating_interval_is_clear_of_the_next_or_overlaps():
    records = [record(e, ["alpha", "beta", "gamma"], [10.0 + e % 2, 0.0 + e % 2, 0.5 - e % 2]) for e in range(12)]
    summary = summarize(THREE, records, expected_episodes=12)
    assert summary.ranking == ["alpha", "beta", "gamma"]
    assert [entry(summary, key).versus_next for key in summary.ranking] == ["clear", "overlaps", None]


def test_a_policy_that_crashes_cannot_outrank_one_that_plays_in_a_real_game(tmp_path):
    """Connect four: the crasher dies at its 2nd turn and its fallback (the first legal column) plays
    on -- and may well win. It still ranks below random, and its failure cause is summarised."""
    game = "pettingzoo:pettingzoo.classic.connect_four_v3:env"
    crasher = policy("pettingzoo_bots.py:CrashAt", **{"kw.at_step": "2"})
    summary = evaluate([crasher, "random"], tmp_path / "board", episodes=6, env=game, steps=100, workers=1)
    assert summary.ranking == ["random", "CrashAt"]
    crashed = entry(summary, "CrashAt")
    assert crashed.forfeits == 6 and crashed.rank == 2
    (cause,) = crashed.failures
    assert (cause.status, cause.cause, cause.count) == ("crashed", "Crashed", 6)
    assert "SIGSEGV" in cause.example


def test_beyond_the_bootstrap_limit_the_interval_is_the_normal_approximation_and_agrees_with_it():
    """A ladder with many matches keeps only its scores' moments: the interval from them is the one
    the summary computes from the scores themselves, and close to the bootstrap at the limit."""
    import random

    rng = random.Random(5)
    scores = [rng.gauss(3.0, 1.5) for _ in range(ranking.BOOTSTRAP_MAX + 1)]
    from_scores = ranking.reward(scores)
    from_moments = ranking.reward_from_moments(len(scores), sum(scores), sum(s * s for s in scores))
    assert from_scores.mean == pytest.approx(from_moments.mean) and from_scores.ci95 == pytest.approx(from_moments.ci95)
    bootstrap = ranking.reward(scores[: ranking.BOOTSTRAP_MAX])
    width = from_moments.ci95[1] - from_moments.ci95[0]
    assert bootstrap.ci95[1] - bootstrap.ci95[0] == pytest.approx(width, rel=0.1)


def test_head_to_head_tallies_wins_draws_losses_and_the_mean_margin_by_the_ranking_rule():
    won, lost, forfeited = ranking.Outcome(3.0), ranking.Outcome(1.0), ranking.Outcome(9.0, forfeited=True)
    tallies = ranking.head_to_head(
        [("b", lost, won), ("a", won, lost), ("a", forfeited, lost), ("a", forfeited, forfeited), ("a", won, won)]
    )
    assert list(tallies) == ["b", "a"]  # in the order each first met
    assert tallies["a"].model_dump() == {"wins": 1, "draws": 2, "losses": 1, "margin": (2.0 + 8.0 + 0.0 + 0.0) / 4}
    assert tallies["a"].played == 4 and tallies["b"].played == 1 and tallies["b"].losses == 1
    # The summary's table and a ladder name's opponents are this tally, with its count under their unit's name.
    summary = broken_wins()
    versus = summary.head_to_head["player"]["broken"]
    assert isinstance(versus, ranking.Tally) and versus.episodes == versus.played == versus.wins == 8


def test_a_tally_is_written_and_coloured_one_way_for_every_view():
    """The terminal, the pages and the report all write a record as W-D-L and colour a heat map's cell by
    its balance: ``Tally`` alone says how."""
    tally = ranking.Tally(wins=3, draws=1, losses=2)
    assert (tally.record, tally.balance, tally.played, tally.share) == ("3-1-2", 1 / 6, 6, 3.5 / 6)
    assert (ranking.Tally(losses=4).balance, ranking.Tally(wins=2).balance) == (-1, 1)
