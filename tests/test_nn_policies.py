"""Neural-network policies: MettaGrid's own LSTM with a real checkpoint, exactly reproducible, each cell
within its thread budget, and torch loaded only where it is asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import POLICIES, policy

ARENA_STEPS = 40


@pytest.fixture(scope="session")
def lstm_checkpoint(tmp_path_factory):
    """``make(n)``: a checkpoint of MettaGrid's LSTM policy for the n-agent arena, written by its own
    ``save_policy_data`` (weights drawn with torch seeded 0)."""
    import torch
    from mettagrid.policy.lstm import LSTMPolicy
    from mettagrid.policy.policy_env_interface import PolicyEnvInterface

    from policybox.envs.mettagrid import make_config

    folder = tmp_path_factory.mktemp("checkpoints")

    def make(agents: int) -> Path:
        path = folder / f"lstm-{agents}.pt"
        if not path.exists():
            torch.manual_seed(0)
            config = make_config("arena", agents, ARENA_STEPS, 0)
            LSTMPolicy(PolicyEnvInterface.from_mg_cfg(config)).save_policy_data(str(path))
        return path

    return make


def digests(result) -> list[str]:
    assert [agent.status for agent in result.agents] == ["ok"] * len(result.agents), [
        agent.failure for agent in result.agents
    ]
    return [agent.action_digest for agent in result.agents]


@pytest.mark.parametrize("agents, preload", [(4, []), (24, ["torch"])])
def test_lstm_is_reproducible_inline_equals_process_and_agents_do_not_share_a_stream(
    play, lstm_checkpoint, agents, preload
):
    """MettaGrid's LSTM samples its actions from torch's generator. Without --preload the policy imports
    torch itself (seeded once it appears); with it, the zygote has (seeded before policy code)."""
    lstm = f"lstm,data={lstm_checkpoint(agents)}"
    # A deadline no loaded machine misses: a cell's first forward pass (torch warming up) can take
    # seconds beside a busy second test worker, and a late step would change the actions, not the test.
    limits = {"act_timeout_ms": 10_000}
    settings = {"agents": agents, "steps": ARENA_STEPS, "seed": 3, "preload": preload, "limits": limits}
    first = digests(play([lstm], **settings))
    assert digests(play([lstm], **settings)) == first
    assert digests(play([lstm], mode="inline", **settings)) == first
    assert len(set(first)) == agents, "two agents played the same action sequence"
    if agents > 4:
        return  # that the checkpoint is loaded does not depend on the seats: checked with four
    # The checkpoint is really loaded: the same policy with its initial weights acts otherwise.
    untrained = digests(play(["lstm"], **settings))
    assert all(a != b for a, b in zip(untrained, first, strict=True))


def test_a_batched_lstm_in_cells_per_policy_is_reproducible_and_inline_equals_process(play, lstm_checkpoint):
    """MettaGrid's LSTM stepped as one batch per cell (benchmarks/batched_lstm.py: one forward pass for all
    the seats of the policy) samples from torch's generator too: its batched actions are pinned across
    runs and modes, and each seat still gets its own action sequence."""
    batched = f"{Path(__file__).parents[1] / 'benchmarks' / 'batched_lstm.py'}:BatchedLSTMPolicy"
    spec = f"{batched},data={lstm_checkpoint(8)}"
    settings = {"agents": 8, "steps": ARENA_STEPS, "seed": 3, "limits": {"act_timeout_ms": 10_000}}
    first = play([spec], cells="per-policy", **settings)
    assert len({agent.log_path for agent in first.agents}) == 1  # one cell for the eight seats
    assert digests(play([spec], cells="per-policy", **settings)) == digests(first)
    assert digests(play([spec], cells="per-policy", mode="inline", **settings)) == digests(first)
    assert len(set(digests(first))) == 8, "two agents played the same action sequence"


def test_torch_sampling_policy_equals_inline_on_both_launchers(play):
    torch_sampler = policy("torch_sampler.py:TorchSampler")
    settings = {"agents": 4, "steps": 30, "seed": 11}
    inline = digests(play([torch_sampler], mode="inline", **settings))
    assert digests(play([torch_sampler], launcher="spawn", **settings)) == inline
    assert digests(play([torch_sampler], preload=["torch"], **settings)) == inline
    assert len(set(inline)) == 4
    assert digests(play([torch_sampler], mode="inline", agents=4, steps=30, seed=12)) != inline


def _reports(result) -> list[str]:
    return [Path(agent.log_path).read_text().strip() for agent in result.agents]


@pytest.mark.parametrize("launcher, preload", [("zygote", ["torch"]), ("zygote", []), ("spawn", [])])
def test_each_cell_gets_its_thread_budget(play, launcher, preload):
    """The budget reaches torch, OpenMP and numpy's BLAS whether they were loaded before the fork (the
    zygote's preload) or after; the default shares this machine's cores among the cells."""
    report = policy("threads_report.py:ThreadsReport")
    settings = {"steps": 2, "launcher": launcher, "preload": preload, "cells": "per-agent"}  # a report per cell
    default = max(1, len(os.sched_getaffinity(0)) // 2)  # two cells
    result = play([report], agents=2, **settings)
    assert [agent.threads for agent in result.agents] == [default] * 2
    assert _reports(result) == [f"torch={default} omp={default} blas=[{default}]"] * 2
    if launcher == "spawn":
        return  # who sets the budget is the host's rule, checked on the zygote: a spawned cell imports torch anew

    result = play(
        [report, policy("threads_report.py:ThreadsReport", **{"env.OMP_NUM_THREADS": "3"})],
        agents=2,
        threads_per_cell=2,
        **settings,
    )
    assert [agent.threads for agent in result.agents] == [2, 3]
    assert _reports(result) == ["torch=2 omp=2 blas=[2]", "torch=3 omp=3 blas=[3]"]


def _maps_torch(pid: int) -> bool | None:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None


def _watch(command: list[str]) -> dict[int, tuple[str, bool, int]]:
    """Run ``command``; every 50 ms, note each of its processes (by pid): its role, whether it maps
    libtorch, and its parent's pid (a cell's: the zygote it was forked from)."""
    seen: dict[int, tuple[str, bool, int]] = {}
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    host = psutil.Process(process.pid)
    try:
        while process.poll() is None:
            try:
                family = [host, *host.children(recursive=True)]
            except psutil.Error:
                break
            for member in family:
                maps = _maps_torch(member.pid)
                try:
                    parent = member.ppid()
                except psutil.Error:  # it ended meanwhile (a cell at the episode's end)
                    continue
                if maps is not None:
                    role = "host" if member.pid == process.pid else "zygote" if parent == process.pid else "cell"
                    seen[member.pid] = (role, maps or seen.get(member.pid, ("", False, 0))[1], parent)
            time.sleep(0.05)
    finally:
        _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return seen


def test_a_random_run_never_loads_torch_and_preload_torch_does(tmp_path):
    """Judged from /proc/<pid>/maps of the run's host, zygote and cells while it plays."""
    run = [
        sys.executable,
        "-m",
        "policybox",
        "run",
        "-p",
        "random",
        "--agents",
        "3",
        "--steps",
        "6000",
        "--log-dir",
        str(tmp_path / "logs"),
        "--out",
        str(tmp_path / "result.json"),
    ]
    seen = _watch(run)
    roles = sorted(role for role, _, _ in seen.values())
    # MettaGrid's default, forked seats: a loader and its 3 seats.
    assert roles.count("cell") == 4 and roles.count("zygote") == 1 and roles.count("host") == 1, roles
    assert not any(maps for _, maps, _ in seen.values()), seen

    seen = _watch([*run, "--steps", "1500", "--preload", "torch"])
    assert {role for role, maps, _ in seen.values() if maps} == {"zygote", "cell"}, seen
    assert json.loads((tmp_path / "result.json").read_text())["agents"][0]["status"] == "ok"


def test_a_torch_policy_forks_from_a_zygote_with_torch_unasked_and_the_others_do_not(tmp_path):
    """No --preload: the torch policy's cells are forked from a second zygote, which has torch mapped;
    the random policy's from the first, which has not, and they never map it. Judged from /proc."""
    sampler = str(POLICIES / "torch_sampler.py") + ":TorchSampler"
    run = [sys.executable, "-m", "policybox", "run", "-p", "random", "-p", sampler, "--agents", "4"]
    run += ["--cells", "per-agent"]  # every cell a child of its zygote
    seen = _watch([*run, "--steps", "3000", "--log-dir", str(tmp_path / "logs"), "--out", str(tmp_path / "r.json")])
    zygotes = {pid: maps for pid, (role, maps, _) in seen.items() if role == "zygote"}
    assert sorted(zygotes.values()) == [False, True], seen
    [torch_zygote] = [pid for pid, maps in zygotes.items() if maps]
    cells = [(maps, parent == torch_zygote) for role, maps, parent in seen.values() if role == "cell"]
    assert sorted(cells) == [(False, False), (False, False), (True, True), (True, True)], seen
    result = json.loads((tmp_path / "r.json").read_text())
    assert [agent["status"] for agent in result["agents"]] == ["ok"] * 4


def _torch_zygotes() -> int:
    """How many zygotes with torch this process has running."""
    return sum(
        "torch" in child.cmdline()
        for child in psutil.Process().children()
        if "policybox.cell.zygote" in child.cmdline()
    )


def test_a_policy_whose_cell_imported_torch_starts_with_it_next_time(tmp_path):
    """Its module never names torch (a helper imports it): the first cell imports torch itself and its
    READY says so; this process's next episode forks its cells from the zygote with torch."""
    from policybox.episode import run_episode
    from policybox.host.zygote import Zygote
    from policybox.settings import EpisodeSettings, zygote_preload

    spec = policy("torch_via_helper.py:TorchViaHelper")
    settings = EpisodeSettings(steps=3, seed=5, cells="per-agent")  # each cell prints what it found
    before = _torch_zygotes()  # another test's, in this worker
    with Zygote(zygote_preload(settings)) as zygote:
        first = run_episode([spec], settings, tmp_path / "first", agents=2, zygote=zygote)
        assert _torch_zygotes() == before
        second = run_episode([spec], settings, tmp_path / "second", agents=2, zygote=zygote)
        assert _torch_zygotes() == before + 1
    for result, preloaded in ((first, False), (second, True)):
        assert [agent.status for agent in result.agents] == ["ok", "ok"], [a.failure for a in result.agents]
        said = [Path(agent.log_path).read_text() for agent in result.agents]
        expected = f"torch loaded before the policy's module: {preloaded}; torch 2.13.0 with 1 threads"
        assert all(expected in text for text in said), said
    assert _torch_zygotes() == before  # closed with the zygote


def test_which_policies_need_torch_is_read_from_source_never_imported(tmp_path):
    """A dotted class in an entrant's package is found on disk: the package's __init__, which would
    plant a file if it ran, never runs on the host. A FIFO in place of a policy file is refused, not
    read (tests/test_hostile_paths.py plays the other files a module may not be)."""
    from policybox.envs.mettagrid import resolve_shorthand
    from policybox.errors import SpecError
    from policybox.host.torch_use import needs_torch
    from policybox.spec import PolicySpec

    package = tmp_path / "trap"
    package.mkdir()
    (package / "__init__.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').write('ran')\n")
    (package / "bot.py").write_text("import torch.nn as nn\n")
    (package / "plain.py").write_text("import numpy\n")
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    cases = {
        "lstm": True,
        "random": False,
        str(POLICIES / "torch_sampler.py") + ":TorchSampler": True,
        str(POLICIES / "torch_via_helper.py") + ":TorchViaHelper": False,  # learned from its first cell
        str(POLICIES / "seeded_random.py") + ":SeededRandom": False,
    }
    for class_path, expected in cases.items():  # named apart from the specs other tests' cells taught
        assert needs_torch(PolicySpec(class_path=class_path, name="read"), resolve_shorthand) is expected, class_path
    with pytest.raises(SpecError, match=r"^fifo.py \(the module of Policy\) is not a regular file$"):
        needs_torch(PolicySpec(class_path=f"{fifo}:Policy"), resolve_shorthand)
    assert needs_torch(PolicySpec(class_path="trap.bot.Bot", python_path=[str(tmp_path)]), resolve_shorthand)
    assert not needs_torch(PolicySpec(class_path="trap.plain.Bot", python_path=[str(tmp_path)]), resolve_shorthand)
    assert not (tmp_path / "imported").exists()


def test_a_shorthand_missing_a_dependency_says_which(play):
    """`lstm` needs einops; a policy path shadowing einops with a package that is not there plays the
    part of a machine without it."""
    result = play(["lstm,path=" + str(POLICIES / "without_einops")], agents=2, steps=2)
    failure = result.agents[0].failure
    assert result.agents[0].status == "error"
    assert failure.message.startswith(
        "policy shorthand 'lstm' (mettagrid.policy.lstm.LSTMPolicy) needs 'einops': No module named 'einops'"
    ), failure.message
    assert "torch extra" in failure.message
