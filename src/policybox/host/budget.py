"""The memory budget all cells of this host share: one cgroup over them, with a limit of its own.

Each cell has its own memory limit (``--memory-limit-mb``), and nothing in those bounds their sum:
24 cells of 4 GiB may ask for far more than the machine has, and under machine-wide pressure the
kernel's OOM killer picks its victim among every process -- a worker, a zygote or the host as well
as a cell. So the host puts every cell's memory cgroup into one parent cgroup, the *budget*, whose
own limit is what all of them together may use (``--memory-budget-mb``): v1
``memory.limit_in_bytes``, or v2 ``memory.max`` with the memory controller passed on to the cells'
cgroups. A parent cgroup rather than a share of memory per cell: the kernel enforces the true sum,
a cell may use what the others leave, and when the sum is reached the budget's own OOM killer
chooses among the cells alone (all at ``oom_score_adj`` 1000, so the one using most), never a
process outside them. A cell's own limit is at most the budget.

Where no such cgroup can be made (no root, no memory controller), the budget is *divided*: each
cell's limit is at most the budget divided by the cells that run at once -- approximate, since a
cell cannot use what another leaves, and the limit is then an address-space one.

The default is ``DEFAULT_SHARE`` of the memory available when the budget is first made
(``MemAvailable``, or what this process's memory cgroups still allow if that is less): the rest is
for the host, its zygotes and workers, the game, the page cache and the rest of the machine.

A budget belongs to a process tree: the first episode of a process (``policybox run``, the driver
of an evaluation) makes it, and it is removed when that process exits; worker processes handed it
(``adopt``) put their cells into the same cgroup. One left by a host that was SIGKILLed is swept by
the next host (``host.cgroup.sweep``), with the cells' cgroups inside it. Two policybox commands
running at once have a budget each.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from policybox.host.cgroup import (
    PREFIX,
    CellCgroup,
    memory_headroom,
    new_child,
    sweep,
    v1_parent,
    v2_memory_parent,
)
from policybox.results import MemoryBudget

MIB = 1024 * 1024
DEFAULT_SHARE = 0.8
LIMIT_FILES = {"v1": "memory.limit_in_bytes", "v2": "memory.max"}
NAME = "budget"
CgroupVersion = Literal["v1", "v2"]


@dataclass(frozen=True)
class Budget:
    """What all cells together may use: ``limit`` bytes, enforced by the cgroup ``folder`` (v1 or v2)
    over them, or, with no ``version``, divided among the cells that run at once."""

    limit: int
    version: CgroupVersion | None = None
    folder: Path | None = None

    def cell_limit(self, wanted: int, cells: int) -> int:
        """The memory limit in force for a cell that asks for ``wanted`` bytes, one of ``cells`` at once."""
        return min(wanted, self.limit if self.version else self.limit // max(1, cells))

    def divided(self) -> Budget:
        """The same budget divided among the cells (for a cell whose cgroup cannot be in the budget's)."""
        return Budget(self.limit)

    def split(self, processes: int) -> Budget:
        """What each of ``processes`` processes sharing this budget gets (evaluate's workers): the same
        cgroup, or an equal part of a divided budget."""
        return self if self.version else Budget(self.limit // max(1, processes))

    def folder_for(self, version: str) -> Path | None:
        """Where cells' ``version`` cgroups go to be inside the budget (None: not in this hierarchy)."""
        return self.folder if self.version == version else None

    def reached(self) -> bool:
        """Whether the budget's own limit ever held memory back (always False for a divided one)."""
        return self.folder is not None and CellCgroup(self.folder).limit_reached()

    def describe(self, cells: int) -> MemoryBudget:
        """The budget as an episode of ``cells`` cells records it."""
        if self.version is None:
            how = f"divided: at most {self.limit // max(1, cells) // MIB} MiB for each of {cells} cells (approximate)"
            return MemoryBudget(mib=self.limit // MIB, enforced_by=how)
        return MemoryBudget(mib=self.limit // MIB, enforced_by=f"cgroup {self.version}", cgroup=str(self.folder))


_lock = threading.Lock()
_budget: Budget | None = None
_adopted = False


def host_budget(mib: int | None) -> Budget:
    """This process's budget, of ``mib`` MiB (None: the default). Made on first use; an episode that
    asks for another size resizes it (the last one started wins: episodes that run at once in one
    process should ask for the same). In a process that was handed a budget (``adopt``), always that one."""
    global _budget
    with _lock:
        if _adopted and _budget is not None:
            return _budget
        wanted = default_limit() if mib is None else mib * MIB
        if _budget is None:
            _budget = _make(wanted)
        elif _budget.limit != wanted:
            _budget = _resized(_budget, wanted)
        return _budget


def adopt(budget: Budget) -> None:
    """Put this process's cells into ``budget``, which the process that started it made (and will
    remove); cgroups that a lost predecessor's cells left in it are swept first."""
    global _budget, _adopted
    with _lock:
        _budget, _adopted = budget, True
    if budget.folder is not None:
        sweep(budget.folder)


@functools.cache
def default_limit() -> int:
    """``DEFAULT_SHARE`` of the memory available now, in whole MiB (found once per process: later,
    cells use some of it)."""
    headroom = memory_headroom()
    available = _mem_available() if headroom is None else min(_mem_available(), headroom)
    return int(available * DEFAULT_SHARE) // MIB * MIB


def _mem_available() -> int:
    """What the kernel estimates can be allocated without swapping (else the free pages)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _make(limit: int) -> Budget:
    """A budget cgroup in this process's v2 cgroup (where children may limit memory), else in its v1
    memory cgroup; a divided budget where neither can be made."""
    parents: tuple[tuple[CgroupVersion, Path | None], ...] = (("v2", v2_memory_parent()), ("v1", v1_parent("memory")))
    for version, parent in parents:
        if parent is None:
            continue
        stale = parent / f"{PREFIX}{os.getpid()}-{NAME}"  # of a dead process that had this pid
        CellCgroup(stale).kill_and_remove_tree(timeout=0.5)
        cgroup = new_child(parent, NAME)
        if cgroup is None:
            continue
        try:
            if version == "v2":
                _pass_on_controllers(cgroup)
            budget = _resized(Budget(0, version, cgroup.path), limit, strict=True)
        except OSError:
            cgroup.remove()
            continue
        atexit.register(cgroup.kill_and_remove_tree)
        return budget
    return Budget(limit)


def _pass_on_controllers(cgroup: CellCgroup) -> None:
    """Let the cells' v2 cgroups inside the budget have every controller it has (memory is a must)."""
    for controller in cgroup.read("cgroup.controllers").split():
        try:
            cgroup.write("cgroup.subtree_control", f"+{controller}")
        except OSError:
            if controller == "memory":
                raise


def _resized(budget: Budget, limit: int, strict: bool = False) -> Budget:
    """The budget with its cgroup's limit set to ``limit``, as the kernel then reports it (rounded to
    pages). If the kernel refuses (more is in use than ``limit``), unchanged -- or, if ``strict``, raise."""
    if budget.version is None:
        return Budget(limit)
    assert budget.folder is not None
    cgroup = CellCgroup(budget.folder)
    name = LIMIT_FILES[budget.version]
    try:
        cgroup.write(name, str(limit))
    except OSError:
        if strict:
            raise
        return budget
    applied = cgroup.read(name).strip()
    return Budget(int(applied) if applied.isdigit() else limit, budget.version, budget.folder)
