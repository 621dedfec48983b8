"""Policies that try to break out of their cell, one way each, and print what they got to their log.
Each plays noop; the tests prove from outside the cell that the attempt failed."""

import os
import signal
import socket
import time
from pathlib import Path

import numpy as np
from mettagrid.policy.noop import NoopPolicy


def attempt(name, action):
    try:
        result = action()
        print(f"{name}: succeeded {result!r}", flush=True)
    except Exception as exc:
        print(f"{name}: refused {type(exc).__name__}: {exc}", flush=True)


def other_cells():
    """Every other policybox cell on the machine, found the way an attacker would: through /proc."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"policybox.cell" in cmdline and int(pid) != os.getpid():
            found.append(int(pid))
    return found


class ConnectOut(NoopPolicy):
    def __init__(self, policy_env_info, port, **kwargs):
        super().__init__(policy_env_info)
        attempt("tcp", lambda: socket.create_connection(("127.0.0.1", port), timeout=3).close())


class WriteOutside(NoopPolicy):
    def __init__(self, policy_env_info, path, **kwargs):
        super().__init__(policy_env_info)
        attempt("write", lambda: Path(path).write_text("escaped"))


class KillOthers(NoopPolicy):
    """SIGKILLs the host, then every pid near its own (its cell's /proc may hide the others)."""

    def __init__(self, policy_env_info, host_pid, **kwargs):
        super().__init__(policy_env_info)
        attempt("kill host", lambda: os.kill(host_pid, signal.SIGKILL))
        outcomes = {}
        own_threads = {int(tid) for tid in os.listdir("/proc/self/task")}  # killing one kills itself
        for pid in range(max(2, os.getpid() - 300), os.getpid() + 300):
            if pid not in own_threads:
                try:
                    os.kill(pid, signal.SIGKILL)
                    outcomes.setdefault("succeeded", []).append(pid)
                except OSError as exc:
                    outcomes.setdefault(type(exc).__name__, []).append(pid)
        print(f"kill nearby pids: {sorted((k, len(v)) for k, v in outcomes.items())}", flush=True)
        print(f"killed: {outcomes.get('succeeded', [])}", flush=True)


class Snoop(NoopPolicy):
    """Reads the host's environment through /proc, another cell's scratch folder, and its own env."""

    def __init__(self, policy_env_info, host_pid, secret_name, **kwargs):
        super().__init__(policy_env_info)
        attempt("host environ", lambda: Path(f"/proc/{host_pid}/environ").read_bytes())
        scratch_root = Path(os.environ["HOME"]).parent
        attempt("list scratch root", lambda: os.listdir(scratch_root))
        attempt("other scratch", lambda: os.listdir(scratch_root / "agent-1"))
        attempt("other scratch file", lambda: (scratch_root / "agent-1" / "diary.txt").read_text())
        for pid in other_cells():
            attempt(f"cell {pid} environ", lambda pid=pid: Path(f"/proc/{pid}/environ").read_bytes())
        print(f"own env secret: {os.environ.get(secret_name)!r}", flush=True)


class Diarist(NoopPolicy):
    """The victim: keeps a private diary in its scratch folder."""

    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        Path("diary.txt").write_text("the victim's private diary")


class ForkBomb(NoopPolicy):
    """Forks until refused (at most 1000 times, so a broken limit cannot take the machine down)."""

    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        started = 0
        try:
            for _ in range(1000):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                started += 1
        except OSError as exc:
            print(f"fork refused after {started}: {exc}", flush=True)
        print(f"forked {started}", flush=True)


class Hog(NoopPolicy):
    """At step 5: allocates and touches 8 GiB (memory), or burns CPU forever (cpu), or writes a
    file of 64 MiB into its scratch folder (file)."""

    def __init__(self, policy_env_info, hog, **kwargs):
        super().__init__(policy_env_info)
        self._hog = hog
        self._steps = 0

    def agent_policy(self, agent_id):
        parent = self

        class _Agent(type(super().agent_policy(agent_id))):
            def step(self, obs):
                parent._steps += 1
                if parent._steps == 5:
                    parent.run_hog()
                return super().step(obs)

        return _Agent(self.policy_env_info)

    def run_hog(self):
        if self._hog == "memory":
            block = np.ones(8 * 2**30 // 8)
            print(f"allocated {block.nbytes} bytes", flush=True)
        elif self._hog == "cpu":
            while True:
                pass
        elif self._hog == "file":
            with open("big.bin", "wb") as big:
                for _ in range(64):
                    big.write(b"\0" * 2**20)
            print("wrote 64 MiB", flush=True)
