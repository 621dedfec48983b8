"""Policies for forked seats (``--cells forked``). ``Seats`` builds a large array in its constructor (what
the seats should share, not copy) and acts from its observation and its own random stream, printing
``seat ID pid PID ppid PPID uid UID draw N`` once per seat to its log; its kwargs make one seat raise,
exit, kill itself or hang at a step (``renamed_exit``: exit, having named its process as /proc/PID/stat's
fields, so that a reader that splits the line at the first parenthesis reads the wrong ones), or the
loader exit before forking. ``Hostile`` is the worst loader:
it forks nothing and answers every seat's socket itself, claiming a pid that is not its team's
(``kw.claim``: host, zygote or other)."""

import ctypes
import os
import select
import signal
import socket
import stat
import time

import numpy as np
import torch  # at import: seeded before the constructor runs (policybox.cell.agent_state)
from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

PROBE_SIGNAL = signal.SIGKILL

BIG_MIB = 64


class _Seat(AgentPolicy):
    def __init__(self, policy_env_info, owner, agent_id):
        super().__init__(policy_env_info)
        self.owner, self.agent_id, self.steps = owner, agent_id, 0
        if owner._how == "renamed_exit" and agent_id == owner._seat:  # before its READY: the host reads it then
            ctypes.CDLL(None, use_errno=True).prctl(15, b"a) Z 1 1 1 1 1", 0, 0, 0)  # PR_SET_NAME
        draw = np.random.randint(0, 1 << 30)  # the seat's own stream, as a cell of its own would draw it
        print(f"seat {agent_id} pid {os.getpid()} ppid {os.getppid()} uid {os.getuid()} draw {draw}", flush=True)

    def step(self, obs):
        self.steps += 1
        self.owner.misbehave(self.agent_id, self.steps)
        names = self.policy_env_info.action_names
        tokens = int(np.asarray([token.raw_token for token in obs.tokens], dtype=np.int64).sum())
        return names[(tokens + int(np.random.randint(0, 1000)) + int(self.owner.big[self.agent_id])) % len(names)]


class Seats(MultiAgentPolicy):
    def __init__(self, policy_env_info, seat=-1, at=-1, how="raise", big_mib=BIG_MIB, pace_s=0, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self._seat, self._at, self._how, self._pace_s = int(seat), int(at), how, float(pace_s)
        if how == "exit_loader":  # in the loader, before any seat is forked
            os._exit(5)
        # Random bytes: no zero page, no page the kernel could merge -- only fork shares them.
        self.big = np.random.default_rng(0).integers(0, 255, int(big_mib) << 20, dtype=np.uint8)

    def agent_policy(self, agent_id):
        return _Seat(self.policy_env_info, self, agent_id)

    def misbehave(self, agent_id, step):
        time.sleep(self._pace_s)
        if agent_id != self._seat or step != self._at:
            return
        if self._how == "raise":
            raise RuntimeError(f"seat {agent_id} gave up at step {step}")
        if self._how in ("exit", "renamed_exit"):
            os._exit(7)
        if self._how == "kill":
            os.kill(os.getpid(), 9)
        if self._how == "hang":
            time.sleep(3600)


class _Noop(AgentPolicy):
    def step(self, obs):
        return self.policy_env_info.action_names[0]


class Hostile(MultiAgentPolicy):
    """Runs in the loader, after its sandbox: finds the seats' sockets among its fds, answers READY on each
    with the claimed pid, then serves them all a noop until ``kw.stop`` steps, and then nothing (it is
    disabled on its bank and killed: the host may then signal only what is verified to be its own)."""

    def __init__(self, policy_env_info, claim="host", stop=5, linger=0, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        from policybox.wire import PROTOCOL_VERSION, FrameType, encode_json

        socks = [socket.socket(fileno=os.dup(fd)) for fd in _socket_fds()]
        ready = {"protocol": PROTOCOL_VERSION, "policy": "hostile", "minimum_action_timeout_ms": 0, "torch": False}
        for sock in socks:
            sock.sendall(encode_json(FrameType.READY, {**ready, "sandbox": {}, "pid": _claimed(claim)}))
        print(f"hostile loader pid {os.getpid()}", flush=True)
        _serve(socks, int(stop), bool(int(linger)))

    def agent_policy(self, agent_id):
        return _Noop(self.policy_env_info)


def _socket_fds():
    fds = []
    for name in os.listdir("/proc/self/fd"):
        with_fd = int(name)
        try:
            if stat.S_ISSOCK(os.fstat(with_fd).st_mode):
                fds.append(with_fd)
        except OSError:
            pass
    return sorted(fds)


def _claimed(claim):
    """A pid that is not the team's: the host's, the zygote's, or another team's seat (OTHER_PID names it)."""
    if claim == "zygote":
        return os.getppid()
    if claim == "other":
        return _others()[0]
    ppid = os.getppid()
    with open(f"/proc/{ppid}/stat") as stat_file:  # the zygote's parent is the host
        return int(stat_file.read().rpartition(")")[2].split()[1])


def _serve(socks, stop, linger):
    """Answer every observation frame with a noop for each seat it asks, until ``stop`` steps; then be
    silent; exit when the host closes a socket, unless it ``linger``s (then only a kill ends it)."""
    from policybox.wire import (
        HOST_TO_CELL,
        MAX_HOST_FRAME,
        FrameDecoder,
        FrameType,
        decode_observations,
        encode_replies,
    )

    decoders = {sock: FrameDecoder(HOST_TO_CELL, MAX_HOST_FRAME) for sock in socks}
    answered = 0
    while True:
        readable, _, _ = select.select(socks, [], [])
        for sock in readable:
            data = sock.recv(1 << 16)
            if not data:
                while linger:
                    time.sleep(1)
                os._exit(0)
            for frame in decoders[sock].feed(data):
                if frame.type != FrameType.OBSERVATION:
                    os._exit(0)
                answered += 1
                if answered > stop * len(socks):
                    continue
                asked = decode_observations(frame.payload)
                replies = [(agent_id, (FrameType.ACTION, _noop_bytes())) for agent_id, _ in asked]
                sock.sendall(encode_replies(frame.seq, replies))


def _noop_bytes():
    from policybox.envs.mettagrid import ACTION, NO_VIBE

    return ACTION.pack(0, NO_VIBE)


def _others():
    """The pids of the processes near its own that it may not signal (``kill(pid, 0)`` says EPERM): another
    uid's, such as another team's seats, forked about when its own were (/proc may not list them)."""
    found = []
    for pid in range(max(2, os.getpid() - 2000), os.getpid() + 2000):
        try:
            os.kill(pid, 0)
        except PermissionError:
            found.append(pid)
        except OSError:
            pass
    return found or [1]


class Prober(MultiAgentPolicy):
    """At its seats' first step, each tries to kill, ptrace-attach and read the memory of every process near
    its own pid that is not its own uid's (another team's cells), printing what worked; then plays noop."""

    def agent_policy(self, agent_id):
        return _Probe(self.policy_env_info)


class _Probe(AgentPolicy):
    def __init__(self, policy_env_info):
        super().__init__(policy_env_info)
        self.probed = False

    def step(self, obs):
        if not self.probed:
            self.probed = True
            for pid in _others():
                for what, attempt in (("kill", _kill), ("ptrace", _ptrace), ("read", _read_memory)):
                    try:
                        attempt(pid)
                        print(f"probe {what} {pid} worked", flush=True)
                    except OSError as exc:
                        print(f"probe {what} {pid} failed: {exc}", flush=True)
        return self.policy_env_info.action_names[0]


def _kill(pid):
    os.kill(pid, PROBE_SIGNAL)


def _ptrace(pid):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def _read_memory(pid):
    with open(f"/proc/{pid}/mem", "rb") as memory:
        memory.read(1)


class TorchSeats(MultiAgentPolicy):
    """Builds a torch network and runs a forward pass in its constructor -- in the loader, before the fork:
    an OpenMP pool started there would hang its seats' forward passes -- then acts from a pass per step."""

    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self.net = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8))
        with torch.no_grad():
            self.net(torch.randn(256, 512))

    def agent_policy(self, agent_id):
        return _TorchSeat(self.policy_env_info, self.net)


class _TorchSeat(AgentPolicy):
    def __init__(self, policy_env_info, net):
        super().__init__(policy_env_info)
        self.net = net

    def step(self, obs):
        tokens = torch.tensor([float(sum(token.raw_token)) for token in obs.tokens] or [0.0])
        with torch.no_grad():
            out = self.net(torch.randn(64, 512) + tokens.sum() / 1000)
        names = self.policy_env_info.action_names
        print(f"threads {torch.get_num_threads()}", flush=True)
        return names[int(out.sum(0).argmax()) % len(names)]
