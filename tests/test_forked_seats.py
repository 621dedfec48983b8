"""Forked seats (``--cells forked``): a loader per submission builds its policy once, then forks a process
per seat. Judged from outside the cells: the agents' results, the game's action digests, /proc, psutil and
the group's log (which the host writes), never a cell's word about itself.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import policy

from policybox.limits import Limits
from policybox.results import AgentStatus, EpisodeResult
from policybox.settings import EpisodeSettings

STEPS = 30
SEATS = policy("forked.py:Seats")
PACED = policy("forked.py:Seats", **{"kw.pace_s": "0.2"})
SEAT_LINE = re.compile(r"seat (\d+) pid (\d+) ppid (\d+) uid (\d+) draw (\d+)")


def digests(result: EpisodeResult) -> list[str]:
    return [agent.action_digest for agent in result.agents]


def seat_lines(result: EpisodeResult) -> dict[int, tuple[int, int, int, int]]:
    """What each seat printed when its agent was built, by agent id: (pid, ppid, uid, draw)."""
    lines: dict[int, tuple[int, int, int, int]] = {}
    for log in {agent.log_path for agent in result.agents if agent.log_path}:
        for match in SEAT_LINE.finditer(Path(log).read_text()):
            seat, *rest = map(int, match.groups())
            lines[seat] = (rest[0], rest[1], rest[2], rest[3])
    return lines


def ok(result: EpisodeResult, agents: list[int], turns: int = STEPS) -> bool:
    return all(result.agents[i].status == AgentStatus.OK and result.agents[i].turns == turns for i in agents)


def test_forked_seats_play_as_inline_as_cells_of_their_own_and_as_the_same_run_twice(play):
    forked = play([SEATS], agents=4, steps=STEPS, seed=5, cells="forked")
    seats = seat_lines(forked)  # read before the next episode writes its logs over these
    apart = play([SEATS], agents=4, steps=STEPS, seed=5, cells="per-agent")
    apart_draws = [seat_lines(apart)[i][3] for i in range(4)]
    again = play([SEATS], agents=4, steps=STEPS, seed=5, cells="forked", launcher="spawn")
    inline = play([SEATS], agents=4, steps=STEPS, seed=5, cells="forked", mode="inline")
    assert forked.cells == "forked" and ok(forked, [0, 1, 2, 3])
    # Each seat draws from its own stream -- the one a cell of its own would have -- so the actions of
    # the whole game are those of a cell per agent, and of inline mode.
    assert digests(forked) == digests(again) == digests(inline) == digests(apart)
    assert sorted(seats) == [0, 1, 2, 3]
    assert len({pid for pid, *_ in seats.values()}) == 4  # a process each ...
    assert len({ppid for _, ppid, *_ in seats.values()}) == 1  # ... forked from one loader
    assert len({draw for *_, draw in seats.values()}) == 4  # each with its own random stream
    assert [seats[i][3] for i in range(4)] == apart_draws


def test_a_submission_with_more_seats_than_a_loader_forks_has_several_loaders(tmp_path):
    from policybox.host.cell_groups import MAX_FORKED_SEATS, cell_groups
    from policybox.host.record import AgentRecord
    from policybox.spec import PolicySpec

    spec = PolicySpec(class_path="random")
    seats = 2 * MAX_FORKED_SEATS + 1
    records = [AgentRecord(i, spec, "team", 1, tmp_path / f"agent-{i}.log") for i in range(seats)]
    groups = cell_groups(records, [{}] * seats, "forked")
    assert [len(group.records) for group in groups] == [MAX_FORKED_SEATS, MAX_FORKED_SEATS, 1]
    assert [record.agent_id for group in groups for record in group.records] == list(range(seats))
    assert len({record.log_path for record in records}) == seats  # a log each


def test_mettagrid_defaults_to_forked_and_pettingzoo_to_a_cell_per_agent(play):
    assert EpisodeSettings().cells_applied == "forked"
    assert EpisodeSettings(env="pettingzoo:mpe2.simple_spread_v3:parallel_env").cells_applied == "per-agent"
    assert EpisodeSettings(cells="per-agent").cells_applied == "per-agent"  # asked: always wins
    assert "cells" not in EpisodeSettings().model_dump()  # stored settings keep reading as the game's default
    result = play(["random"], agents=2, steps=3)
    assert result.cells == "forked"


def test_a_pettingzoo_game_asked_for_forked_seats(play):
    spread = "pettingzoo:mpe2.simple_spread_v3:parallel_env"
    process = play(["random"], agents=None, env=spread, steps=25, seed=2, cells="forked")
    inline = play(["random"], agents=None, env=spread, steps=25, seed=2, cells="forked", mode="inline")
    assert process.cells == "forked"
    assert digests(process) == digests(inline)
    assert all(agent.status == AgentStatus.OK and agent.turns == 25 for agent in process.agents)


@pytest.mark.parametrize(
    ("how", "status", "message"),
    [
        ("raise", AgentStatus.ERROR, "seat 2 gave up at step 3"),
        ("exit", AgentStatus.CRASHED, "cell exited with code 7"),
        ("renamed_exit", AgentStatus.CRASHED, "cell exited with code 7"),  # its name parsed as stat's fields
        ("kill", AgentStatus.CRASHED, "cell killed by SIGKILL"),
    ],
)
def test_one_seat_that_fails_fails_alone(play, how, status, message):
    failing = policy("forked.py:Seats", **{"kw.seat": "2", "kw.at": "3", "kw.how": how})
    result = play([failing, "random"], agents=4, steps=STEPS, cells="forked")
    failed = result.agents[2]  # the failing policy plays seats 0 and 2
    assert failed.status == status and message in failed.failure.message, failed.failure
    assert ok(result, [0, 1, 3])


def test_a_loader_that_ends_before_forking_fails_its_seats_with_how_it_ended(play):
    ending = policy("forked.py:Seats", **{"kw.how": "exit_loader"})
    result = play([ending, "random"], agents=6, steps=5, cells="forked")
    for agent in result.agents[0::2]:
        assert agent.status == AgentStatus.CRASHED and agent.failure.phase == "init"
        assert "cell exited with code 5" in agent.failure.message, agent.failure
    assert ok(result, [1, 3, 5], turns=5)


def test_a_seat_that_hangs_is_disabled_alone_and_nothing_survives(play):
    hanging = policy("forked.py:Seats", **{"kw.seat": "0", "kw.at": "2", "kw.how": "hang", "kw.pace_s": "0.2"})
    limits = Limits(act_timeout_ms=1500, time_bank_ms=300)  # ten steps of 0.2 s outlast its deadline and bank
    result = play([hanging], agents=3, steps=10, cells="forked", limits=limits)
    assert result.agents[0].status == AgentStatus.DISABLED
    assert ok(result, [1, 2], turns=10)
    for pid, *_ in seat_lines(result).values():  # a zombie at most, until the machine's init reaps it
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def _seat_memory(logs: Path, stop: threading.Event, seen: list[tuple[int, int]]) -> None:
    """Until ``stop``: the seats' summed Pss and Rss (kB, /proc/PID/smaps_rollup), once all four have
    printed their pids to their logs in ``logs`` -- the largest Rss seen."""
    while not stop.is_set():
        text = "".join(log.read_text() for log in logs.glob("agent-*.log"))
        pids = [int(pid) for pid in re.findall(r"seat \d+ pid (\d+)", text)]
        if len(pids) == 4:
            try:
                sums = [0, 0]
                for pid in pids:
                    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
                    for index, field in enumerate(("Pss", "Rss")):
                        sums[index] += int(re.search(rf"^{field}:\s+(\d+)", rollup, re.M).group(1))
                if not seen or sums[1] > seen[0][1]:
                    seen[:] = [(sums[0], sums[1])]
            except (OSError, AttributeError):
                pass
        time.sleep(0.05)


def test_forked_seats_share_one_copy_of_what_the_loader_built(play, tmp_path):
    """64 MiB of random bytes built in the constructor: in each seat's Rss, but only once in their Pss."""
    paced = policy("forked.py:Seats", **{"kw.pace_s": "0.05"})
    stop, seen = threading.Event(), []
    watcher = threading.Thread(target=_seat_memory, args=(tmp_path / "logs", stop, seen))
    watcher.start()
    try:
        result = play([paced], agents=4, steps=40, cells="forked")
    finally:
        stop.set()
        watcher.join()
    assert ok(result, [0, 1, 2, 3], turns=40)
    pss, rss = seen[0]
    assert rss > 4 * 64 * 1024  # each seat maps the whole array ...
    assert pss < rss / 2  # ... and they share its pages (alone, Pss would equal Rss)


def test_a_loader_that_answers_every_seat_itself_harms_only_its_own_seats(play):
    """The worst entrant: no fork; it answers READY on every seat's socket with another team's pid and
    then the zygote's, plays five steps and falls silent. Its seats are disabled and 'killed': nothing
    the host did to them may reach the pid claimed -- the other team plays every step, the zygote
    forks the next episode."""
    for claim in ("other", "zygote"):
        hostile = policy("forked.py:Hostile", **{"kw.claim": claim})
        limits = Limits(act_timeout_ms=1000, time_bank_ms=300)  # 12 steps of 0.2 s outlast both
        result = play([hostile, PACED], agents=4, steps=12, cells="forked", limits=limits)
        for agent in result.agents[0::2]:
            assert agent.status == AgentStatus.DISABLED and agent.failure.kind == "TimeBank", agent.failure
        assert ok(result, [1, 3], turns=12), [agent.failure for agent in result.agents]
    assert ok(play([SEATS], agents=2, steps=3, cells="forked"), [0, 1], turns=3)


def test_a_loader_that_ignores_its_sockets_closing_does_not_outlive_the_episode(play):
    lingering = policy("forked.py:Hostile", **{"kw.claim": "zygote", "kw.linger": "1", "kw.stop": "2"})
    limits = Limits(act_timeout_ms=500, time_bank_ms=200)
    result = play([lingering], agents=2, steps=6, cells="forked", limits=limits)
    pid = int(re.search(r"hostile loader pid (\d+)", Path(result.agents[0].log_path).read_text()).group(1))
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_one_teams_seats_cannot_signal_trace_or_read_another_teams_forked_seats(play):
    prober = policy("forked.py:Prober")
    paced = policy("forked.py:Seats", **{"kw.pace_s": "0.02"})
    result = play([prober, paced], agents=4, steps=STEPS, cells="forked")
    assert ok(result, [1, 3])  # judged by B's result: every seat played every step
    probes = Path(result.agents[0].log_path).read_text() + Path(result.agents[2].log_path).read_text()
    theirs = [pid for pid, *_ in seat_lines(result).values()]
    assert all(f"probe {what} {pid} failed" in probes for what in ("kill", "ptrace", "read") for pid in theirs), probes
    assert " worked" not in probes, probes


def test_a_seat_forked_after_its_loader_ran_torch_steps_with_its_thread_budget(play):
    torch_seats = policy("forked.py:TorchSeats")
    limits = Limits(act_timeout_ms=5000)
    process = play([torch_seats], agents=2, steps=8, cells="forked", threads_per_cell=2, limits=limits)
    inline = play([torch_seats], agents=2, steps=8, cells="forked", threads_per_cell=2, mode="inline")
    assert ok(process, [0, 1], turns=8), [agent.failure for agent in process.agents]
    assert digests(process) == digests(inline)
    assert "threads 2" in Path(process.agents[0].log_path).read_text()
