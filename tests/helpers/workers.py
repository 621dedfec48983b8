"""Killing one of this process's play workers in the middle of an episode, as a crash would: the tests
of a lost worker (an evaluation's, a ladder's) judge what the run makes of it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import defaultdict

import psutil

WORKER = "policybox.league.play.worker"


def playing_worker() -> int | None:
    """A worker of this process whose zygote has a cell now, from one read of the process table: a
    psutil ``children()`` call reads the whole table itself, and a loop of them costs a loaded
    machine a core."""
    children: dict[int, list[int]] = defaultdict(list)
    for process in psutil.process_iter(["ppid"]):
        children[process.info["ppid"]].append(process.pid)
    for worker in children[os.getpid()]:
        if not any(children[zygote] for zygote in children[worker]):
            continue
        try:
            if WORKER in " ".join(psutil.Process(worker).cmdline()):
                return worker
        except psutil.Error:
            continue
    return None


class WorkerKiller(threading.Thread):
    """SIGKILLs the first worker seen playing, ``after_s`` later, within ``give_up_s``; ``killed`` holds
    its pid once it has."""

    def __init__(self, after_s: float, give_up_s: float = 120) -> None:
        super().__init__(daemon=True)
        self.after_s, self.give_up_s = after_s, give_up_s
        self.killed: list[int] = []

    def run(self) -> None:
        give_up = time.monotonic() + self.give_up_s
        while time.monotonic() < give_up:
            if (worker := playing_worker()) is not None:
                time.sleep(self.after_s)
                os.kill(worker, signal.SIGKILL)
                self.killed.append(worker)
                return
            time.sleep(0.05)
