"""One cgroup (v2) per cell, so everything a policy started dies with it -- even a grandchild that
left the cell's process group with setsid(). Used where the machine lets the host create cgroups;
elsewhere cells are still killed by process group, and the result says which one was in force.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import time
from pathlib import Path

import psutil

PREFIX = "policybox-"
_names = itertools.count()


class CellCgroup:
    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            (self.path / "cgroup.kill").write_text("1")

    def kill_and_remove(self, timeout: float = 2.0) -> None:
        """Kill every process in the cgroup, then remove it once empty (left for the sweep otherwise)."""
        self.kill()
        give_up = time.monotonic() + timeout
        while True:
            try:
                self.path.rmdir()
                return
            except OSError:
                if time.monotonic() > give_up:
                    return
                time.sleep(0.005)


def new_cell_cgroup() -> CellCgroup | None:
    """A fresh, empty cgroup for one cell, or None where this machine does not allow it."""
    parent = cgroup_parent()
    if parent is None:
        return None
    path = parent / f"{PREFIX}{os.getpid()}-{next(_names)}"
    try:
        path.mkdir()
    except OSError:
        return None
    return CellCgroup(path)


@functools.cache
def cgroup_parent() -> Path | None:
    """This process's own cgroup v2 folder, if it can hold killable child cgroups; stale ones swept."""
    parent = _own_cgroup()
    if parent is None:
        return None
    probe = parent / f"{PREFIX}probe-{os.getpid()}"
    try:
        probe.mkdir()
        usable = (probe / "cgroup.kill").exists()
        probe.rmdir()
    except OSError:
        return None
    if not usable:
        return None
    _sweep(parent)
    return parent


def _own_cgroup() -> Path | None:
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        membership = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mount = next((line.split()[4] for line in mounts if line.split(" - ")[-1].startswith("cgroup2 ")), None)
    own = next((line[3:] for line in membership if line.startswith("0::")), None)
    if mount is None or own is None:
        return None
    return Path(mount) / own.lstrip("/")


def _sweep(parent: Path) -> None:
    """Kill and remove cgroups left by a policybox host that died without cleaning up (e.g. SIGKILL)."""
    for path in parent.glob(f"{PREFIX}*-*"):
        host_pid = path.name[len(PREFIX) :].split("-")[0]
        if host_pid.isdigit() and not psutil.pid_exists(int(host_pid)):
            CellCgroup(path).kill_and_remove(timeout=0.5)
