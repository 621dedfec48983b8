"""The zygote: started once, reused across episodes, forks every cell, holds no policy, dies cleanly."""

import psutil
import pytest
from conftest import policy
from typer.testing import CliRunner

from policybox.cli import app
from policybox.episode import EpisodeSettings, run_episode
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
        # The zygote never imported policy code: it still has no module of the policy file.
        maps = "".join(m.path for m in zygote_process.memory_maps())
        assert "stateful" not in maps
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
