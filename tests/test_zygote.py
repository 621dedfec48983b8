"""The zygote: started once, reused across episodes, forks every cell, holds no policy, dies cleanly."""

import re
from pathlib import Path

import psutil
import pytest
from conftest import policy
from policybox.settings import EpisodeSettings
from typer.testing import CliRunner

from policybox.cli import app
from policybox.episode import run_episode
from policybox.host.zygote import Zygote, ZygoteError
from policybox.results import AgentStatus
from policybox.spec import PolicySpec, parse_policy_arg


def test_one_zygote_serves_many_episodes(tmp_path):
    specs = [parse_policy_arg(policy("stateful.py:Stateful")), PolicySpec(class_path="random")]
    with Zygote() as zygote:
        zygote_process = psutil.Process(zygote._popen.pid)
        digests = []
        for seed in (3, 3, 4):
            result = run_episode(specs, EpisodeSettings(steps=30, seed=seed), tmp_path / str(seed), zygote=zygote)
            assert [a.status for a in result.agents] == [AgentStatus.OK] * 2
            digests.append([a.action_digest for a in result.agents])
            assert zygote_process.is_running() and zygote_process.children() == []  # its cells are gone
        assert digests[0] == digests[1] != digests[2]
        # Policy code is imported by each cell, never by the zygote (else a forked cell would find the
        # module already imported and print nothing).
        marker = parse_policy_arg(policy("import_marker.py:Marker"))
        result = run_episode([marker] * 2, EpisodeSettings(steps=3), tmp_path / "marker", zygote=zygote)
        for agent in result.agents:
            importers = re.findall(r"policy module imported in pid (\d+)", Path(agent.log_path).read_text())
            assert len(importers) == 1 and int(importers[0]) != zygote_process.pid
    assert not zygote_process.is_running() or zygote_process.status() == psutil.STATUS_ZOMBIE


def test_cells_are_forked_by_the_zygote(tmp_path):
    spec = parse_policy_arg(policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.2"}))
    with Zygote() as zygote:
        import threading

        seen: list[int] = []
        done = threading.Event()

        def watch():
            while not done.is_set() and not seen:
                seen.extend(child.pid for child in psutil.Process(zygote._popen.pid).children())

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            run_episode([spec] * 2, EpisodeSettings(steps=5), tmp_path, zygote=zygote)
        finally:
            done.set()
            watcher.join()
        assert seen, "no cell was a child of the zygote"


def test_missing_preload_module_is_a_clear_error():
    with pytest.raises(ZygoteError, match="preload failed: ModuleNotFoundError: No module named 'no_such_mod"):
        Zygote(("no_such_module_for_policybox",))
    run = CliRunner().invoke(app, ["run", "-p", "random", "--steps", "5", "--preload", "no_such_module_for_policybox"])
    assert run.exit_code == 2
    assert "preload failed" in run.output


def test_a_dead_zygote_fails_the_episode_and_leaves_no_cgroup(tmp_path):
    import os

    from policybox.host.cgroup import kill_cgroup_parent

    zygote = Zygote()
    zygote.close()
    with pytest.raises(ZygoteError, match="the zygote cannot fork a cell"):
        run_episode([PolicySpec(class_path="random")], EpisodeSettings(steps=3), tmp_path, zygote=zygote)
    parent = kill_cgroup_parent()
    if parent is not None:
        assert list(parent.glob(f"policybox-{os.getpid()}-*")) == []
