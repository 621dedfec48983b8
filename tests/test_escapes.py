"""The escape suite: policies that try to break out of their cell. Each attempt must fail (or kill
only that cell, with the cause recorded), the host and the other agent carry on, and the test
proves it from outside the cell. A test is skipped only where `policybox doctor` finds its layer
unavailable on this machine."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest
from conftest import policy
from helpers.doctor import needs

from policybox.host.diagnosis import diagnose
from policybox.results import AgentStatus
from policybox.sandbox import Layer

VICTIM = policy("escapes.py:Diarist")


def log(agent) -> str:
    return Path(agent.log_path).read_text()


def test_connect_to_a_server_on_localhost(play):
    needs(Layer.NETWORK)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        attacker, victim = play(
            [policy("escapes.py:ConnectOut", **{"kw.port": port}), VICTIM], agents=2, steps=20
        ).agents
        with pytest.raises(BlockingIOError):
            server.accept()  # the server saw no connection
    assert "tcp: refused" in log(attacker)
    assert attacker.status == victim.status == AgentStatus.OK


def test_write_a_file_outside_the_scratch_folder(play, tmp_path):
    needs(Layer.LANDLOCK)
    target = tmp_path / "escaped.txt"
    tmp_path.chmod(0o777)  # even a folder anyone may write to
    attacker, _ = play(
        [policy("escapes.py:WriteOutside", **{"kw.path": f'"{target}"'}), VICTIM], agents=2, steps=20
    ).agents
    assert not target.exists()
    # Refused by Landlock where the folder is visible, or not even there in the cell's private /tmp.
    assert re.search(r"write: refused (PermissionError|FileNotFoundError)", log(attacker))


def test_kill_the_host_and_another_cell(play):
    needs(Layer.UID)
    attacker, victim = play(
        [policy("escapes.py:KillOthers", **{"kw.host_pid": os.getpid()}), VICTIM], agents=2, steps=30
    ).agents
    # This test process is the host: it is alive. The victim played every step.
    assert victim.status == AgentStatus.OK and victim.latency.count == 30
    assert "kill host: refused PermissionError" in log(attacker)
    assert "killed: []" in log(attacker) and "('PermissionError'" in log(attacker)


def test_read_the_host_environment_another_cell_and_secrets(play, monkeypatch):
    needs(Layer.UID, Layer.ENVIRONMENT)
    monkeypatch.setenv("POLICYBOX_TEST_SECRET", "hunter2-api-key")
    snoop = policy("escapes.py:Snoop", **{"kw.host_pid": os.getpid(), "kw.secret_name": "POLICYBOX_TEST_SECRET"})
    attacker, victim = play([snoop, VICTIM], agents=2, steps=20).agents
    text = log(attacker)
    assert "hunter2-api-key" not in text and "own env secret: None" in text
    assert "the victim's private diary" not in text
    listing = re.search(r"list scratch root: (.*)", text)[1]
    assert "agent-1" not in listing  # refused, or it lists its own private /tmp: only itself
    for attempt in ("host environ", "other scratch", "other scratch file"):
        # Refused outright, or not even there: the cell's /proc and /tmp are its own.
        assert re.search(f"{attempt}: refused (PermissionError|FileNotFoundError)", text)
    assert victim.status == AgentStatus.OK


def test_fork_bomb_stays_inside_its_cell(play):
    needs(Layer.PROCESSES)
    attacker, victim = play([policy("escapes.py:ForkBomb"), VICTIM], agents=2, steps=20).agents
    started = int(re.search(r"forked (\d+)", log(attacker))[1])
    assert "fork refused after" in log(attacker) and started < 256
    assert attacker.status == victim.status == AgentStatus.OK
    # The autouse fixture then proves none of the forked processes outlived the episode.


def hog(play, kind: str, **limits):
    from policybox.limits import Limits

    spec = policy("escapes.py:Hog", **{"kw.hog": kind})
    pacer = policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.02"})  # keeps the episode running ~4 s
    return play(
        [spec, pacer], agents=2, steps=200, limits=Limits(act_timeout_ms=1000, time_bank_ms=60_000, **limits)
    ).agents


def test_allocate_8_gib(play):
    needs(Layer.MEMORY)
    attacker, victim = hog(play, "memory", memory_limit_mb=512)
    assert "allocated" not in log(attacker)
    if attacker.status == AgentStatus.CRASHED:  # a memory cgroup: the kernel killed the cell
        assert attacker.failure.signal == "SIGKILL" and "out of memory" in attacker.failure.message
    else:  # an address-space limit: the allocation failed
        assert (attacker.status, attacker.failure.kind) == (AgentStatus.ERROR, "MemoryError")
    assert attacker.failure.step == attacker.first_failure_step == 4
    assert victim.status == AgentStatus.OK and victim.latency.count == 200


def test_exceed_the_cpu_time_limit(play):
    needs(Layer.RLIMITS)
    attacker, victim = hog(play, "cpu", cpu_limit_s=1)  # CPU seconds: reached well within the ~4 s episode
    assert attacker.status == AgentStatus.CRASHED and attacker.failure.signal == "SIGXCPU"
    assert attacker.failure.step == 4 and "CPU time limit" in attacker.failure.message
    assert victim.status == AgentStatus.OK and victim.latency.count == 200


def test_write_a_file_larger_than_the_limit(play):
    needs(Layer.RLIMITS)
    attacker, victim = hog(play, "file", file_size_limit_mb=8)
    # Python ignores SIGXFSZ, so the write past the limit fails with EFBIG inside the policy.
    assert (attacker.status, attacker.failure.kind, attacker.failure.step) == (AgentStatus.ERROR, "OSError", 4)
    assert "File too large" in attacker.failure.message
    assert "wrote 64 MiB" not in log(attacker)
    assert victim.status == AgentStatus.OK


def test_every_agent_result_lists_its_active_layers(play):
    agents = play(["random", VICTIM], agents=2, steps=5).agents
    working = {check.layer for check in diagnose() if check.works}
    for agent in agents:
        active = {layer for layer, status in agent.sandbox.items() if status.startswith("active")}
        assert active == working


def test_the_probe_sees_through_a_cell_without_sandbox(tmp_path):
    """The doctor's probe really detects breaches: with the sandbox off, it gets through."""
    from policybox.episode import run_episode
    from policybox.host.diagnosis import _probe_report
    from policybox.settings import EpisodeSettings
    from policybox.spec import PolicySpec

    outside = tmp_path / "outside.txt"
    kwargs = {"host_pid": os.getpid(), "udp_port": 9, "secret_name": "PATH", "outside": str(outside)}
    spec = PolicySpec(class_path="policybox.probe.SandboxProbe", init_kwargs=kwargs)
    agent = run_episode([spec], EpisodeSettings(steps=1, sandbox="off"), tmp_path / "logs").agents[0]
    report = _probe_report(Path(agent.log_path))
    assert report["uid"] and report["landlock"] and report["environment"] and report["network"]
    assert outside.read_text() == "escaped"


def test_read_another_submission(play, tmp_path):
    """Submissions kept under a folder only root may enter: each cell sees its own, not the others'."""
    needs(Layer.UID, Layer.FILESYSTEM)
    submissions = tmp_path / "submissions"
    for team, body in {
        "team_a": "from pathlib import Path\n"
        "from mettagrid.policy.noop import NoopPolicy\n\n"
        "class Bot(NoopPolicy):\n"
        "    def __init__(self, policy_env_info, **kwargs):\n"
        "        super().__init__(policy_env_info)\n"
        "        try:\n"
        f"            print('read:', Path('{submissions}/team_b/bot.py').read_text())\n"
        "        except OSError as exc:\n"
        "            print('refused:', type(exc).__name__)\n",
        "team_b": "from mettagrid.policy.noop import NoopPolicy\n\n"
        "SECRET = 'TEAM-B-WINNING-STRATEGY'\n\n"
        "class Bot(NoopPolicy):\n    pass\n",
    }.items():
        (submissions / team).mkdir(parents=True)
        (submissions / team / "bot.py").write_text(body)
    submissions.chmod(0o700)
    a, b = play([f"{submissions}/team_a/bot.py:Bot", f"{submissions}/team_b/bot.py:Bot"], agents=2, steps=5).agents
    assert a.status == b.status == AgentStatus.OK  # each ran its own code
    assert "TEAM-B-WINNING-STRATEGY" not in log(a)
    assert "refused:" in log(a)


def test_allocate_8_gib_where_no_memory_cgroup_can_be_made(play, monkeypatch):
    """Without a memory cgroup the cell caps its address space instead (approximate, but it holds)."""
    import policybox.host.sandbox as host_sandbox

    real = host_sandbox.new_limit_cgroup
    monkeypatch.setattr(
        host_sandbox,
        "new_limit_cgroup",
        lambda controller, *a: None if controller == "memory" else real(controller, *a),
    )
    attacker, victim = hog(play, "memory", memory_limit_mb=3072)
    assert attacker.sandbox["memory"] == "active: address-space limit 3072 MiB (approximate)"
    assert (attacker.status, attacker.failure.kind, attacker.failure.step) == (AgentStatus.ERROR, "MemoryError", 4)
    assert "allocated" not in log(attacker)
    assert victim.status == AgentStatus.OK and victim.latency.count == 200
