"""PettingZoo games through policybox: a Parallel game (mpe2's simple_spread) and a turn-based one
(connect four), each with every agent in its own sandboxed cell, equal to inline mode, with real
faults contained, agents leaving the game, the CLI and ``policybox evaluate``."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from conftest import policy, policybox, policybox_process
from typer.testing import CliRunner

from policybox.cli import app
from policybox.league.evaluate.results_folder import evaluate
from policybox.results import AgentStatus, EpisodeResult

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pettingzoo.classic's own warning

SPREAD = "pettingzoo:mpe2.simple_spread_v3:parallel_env"
CONNECT_FOUR = "pettingzoo:pettingzoo.classic.connect_four_v3:env"
STAGGERED = f"pettingzoo:{Path(__file__).parent / 'games' / 'staggered.py'}:parallel_env"
SEEDED = policy("pettingzoo_bots.py:Seeded")
LIMITS = {"act_timeout_ms": 500, "time_bank_ms": 500, "init_timeout_s": 20}


def outcome(result: EpisodeResult) -> list[tuple]:
    return [(a.agent, a.policy, a.reward, a.action_digest, a.latency.count, a.status) for a in result.agents]


@pytest.mark.parametrize("env", [SPREAD, CONNECT_FOUR])
def test_seeded_policies_play_the_same_in_cells_and_inline(env, play):
    """Every agent in its own sandboxed cell gives exactly the inline episode: rewards, every action."""
    cells = play(["random", SEEDED], agents=None, env=env, seed=3, steps=40)
    inline = play(["random", SEEDED], agents=None, env=env, seed=3, steps=40, mode="inline")
    assert outcome(cells) == outcome(inline)
    assert all(a.status == AgentStatus.OK for a in cells.agents)
    assert all(a.sandbox and all(v.startswith("active") for v in a.sandbox.values()) for a in cells.agents)
    assert len({a.action_digest for a in cells.agents}) == len(cells.agents)
    other_seed = play(["random", SEEDED], agents=None, env=env, seed=4, steps=40)
    assert outcome(other_seed) != outcome(cells)


def test_simple_spread_is_a_parallel_game_of_three(play):
    result = play(["random"], agents=None, env=SPREAD, seed=3, steps=40)
    assert [a.agent for a in result.agents] == ["agent_0", "agent_1", "agent_2"]
    assert result.env["api"] == "parallel" and result.env["label"] == "mpe2.simple_spread_v3:parallel_env"
    assert result.steps == 25  # the game truncates at its own max_cycles, before --steps
    assert [a.latency.count for a in result.agents] == [25, 25, 25]  # all act every step
    assert [a.left_at_step for a in result.agents] == [25, 25, 25]


def test_connect_four_agents_act_in_turn_and_the_winner_is_rewarded(play):
    result = play(["random"], agents=None, env=CONNECT_FOUR, seed=3, steps=100)
    first, second = result.agents
    assert (first.agent, second.agent) == ("player_0", "player_1")
    assert result.env["api"] == "aec" and result.steps < 43
    assert first.latency.count + second.latency.count == result.steps  # one agent asked per step
    assert first.latency.count - second.latency.count in (0, 1)
    assert sorted([first.reward, second.reward]) in ([-1.0, 1.0], [0.0, 0.0])


@pytest.mark.parametrize(
    ("bot", "status", "kind"),
    [
        ("CrashAt", AgentStatus.CRASHED, "Crashed"),
        ("HangAt", AgentStatus.TIMEOUT, "Timeout"),
        ("WrongActionAt", AgentStatus.INVALID_ACTION, "InvalidAction"),
    ],
)
def test_a_fault_in_connect_four_is_that_player_s_alone(bot, status, kind, play):
    """A player that crashes, hangs or returns a non-action at its 3rd turn (step 4) plays the
    first legal column from then on (never a move that would end the game for both); the other
    player plays on, asked at every one of its turns."""
    faulty = policy(f"pettingzoo_bots.py:{bot}", **{"kw.at_step": "3"})
    result = play([faulty, SEEDED], agents=None, env=CONNECT_FOUR, seed=3, steps=100, **LIMITS)
    player, other = result.agents
    assert player.status == status or (bot == "HangAt" and player.status == AgentStatus.DISABLED), player.failure
    assert (player.failure.kind, player.failure.step) == (kind, 4)
    assert other.status == AgentStatus.OK and other.latency.count == result.steps // 2
    assert result.aborted is None and result.env["api"] == "aec"
    # The game ended by a connect-four (a reward of +-1), not by an illegal move's penalty for both.
    assert sorted([player.reward, other.reward]) in ([-1.0, 1.0], [0.0, 0.0])


def test_a_crash_in_simple_spread_leaves_the_other_agents_as_they_were(play):
    """Seat 0 plays action 0 twice, then its cell dies of SIGSEGV (step 2) and it plays the fallback
    (0, MPE's "no action") to the end: the game saw the same actions from it as from ``noop``, so
    the other agents' rewards and every action they took equal the run where seat 0 is ``noop``."""
    crash = policy("pettingzoo_bots.py:CrashAt", **{"kw.at_step": "3"})
    reference = play(["noop", SEEDED, SEEDED], agents=None, env=SPREAD, seed=5, steps=25, **LIMITS)
    result = play([crash, SEEDED, SEEDED], agents=None, env=SPREAD, seed=5, steps=25, **LIMITS)
    faulty, *others = result.agents
    assert faulty.status == AgentStatus.CRASHED and faulty.failure.step == 2
    assert "SIGSEGV" in faulty.failure.message
    assert faulty.action_digest != reference.agents[0].action_digest  # it sent its first two itself
    assert [(a.reward, a.action_digest, a.status) for a in others] == [
        (a.reward, a.action_digest, a.status) for a in reference.agents[1:]
    ]


@pytest.mark.alone  # its heartbeats must stop 1.5 s before the episode ends: a wall-clock time
def test_agents_that_leave_the_game_have_their_cells_stopped(play):
    """In a game whose agents leave at steps 2, 5 and 30, the leaving agents' cells stop then: the
    heartbeat their thread writes to the log (read from disk, written by the host) ends there,
    while the last agent plays on for seconds."""
    beat = policy("pettingzoo_bots.py:Heartbeat")
    slow = policy("pettingzoo_bots.py:SlowPlayer", **{"kw.sleep_s": "0.1"})
    started = time.time()
    result = play([beat, beat, slow], agents=None, env=STAGGERED, seed=0, steps=100, **LIMITS)
    ended = time.time()
    assert [a.left_at_step for a in result.agents] == [2, 5, 30]
    assert [a.latency.count for a in result.agents] == [2, 5, 30]
    assert result.steps == 30 and all(a.status == AgentStatus.OK for a in result.agents)
    for agent in result.agents[:2]:
        beats = [float(m) for m in re.findall(r"beat (\d+\.\d+)", Path(agent.log_path).read_text())]
        assert beats and started <= beats[-1] < ended - 1.5  # stopped well before the episode's last 2.5 s


def test_bad_games_and_policies_get_one_clear_error(tmp_path):
    cases = {
        "pettingzoo:mpe2.simple_spread_v3": "is not MODULE:FACTORY",
        "pettingzoo:no_such_game_module:env": "cannot import the PettingZoo game module 'no_such_game_module'",
        "pettingzoo:mpe2.simple_spread_v3:no_factory": "has no factory 'no_factory'",
        "pettingzoo:json:loads": "failed",
    }
    for env, message in cases.items():
        run = CliRunner().invoke(app, ["run", "-p", "random", "--env", env, "--log-dir", str(tmp_path)])
        assert run.exit_code == 2 and message in " ".join(run.output.split()), (env, run.output)
    checks = [
        (["--env", SPREAD, "-n", "4"], "is a game for 3 agents, not 4"),
        (["--env", SPREAD, "--env-kwargs", "[1]"], "must be a JSON object"),
        (["--env", SPREAD, "--env-kwargs", '{"nope": 1}'], "unexpected keyword argument 'nope'"),
        (["--env", "arena", "--env-kwargs", '{"N": 1}'], "--env-kwargs is for PettingZoo games"),
        (["--env", SPREAD, "-p", "lstm"], "unknown policy shorthand 'lstm' for PettingZoo games"),
    ]
    for args, message in checks:
        policies = [] if "-p" in args else ["-p", "random"]
        run = CliRunner().invoke(app, ["run", *policies, *args, "--log-dir", str(tmp_path)])
        assert run.exit_code == 2 and message in " ".join(run.output.split()), (args, run.output)


def test_a_class_that_is_not_a_policy_for_pettingzoo_is_that_agent_s_error(play):
    for spec in (policy("pettingzoo_bots.py:NoAct"), policy("stateful.py:Stateful")):
        result = play([spec, "random"], agents=None, env=CONNECT_FOUR, seed=1, steps=50)
        broken, fine = result.agents
        assert broken.status == AgentStatus.ERROR and "is not a policy for PettingZoo games" in broken.failure.message
        assert fine.status == AgentStatus.OK


def test_policybox_run_on_the_command_line_equals_inline(tmp_path):
    """The issue's own commands: ``policybox run --env pettingzoo:... -p random --seed 3``."""
    for env in (SPREAD, CONNECT_FOUR):
        results = []
        for mode in ("process", "inline"):
            out = tmp_path / f"{mode}.json"
            args = ["run", "--env", env, "-p", "random", "--seed", "3", "--mode", mode]
            args += ["--out", str(out), "--log-dir", str(tmp_path / mode)]
            # Inline mode imports the game into the interpreter that plays: a process of its own, not this one.
            run = policybox_process(*args) if mode == "inline" else policybox(*args)
            assert run.returncode == 0, run.stdout + run.stderr
            results.append(EpisodeResult.model_validate_json(out.read_text()))
        assert outcome(results[0]) == outcome(results[1])
        assert "player_0" in run.stdout or "agent_0" in run.stdout


@pytest.mark.parametrize("env", [SPREAD, CONNECT_FOUR])
def test_evaluate_ranks_policies_on_a_pettingzoo_game(env, tmp_path):
    summary = evaluate(["random", SEEDED], out=tmp_path / "board", episodes=2, steps=30, seed=1, env=env, workers=2)
    assert summary.episodes_done == 2
    assert {row.policy for row in summary.policies} == {"random", "Seeded"}
    records = [json.loads(line) for line in (tmp_path / "board" / "results.jsonl").read_text().splitlines()]
    assert all(record["env"]["family"] == "pettingzoo" for record in records)
    assert sorted(record["episode"] for record in records) == [0, 1]


def test_forged_action_bytes_are_the_forger_s_invalid_actions_and_never_unpickled(play, tmp_path):
    """A player that bypasses its cell's encoder sends the host raw forged bytes, a pickle among
    them: each is an invalid action (the host parses bytes by the schema alone), the player plays
    the first legal column instead, the other player is untouched -- and the pickle's command never
    ran (judged by the file it would have created)."""
    marker = tmp_path / "unpickled"
    forger = policy("pettingzoo_bots.py:ForgedActions", **{"kw.marker": str(marker)})
    result = play([forger, SEEDED], agents=None, env=CONNECT_FOUR, seed=2, steps=100)
    player, other = result.agents
    assert player.status == AgentStatus.INVALID_ACTION and player.invalid_actions == 5
    assert (player.failure.kind, player.failure.step) == ("InvalidAction", 0)
    assert other.status == AgentStatus.OK and other.latency.count == result.steps // 2
    assert sorted([player.reward, other.reward]) in ([-1.0, 1.0], [0.0, 0.0])
    assert not marker.exists()


def test_a_play_limit_counts_the_game_s_own_steps_when_they_are_fewer(play):
    """simple_spread truncates at its own 25 cycles: a share of 0.5 of a 400 ms deadline allows 5 s of
    play, not the 40 s that --steps 200 would; players that spend 0.75 of every deadline are disabled
    (0.1 s to spare a step: a loaded machine once made players of 0.9 miss deadlines instead)."""
    slow = policy("pettingzoo_bots.py:SlowPlayer", **{"kw.sleep_s": "0.3"})
    limits = {"act_timeout_ms": 400, "time_bank_ms": 500, "play_share": 0.5}
    result = play([slow], agents=None, env=SPREAD, steps=200, limits=limits)
    assert result.aborted is not None and result.aborted.startswith("episode time limit reached")
    assert all(a.status == AgentStatus.DISABLED and a.failure.kind == "EpisodeTimeLimit" for a in result.agents)
