"""Policies for PettingZoo games (built as Cls(observation_space, action_space, **kwargs), act(obs))."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np


class Seeded:
    """A stateful policy on the process-wide numpy RNG (policybox seeds it per agent): a legal move
    drawn at random, or a random action; counts its steps."""

    def __init__(self, observation_space, action_space, **kwargs):
        self.action_space = action_space
        self.steps = 0

    def reset(self):
        self.steps = 0

    def act(self, observation):
        self.steps += 1
        if isinstance(observation, dict) and "action_mask" in observation:
            return int(np.random.choice(np.flatnonzero(observation["action_mask"])))
        return int(np.random.randint(self.action_space.n))


class _Counting:
    def __init__(self, observation_space, action_space, at_step=3, **kwargs):
        self.action_space = action_space
        self.at_step = int(at_step)
        self.steps = 0

    def act(self, observation):
        self.steps += 1
        if self.steps == self.at_step:
            self.misbehave()
        if isinstance(observation, dict) and "action_mask" in observation:
            return int(np.flatnonzero(observation["action_mask"])[-1])
        return 0

    def misbehave(self):
        raise NotImplementedError


class CrashAt(_Counting):
    """Its cell dies of SIGSEGV at its ``at_step``-th turn."""

    def misbehave(self):
        os.kill(os.getpid(), signal.SIGSEGV)


class HangAt(_Counting):
    """Never answers from its ``at_step``-th turn on."""

    def misbehave(self):
        while True:
            pass


class WrongActionAt(_Counting):
    """Returns an action outside its action space at its ``at_step``-th turn."""

    def act(self, observation):
        self.steps += 1
        return 10**6 if self.steps == self.at_step else 0


class Heartbeat:
    """Prints the time to its log every 20 ms from a thread, so its log shows when its cell stopped."""

    def __init__(self, observation_space, action_space, **kwargs):
        def beat():
            while True:
                print(f"beat {time.time():.3f}", flush=True)
                time.sleep(0.02)

        threading.Thread(target=beat, daemon=True).start()

    def act(self, observation):
        return 0


class SlowPlayer:
    """Sleeps ``sleep_s`` a step, then plays 0."""

    def __init__(self, observation_space, action_space, sleep_s=0.1, **kwargs):
        self.sleep_s = float(sleep_s)

    def act(self, observation):
        time.sleep(self.sleep_s)
        return 0


class NoAct:
    """Not a policy: it has no act()."""

    def __init__(self, observation_space, action_space, **kwargs):
        pass


class _Touch:
    """Unpickling this runs ``os.system("touch PATH")``: proof that someone unpickled it."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


class ForgedActions:
    """Hostile: it owns its process, so it replaces its cell's action encoder and the host receives
    forged bytes -- empty, a column out of range, a negative one, too many bytes, a pickle that
    would create ``marker`` if unpickled -- then legal columns, encoded honestly."""

    def __init__(self, observation_space, action_space, marker="/tmp/policybox-unpickled", **kwargs):
        import pickle
        import struct

        from policybox.envs import pettingzoo as adapter

        forged = iter([b"", struct.pack("<q", 7), struct.pack("<q", -1), b"\x00" * 16, pickle.dumps(_Touch(marker))])
        honest = adapter.PettingZooCell.encode_action

        def encode_action(cell, action):
            payload = next(forged, None)
            return honest(cell, action) if payload is None else payload

        adapter.PettingZooCell.encode_action = encode_action

    def act(self, observation):
        return int(np.flatnonzero(observation["action_mask"])[0])


class OneColumn:
    """Always plays ``column``: legal until that column is full, then an illegal move every turn."""

    def __init__(self, observation_space, action_space, column=0, **kwargs):
        self.column = int(column)

    def act(self, observation):
        return self.column


class InfoReader:
    """Plays the last legal move its info's ``action_mask`` allows, and prints the info's keys once."""

    def __init__(self, observation_space, action_space, **kwargs):
        self.printed = False

    def act(self, observation, info):
        if not self.printed:
            print(f"info keys: {sorted(info)}", flush=True)
            self.printed = True
        return int(np.flatnonzero(info["action_mask"])[-1])
