"""Memory pressure: cells are the kernel's first victims, and all the cells of a host share one budget.

Each attack is played through the real CLI (``python -m policybox run|evaluate``, a process of its
own) at the default sandbox level inside a small budget -- never by exhausting the machine -- and
judged from outside: the result file, the exit code and output, ``/proc/<pid>/oom_score_adj``, the
budget's cgroup files while it plays, and what is left in /sys/fs/cgroup afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from conftest import policy
from helpers.processes import alive, wait_for

from policybox.host import budget as host_budget
from policybox.host import sandbox as host_sandbox
from policybox.host.budget import LIMIT_FILES, NAME
from policybox.host.cgroup import PREFIX, v1_parent, v2_memory_parent
from policybox.process_names import WORKER
from policybox.results import AgentStatus, EpisodeResult
from policybox.sandbox import Layer

MIB = 1024 * 1024
STEPS = 150
PACER = policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.02"})  # 150 steps: 3 s to look from outside
WELL_BEHAVED = [policy("seeded_random.py:SeededRandom"), policy("stateful.py:Stateful"), PACER]
LIMITS = ["--act-timeout-ms", "2000", "--time-bank-ms", "30000"]  # room for a loaded machine


def hog(mib: int, step_mib: int = 25) -> str:
    return policy("memory.py:MemoryHog", **{"kw.mib": str(mib), "kw.step_mib": str(step_mib)})


def specs(*policies: str) -> list[str]:
    return [arg for spec in policies for arg in ("-p", spec)]


@pytest.fixture
def budget_version() -> str:
    """The cgroup hierarchy a budget is made in here (v2 where cells' v2 cgroups can limit memory)."""
    if os.geteuid() != 0:
        pytest.skip("a budget cgroup needs root")
    if v2_memory_parent() is not None:
        return "v2"
    if v1_parent("memory") is not None:
        return "v1"
    pytest.skip("no memory cgroup can be made here")


def budget_folder(host_pid: int, version: str) -> Path:
    parent = v2_memory_parent() if version == "v2" else v1_parent("memory")
    assert parent is not None
    return parent / f"{PREFIX}{host_pid}-{NAME}"


def limit_of(folder: Path, version: str) -> int:
    return int((folder / LIMIT_FILES[version]).read_text())


def cells_in(folder: Path) -> list[Path]:
    try:
        return [path for path in folder.iterdir() if path.is_dir() and path.name.startswith(PREFIX)]
    except OSError:
        return []


def start(*args: str) -> subprocess.Popen[str]:
    """``policybox ARGS`` as a command of its own, as a user runs it."""
    command = [sys.executable, "-m", "policybox", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(host: subprocess.Popen[str]) -> str:
    output, _ = host.communicate(timeout=300)
    return output


def left_behind(pid: int) -> list[str]:
    """Every cgroup folder a policybox process ``pid`` made (cells' and budget) still on the machine."""
    found = []
    for root, folders, _ in os.walk("/sys/fs/cgroup"):
        found += [os.path.join(root, name) for name in folders if name.startswith(f"{PREFIX}{pid}-")]
    return found


def run_in_budget(tmp_path: Path, version: str, *args: str) -> tuple[EpisodeResult, int, str, Path]:
    """``policybox run ARGS`` in a 500 MiB budget: (result file, exit code, output, budget folder), having
    checked the budget's limit while it played and that none of its cgroups are left."""
    out, logs = tmp_path / "result.json", tmp_path / "logs"
    host = start("run", *args, "--memory-budget-mb", "500", "--out", str(out), "--log-dir", str(logs), *LIMITS)
    try:
        folder = budget_folder(host.pid, version)
        assert wait_for(lambda: len(cells_in(folder)) > 0, timeout=120), "no cell came into the budget"
        assert limit_of(folder, version) == 500 * MIB
    finally:
        output = finish(host)
    assert host.returncode in (0, 1), output
    assert not folder.exists() and left_behind(host.pid) == []
    return EpisodeResult.model_validate_json(out.read_text()), host.returncode, output, folder


def test_cells_that_together_ask_for_more_than_the_budget_are_killed_and_the_others_play_on(tmp_path, budget_version):
    hogs = [hog(250)] * 3  # each alone fits in the 500 MiB budget, all three together do not
    result, code, output, folder = run_in_budget(
        tmp_path, budget_version, "-n", "6", *specs(*hogs, *WELL_BEHAVED), "--steps", str(STEPS)
    )
    assert code == 1 and result.steps == STEPS and result.aborted is None
    budget = result.memory_budget
    assert (budget.mib, budget.enforced_by, budget.cgroup) == (500, f"cgroup {budget_version}", str(folder))
    assert [agent.memory.mib for agent in result.agents] == [500] * 6  # min(--memory-limit-mb 4096, budget)
    hogs, others = result.agents[:3], result.agents[3:]
    killed = [agent for agent in hogs if agent.status == AgentStatus.CRASHED]
    assert killed, "three hogs of 250 MiB all held their memory inside a 500 MiB budget"
    for agent in killed:
        assert (agent.failure.kind, agent.failure.signal) == ("OutOfMemory", "SIGKILL")
        assert "out of memory: the host's memory budget of 500 MiB for all its cells was reached" in (
            agent.failure.message
        )
    assert all(agent.status == AgentStatus.OK for agent in hogs if agent not in killed)
    assert [(agent.status, agent.latency.count) for agent in others] == [(AgentStatus.OK, STEPS)] * 3
    assert "OutOfMemory" in output


def test_a_cell_over_its_own_limit_is_killed_naming_its_own_limit(tmp_path, budget_version):
    result, code, output, _ = run_in_budget(
        tmp_path, budget_version, "-n", "2", *specs(hog(250), PACER), "--steps", str(STEPS), "--memory-limit-mb", "100"
    )
    attacker, victim = result.agents
    assert code == 1 and [agent.memory.mib for agent in result.agents] == [100, 100]
    assert (attacker.status, attacker.failure.kind) == (AgentStatus.CRASHED, "OutOfMemory")
    assert "out of memory: its own memory limit of 100 MiB was reached" in attacker.failure.message
    assert "holding 100 MiB" not in Path(attacker.log_path).read_text()
    assert (victim.status, victim.latency.count) == (AgentStatus.OK, STEPS)


def test_evaluate_shares_one_budget_across_its_workers(tmp_path, budget_version):
    """Two workers, an episode each at once, a hog of 300 MiB in each: either fits alone in the 500 MiB
    budget, not both -- so a hog is killed only because the budget is one. Each hog holds its 300 MiB
    for about 14 s: far longer than one worker may start after the other."""
    out = tmp_path / "board"
    pacer = policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.05"})  # 300 steps: 15 s of episode
    args = [*specs(hog(300, step_mib=20), pacer), "--episodes", "2", "--agents", "2", "--workers", "2"]
    args += ["--cells", "per-agent"]  # a cgroup per cell
    driver = start("evaluate", *args, "--steps", "300", "--memory-budget-mb", "500", "--out", str(out), *LIMITS)
    try:
        folder = budget_folder(driver.pid, budget_version)
        owners = lambda: {path.name.split("-")[1] for path in cells_in(folder)}  # noqa: E731
        assert wait_for(lambda: len(owners()) == 2, timeout=120), "the two workers' cells never shared the budget"
        workers = {str(p.pid) for p in psutil.Process(driver.pid).children(recursive=True) if p.name() == WORKER}
        assert owners() <= workers and limit_of(folder, budget_version) == 500 * MIB
        own = Path("/proc/self/oom_score_adj").read_text()
        assert {Path(f"/proc/{pid}/oom_score_adj").read_text() for pid in [driver.pid, *map(int, workers)]} == {own}
    finally:
        output = finish(driver)
    assert driver.returncode == 0, output
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    shared = {"mib": 500, "enforced_by": f"cgroup {budget_version}", "cgroup": str(folder)}
    assert [record["memory_budget"] for record in records] == [shared, shared]
    hogs = [agent for record in records for agent in record["agents"] if agent["policy"] == "MemoryHog"]
    assert any(agent["failure"] and agent["failure"]["kind"] == "OutOfMemory" for agent in hogs)
    assert all(agent["status"] == "ok" for record in records for agent in record["agents"] if agent not in hogs)
    assert not folder.exists() and left_behind(driver.pid) == []
    assert all(left_behind(int(pid)) == [] for pid in workers)


@pytest.mark.parametrize("launcher", ["zygote", "spawn"])
def test_every_cell_and_its_children_are_the_first_victims_and_cannot_change_that(tmp_path, launcher):
    """oom_score_adj 1000 in every cell and in the child it starts, read from the host's side while it
    plays; the host and the zygote keep theirs; the policy's attempts to lower it are refused."""
    logs = tmp_path / "logs"
    attacker = policy("memory.py:LowerOomScore")
    args = [*specs(attacker, PACER), "-n", "2", "--steps", str(STEPS), "--launcher", launcher, "--log-dir", str(logs)]
    host = start("run", *args)
    try:
        log = logs / "agent-0.log"
        assert wait_for(lambda: "ATTACK-DONE" in _text(log), timeout=120), _text(log)
        child = psutil.Process(int(_text(log).split("child ")[1].split()[0]))
        assert wait_for(lambda: child.cmdline() == ["sleep", "600"])  # the shell has tried, then exec'd
        cells = lambda: [p.pid for p in psutil.Process(host.pid).children(True) if p.uids().real != 0]  # noqa: E731
        assert wait_for(lambda: len(cells()) == 3)  # two cells (switched to their uids) and the attacker's child
        assert child.pid in cells()
        machinery = [host.pid, *(p.pid for p in psutil.Process(host.pid).children() if p.uids().real == 0)]
        adj = {pid: Path(f"/proc/{pid}/oom_score_adj").read_text().strip() for pid in [*machinery, *cells()]}
        own = Path("/proc/self/oom_score_adj").read_text().strip()
        assert {adj[pid] for pid in cells()} == {"1000"}
        assert {adj[pid] for pid in machinery} == {own}  # the host (and the zygote) keep theirs
    finally:
        output = finish(host)
    assert host.returncode == 0, output
    text = _text(log)
    for attempt in ("write 0", "write -1000", "write 0 when dumpable", "write -1000 when dumpable"):
        assert f"{attempt}: refused PermissionError" in text
    assert text.count("cannot create /proc/self/oom_score_adj") == 2  # the child shell's two writes
    assert "own oom_score_adj 1000" in text
    assert not alive(child)


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def test_the_default_budget_is_a_share_of_the_machine_and_bounds_every_cell(play):
    result = play(["noop"], agents=2, steps=2)
    budget = result.memory_budget
    total = psutil.virtual_memory().total // MIB
    assert 0 < budget.mib <= total * host_budget.DEFAULT_SHARE
    assert [agent.memory.mib for agent in result.agents] == [min(4096, budget.mib)] * 2


def test_where_no_budget_cgroup_can_be_made_each_cell_gets_its_share(play, monkeypatch):
    """No memory cgroup at all: the budget is divided among the cells at once, as address-space limits."""
    monkeypatch.setattr(host_budget, "_budget", None)  # this process's budget is made again, here
    monkeypatch.setattr(host_budget, "v1_parent", lambda controller: None)
    monkeypatch.setattr(host_budget, "v2_memory_parent", lambda: None)
    real = host_sandbox.new_limit_cgroup
    monkeypatch.setattr(
        host_sandbox,
        "new_limit_cgroup",
        lambda controller, *a: None if controller == "memory" else real(controller, *a),
    )
    from policybox.limits import Limits

    # Never touched: an allocation past the address-space limit fails at once.
    hungry = policy("memory.py:MemoryHog", **{"kw.mib": "3000", "kw.step_mib": "3000"})
    result = play([hungry, PACER], agents=4, steps=5, limits=Limits(memory_budget_mb=8000))
    assert result.memory_budget.model_dump() == {
        "mib": 8000,
        "enforced_by": "divided: at most 2000 MiB for each of 4 cells (approximate)",
        "cgroup": None,
    }
    for agent in result.agents:
        assert agent.memory.model_dump() == {"mib": 2000, "enforced_by": "address space (approximate)"}
        assert agent.sandbox[Layer.MEMORY] == "active: address-space limit 2000 MiB (approximate)"
    hogs, pacers = result.agents[0::2], result.agents[1::2]
    assert [(agent.status, agent.failure.kind) for agent in hogs] == [(AgentStatus.ERROR, "MemoryError")] * 2
    assert all(agent.status == AgentStatus.OK for agent in pacers)


def test_each_cell_has_a_cgroup_of_its_own_inside_the_budget(tmp_path, budget_version):
    """While cells play, the budget's cgroup holds each cell's own cgroup, limited as asked."""
    out, logs = tmp_path / "result.json", tmp_path / "logs"
    args = [*specs(PACER), "-n", "3", "--steps", str(STEPS), "--memory-limit-mb", "300", "--memory-budget-mb", "700"]
    args += ["--cells", "per-agent"]  # a cgroup per cell
    host = start("run", *args, "--out", str(out), "--log-dir", str(logs))
    try:
        folder = budget_folder(host.pid, budget_version)
        limited = lambda: {limit_of(cell, budget_version) for cell in cells_in(folder)} == {300 * MIB}  # noqa: E731
        # A cell's cgroup is made, then limited, then given the cell: wait for all three to be limited.
        assert wait_for(lambda: len(cells_in(folder)) == 3 and limited(), timeout=120)
        assert limit_of(folder, budget_version) == 700 * MIB
        assert {limit_of(cell, budget_version) for cell in cells_in(folder)} == {300 * MIB}
    finally:
        output = finish(host)
    assert host.returncode == 0, output
    assert left_behind(host.pid) == []


def test_a_budget_left_by_a_killed_host_is_swept_with_its_cells_by_the_next_host(tmp_path, budget_version):
    host = start(
        "run", *specs(PACER), "-n", "2", "--steps", "2000", "--cells", "per-agent", "--log-dir", str(tmp_path / "logs")
    )
    try:
        folder = budget_folder(host.pid, budget_version)
        assert wait_for(lambda: len(cells_in(folder)) == 2, timeout=120)
        host.kill()  # SIGKILL: no cleanup of its own; its cells die with it
        # Not reaped yet, so its pid still exists: no other host (the other test worker's) sweeps its
        # cgroups before the check sees them left behind, cells' cgroups inside.
        assert wait_for(lambda: not alive(psutil.Process(host.pid)), timeout=30)
        assert len(cells_in(folder)) == 2 and str(folder) in left_behind(host.pid)
    finally:
        host.kill()
        finish(host)
    after = start("run", "-p", "noop", "-n", "1", "--steps", "2", "--log-dir", str(tmp_path / "after"))
    output = finish(after)
    assert after.returncode == 0, output
    assert left_behind(host.pid) == [] and left_behind(after.pid) == []
