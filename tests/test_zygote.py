"""The zygote: started once, reused across episodes, forks every cell, holds no policy, dies cleanly."""

import re
from pathlib import Path

import psutil
import pytest
from conftest import policy
from typer.testing import CliRunner

from policybox.cli import app
from policybox.episode import run_episode
from policybox.host.zygote import Zygote, ZygoteError
from policybox.results import AgentStatus
from policybox.settings import EpisodeSettings
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


def zygotes_here() -> set[int]:
    """The zygote processes this process has started, as the kernel lists them."""
    return {p.pid for p in psutil.Process().children() if "policybox.cell.zygote" in " ".join(p.cmdline())}


def test_kept_zygotes_serve_every_episode_in_their_block_and_end_with_it(tmp_path):
    """Within kept_zygotes(), episodes given no zygote -- a MettaGrid one and a PettingZoo one, twice
    each -- fork from one zygote per preload, the same process each time; when the block ends both are
    gone. Judged from outside: the zygote processes this process has, during and after."""
    from policybox.host.zygote import kept_zygotes

    before = zygotes_here()
    games = [{}, {"env": "pettingzoo:pettingzoo.classic.rps_v2:env"}]
    seen = []
    with kept_zygotes() as kept:
        for turn in range(2):
            for game in games:
                logs = tmp_path / f"{turn}-{len(game)}"
                result = run_episode(["random"], EpisodeSettings(steps=5, **game), logs, agents=None if game else 2)
                assert {a.status for a in result.agents} == {AgentStatus.OK}
                seen.append(zygotes_here() - before)
        both = {zygote._popen.pid for zygote in kept.values()}
        assert len(both) == 2 and seen[0] < both and seen[1:] == [both] * 3  # the second game's started once
    assert zygotes_here() == before


def test_zygotes_kept_for_an_owner_outlive_the_block_for_the_next(tmp_path):
    """Given ``keep`` (its owner's, as the test suite keeps one per worker), a block uses and fills it and
    leaves its zygotes running: the next block's episode forks from the same process."""
    from policybox.host.zygote import kept_zygotes

    keep: dict = {}
    try:
        for turn in range(2):
            with kept_zygotes(keep):
                run_episode(["random"], EpisodeSettings(steps=3), tmp_path / str(turn), agents=2)
            (zygote,) = keep.values()
            assert zygote.alive and zygote._popen.pid in zygotes_here()
            if turn == 0:
                first = zygote
        assert zygote is first
    finally:
        for zygote in keep.values():
            zygote.close()


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
