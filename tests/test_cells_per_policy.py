"""Cells per policy (``--cells per-policy``): every seat of one submission in one cell, stepped together.

Judged from outside the cells: the agents' results, the game's action digests and the cells' own logs
(which the host writes), never what a cell says of itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
import zipfile
from pathlib import Path

import psutil
from conftest import POLICIES, policy
from helpers.runs import policybox_run

from policybox.host.uids import UID_BASE
from policybox.limits import Limits
from policybox.results import AgentStatus, EpisodeResult

STEPS = 40
GROUPED, UNGROUPED, RAW = (policy(f"grouped.py:{name}") for name in ("Grouped", "Ungrouped", "RawBuffer"))


def log_lines(result: EpisodeResult, agent_id: int) -> list[str]:
    path = result.agents[agent_id].log_path
    assert path is not None
    return Path(path).read_text().splitlines()


def digests(result: EpisodeResult) -> list[str]:
    return [agent.action_digest for agent in result.agents]


def test_the_seats_of_a_policy_share_one_cell_and_policies_do_not(play):
    first, second = policy("grouped.py:Seats"), policy("grouped.py:Seats", **{"kw.fail_at": "-3"})
    result = play([first, second], agents=6, steps=5, cells="per-policy")
    assert result.cells == "per-policy"
    assert {agent.log_path for agent in result.agents[0::2]} == {result.agents[0].log_path}
    assert {agent.log_path for agent in result.agents[1::2]} == {result.agents[1].log_path}
    cells = {}
    for first_seat in (0, 1):
        seats = [re.fullmatch(r"seat (\d+) pid (\d+) uid (\d+)", line) for line in log_lines(result, first_seat)]
        built = [match.groups() for match in seats if match]
        assert [int(seat) for seat, _, _ in built] == [first_seat, first_seat + 2, first_seat + 4]
        assert len({(pid, uid) for _, pid, uid in built}) == 1  # one process, one user for all its seats
        cells[first_seat] = built[0][1:]
    assert cells[0][0] != cells[1][0] and cells[0][1] != cells[1][1]  # the two submissions: apart
    assert all(agent.status == AgentStatus.OK and agent.turns == 5 for agent in result.agents)


def test_step_group_is_called_when_the_policy_can_and_not_when_it_cannot(play):
    policies = [GROUPED, UNGROUPED, RAW]
    grouped = play(policies, agents=6, steps=STEPS, cells="per-policy", seed=4)
    assert log_lines(grouped, 0) == ["step_group [0, 3]"] * STEPS
    assert log_lines(grouped, 1) == ["step 1", "step 4"] * STEPS
    assert log_lines(grouped, 2) == ["step_batch [2, 5] (6, 500, 3) uint8"] * STEPS
    # Each seat's action is a function of its own observation only: the same game, seat by seat, when
    # each agent plays in a cell of its own and steps alone.
    alone = play(policies, agents=6, steps=STEPS, seed=4, cells="per-agent")
    assert alone.cells == "per-agent" and log_lines(alone, 0) == ["step 0"] * STEPS
    assert digests(grouped) == digests(alone)
    assert len(set(digests(alone))) > 1
    assert all(agent.status == AgentStatus.OK and agent.turns == STEPS for agent in grouped.agents)


def test_inline_equals_process_with_cells_per_policy(play):
    policies = ["random", GROUPED, policy("seeded_random.py:SeededRandom")]
    process = play(policies, agents=6, steps=STEPS, cells="per-policy", seed=9)
    inline = play(policies, agents=6, steps=STEPS, cells="per-policy", seed=9, mode="inline")
    assert inline.cells == "per-policy" and len({agent.log_path for agent in process.agents}) == 3
    assert digests(process) == digests(inline)
    # Grouped, the random policy's two seats draw from one stream: not the game they play apart. So
    # inline, equal to process, grouped its seats too.
    alone = play(policies, agents=6, steps=STEPS, seed=9)
    assert digests(alone)[0::3] != digests(process)[0::3]
    assert [agent.reward for agent in process.agents] == [agent.reward for agent in inline.agents]
    again = play(policies, agents=6, steps=STEPS, cells="per-policy", seed=9)
    assert digests(again) == digests(process)  # a fixed seed: the same actions on every run


def test_a_seat_whose_policy_raises_fails_alone(play):
    failing = policy("grouped.py:Ungrouped", **{"kw.fail_seat": "2", "kw.fail_at": "5"})
    result = play([failing, "random"], agents=6, steps=STEPS, cells="per-policy")
    failed = result.agents[2]
    assert failed.status == AgentStatus.ERROR
    assert (failed.failure.kind, failed.failure.step, failed.turns) == ("RuntimeError", 5, STEPS)
    assert "seat 2 gave up at step 5" in failed.failure.message
    # Three seats a step up to step 5, when seat 2 raised; from then on, its other two only.
    assert log_lines(result, 0)[3 * 6 :] == ["step 0", "step 4"] * (STEPS - 6)
    others = [agent for agent in result.agents if agent.agent_id != 2]
    assert all(agent.status == AgentStatus.OK and agent.failure is None for agent in others)


def test_a_crash_fails_every_seat_of_that_policy_and_no_other(tmp_path):
    crashing = policy("grouped.py:Ungrouped", **{"kw.fail_seat": "-2", "kw.fail_at": "5"})
    args = ["-n", "6", "-p", crashing, "-p", "random", "--steps", str(STEPS), "--cells", "per-policy"]
    result, exit_code, output = policybox_run(tmp_path, *args)
    assert result.cells == "per-policy"
    for agent in result.agents[0::2]:
        assert agent.status == AgentStatus.CRASHED
        assert (agent.failure.kind, agent.failure.step, agent.failure.exit_code) == ("Crashed", 5, 3)
    for agent in result.agents[1::2]:
        assert agent.status == AgentStatus.OK and agent.turns == STEPS and agent.timeouts == 0
    assert exit_code == 1 and "crashed" in output and "process · a cell per policy" in output


def test_a_slow_cell_spends_one_bank_for_all_its_seats(play):
    # The slow cell's first step (4 s) outlasts its deadline and bank together (2.5 s); the pacer's steps
    # (0.2 s) stay far inside their 2 s deadline on a loaded machine (with 0.5 s, a suite run on four
    # workers once stalled one past it).
    slow = policy("grouped.py:SlowGroup", **{"kw.sleep_s": "4"})
    pacer = policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.2"})  # 10 steps last 2 s: the bank runs out
    limits = Limits(act_timeout_ms=2000, time_bank_ms=500)
    result = play([slow, pacer], agents=4, steps=10, cells="per-policy", limits=limits)
    first, _, third, _ = result.agents
    for agent in (first, third):
        assert agent.status == AgentStatus.DISABLED
        assert (agent.failure.kind, agent.failure.step) == ("TimeBank", 0)
    assert first.timeouts == third.timeouts >= 1  # one deadline, missed by both seats together
    for agent in result.agents[1::2]:
        assert agent.status == AgentStatus.OK and agent.timeouts == 0 and agent.turns == 10


def test_a_reply_forged_for_another_seat_fails_only_the_forger(play):
    forger = policy("faults.py:ForgeFrame", **{"kw.forge": "other_seat"})
    result = play([forger, "noop"], agents=4, steps=20, cells="per-policy")
    for agent in result.agents[0::2]:
        assert agent.status == AgentStatus.ERROR
        assert agent.failure.kind == "ProtocolError" and agent.failure.step == 10
        assert "answers agent 99 where agent 0 was asked" in agent.failure.message
    assert all(agent.status == AgentStatus.OK for agent in result.agents[1::2])


def test_a_pettingzoo_game_with_cells_per_policy(play):
    spread = "pettingzoo:mpe2.simple_spread_v3:parallel_env"
    process = play(["random"], agents=None, env=spread, steps=25, seed=2, cells="per-policy")
    inline = play(["random"], agents=None, env=spread, steps=25, seed=2, cells="per-policy", mode="inline")
    assert len({agent.log_path for agent in process.agents}) == 1  # three seats, one cell
    assert digests(process) == digests(inline)
    assert all(agent.status == AgentStatus.OK and agent.turns == 25 for agent in process.agents)


def test_an_evaluation_and_a_ladder_play_with_cells_per_policy(tmp_path):
    from policybox import EpisodeSettings, LadderSettings, evaluate
    from policybox.ladder import Ladder
    from policybox.league.views.rules import rules

    summary = evaluate([GROUPED, "random"], tmp_path / "evaluation", episodes=2, steps=10, cells="per-policy")
    assert summary.episodes_done == 2
    records = [EpisodeResult.model_validate_json(line) for line in (tmp_path / "evaluation" / "results.jsonl").open()]
    assert [record.cells for record in records] == ["per-policy"] * 2
    assert all(len({agent.log_path for agent in record.agents}) == 2 for record in records)  # a cell per policy

    settings = EpisodeSettings(env="arena", steps=10, cells="per-policy")
    with Ladder.create(tmp_path / "cup", LadderSettings(settings=settings, agents=4, placement_matches=0)) as ladder:
        ladder.submit("grouped", GROUPED)
        ladder.submit("seats", policy("grouped.py:Seats"))
        assert ladder.run(matches=1, workers=1).played == 1
        assert rules(ladder).game.cells.startswith("one per version in a match")
        match_logs = sorted((tmp_path / "cup" / "logs").glob("match-*/agent-*.log"))
        assert len(match_logs) == 2  # four seats, two versions: two cells
        assert any("step_group [" in log.read_text() for log in match_logs)
        assert {row.state for row in ladder.standings().rows} == {"active"}


def test_a_batched_step_that_raises_fails_every_seat_it_was_called_for_however_many(play):
    """48 seats' error reports (each ~8 KB) come back in one frame, larger than one seat's frame limit."""
    result = play([policy("grouped.py:RaisingGroup")], agents=48, steps=10, cells="per-policy")
    for agent in result.agents:
        assert agent.status == AgentStatus.ERROR
        assert (agent.failure.kind, agent.failure.step) == ("RuntimeError", 3)
        assert agent.failure.message.startswith("the batch gave up: xxx")


def test_sandboxed_policy_in_mettagrids_rollout_steps_a_group_in_one_cell(tmp_path):
    """MettaGrid's Rollout with one group key steps SandboxedPolicy's agents together; with cells per
    policy they share one cell, which steps them with the inner policy's step_group."""
    from mettagrid.policy.policy_env_interface import PolicyEnvInterface
    from mettagrid.simulator.rollout import Rollout

    from policybox.envs.mettagrid import make_config
    from policybox.mettagrid import SandboxedPolicy

    config = make_config("arena", 4, 20, 5)
    wrapped = SandboxedPolicy(
        PolicyEnvInterface.from_mg_cfg(config), policy=GROUPED, cells="per-policy", log_dir=tmp_path / "logs"
    )
    try:
        agents = [wrapped.agent_policy(i) for i in range(4)]
        Rollout(config, agents, seed=5, policy_group_keys=[0] * 4).run_until_done()
        assert [agent.infos for agent in agents] == [{"policybox_status": "ok"}] * 4
    finally:
        wrapped.close()
    logs = list((tmp_path / "logs").rglob("*.log"))
    assert len(logs) == 1 and logs[0].read_text().splitlines() == ["step_group [0, 1, 2, 3]"] * 20


def test_two_entrants_with_equal_specs_are_two_cells(play):
    """``-p X -p X``: two entrants, however alike their specs: seats alternate between two cells."""
    seats = policy("grouped.py:Seats")
    result = play([seats, seats], agents=4, steps=3, cells="per-policy")
    logs = [agent.log_path for agent in result.agents]
    assert logs[0] == logs[2] and logs[1] == logs[3] and logs[0] != logs[1]


def _cell_uids(stop: threading.Event, most: list[set[int]]) -> None:
    """Until ``stop``: the largest set of cells' leased uids seen at one moment among the processes
    below this one (judged from /proc, not from what a cell says)."""
    while not stop.is_set():
        now = set()
        for process in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if (uid := process.uids().real) >= UID_BASE:
                    now.add(uid)
        if len(now) > len(most[0]):
            most[0] = now
        time.sleep(0.02)


def test_two_teams_that_upload_the_same_bytes_play_in_two_cells_with_two_uids(tmp_path):
    """Grouping is by submission, never by content: the same zip from two teams is two versions, and a
    match between them, cells per policy, is played by two cells as two users at once (each version's
    validation episode, before it, by one)."""
    from policybox import EpisodeSettings, LadderSettings
    from policybox.ladder import Ladder

    bot = tmp_path / "starter.zip"
    with zipfile.ZipFile(bot, "w") as archive:
        spec = {"class_path": "bot.py:Sleepy", "init_kwargs": {"sleep_s": 0.05}}
        archive.writestr("policy_spec.json", json.dumps(spec))
        archive.writestr("bot.py", (POLICIES / "sleepy.py").read_text())
    settings = EpisodeSettings(env="arena", steps=30, cells="per-policy")
    stop, most = threading.Event(), [set()]
    watcher = threading.Thread(target=_cell_uids, args=(stop, most))
    with Ladder.create(tmp_path / "cup", LadderSettings(settings=settings, agents=4, placement_matches=0)) as ladder:
        for team in ("alpha", "bravo"):
            ladder.token(team)
            ladder.submit(f"{team}bot", str(bot), team=team)
        watcher.start()
        try:
            assert ladder.run(matches=1, workers=1).played == 1
        finally:
            stop.set()
            watcher.join()
    match_logs = sorted((tmp_path / "cup" / "logs").glob("match-*/agent-*.log"))
    assert len(match_logs) == 2  # four seats, two versions: two cells
    assert len(most[0]) == 2, most  # ... as two users at once


def test_the_thread_budget_counts_the_cells_started_when_a_policys_seats_differ(play):
    """One policy's seats whose game gives their cells different setups (an adversary sees less than
    the agents) play in a cell per setup, and the cores are divided among those cells, not among the
    one cell the policy alone would suggest."""
    adversary = "pettingzoo:mpe2.simple_adversary_v3:parallel_env"
    result = play(["random"], agents=None, env=adversary, steps=5, cells="per-policy")
    cells = {agent.log_path for agent in result.agents}
    assert len(result.agents) == 3 and len(cells) == 2  # the adversary's cell, and the two agents'
    assert {agent.threads for agent in result.agents} == {max(1, len(os.sched_getaffinity(0)) // len(cells))}
