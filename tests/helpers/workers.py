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

from policybox.process_names import CELL, WORKER


def playing_worker() -> int | None:
    """A worker of this process that has a cell now: one holding the read end of a cell's output pipe (its
    cells fork from this process's zygote, or from one of its own). Workers and cells are told by their
    names (``policybox.process_names``): a forked one keeps the zygote's command line. From one read of the
    process table: a psutil ``children()`` call reads the whole table itself, and a loop of them costs a
    loaded machine a core."""
    children: dict[int, list[int]] = defaultdict(list)
    names = {}
    for process in psutil.process_iter(["ppid", "name"]):
        children[process.info["ppid"]].append(process.pid)
        names[process.pid] = process.info["name"]
    mine = _descendants(children, os.getpid())
    workers = [pid for pid in mine if names.get(pid) == WORKER]
    outputs = {_pipe(f"/proc/{cell}/fd/1") for cell in mine if names.get(cell) == CELL} - {None}
    for worker in workers:
        with contextlib.suppress(OSError):
            if any(_pipe(f"/proc/{worker}/fd/{fd}") in outputs for fd in os.listdir(f"/proc/{worker}/fd")):
                return worker
    return None


def _descendants(children: dict[int, list[int]], root: int) -> list[int]:
    found, todo = [], list(children[root])
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children[pid])
    return found


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
