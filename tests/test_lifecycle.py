"""Cells start together and are gone after every episode, however it ends."""

import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import descendants, kept_pids, policy
from helpers.processes import alive, wait_for

from policybox.host.process_pool import ProcessPool
from policybox.results import AgentStatus


def cells_of(host_pid: int) -> list[psutil.Process]:
    """Cells (and the zygote) serving the given host, wherever they are in the process tree: a
    spawned cell and the zygote name the host's pid; a forked cell carries the zygote's command line.
    Not this worker's kept zygotes, which serve every test (``conftest.kept_pids``; their cells are)."""
    kept = kept_pids()
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if {"policybox.cell", "policybox.cell.zygote"} & set(cmdline) and str(host_pid) in cmdline:
            found.append(proc)
    return [proc for proc in found if proc.pid not in kept]


def test_ten_episodes_leave_no_process_and_no_fd(play):
    me = psutil.Process()
    play(["random"], agents=2, steps=5)  # warm up lazy imports that keep files open
    gc.collect()  # files an earlier test left to the collector (a database engine's pool) close now, not mid-test
    fds = me.num_fds()
    for seed in range(10):
        result = play(["random", policy("faults.py:ExitInStep")], agents=2, steps=12, seed=seed)
        assert [a.status for a in result.agents] == [AgentStatus.OK, AgentStatus.CRASHED]
        assert descendants() == []
    gc.collect()
    assert me.num_fds() <= fds  # a file left open per episode would be 10 more


def test_exception_in_the_host_mid_episode_stops_every_cell(play, monkeypatch):
    """A bug of the host's own (not the game's: that is a game_fault) ends the episode by raising,
    and no cell outlives it."""
    real_act = ProcessPool.act

    def failing_act(self, step, observations):
        if step == 3:
            raise RuntimeError("host bug")
        return real_act(self, step, observations)

    monkeypatch.setattr(ProcessPool, "act", failing_act)
    with pytest.raises(RuntimeError, match="host bug"):
        play(["random"], agents=3, steps=10)
    assert cells_of(os.getpid()) == []


@pytest.fixture(params=["spawn", "zygote"])
def background_host(request, tmp_path):
    """A ``policybox run`` host in a long episode: 2 cells stuck inside step(), deaf to their sockets,
    and a slow but healthy one that keeps the host waiting every step."""
    command = [
        sys.executable,
        "-m",
        "policybox",
        "run",
        "-p",
        policy("faults.py:SleepInStep"),
        "-p",
        policy("sleepy.py:Sleepy"),
        "-n",
        "3",
        "--steps",
        "2000",
        "--act-timeout-ms",
        "1000",
        "--launcher",
        request.param,
        "--log-dir",
        str(tmp_path / "logs"),
        "--out",
        str(tmp_path / "r.json"),
    ]
    host = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # MettaGrid's default, forked seats: SleepInStep's loader and its 2 seats, Sleepy's cell (and the zygote).
        processes = 4 if request.param == "spawn" else 5
        assert wait_for(lambda: len(cells_of(host.pid)) == processes), "cells did not start"
        time.sleep(2.0)  # past step 10: every cell is asleep in step()
        yield host
    finally:
        host.kill()
        host.communicate()


def test_ctrl_c_stops_every_cell(background_host, tmp_path):
    cells = cells_of(background_host.pid)
    background_host.send_signal(signal.SIGINT)
    _, stderr = background_host.communicate(timeout=30)
    assert background_host.returncode == 130
    assert "interrupted" in stderr
    assert not (tmp_path / "r.json").exists()
    assert not any(alive(cell) for cell in cells)


def test_cells_die_when_the_host_is_killed(background_host):
    cells = cells_of(background_host.pid)
    background_host.kill()
    background_host.wait()
    assert wait_for(lambda: not any(alive(cell) for cell in cells), timeout=10)


def test_scratch_folders_of_a_dead_host_are_swept(play, tmp_path):
    import tempfile

    dead_pid = 2**22 + 12345  # above pid_max: no such process can exist
    stale = Path(tempfile.gettempdir()) / f"policybox-scratch-{dead_pid}-abc"
    (tmp_path / "stale" / "agent-0").mkdir(parents=True)  # built aside, moved in at once: other hosts sweep too
    (tmp_path / "stale").rename(stale)
    result = play(["noop"], agents=1, steps=2)
    assert result.agents[0].status == AgentStatus.OK
    assert not stale.exists()
