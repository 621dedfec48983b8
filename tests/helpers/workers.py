"""Killing one of this process's play workers in the middle of an episode, as a crash would: the tests
of a lost worker (an evaluation's, a ladder's) judge what the run makes of it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import defaultdict

import psutil

WORKER = "policybox.league.play.worker"
ZYGOTE = "policybox.cell.zygote"


def playing_worker() -> int | None:
    """A worker of this process that has a cell now: one holding the read end of a cell's output pipe (its
    cells fork from this process's zygote, or from one of its own). From one read of the process table: a
    psutil ``children()`` call reads the whole table itself, and a loop of them costs a loaded machine a
    core."""
    children: dict[int, list[int]] = defaultdict(list)
    for process in psutil.process_iter(["ppid"]):
        children[process.info["ppid"]].append(process.pid)
    workers = [pid for pid in children[os.getpid()] if _is(pid, WORKER)]
    zygotes = [pid for parent in (os.getpid(), *workers) for pid in children[parent] if _is(pid, ZYGOTE)]
    outputs = {_pipe(f"/proc/{cell}/fd/1") for zygote in zygotes for cell in children[zygote]} - {None}
    for worker in workers:
        with contextlib.suppress(OSError):
            if any(_pipe(f"/proc/{worker}/fd/{fd}") in outputs for fd in os.listdir(f"/proc/{worker}/fd")):
                return worker
    return None


def _is(pid: int, module: str) -> bool:
    try:
        return module in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False  # gone


def _pipe(fd: str) -> str | None:
    try:
        link = os.readlink(fd)
    except OSError:
        return None
    return link if link.startswith("pipe:") else None


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
