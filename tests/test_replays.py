"""Replays: the episode as MettaGrid's own replay writer records it, loadable by MettaGrid's tools."""

from collections import Counter

import pytest
from conftest import policy, policybox
from helpers.replays import digest_of, load_replay

from policybox.envs import ConfigError

POLICIES = ["random", policy("stateful.py:Stateful")]


def actions_per_step(replay: dict) -> dict[int, list[int]]:
    """Each agent's action id at every step, expanded from the replay's [step, value] change lists."""
    steps = replay["max_steps"]
    actions = {}
    for obj in replay["objects"]:
        if "agent_id" not in obj:
            continue
        changes = obj["action_id"] if isinstance(obj["action_id"], list) else [[0, obj["action_id"]]]
        ends = [start for start, _ in changes[1:]] + [steps]
        actions[obj["agent_id"]] = [
            value for (start, value), end in zip(changes, ends, strict=True) for _ in range(start, end)
        ]
    return actions


def outcome(result) -> list:
    return [(a.action_digest, a.reward, a.stats) for a in result.agents] + [result.game_stats, result.steps]


def test_replay_loads_and_matches_the_episode(play, tmp_path):
    path = tmp_path / "r.json.z"
    result = play(POLICIES, agents=4, steps=30, seed=3, replay=str(path))
    replay = load_replay(path)
    assert (replay["num_agents"], replay["max_steps"], result.steps) == (4, 30, 30)
    assert replay["infos"]["episode_rewards"] == [a.reward for a in result.agents]
    actions = actions_per_step(replay)
    assert sorted(actions) == [0, 1, 2, 3]
    names = replay["action_names"]
    for agent in result.agents:
        played = actions[agent.agent_id]
        # The same actions, step by step, as the game received (the action digest folds in each one).
        assert len(played) == 30 and digest_of(played) == agent.action_digest
        counts = Counter(names[a].split("_")[0] for a in played)
        stats = agent.stats
        assert counts["noop"] == stats.get("action.noop.success", 0) + stats.get("action.noop.failed", 0)
        assert counts["move"] == stats.get("action.move.success", 0) + stats.get("action.move.failed", 0)
    agents = {obj["agent_id"]: obj for obj in replay["objects"] if "agent_id" in obj}
    assert [agents[i]["policy_infos"]["policy_name"] for i in range(4)] == ["random", "Stateful"] * 2


def test_recording_does_not_change_the_outcome(play, tmp_path):
    recorded = play(POLICIES, agents=4, steps=30, seed=3, replay=str(tmp_path / "r.json.z"))
    plain = play(POLICIES, agents=4, steps=30, seed=3)
    assert outcome(recorded) == outcome(plain)


def test_an_aborted_episode_is_written_as_far_as_it_was_played(play, tmp_path):
    path = tmp_path / "r.json.z"
    result = play(
        [policy("faults.py:RaiseInStep"), "random"], agents=2, steps=50, on_agent_failure="abort", replay=str(path)
    )
    assert result.aborted and result.steps < 50
    replay = load_replay(path)
    assert replay["max_steps"] == replay["infos"]["attributes"]["steps"] == result.steps
    assert all(len(played) == result.steps for played in actions_per_step(replay).values())


def test_a_replay_into_a_missing_folder_is_refused_before_any_cell_starts(play, tmp_path):
    with pytest.raises(ConfigError, match="replay folder .*missing does not exist"):
        play(["random"], agents=2, replay=str(tmp_path / "missing" / "r.json.z"))
    assert not (tmp_path / "logs").exists()  # made for the agents' logs just before their cells start


def test_cli_writes_the_replay_and_names_it(tmp_path):
    path = tmp_path / "r.json.z"
    run = policybox(
        "run", "-n", "2", "-p", "random", "--steps", "10", "--replay", str(path), "--log-dir", str(tmp_path)
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.rstrip().endswith(f"replay: {path}")
    assert load_replay(path)["max_steps"] == 10


def test_cli_refuses_a_replay_name_mettagrid_would_not_read(tmp_path):
    run = policybox("run", "-p", "random", "--replay", str(tmp_path / "x.txt"), "--log-dir", str(tmp_path))
    assert run.returncode == 2
    assert "does not end in .json.z" in run.stderr
    assert not (tmp_path / "x.txt").exists()
