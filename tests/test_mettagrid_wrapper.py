"""SandboxedPolicy inside MettaGrid's own tools: its Rollout and run_multi_episode_rollout, unchanged."""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from conftest import POLICIES, descendants
from mettagrid.policy.policy import PolicySpec as MettaGridPolicySpec
from mettagrid.policy.policy_env_interface import PolicyEnvInterface
from mettagrid.runner.rollout import run_multi_episode_rollout
from mettagrid.simulator.rollout import Rollout

from policybox.envs.mettagrid import make_config
from policybox.mettagrid import SandboxedPolicy, initialize_or_load_policy
from policybox.spec import SpecError

WRAPPER = "policybox.mettagrid.SandboxedPolicy"
STATEFUL = f"{POLICIES / 'stateful.py'}:Stateful"
STEPS = 60


def game(agents: int = 4, steps: int = STEPS):
    return make_config("arena", agents, steps, 5)


def in_process(class_path: str) -> MettaGridPolicySpec:
    """The policy as MettaGrid loads it itself: a file path is importable by MettaGrid as module:Class."""
    return MettaGridPolicySpec(class_path=class_path)


def sandboxed(policy: str, **options) -> MettaGridPolicySpec:
    return MettaGridPolicySpec(class_path=WRAPPER, init_kwargs={"policy": policy, **options})


def multi_episode(specs: list[MettaGridPolicySpec], assignments: list[int], episodes: int = 2):
    result, _ = run_multi_episode_rollout(
        policy_specs=specs, assignments=assignments, env_cfg=game(), episodes=episodes, seed=9, max_action_time_ms=10000
    )
    gc.collect()  # the runner drops its policies after each episode: their cells stop with them
    return [(episode.assignments, episode.rewards, episode.stats) for episode in result.episodes]


@pytest.fixture(scope="module", autouse=True)
def stateful_importable():
    """MettaGrid's own loader imports the in-process reference by dotted path."""
    sys.path.insert(0, str(POLICIES))
    yield
    sys.path.remove(str(POLICIES))


def test_run_multi_episode_rollout_gives_identical_results_with_one_class_path_changed():
    plain = multi_episode([in_process("stateful.Stateful"), in_process("noop")], [0, 0, 1, 1])
    boxed = multi_episode([sandboxed(STATEFUL), sandboxed("noop")], [0, 0, 1, 1])
    assert boxed == plain
    assert plain[0][2]["agent"][0] != plain[0][2]["agent"][2]  # the stateful agents really moved
    assert not descendants()


@pytest.mark.parametrize("grouped, mode", [(False, "process"), (True, "process"), (True, "inline")])
def test_rollout_with_and_without_the_wrapper_is_identical(grouped, mode):
    config = game()
    env_info = PolicyEnvInterface.from_mg_cfg(config)
    from stateful import Stateful

    def play(policy) -> list:
        agents = [policy.agent_policy(i) for i in range(4)]
        rollout = Rollout(config, agents, seed=5, policy_group_keys=[0] * 4 if grouped else None)
        rollout.run_until_done()
        return [rollout._sim.episode_rewards.tolist(), rollout._sim.episode_stats["agent"], agents]

    wrapped = SandboxedPolicy(env_info, policy=STATEFUL, mode=mode)
    try:
        *outcome, agents = play(wrapped)
        assert [agent.infos for agent in agents] == [{"policybox_status": "ok"}] * 4
    finally:
        wrapped.close()
    assert outcome == play(Stateful(env_info))[:2]
    assert not descendants()


@pytest.mark.parametrize(
    "fault, status",
    [("RaiseInStep", "error"), ("SegfaultInStep", "crashed"), ("InfiniteLoopInStep", "disabled")],
)
def test_a_failing_inner_policy_plays_noop_and_the_mettagrid_episode_completes(fault, status):
    """Agents 0 and 1 run a policy that fails at its 11th step (step index 10); it plays noop before that,
    and MettaGrid's no-op after, so the whole game equals one where they played noop -- the others acted
    exactly the same."""
    faulty = sandboxed(f"{POLICIES / 'faults.py'}:{fault}", act_timeout_ms=300, time_bank_ms=600)
    mixed = multi_episode([faulty, in_process("stateful.Stateful")], [0, 0, 1, 1], episodes=1)
    reference = multi_episode([in_process("noop"), in_process("stateful.Stateful")], [0, 0, 1, 1], episodes=1)
    assert mixed == reference
    config = game()
    policy = SandboxedPolicy(PolicyEnvInterface.from_mg_cfg(config), **faulty.init_kwargs)
    try:
        agents = [policy.agent_policy(i) for i in range(2)]
        Rollout(config, [*agents, *(policy.agent_policy(i) for i in (2, 3))], seed=5).run_until_done()
        assert agents[0].infos["policybox_status"] == status
        assert "step 11" in agents[0].infos["policybox_failure"]  # counted from 1, as people count
    finally:
        policy.close()


@pytest.mark.alone  # a wall-clock time
def test_grouped_agents_are_asked_at_once(tmp_path):
    """Four agents that each take ~1 s per step: grouped, a step takes ~1 s, not ~4 s."""
    config = game(steps=3)
    policy = SandboxedPolicy(
        PolicyEnvInterface.from_mg_cfg(config),
        policy=f"{POLICIES / 'sleepy.py'}:Sleepy,kw.sleep_s=1",
        act_timeout_ms=5000,
    )
    try:
        agents = [policy.agent_policy(i) for i in range(4)]
        rollout = Rollout(config, agents, seed=5, policy_group_keys=[0] * 4)  # its reset() starts the cells
        started = time.monotonic()
        rollout.run_until_done()
        assert time.monotonic() - started < 3 * 2.5  # one after another would take 3 x 4 s
        assert [agent.infos for agent in agents] == [{"policybox_status": "ok"}] * 4
    finally:
        policy.close()


def cell_pids() -> set[int]:
    """The cells: forked by the zygote, which is this process's child."""
    return {p.pid for p in descendants() if p.ppid() != os.getpid()}


def open_log_folders() -> set[Path]:
    """The temporary log folders (``<tmp>/policybox-mettagrid-*``) this process has an agent's log open
    in while its cells run: its own, not the other test worker's."""
    tmp = Path(tempfile.gettempdir())
    files = [Path(file.path) for file in psutil.Process().open_files()]
    logs = [file.relative_to(tmp) for file in files if file.is_relative_to(tmp)]
    return {tmp / log.parts[0] for log in logs if log.parts[0].startswith("policybox-mettagrid-")}


def test_reset_gives_fresh_cells_and_close_and_garbage_collection_stop_them():
    config = game(steps=5)
    policy = SandboxedPolicy(PolicyEnvInterface.from_mg_cfg(config), policy=STATEFUL)
    agents = [policy.agent_policy(i) for i in range(2)]
    rollout = Rollout(config, [*agents, *(policy.agent_policy(i) for i in (2, 3))], seed=5)
    rollout.step()
    first = cell_pids()
    assert len(first) == 5  # MettaGrid's default, forked seats: a loader and its four seats
    agents[0].reset()  # MettaGrid resets each agent policy before an episode: the first restarts them
    agents[1].reset()
    rollout.step()
    second = cell_pids()
    assert len(second) == 5 and not first & second
    folders = open_log_folders()
    assert len(folders) == 1  # the agents' logs, one folder per episode in it
    policy.close()
    assert not descendants() and not any(folder.exists() for folder in folders)
    rollout.step()  # a closed policy starts again when it is used
    assert len(cell_pids()) == 5
    folders = open_log_folders()
    assert len(folders) == 1
    del policy, agents, rollout
    gc.collect()
    assert not descendants() and not any(folder.exists() for folder in folders)


def test_cells_stop_when_the_interpreter_exits(tmp_path):
    script = f"""
import json, psutil, sys
sys.path.insert(0, {str(POLICIES)!r})
from mettagrid.policy.policy_env_interface import PolicyEnvInterface
from mettagrid.simulator.rollout import Rollout
from policybox.envs.mettagrid import make_config
from policybox.mettagrid import SandboxedPolicy
config = make_config("arena", 2, 5, 5)
policy = SandboxedPolicy(PolicyEnvInterface.from_mg_cfg(config), policy={STATEFUL!r})
Rollout(config, [policy.agent_policy(i) for i in range(2)], seed=5).step()
print(json.dumps([p.pid for p in psutil.Process().children(recursive=True)]))
"""
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr
    pids = json.loads(stdout.strip().splitlines()[-1])
    assert len(pids) >= 3  # the zygote and two cells
    time.sleep(1)
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    # Its memory budget's cgroup went with it: at exit its cells were killed, on v1 too (which has no
    # cgroup.kill), before the cgroup was removed; once they were left running, waiting 2 s each.
    assert not list(Path("/sys/fs/cgroup").glob(f"**/policybox-{run.pid}-budget"))


def test_initialize_or_load_policy_with_sandbox_and_a_checkpoint(tmp_path):
    import numpy

    config = game(agents=2, steps=20)
    env_info = PolicyEnvInterface.from_mg_cfg(config)
    checkpoint = str(tmp_path / "weights.npz")
    numpy.savez(checkpoint, weights=numpy.array([0.0, 3.0, 1.0, 1.0, 1.0]))
    spec = MettaGridPolicySpec(class_path=f"{POLICIES / 'weights.py'}:Weights", data_path=checkpoint)
    policy = initialize_or_load_policy(env_info, spec, sandbox=True, log_dir=tmp_path / "logs")
    try:
        assert isinstance(policy, SandboxedPolicy) and policy.spec.data_path == checkpoint
        agents = [policy.agent_policy(i) for i in range(2)]
        rollout = Rollout(config, agents, seed=5)
        rollout.run_until_done()
        assert [agent.infos for agent in agents] == [{"policybox_status": "ok"}] * 2
        moves = [
            stats.get("action.move.success", 0) + stats.get("action.move.failed", 0)
            for stats in rollout._sim.episode_stats["agent"]
        ]
        assert moves == [20, 20]  # the checkpoint prefers a move: it was loaded in the cells
    finally:
        policy.close()
    # Logs given a folder stay there: the loader of the forked seats printed what it loaded, in its first's.
    assert "loaded weights [0.0, 3.0" in (tmp_path / "logs" / "episode-0" / "agent-0.log").read_text()


def test_bad_input_is_one_clear_error():
    env_info = PolicyEnvInterface.from_mg_cfg(game())
    with pytest.raises(SpecError, match="unknown policy shorthand 'rnadom'"):
        SandboxedPolicy(env_info, policy="rnadom")
    with pytest.raises(SpecError, match="does not exist"):
        SandboxedPolicy(env_info, policy={"class_path": "random", "data_path": "/nowhere/ckpt.pt"})
    with pytest.raises(ValueError, match="steps belong to the episode MettaGrid runs"):
        SandboxedPolicy(env_info, policy="random", steps=10)
    with pytest.raises(ValueError, match="--act-timeout-ms: Input should be greater than 0"):
        SandboxedPolicy(env_info, policy="random", act_timeout_ms=-1)


@pytest.mark.parametrize("attack", ["KillOthers", "Snoop"])
def test_an_attack_from_inside_the_wrapper_stays_in_its_cell(tmp_path, monkeypatch, attack):
    """The wrapper runs inside the user's MettaGrid process, which holds the secrets and the other
    policies: a hostile inner policy tries to kill that process and its neighbours' cells, or read its
    environment. Judged from outside: this process is alive, the victim (another SandboxedPolicy)
    answered every step, the host-written log shows the attempts refused, and the host's own /proc check
    of the attacker's cell found its layers."""
    if os.geteuid() != 0:
        pytest.skip("the uid layer needs root")
    monkeypatch.setenv("POLICYBOX_TEST_SECRET", "hunter2-api-key")
    config = game(agents=2, steps=30)
    env_info = PolicyEnvInterface.from_mg_cfg(config)
    options = {"host_pid": os.getpid(), **({"secret_name": "POLICYBOX_TEST_SECRET"} if attack == "Snoop" else {})}
    spec = ",".join([f"{POLICIES / 'escapes.py'}:{attack}", *(f"kw.{key}={value}" for key, value in options.items())])
    attacker = SandboxedPolicy(env_info, policy=spec, log_dir=tmp_path / "attacker")
    victim = SandboxedPolicy(env_info, policy=f"{POLICIES / 'escapes.py'}:Diarist", log_dir=tmp_path / "victim")
    try:
        agents = [attacker.agent_policy(0), victim.agent_policy(1)]
        Rollout(config, agents, seed=5, policy_group_keys=[0, 1]).run_until_done()
        assert [agent.infos for agent in agents] == [{"policybox_status": "ok"}] * 2
        assert attacker._state.record(0).sandbox["uid"].startswith("active")  # verified from /proc by the host
        assert victim._state.record(1).latency().count == 30
    finally:
        attacker.close()
        victim.close()
    text = (tmp_path / "attacker" / "episode-0" / "agent-0.log").read_text()
    if attack == "KillOthers":
        assert "kill host: refused PermissionError" in text and "killed: []" in text
    else:
        assert "hunter2-api-key" not in text and "own env secret: None" in text
        assert re.search("host environ: refused (PermissionError|FileNotFoundError)", text)
