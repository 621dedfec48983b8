"""The leaderboard from synthetic episode records: ranking, intervals, counts, redaction, rendering."""

from __future__ import annotations

import random

import pytest
from helpers.records import entry, record
from rich.console import Console

from policybox.cli.result_tables import show_summary
from policybox.cli.tables import number
from policybox.league.views.summary import Summary, summarize
from policybox.results import AgentStatus, EpisodeRecord, Failure, Latency
from policybox.spec import PolicySpec

POLICIES = [("strong", PolicySpec(class_path="strong")), ("weak", PolicySpec(class_path="weak"))]


def tournament(episodes: int = 20) -> list[EpisodeRecord]:
    """``strong`` always outscores ``weak``; seats alternate so each plays every seat."""
    rng = random.Random(7)
    records = []
    for episode in range(episodes):
        seats = ["strong", "weak", "strong", "weak"] if episode % 2 else ["weak", "strong", "weak", "strong"]
        rewards = [rng.uniform(5, 8) if key == "strong" else rng.uniform(0, 3) for key in seats]
        records.append(record(episode, seats, rewards))
    return records


def test_a_clearly_better_policy_ranks_first_with_a_separate_interval():
    summary = summarize(list(reversed(POLICIES)), tournament(), expected_episodes=20)
    strong, weak = entry(summary, "strong"), entry(summary, "weak")
    assert summary.ranking == ["strong", "weak"]
    assert [policy.policy for policy in summary.policies] == summary.ranking
    assert strong.rating.ordinal > weak.rating.ordinal
    assert strong.rating.ordinal == pytest.approx(strong.rating.mu - 3 * strong.rating.sigma)
    assert weak.reward.ci95[1] < strong.reward.ci95[0]
    assert summary.episodes_done == summary.episodes_expected == 20


def test_seats_and_seat_plays_are_counted():
    records = [record(0, ["strong", "strong", "weak"], [1, 1, 0]), record(1, ["weak", "strong", "weak"], [0, 1, 0])]
    summary = summarize(POLICIES, records, expected_episodes=2)
    strong, weak = entry(summary, "strong"), entry(summary, "weak")
    assert (strong.episodes, strong.seat_plays, strong.seats) == (2, 3, [1, 2, 0])
    assert (weak.episodes, weak.seat_plays, weak.seats) == (2, 3, [1, 0, 2])


def test_episode_score_is_the_mean_of_the_policys_agents():
    records = [record(0, ["strong", "strong", "weak"], [1, 3, 0]), record(1, ["strong", "weak", "weak"], [4, 0, 0])]
    assert entry(summarize(POLICIES, records, expected_episodes=2), "strong").reward.mean == 3.0


def test_statuses_timeouts_and_invalid_actions_aggregate():
    late = {"status": AgentStatus.TIMEOUT, "timeouts": 3, "latency": Latency(count=2, p50_ms=3.0, p99_ms=9.0)}
    records = [
        record(0, ["strong", "weak"], [1, 0], a0=late, a1={"invalid_actions": 2}),
        record(1, ["strong", "weak"], [1, 0], a0={"timeouts": 1}, a1={"status": AgentStatus.CRASHED}),
    ]
    summary = summarize(POLICIES, records, expected_episodes=2)
    strong, weak = entry(summary, "strong"), entry(summary, "weak")
    assert (strong.statuses, strong.timeouts, strong.invalid_actions) == ({"ok": 1, "timeout": 1}, 4, 0)
    assert (weak.statuses, weak.timeouts, weak.invalid_actions) == ({"ok": 1, "crashed": 1}, 0, 2)
    assert (strong.latency.p50_ms, strong.latency.p99_ms) == (2.0, 7.0)


def test_the_bootstrap_is_deterministic_and_brackets_the_mean():
    first, second = (summarize(POLICIES, tournament(), expected_episodes=20) for _ in range(2))
    assert first == second
    for policy in first.policies:
        low, high = policy.reward.ci95
        assert low < policy.reward.mean < high


def test_one_episode_gives_a_point_interval():
    summary = summarize(POLICIES, [record(0, ["strong", "weak"], [2.5, 1.0])], expected_episodes=1)
    assert entry(summary, "strong").reward.model_dump() == {"mean": 2.5, "ci95": (2.5, 2.5)}


def test_head_to_head_is_antisymmetric():
    records = [
        record(0, ["strong", "weak"], [2, 1]),
        record(1, ["strong", "weak"], [1, 1]),
        record(2, ["strong", "weak"], [0, 1]),
        record(3, ["strong", "weak"], [3, 0]),
    ]
    h2h = summarize(POLICIES, records, expected_episodes=4).head_to_head
    assert h2h["strong"]["weak"].model_dump() == {"episodes": 4, "wins": 2, "draws": 1, "losses": 1, "margin": 0.75}
    assert h2h["weak"]["strong"].model_dump() == {"episodes": 4, "wins": 1, "draws": 1, "losses": 2, "margin": -0.75}


def test_scores_equal_within_tolerance_tie_in_rating_and_head_to_head():
    summary = summarize(POLICIES, [record(0, ["strong", "strong", "weak"], [0.1, 0.2, 0.15])], expected_episodes=1)
    strong, weak = entry(summary, "strong"), entry(summary, "weak")
    assert strong.reward.mean != weak.reward.mean
    assert summary.head_to_head["strong"]["weak"].draws == 1
    assert strong.rating == weak.rating


def test_policies_that_never_met_have_no_head_to_head_and_a_single_policy_none():
    policies = [*POLICIES, ("idle", PolicySpec(class_path="idle"))]
    summary = summarize(policies, tournament(4), expected_episodes=4)
    assert set(summary.head_to_head) == {"strong", "weak"}
    assert summary.ranking[-1] == "idle" and entry(summary, "idle").reward is None
    alone = summarize(POLICIES[:1], [record(0, ["strong", "strong"], [1, 2])], expected_episodes=1)
    assert alone.head_to_head == {} and alone.ranking == ["strong"]


def test_record_order_does_not_matter():
    records = tournament()
    shuffled = records[:]
    random.Random(3).shuffle(shuffled)
    in_order = summarize(POLICIES, records, expected_episodes=20)
    assert summarize(POLICIES, shuffled, expected_episodes=20).model_dump_json() == in_order.model_dump_json()


def test_env_secrets_are_redacted():
    secret = PolicySpec(class_path="strong", env={"API_KEY": "hunter2"})
    summary = summarize([("strong", secret), POLICIES[1]], tournament(2), expected_episodes=2)
    assert entry(summary, "strong").spec.env == {"API_KEY": "***"}
    assert "hunter2" not in summary.model_dump_json()


def test_json_round_trips():
    summary = summarize(POLICIES, tournament(), expected_episodes=22, incomplete={21: "cell launch failed"})
    assert Summary.model_validate_json(summary.model_dump_json(indent=2)) == summary


def test_records_of_another_tournament_are_refused():
    with pytest.raises(ValueError, match="unknown policies"):
        summarize(POLICIES, [record(0, ["strong", "other"], [1, 0])], expected_episodes=1)
    with pytest.raises(ValueError, match="more than one record"):
        summarize(POLICIES, [record(0, ["strong", "weak"], [1, 0])] * 2, expected_episodes=2)


def shown_at(width: int, summary: Summary) -> str:
    console = Console(record=True, width=width)
    show_summary(console, summary)
    return console.export_text()


def test_the_terminal_shows_the_leaderboard_head_to_head_and_notes():
    summary = summarize(POLICIES, tournament(), expected_episodes=23, incomplete={20: "cell launch failed"})
    text = shown_at(200, summary)
    assert "what they did" not in text  # the synthetic agents report no stats
    assert "strong" in text and f"{entry(summary, 'strong').reward.mean:.3g}" in text
    assert "20-0-0" in text and "0-0-20" in text
    assert "incomplete: 20 (cell launch failed)" in text and "not played: 2" in text
    assert "ranked by forfeit:" in text
    assert "head-to-head" not in shown_at(200, summarize(POLICIES[:1], [], expected_episodes=0))


def test_at_80_columns_no_number_is_split_and_long_names_are_given_in_full():
    long = "a-policy-with-a-name-far-too-long-for-any-table:checkpoint-0001.npy"
    policies = [("strong", PolicySpec(class_path="strong")), (long, PolicySpec(class_path="weak"))]
    records = [
        record(
            e,
            ["strong", long],
            [1234.5678 + e, 0.001234 * e],
            a1={
                "status": AgentStatus.CRASHED,
                "failure": Failure(step=4, phase="step", kind="Crashed", message="cell killed by SIGSEGV " * 5),
            },
        )
        for e in range(6)
    ]
    summary = summarize(policies, records, expected_episodes=6)
    text = shown_at(80, summary)
    full_names = [line for line in text.splitlines() if " = " in line]  # left whole for the terminal to wrap
    assert max(len(line.rstrip()) for line in text.splitlines() if line not in full_names) <= 80
    rows = [line for line in text.splitlines() if line.lstrip().startswith(("1 ", "2 "))]
    assert len(rows) == 2  # one line per policy: nothing wrapped
    low, high = entry(summary, "strong").reward.ci95
    assert f"[{number(low)}, {number(high)}]" in rows[0] and "1,2" in rows[0]  # whole numbers, no exponent
    assert f"= {long}" in text  # the shortened name, then its full name
    squeezed = "".join(text.split())
    assert "".join(("cell killed by SIGSEGV " * 5).split()) in squeezed  # the whole message, wrapped not cut
