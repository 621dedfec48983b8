"""Policies that misbehave in one specific way each, so tests can check the failure is pinned on the
right agent. Every one plays "noop" until it misbehaves at step 10 (its 11th step() call), so the
game sees exactly what a no-op agent would have done."""

import ctypes
import os
import signal
import stat
import subprocess
import sys
import time

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

FAIL_AT = 10


class _Countdown(AgentPolicy):
    """Plays noop; at step FAIL_AT calls misbehave(), whose return value (if any) is the action."""

    def __init__(self, policy_env_info, misbehave, every_step=False):
        super().__init__(policy_env_info)
        self._misbehave = misbehave
        self._every_step = every_step
        self._steps = 0

    def step(self, obs):
        step = self._steps
        self._steps += 1
        if step == FAIL_AT or (self._every_step and step > FAIL_AT):
            action = self._misbehave()
            if action is not None:
                return action
        return "noop"


class _Faulty(MultiAgentPolicy):
    """Subclasses define misbehave(self); its return value, if not None, is returned as the action."""

    every_step = False

    def agent_policy(self, agent_id):
        return _Countdown(self.policy_env_info, self.misbehave, self.every_step)

    def misbehave(self):
        raise NotImplementedError


def host_socket_fd():
    """What a hostile policy would do: find its socket to the host among its open files."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                return int(name)
        except OSError:
            continue
    raise RuntimeError("no socket found")


class RaiseInStep(_Faulty):
    def misbehave(self):
        raise RuntimeError("policy gave up at step 10")


class ExitInStep(_Faulty):
    def misbehave(self):
        os._exit(3)


class SegfaultInStep(_Faulty):
    def misbehave(self):
        ctypes.string_at(0)


class InfiniteLoopInStep(_Faulty):
    def misbehave(self):
        while True:
            pass


class SleepInStep(_Faulty):
    """Sleeps for an hour inside step(): deaf to its socket, only a kill ends it."""

    def misbehave(self):
        time.sleep(3600)


class SleepOnceInStep(_Faulty):
    """Misses a few deadlines at step 10, then plays on. Its late reply there is ``late_action`` (default:
    noop), which the game must never see: a late reply answers a step that is over."""

    def __init__(self, policy_env_info, sleep_s=0.7, late_action="noop", **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self._sleep_s = sleep_s
        self._late_action = late_action

    def misbehave(self):
        time.sleep(self._sleep_s)
        return self._late_action


class Flood(_Faulty):
    """Prints about 4 MB to stdout and to stderr on every step from step 10 on."""

    every_step = True

    def misbehave(self):
        line = "x" * 1000
        for _ in range(2000):
            print(line)
            print(line, file=sys.stderr)


class InvalidAction(_Faulty):
    """Returns one invalid action at step 10: an out-of-range index, an unknown name or a wrong type."""

    def __init__(self, policy_env_info, returns="index", **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self._action = {"index": 99, "name": "fly_to_the_moon", "type": 2.5}[returns]

    def misbehave(self):
        return self._action


class CloseSocket(_Faulty):
    def misbehave(self):
        os.close(host_socket_fd())


class ForgeFrame(_Faulty):
    """Writes bytes of its own to the host socket: garbage, or a frame forged in one specific way."""

    def __init__(self, policy_env_info, forge="garbage", **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self._forge = forge

    def misbehave(self):
        import struct

        header = struct.Struct("<B3xII")  # written out here: a hostile policy would not import policybox
        data = {
            "garbage": b"\xde\xad\xbe\xef" * 64,
            "wrong_type": header.pack(4, FAIL_AT, 0),  # OBSERVATION, a host-to-cell frame
            "wrong_seq": header.pack(5, 9999, 4) + b"\x00\x00\xff\xff",  # ACTION for a step never asked
            "absurd_length": header.pack(5, FAIL_AT, 0x7FFFFFFF),
            "half_frame": header.pack(5, FAIL_AT, 4) + b"\x00",  # then silence
            # an answer at the right step, for a seat the host did not ask (99): as if it spoke for another
            "other_seat": header.pack(5, FAIL_AT, 13) + struct.pack("<IBI", 99, 5, 4) + b"\x00\x00\xff\xff",
        }[self._forge]
        os.write(host_socket_fd(), data)
        if self._forge == "half_frame":
            time.sleep(3600)


class Grandchild(MultiAgentPolicy):
    """Starts a process at init that ignores SIGTERM and outlives its parent; with escape=True it
    also leaves the cell's process group and session (setsid)."""

    def __init__(self, policy_env_info, escape=False, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        code = "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"
        child = subprocess.Popen([sys.executable, "-c", code], start_new_session=escape)
        print(f"grandchild pid {child.pid}", flush=True)

    def agent_policy(self, agent_id):
        return _Countdown(self.policy_env_info, lambda: None)


class IgnoreSigterm(_Faulty):
    """Ignores SIGTERM, then hangs in step(): only SIGKILL can stop it."""

    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def misbehave(self):
        time.sleep(3600)


class RaiseInInit(MultiAgentPolicy):
    def __init__(self, policy_env_info, **kwargs):
        raise ValueError("bad configuration for this policy")

    def agent_policy(self, agent_id):
        raise AssertionError("never built")


class HangInInit(MultiAgentPolicy):
    def __init__(self, policy_env_info, **kwargs):
        time.sleep(3600)

    def agent_policy(self, agent_id):
        raise AssertionError("never built")


class NeedsCheckpoint(MultiAgentPolicy):
    """Its checkpoint folder must hold model.npz."""

    def load_policy_data(self, policy_data_path):
        with open(os.path.join(policy_data_path, "model.npz"), "rb"):
            pass

    def agent_policy(self, agent_id):
        return _Countdown(self.policy_env_info, lambda: None)


class NotAPolicy:
    """Has no agent_policy: policybox must say so, naming this class."""

    def __init__(self, policy_env_info):
        pass
