"""Policies that press on memory: one that grows until it holds what it asked for, one that tries to
stop being the kernel's first choice of victim. Each prints what it did and plays noop; the tests
judge from outside (the result, the cgroup files, /proc/<pid>/oom_score_adj)."""

import ctypes
import subprocess

from mettagrid.policy.noop import NoopPolicy

MIB = 1024 * 1024
PAGE = 4096
PR_SET_DUMPABLE = 4
MARK = "ATTACK-DONE"


class MemoryHog(NoopPolicy):
    """Allocates and touches ``step_mib`` more MiB at every step until it holds ``mib``, then holds it
    to the end of the episode; prints how much it holds after each step."""

    def __init__(self, policy_env_info, mib, step_mib=25, **kwargs):
        super().__init__(policy_env_info)
        self._mib = mib
        self._step_mib = step_mib
        self._held = []

    def agent_policy(self, agent_id):
        parent = self

        class _Agent(type(super().agent_policy(agent_id))):
            def step(self, obs):
                parent.grow()
                return super().step(obs)

        return _Agent(self.policy_env_info)

    def grow(self):
        if len(self._held) * self._step_mib >= self._mib:
            return
        block = bytearray(self._step_mib * MIB)
        block[::PAGE] = b"\1" * len(range(0, len(block), PAGE))  # touch every page: really resident
        self._held.append(block)
        print(f"holding {len(self._held) * self._step_mib} MiB", flush=True)


def attempt(name, action):
    try:
        print(f"{name}: succeeded {action()!r}", flush=True)
    except Exception as exc:
        print(f"{name}: refused {type(exc).__name__}: {exc}", flush=True)


def write_adj(value):
    with open("/proc/self/oom_score_adj", "w") as adj:
        adj.write(str(value))
    return value


class LowerOomScore(NoopPolicy):
    """Tries to make itself the last victim instead of the first: writes 0 and -1000 into its own
    oom_score_adj, again after making itself dumpable (so that its /proc files are its own), and from a
    child shell it execs (exec makes a process dumpable again); the child then stays, and its pid is
    printed for the test to look at."""

    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        attempt("write 0", lambda: write_adj(0))
        attempt("write -1000", lambda: write_adj(-1000))
        attempt("make dumpable", lambda: ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
        attempt("write 0 when dumpable", lambda: write_adj(0))
        attempt("write -1000 when dumpable", lambda: write_adj(-1000))
        script = "echo 0 > /proc/self/oom_score_adj; echo -1000 > /proc/self/oom_score_adj; exec sleep 600"
        self._child = subprocess.Popen(["/bin/sh", "-c", script])
        print(f"child {self._child.pid}", flush=True)
        with open("/proc/self/oom_score_adj") as adj:
            print(f"own oom_score_adj {adj.read().strip()}", flush=True)
        print(MARK, flush=True)
