"""The core property: process mode gives exactly the results of inline mode, and a seed replays."""

import pytest
from conftest import policy

RANDOM = "mettagrid.policy.random_agent.RandomMultiAgentPolicy"
LINEUP = [policy("seeded_random.py:SeededRandom"), policy("stateful.py:Stateful"), RANDOM]


def outcome(result):
    """Everything that must match between two runs of the same episode."""
    return (
        result.steps,
        result.game_stats,
        [(a.policy, a.reward, a.stats, a.status, a.action_digest) for a in result.agents],
    )


@pytest.fixture(scope="module")
def inline_run(tmp_path_factory):
    from policybox.settings import EpisodeSettings

    from policybox.episode import assign_policies, run_episode
    from policybox.spec import parse_policy_arg

    specs = assign_policies([parse_policy_arg(p) for p in LINEUP], 6)
    return run_episode(specs, EpisodeSettings(steps=200, seed=11, mode="inline"), tmp_path_factory.mktemp("l"))


@pytest.mark.parametrize("launcher", ["zygote", "spawn"])
def test_process_mode_equals_inline_mode(play, inline_run, launcher):
    process_run = play(LINEUP, agents=6, steps=200, seed=11, mode="process", launcher=launcher)
    assert process_run.mode == "process" and inline_run.mode == "inline"
    assert outcome(process_run) == outcome(inline_run)
    assert process_run.steps == 200
    # The episode was not trivial: agents moved, and policies of one kind still differ per agent.
    assert any(key.startswith("action.move") for key in process_run.agents[0].stats)
    assert len({a.action_digest for a in process_run.agents}) == 6


def test_same_seed_replays_map_included(play, inline_run):
    again = play(LINEUP, agents=6, steps=200, seed=11, mode="inline")
    assert outcome(again) == outcome(inline_run)
    assert again.env["map_seed"] == 11
    assert again.env["map_digest"] == inline_run.env["map_digest"]


def test_other_seed_gives_another_episode(play, inline_run):
    other = play(LINEUP, agents=6, steps=200, seed=12, mode="inline")
    assert other.env["map_digest"] != inline_run.env["map_digest"]
    assert [a.action_digest for a in other.agents] != [a.action_digest for a in inline_run.agents]
