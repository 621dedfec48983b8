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
    # The checkpoint is really loaded: the same policy with its initial weights acts otherwise.
    untrained = digests(play(["lstm"], **settings))
    assert all(a != b for a, b in zip(untrained, first, strict=True))


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
    settings = {"steps": 2, "launcher": launcher, "preload": preload}
    default = max(1, len(os.sched_getaffinity(0)) // 4)
    result = play([report], agents=4, **settings)
    assert [agent.threads for agent in result.agents] == [default] * 4
    assert _reports(result) == [f"torch={default} omp={default} blas=[{default}]"] * 4

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


def _watch(command: list[str]) -> dict[int, tuple[str, bool]]:
    """Run ``command``; every 50 ms, note each of its processes (by pid) and whether it maps libtorch."""
    seen: dict[int, tuple[str, bool]] = {}
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
                if maps is not None:
                    role = "host" if member.pid == process.pid else "zygote" if member.ppid() == process.pid else "cell"
                    seen[member.pid] = (role, maps or seen.get(member.pid, ("", False))[1])
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
    roles = sorted(role for role, _ in seen.values())
    assert roles.count("cell") == 3 and roles.count("zygote") == 1 and roles.count("host") == 1, roles
    assert not any(maps for _, maps in seen.values()), seen

    seen = _watch([*run, "--steps", "1500", "--preload", "torch"])
    assert {role for role, maps in seen.values() if maps} == {"zygote", "cell"}, seen
    assert json.loads((tmp_path / "result.json").read_text())["agents"][0]["status"] == "ok"


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
