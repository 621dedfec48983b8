"""Games that keep their legal moves in the agent's info and raise on an illegal move, and games with
bugs: no entrant can void a match with a bad move, and a game that raises ends its episode with a
written, attributed result -- never a host traceback, never a retry.

The game is ``tests/games/columns.py`` (turn-based, masks in ``info["action_mask"]``, ``step()``
raises ``IllegalMove`` on a full column) and ``tests/games/staggered.py`` (Parallel).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import policy
from typer.testing import CliRunner

from policybox.cli import app
from policybox.league.evaluate.results_folder import evaluate
from policybox.results import AgentStatus, EpisodeRecord, EpisodeResult

GAMES = Path(__file__).parent / "games"
COLUMNS = f"pettingzoo:{GAMES / 'columns.py'}:env"
STAGGERED = f"pettingzoo:{GAMES / 'staggered.py'}:parallel_env"
ONE_COLUMN = policy("pettingzoo_bots.py:OneColumn")
INFO_READER = policy("pettingzoo_bots.py:InfoReader")
SLOTS = 3 * 2  # columns x height: a game played to its end has this many turns


def run_cli(tmp_path: Path, *args: str) -> tuple[int, str, EpisodeResult | None]:
    out = tmp_path / "result.json"
    where = ["--out", str(out), "--log-dir", str(tmp_path / "logs")]
    run = CliRunner().invoke(app, ["run", *args, *where], env={"COLUMNS": "200"})
    return run.exit_code, run.output, EpisodeResult.model_validate_json(out.read_text()) if out.exists() else None


def test_the_mask_in_info_reaches_the_policy_and_only_the_mask(play, tmp_path):
    result = play([INFO_READER, "random"], agents=None, env=COLUMNS, steps=100)
    reader, other = result.agents
    assert (reader.status, other.status, result.steps, result.game_fault) == ("ok", "ok", SLOTS, None)
    # The game's info also holds a turn counter and an object(): neither crosses to the cell.
    assert "info keys: ['action_mask']" in Path(reader.log_path).read_text()


@pytest.mark.parametrize("mask_in", ["info", "observation"])
def test_random_plays_only_legal_moves_wherever_the_game_keeps_the_mask(play, mask_in):
    for seed in range(8):
        result = play(["random", "random"], agents=None, env=COLUMNS, env_kwargs={"mask_in": mask_in}, seed=seed)
        assert result.game_fault is None and result.steps == SLOTS
        assert [(a.status, a.invalid_actions) for a in result.agents] == [("ok", 0), ("ok", 0)]


@pytest.mark.parametrize("mask_in", ["info", "observation"])
def test_an_illegal_move_is_an_invalid_action_the_game_never_sees(play, mask_in):
    """OneColumn plays column 0 every turn: legal twice (its height), then full. Each later turn is its
    invalid action, the fallback (a legal column) is played instead, and the game plays to its end."""
    kwargs = {"mask_in": mask_in}
    result = play([ONE_COLUMN, "noop"], agents=None, env=COLUMNS, env_kwargs=kwargs, steps=100)
    stubborn, other = result.agents
    assert result.game_fault is None and result.aborted is None and result.steps == SLOTS
    assert stubborn.status == AgentStatus.INVALID_ACTION
    assert stubborn.failure.step == 2  # its second turn: noop filled column 0's second slot at step 1
    assert "not legal now" in stubborn.failure.message
    assert stubborn.invalid_actions == 2  # its 2nd and 3rd turns; every invalid action is counted
    assert other.status == AgentStatus.OK


def test_an_illegal_move_in_a_game_without_a_mask_ends_the_episode_blamed_on_the_mover(tmp_path):
    """No mask: the only way the game refuses a full column is by raising. The episode ends there, the
    mover is blamed (status error), the other is untouched, the result is written and the exit code
    is 1 -- no traceback."""
    code, output, result = run_cli(
        tmp_path, "--env", COLUMNS, "--env-kwargs", '{"mask_in": "none"}', "-p", ONE_COLUMN, "-p", "noop"
    )
    assert code == 1 and "Traceback" not in output
    assert "episode aborted: the game raised IllegalMove at step 3 applying agent 0's action" in output
    fault = result.game_fault
    assert (fault.phase, fault.step, fault.kind, fault.agent, fault.blamed) == ("step", 2, "IllegalMove", 0, True)
    assert fault.message == "column 0 is full" and "IllegalMove" in fault.traceback
    stubborn, other = result.agents
    assert (stubborn.status, stubborn.failure.kind, stubborn.failure.step) == ("error", "GameError", 2)
    assert other.status == "ok" and result.steps == 2 and result.aborted == fault.one_line()


def test_a_game_bug_on_a_checked_move_blames_nobody(tmp_path):
    """With a mask the host checked the move: the game raising on it is the game's own bug."""
    code, output, result = run_cli(
        tmp_path, "--env", COLUMNS, "--env-kwargs", '{"raise_at_turn": 4}', "-p", "random", "-p", "random"
    )
    assert code == 1 and "Traceback" not in output
    fault = result.game_fault
    assert (fault.kind, fault.step, fault.agent, fault.blamed) == ("RuntimeError", 3, 1, False)
    assert [agent.status for agent in result.agents] == ["ok", "ok"]


def test_an_observation_that_raises_mid_episode_ends_it_blaming_nobody(play):
    result = play(["random", "random"], agents=None, env=COLUMNS, env_kwargs={"observe_raises_at_turn": 3})
    fault = result.game_fault
    assert (fault.phase, fault.kind, fault.step, fault.agent, fault.blamed) == ("observe", "KeyError", 3, None, False)
    assert result.steps == 3 and [agent.status for agent in result.agents] == ["ok", "ok"]


def test_a_parallel_game_that_raises_while_every_agent_moves_blames_nobody(play):
    result = play(["random"] * 3, agents=None, env=STAGGERED, env_kwargs={"raise_at_step": 2})
    fault = result.game_fault
    assert (fault.phase, fault.step, fault.agent, fault.blamed) == ("step", 1, None, False)
    assert [agent.status for agent in result.agents] == ["ok"] * 3


def test_a_game_that_cannot_be_reset_is_the_users_to_fix(tmp_path):
    code, output, result = run_cli(tmp_path, "--env", COLUMNS, "--env-kwargs", '{"reset_raises": true}', "-p", "noop")
    assert code == 2 and result is None
    assert "could not be started with seed 0: OSError: the board file is missing" in output


@pytest.mark.parametrize("mask_in", ["info", "none"])
def test_inline_equals_process_when_the_game_refuses_or_raises(play, mask_in):
    kwargs = {"mask_in": mask_in}
    results = [
        play([ONE_COLUMN, "random"], agents=None, env=COLUMNS, env_kwargs=kwargs, seed=5, mode=mode)
        for mode in ("process", "inline")
    ]
    process, inline = (
        (r.steps, r.game_fault and r.game_fault.model_dump(exclude={"traceback"}), r.aborted) for r in results
    )
    assert process == inline
    for a, b in zip(results[0].agents, results[1].agents, strict=True):
        assert (a.status, a.reward, a.invalid_actions, a.action_digest) == (
            b.status,
            b.reward,
            b.invalid_actions,
            b.action_digest,
        )


def test_evaluate_counts_a_game_that_raised_as_a_finished_episode(tmp_path):
    """Every episode in which the game raised is recorded once, with its fault; none is retried or
    left incomplete, and each blamed agent is an error in the summary."""
    out = tmp_path / "board"
    summary = evaluate(
        [ONE_COLUMN, "random"], out, episodes=4, env=COLUMNS, env_kwargs={"mask_in": "none"}, steps=50, workers=1
    )
    assert summary.episodes_done == 4 and summary.incomplete == {}
    records = [
        EpisodeRecord.model_validate(json.loads(line)) for line in (out / "results.jsonl").read_text().splitlines()
    ]
    assert sorted(record.episode for record in records) == [0, 1, 2, 3]
    for record in records:  # without a mask, random may be the first to pick a full column
        fault = record.game_fault
        assert fault is not None and fault.kind == "IllegalMove" and fault.blamed
        assert record.agents[fault.agent].status == "error"
    assert sum(entry.statuses.get("error", 0) for entry in summary.policies) == 4


def test_evaluate_stops_with_the_message_when_an_episodes_game_cannot_be_reset(tmp_path):
    """The check before the first episode passes (seed 0); every episode's own seed fails to reset: the
    tournament stops at once, exit 2, naming the seed -- not retried, not left incomplete forever."""
    out = tmp_path / "board"
    args = ["evaluate", "-p", "random", "-p", "noop", "--env", COLUMNS, "--episodes", "3", "--out", str(out)]
    kwargs = '{"reset_raises_unless_seed": 0}'
    run = CliRunner().invoke(app, [*args, "--env-kwargs", kwargs, "--workers", "1"], env={"COLUMNS": "200"})
    assert run.exit_code == 2, run.output
    assert "could not be started with seed" in run.output and "OSError: the board file is missing" in run.output
    assert (out / "results.jsonl").read_text() == ""
