"""The worst entrant, played through the real engine at the default level and judged from outside
the cell: the host's disk and inodes, `ipcs`, listeners the test runs, /proc of the cell as the host
sees it, file modes, the result JSON, and whether the other agents played on. Each attack policy is
in tests/policies/hostile.py."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import descendants, ipc_objects_of, policy, policybox
from helpers.doctor import needs

from policybox.limits import Limits
from policybox.results import AgentStatus
from policybox.sandbox import Layer

PACER = policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.02"})  # 0.02 s a step: time to look from outside
VICTIM = policy("hostile.py:Diarist")


def log(agent) -> str:
    return Path(agent.log_path).read_text()


def play_and_look(play, tmp_path: Path, policies: list[str], look, **settings):
    """Play in a thread; once agent 0 has logged its attack, call ``look(cells)`` with the cells'
    processes as the host sees them. The result, and what ``look`` returned."""
    outcome: dict = {}
    runner = threading.Thread(target=lambda: outcome.update(result=play(policies, **settings)))
    runner.start()
    attacker_log = tmp_path / "logs" / "agent-0.log"
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up and "ATTACK-DONE" not in _text(attacker_log):
        time.sleep(0.05)
    # Not the test PostgreSQL server's processes (another uid too), which this worker may have started.
    cells = [p for p in descendants() if p.uids().real != 0]
    seen = look(cells)
    runner.join()
    return outcome["result"], seen


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@pytest.mark.alone  # the host's free space and inodes, which the other worker's test would use meanwhile
def test_a_cell_holds_no_host_file_and_cannot_fill_the_disk(play, tmp_path):
    needs(Layer.DISK)
    before = os.statvfs(tmp_path)

    def look(cells):
        fds = {}
        for cell in cells:
            for fd in Path(f"/proc/{cell.pid}/fd").iterdir():
                fds[f"{cell.pid}:{fd.name}"] = os.readlink(fd)
        return fds, os.statvfs(tmp_path)

    limits = Limits(disk_limit_mb=64, disk_limit_files=1000)
    attack = policy("hostile.py:FillDisk", **{"kw.megabytes": "256", "kw.files": "30000"})
    result, (fds, during) = play_and_look(play, tmp_path, [attack, PACER], look, agents=2, steps=100, limits=limits)
    attacker, pacer = result.agents
    # No descriptor of any cell names a file of the host: only pipes, sockets and /dev/null.
    files = {fd: target for fd, target in fds.items() if target.startswith("/") and target != "/dev/null"}
    assert fds and not files, files
    text = log(attacker)
    assert "fallocate fd 1: refused" in text and "fallocate fd 2: refused" in text
    assert int(re.search(r"wrote (\d+) MiB", text)[1]) <= 64
    assert int(re.search(r"made (\d+) files", text)[1]) < 1000
    # The host's file system lost neither the 256 MiB nor the 30,000 files (allowing for other users).
    assert (before.f_bavail - during.f_bavail) * before.f_frsize < 64 * 2**20
    assert before.f_favail - during.f_favail < 15_000
    assert Path(attacker.log_path).stat().st_blocks * 512 < 2**20  # no reservation on the log file
    assert attacker.status == pacer.status == AgentStatus.OK


def test_cells_share_no_ipc_and_nothing_outlives_the_episode(play, tmp_path):
    needs(Layer.IPC)
    result, (shm_during, uids) = play_and_look(
        play,
        tmp_path,
        [policy("hostile.py:IpcWriter"), policy("hostile.py:IpcReader"), PACER],
        lambda cells: (Path("/proc/sysvipc/shm").read_text(), {cell.uids().real for cell in cells}),
        agents=3,
        steps=60,
    )
    writer, reader, _ = result.agents
    assert "shmget create: succeeded" in log(writer)  # it had its own segment...
    assert "shmget find: refused FileNotFoundError: [Errno 2] ENOENT" in log(reader)  # ...which the other never saw
    assert "msgget find: refused FileNotFoundError: [Errno 2] ENOENT" in log(reader)
    key = f"{0x5EED:d}"
    host_keys = [line.split()[0] for line in shm_during.splitlines()[1:]]
    assert key not in host_keys  # not in the host's namespace while it lived
    ipcs = subprocess.run(["ipcs", "-m", "-q"], capture_output=True, text=True).stdout
    assert "0x00005eed" not in ipcs and key not in Path("/proc/sysvipc/shm").read_text()
    assert len(uids) == 3 and ipc_objects_of(uids) == []  # no object of any key, made by any of the cells
    assert all(agent.status == AgentStatus.OK for agent in result.agents)


@pytest.fixture
def unix_listeners(tmp_path):
    """A stream and a datagram Unix socket of the host's, world-writable, in a folder cells can see
    (the repository) and in one they cannot (under /tmp)."""
    folders = [Path(__file__).parent / f".sockets-{os.getpid()}", tmp_path / "sockets"]
    sockets = []
    for folder in folders:
        folder.mkdir(mode=0o777, exist_ok=True)
        folder.chmod(0o777)
        stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stream.bind(str(folder / "host.sock"))
        stream.listen()
        stream.setblocking(False)
        dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        dgram.bind(str(folder / "host.sock.dgram"))
        dgram.setblocking(False)
        for path in folder.iterdir():
            path.chmod(0o777)
        sockets += [stream, dgram]
    yield [str(folder / "host.sock") for folder in folders], sockets
    for sock in sockets:
        sock.close()
    for path in folders[0].iterdir():
        path.unlink()
    folders[0].rmdir()


def test_no_channel_to_the_host_or_view_of_other_processes(play, tmp_path, unix_listeners):
    needs(Layer.PROC, Layer.SECCOMP)
    paths, sockets = unix_listeners
    snoop = policy(
        "hostile.py:Snoop",
        **{
            "kw.host_pid": str(os.getpid()),
            "kw.log_path": json.dumps(str(tmp_path / "logs" / "agent-1.log")),
            "kw.socket_paths": json.dumps("|".join(paths)),
        },
    )
    attacker, victim = play([snoop, VICTIM], agents=2, steps=10).agents
    text = log(attacker)
    assert "visible pids: 1" in text  # itself, and nothing else
    for entry in ("comm", "cmdline", "environ"):
        assert re.search(rf"/proc/{os.getpid()}/{entry}: refused", text)
    assert "other agent's log: refused" in text and "VICTIM-PRIVATE-DIARY" not in text
    # The victim opened its scratch to everyone; the attacker still reached neither file nor socket.
    assert "OPEN-HOUSE-SECRET" not in text
    assert "peer's open file: refused" in text and "peer's open socket: refused" in text
    for path in paths:
        assert f"unix stream {path}: refused" in text and f"unix datagram {path}.dgram: refused" in text
    for shared in ("/dev/shm", "/tmp", "/var/tmp", "/run"):  # nothing reached the machine's shared folders
        assert f"drop {shared}: refused" in text and not Path(shared, "policybox-meeting-point").exists()
    for sock in sockets:  # the host's listeners got nothing
        with pytest.raises(BlockingIOError):
            sock.accept() if sock.type == socket.SOCK_STREAM else sock.recv(64)
    assert attacker.status == victim.status == AgentStatus.OK


def test_logs_are_private_to_the_operator(play, tmp_path):
    agent = play([VICTIM], agents=1, steps=2).agents[0]
    folder = Path(agent.log_path).parent
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(agent.log_path).stat().st_mode) == 0o600
    assert "VICTIM-PRIVATE-DIARY" in log(agent)


def test_a_secret_stays_off_command_lines_and_out_of_results(tmp_path):
    """Through the real command: a secret passed as env.NAME=@FILE reaches its cell only; a snoop
    reading every /proc entry it can sees neither it nor the host's command line; the result redacts it."""
    secret = tmp_path / "token.txt"
    secret.write_text("s3cr3t-API-TOKEN\n")
    secret.chmod(0o600)
    out = tmp_path / "result.json"
    snoop = policy("hostile.py:Snoop", **{"kw.host_pid": "1"})
    args = ["run", "-n", "2", "--steps", "5", "--out", str(out)]
    run = policybox(*args, "-p", snoop, "-p", f"{VICTIM},env.API_TOKEN=@{secret}", "--log-dir", tmp_path / "logs")
    assert run.returncode == 0, run.stdout + run.stderr
    attacker, victim = json.loads(out.read_text())["agents"]
    assert "token length 16, starts 's3'" in Path(victim["log_path"]).read_text()  # it got its secret
    assert "s3cr3t" not in Path(attacker["log_path"]).read_text()
    assert "s3cr3t" not in out.read_text() and victim["spec"]["env"] == {"API_TOKEN": "***"}
    assert "s3cr3t" not in run.stdout + run.stderr


def test_cpu_time_is_limited_over_all_of_a_cells_processes(play, tmp_path):
    needs(Layer.CPU)
    limits = Limits(cpu_limit_s=2, act_timeout_ms=1000, time_bank_ms=60_000)
    # Up to a minute of play, ended by the attacker's disabling: a loaded machine gives the children
    # their 2 CPU seconds later, never not at all.
    result = play(
        [policy("hostile.py:CpuSpreader"), PACER], agents=2, steps=3000, limits=limits, on_agent_failure="abort"
    )
    attacker, pacer = result.agents
    assert attacker.status == AgentStatus.DISABLED and attacker.failure.kind == "CpuLimit"
    assert "over all its processes, limit 2 s" in attacker.failure.message
    assert result.steps < 3000 and result.aborted.startswith("agent 0")
    assert pacer.status == AgentStatus.OK and pacer.latency.count == result.steps
    # The autouse fixture then proves none of the six children outlived the episode.


@pytest.mark.alone  # the others' step times, in milliseconds
def test_a_cell_that_stops_reading_does_not_stall_the_others(play, tmp_path, monkeypatch):
    """A frame larger than the socket buffer goes out as the cell reads; the host never blocks on it."""
    import policybox.host.launcher as launcher

    real_socketpair = socket.socketpair

    def small_buffers(*args):
        host, cell = real_socketpair(*args)
        host.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        return host, cell

    monkeypatch.setattr(launcher.socket, "socketpair", small_buffers)
    config = tmp_path / "big_observations.json"
    from mettagrid.builder.envs import make_arena

    game = make_arena(3)
    game.game.obs.num_tokens = 6000  # 18 KB observations, several socket buffers each
    config.write_text(game.model_dump_json())
    staller = policy("hostile.py:Staller", **{"kw.pause_s": "3"})
    others = [policy("seeded_random.py:SeededRandom"), policy("stateful.py:Stateful")]
    limits = Limits(act_timeout_ms=1000, time_bank_ms=60_000)
    result = play([staller, *others], agents=3, steps=40, env=str(config), limits=limits)
    stalled, *rest = result.agents
    assert stalled.status == AgentStatus.TIMEOUT
    for agent in rest:  # before the fix each waited up to the full deadline on the stalled cell
        assert agent.status == AgentStatus.OK and agent.latency.max_ms < 500


def test_a_forged_sandbox_report_is_not_believed(play):
    needs(Layer.UID)
    agent = play([policy("hostile.py:Forger")], agents=1, steps=2, seccomp=False).agents[0]
    assert "forged the report" in log(agent)
    assert "seccomp" not in agent.sandbox  # opted out: a forged claim adds nothing
    for layer, status in agent.sandbox.items():
        if layer == Layer.LANDLOCK:
            assert status == "active (cell-reported): forged"  # only the cell can say; marked as such
        else:
            assert "forged" not in status, (layer, status)  # the host's own words, from /proc


def test_a_policy_cannot_rewrite_its_own_files(play, tmp_path):
    needs(Layer.FILESYSTEM)
    bot = tmp_path / "bot"
    bot.mkdir()
    source = (Path(__file__).parent / "policies" / "hostile.py").read_text()
    (bot / "hostile.py").write_text(source)
    (bot / "weights.bin").write_text("original weights")
    agent = play([f"{bot}/hostile.py:SelfEdit,data={bot}/weights.bin"], agents=1, steps=2).agents[0]
    assert "edit policy file: refused" in log(agent) and "edit checkpoint: refused" in log(agent)
    assert (bot / "weights.bin").read_text() == "original weights"
    assert (bot / "hostile.py").read_text() == source


def test_nested_policy_folders_are_all_read_only(play, tmp_path):
    """A policy file in a folder inside its own import root: both are bound back read-only."""
    needs(Layer.FILESYSTEM)
    inner = tmp_path / "outer" / "inner"
    inner.mkdir(parents=True)
    source = (Path(__file__).parent / "policies" / "hostile.py").read_text()
    (inner / "hostile.py").write_text(source)
    (inner / "weights.bin").write_text("original weights")
    spec = f"{inner}/hostile.py:SelfEdit,data={inner}/weights.bin,path={tmp_path / 'outer'}"
    agent = play([spec], agents=1, steps=2).agents[0]
    assert agent.sandbox["filesystem"].startswith("active"), agent.sandbox["filesystem"]
    assert "edit policy file: refused" in log(agent) and (inner / "hostile.py").read_text() == source
    assert (inner / "weights.bin").read_text() == "original weights"
