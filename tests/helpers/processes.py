"""Processes as the tests watch them: alive or a zombie, the tree below a process with its start times,
which of those still run, and waiting for a condition."""

from __future__ import annotations

import time

import psutil


def alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (this machine's init does not reap orphans, so zombies linger)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for(condition, timeout: float = 30.0) -> bool:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if condition():
            return True
        time.sleep(0.05)
    return False


def tree(pid: int) -> dict[int, float]:
    """Every process below ``pid`` now (cells included: they descend from a worker's zygote), with its
    start time (so a later process reusing a pid is not taken for it)."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return {}
    started = {}
    for process in found:
        try:
            started[process.pid] = process.create_time()
        except psutil.NoSuchProcess:
            continue
    return started


def still_running(seen: dict[int, float]) -> list[int]:
    left = []
    for pid, created in seen.items():
        try:
            process = psutil.Process(pid)
            if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.NoSuchProcess:
            continue
    return left
