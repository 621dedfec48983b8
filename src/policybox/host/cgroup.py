"""Per-cell cgroups, created by the host and joined by the cell before it runs any policy code.

* A **kill** cgroup (v2, ``cgroup.kill``): everything a policy started dies with its cell -- even a
  grandchild that left the process group with setsid().
* **Limit** cgroups for ``memory`` and ``pids``: the v2 controller where the cell's v2 cgroup has
  it, else the v1 hierarchy (machines that mount both, like this one, keep memory and pids in v1).
* CPU **accounting**: the CPU time of every process of the cell together (``cpu.stat`` of its v2
  cgroup, which every v2 cgroup has, else a v1 ``cpuacct`` cgroup), which the host checks against
  the cell's CPU limit -- a per-process rlimit alone lets a cell spread its work over children.

Each is used only where the machine lets the host create it; callers get None otherwise and report
the layer as unavailable. A cell's memory cgroup (and, in v2, its kill cgroup) may be made inside
the host's memory budget instead (``policybox.host.budget``). Cgroups left by a host that died
(SIGKILL) are swept by the next host, with every cgroup below them.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import time
from pathlib import Path

import psutil

PREFIX = "policybox-"
V1_LIMIT_FILES = {"memory": "memory.limit_in_bytes", "pids": "pids.max", "cpuacct": "cpuacct.usage"}
V2_LIMIT_FILES = {"memory": "memory.max", "pids": "pids.max"}
# (controller, limit file, usage file) of memory in v1, then in v2 (controller "": the v2 hierarchy)
MEMORY_FILES = (("memory", "memory.limit_in_bytes", "memory.usage_in_bytes"), ("", "memory.max", "memory.current"))
_names = itertools.count()


class CellCgroup:
    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def write(self, name: str, value: str) -> None:
        (self.path / name).write_text(value)

    def read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL every process in it: at once with v2's ``cgroup.kill``; where there is none (v1), each
        one it lists, by a pidfd opened while it is listed (a pid freed and reused since is not hit)."""
        try:
            (self.path / "cgroup.kill").write_text("1")
            return
        except OSError:
            pass
        for pid in self._pids():
            with contextlib.suppress(OSError):  # gone meanwhile
                handle = os.pidfd_open(pid)
                try:
                    if pid in self._pids():
                        signal.pidfd_send_signal(handle, signal.SIGKILL)
                finally:
                    os.close(handle)

    def _pids(self) -> list[int]:
        return [int(pid) for pid in self.read("cgroup.procs").split()]

    def oom_kills(self) -> int:
        """How many of this cgroup's processes the kernel's OOM killer killed, whatever limit was hit
        (v1 counts a kill in the victim's own cgroup only, v2 in its ancestors too)."""
        return self._count(("memory.events", "memory.oom_control"), "oom_kill")  # v2, v1

    def limit_reached(self) -> bool:
        """Whether this cgroup's own memory limit ever held back memory: v2 counts the OOMs it caused
        (``memory.events.local``: not its descendants'); v1 only the charges it refused (``failcnt``)."""
        if self._count(("memory.events.local",), "oom") > 0:
            return True
        failcnt = self.read("memory.failcnt").strip()
        return failcnt.isdigit() and int(failcnt) > 0

    def _count(self, names: tuple[str, ...], wanted: str) -> int:
        """The counter ``wanted`` of the first of the flat-keyed files ``names`` that has it."""
        for name in names:
            for line in self.read(name).splitlines():
                key, _, value = line.partition(" ")
                if key == wanted and value.strip().isdigit():
                    return int(value)
        return 0

    def cpu_seconds(self) -> float | None:
        """CPU time used by every process ever in this cgroup, or None if it does not account it."""
        for line in self.read("cpu.stat").splitlines():  # v2: microseconds
            key, _, value = line.partition(" ")
            if key == "usage_usec" and value.strip().isdigit():
                return int(value) / 1e6
        usage = self.read("cpuacct.usage").strip()  # v1: nanoseconds
        return int(usage) / 1e9 if usage.isdigit() else None

    def remove(self, timeout: float = 2.0) -> None:
        """Remove the cgroup once its processes are gone (left for the sweep if they never go)."""
        give_up = time.monotonic() + timeout
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > give_up:
                    return
                time.sleep(0.005)

    def kill_and_remove(self, timeout: float = 2.0) -> None:
        """Kill and remove; never raises (kill() and remove() swallow every OSError)."""
        self.kill()
        self.remove(timeout)

    def kill_and_remove_tree(self, timeout: float = 2.0) -> None:
        """Kill and remove this cgroup and every cgroup below it, deepest first (a cgroup with
        children cannot be removed); iterative, and never raises."""
        found, todo = [], [self.path]
        while todo:
            path = todo.pop()
            found.append(path)
            try:
                todo += [entry for entry in path.iterdir() if entry.is_dir()]
            except OSError:
                continue
        for path in reversed(found):
            CellCgroup(path).kill_and_remove(timeout)


def new_kill_cgroup(parent: Path | None = None) -> CellCgroup | None:
    """A fresh, empty v2 cgroup for one cell (in ``parent``, else in this process's own v2 cgroup),
    or None where this machine does not allow it."""
    parent = parent or kill_cgroup_parent()
    return None if parent is None else new_child(parent)


def new_limit_cgroup(
    controller: str, limit: int, kill_cgroup: CellCgroup | None, v1_folder: Path | None = None
) -> CellCgroup | None:
    """A cgroup enforcing ``limit`` for ``controller`` (memory bytes, pids count), or None.

    Prefers the v2 controller in the cell's own kill cgroup; else a new cgroup in the v1 hierarchy,
    in ``v1_folder`` if given (the host's memory budget), else in this process's own v1 cgroup.
    """
    if kill_cgroup is not None and (kill_cgroup.path / V2_LIMIT_FILES[controller]).exists():
        kill_cgroup.write(V2_LIMIT_FILES[controller], str(limit))
        return kill_cgroup
    parent = v1_folder or v1_parent(controller)
    cgroup = None if parent is None else new_child(parent)
    if cgroup is None:
        return None
    try:
        cgroup.write(V1_LIMIT_FILES[controller], str(limit))
    except OSError:
        cgroup.remove()
        return None
    return cgroup


def new_accounting_cgroup(kill_cgroup: CellCgroup | None) -> CellCgroup | None:
    """A cgroup that accounts the cell's CPU time: its v2 kill cgroup, else a v1 cpuacct one, or None."""
    if kill_cgroup is not None and (kill_cgroup.path / "cpu.stat").exists():
        return kill_cgroup
    parent = v1_parent("cpuacct")
    return None if parent is None else new_child(parent)


def new_child(parent: Path, name: str | None = None) -> CellCgroup | None:
    """A new cgroup in ``parent``, named after this process (so the sweep knows its owner), or None."""
    path = parent / f"{PREFIX}{os.getpid()}-{name or next(_names)}"
    try:
        path.mkdir()
    except OSError:
        return None
    return CellCgroup(path)


@functools.cache
def kill_cgroup_parent() -> Path | None:
    """This process's own cgroup v2 folder, if it can hold killable child cgroups; stale ones swept."""
    parent = _own_cgroup("")
    if parent is None or not _usable(parent, "cgroup.kill"):
        return None
    sweep(parent)
    return parent


@functools.cache
def v1_parent(controller: str) -> Path | None:
    """This process's own cgroup folder in the v1 ``controller`` hierarchy, if usable; stale ones swept."""
    parent = _own_cgroup(controller)
    if parent is None or not _usable(parent, V1_LIMIT_FILES[controller]):
        return None
    sweep(parent)
    return parent


@functools.cache
def v2_memory_parent() -> Path | None:
    """This process's own cgroup v2 folder, if its child cgroups can have a memory limit of their own."""
    parent = kill_cgroup_parent()
    return parent if parent is not None and _usable(parent, V2_LIMIT_FILES["memory"]) else None


def memory_headroom() -> int | None:
    """Bytes this process's memory cgroups and their ancestors allow it before one of their limits is
    reached (v1 and v2), or None where none is limited."""
    headroom = None
    for controller, limit_file, usage_file in MEMORY_FILES:
        folder = _own_cgroup(controller)
        while folder is not None and (folder / limit_file).is_file():
            cgroup = CellCgroup(folder)
            limit, usage = cgroup.read(limit_file).strip(), cgroup.read(usage_file).strip()
            if limit.isdigit() and usage.isdigit():
                left = max(0, int(limit) - int(usage))
                headroom = left if headroom is None else min(headroom, left)
            folder = folder.parent
    return headroom


def _usable(parent: Path, needed_file: str) -> bool:
    probe = parent / f"{PREFIX}probe-{os.getpid()}-{next(_names)}"  # threads may probe one parent at once
    try:
        probe.mkdir()
        usable = (probe / needed_file).exists()
        probe.rmdir()
    except OSError:
        return False
    return usable


def _own_cgroup(controller: str) -> Path | None:
    """Where this process sits in the v2 hierarchy (controller "") or the v1 ``controller`` one."""
    try:
        mounts = [line.split(" - ") for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        membership = [line.split(":", 2) for line in Path("/proc/self/cgroup").read_text().splitlines()]
    except OSError:
        return None
    own = next((path for _, names, path in membership if controller in names.split(",") or names == controller), None)
    for fields, fs in mounts:
        fs_type, _, options = fs.split(" ", 2)
        mount_point = fields.split()[4]
        v2 = fs_type == "cgroup2" and not controller
        v1 = fs_type == "cgroup" and controller and controller in options.split(",")
        if own is not None and (v2 or v1):
            return Path(mount_point) / own.lstrip("/")
    return None


def sweep(parent: Path) -> None:
    """Kill and remove cgroups left by a policybox process that died without cleaning up (e.g.
    SIGKILL), with the cgroups below them (a memory budget holds its cells').

    Never raises: a cgroup it cannot list or remove stays for the next sweep, and the episode goes on.
    """
    try:
        paths = list(parent.glob(f"{PREFIX}*-*"))
    except OSError:
        return
    for path in paths:
        host_pid = path.name[len(PREFIX) :].split("-")[0]
        try:
            if host_pid.isdigit() and not psutil.pid_exists(int(host_pid)):
                CellCgroup(path).kill_and_remove_tree(timeout=0.5)
        except (OSError, psutil.Error):
            continue
