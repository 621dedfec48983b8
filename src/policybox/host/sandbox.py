"""The host's half of one cell's sandbox: its uid, scratch folder, cgroups and clean environment.

The host prepares what must exist before the cell starts (a scratch folder owned by the cell's
uid, cgroups with limits -- its memory cgroup inside the host's memory budget, see
``policybox.host.budget`` -- and an environment without the host's secrets) and hands the cell a
SandboxPlan for the layers the cell applies to itself (see ``policybox.cell.sandbox``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import psutil

from policybox.host.budget import Budget
from policybox.host.cgroup import CellCgroup, new_accounting_cgroup, new_kill_cgroup, new_limit_cgroup
from policybox.host.record import AgentRecord
from policybox.host.remove import remove_tree
from policybox.host.uids import UidLease, lease_uid
from policybox.limits import Limits
from policybox.results import MemoryLimit
from policybox.sandbox import ACTIVE, Layer, SandboxLevel, SandboxPlan
from policybox.threads import thread_environment

MIB = 1024 * 1024
# Variables a cell may inherit: locale, time zone, and knobs of numeric libraries (its thread budget,
# policybox.threads, is set over the host's thread counts).
ENV_ALLOW = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
ENV_ALLOW_PREFIXES = ("LC_", "OMP_", "MKL_", "OPENBLAS_NUM_THREADS")
HOST_SIDE = {Layer.ENVIRONMENT, Layer.MEMORY, Layer.PROCESSES, Layer.CPU}


def wanted_layers(level: SandboxLevel, seccomp: bool) -> list[Layer]:
    if level == SandboxLevel.OFF:
        return []
    layers: list[Layer] = [layer for layer in Layer if layer != Layer.SECCOMP]
    return [*layers, Layer.SECCOMP] if seccomp or level == SandboxLevel.STRICT else layers


def host_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ENV_ALLOW or k.startswith(ENV_ALLOW_PREFIXES)}


SCRATCH_PREFIX = "policybox-scratch-"


class ScratchRoot:
    """One folder per episode holding each cell's scratch folder; others may pass through, not list.

    Named after the host's pid, so that folders a killed host left behind are removed by the next one.
    """

    def __init__(self) -> None:
        _sweep_scratch()
        self.path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        self.path.chmod(0o711)

    def close(self) -> str | None:
        """Remove the folder and all the cells left in it; what could not be removed, if anything."""
        problems = remove_tree(self.path)
        return "; ".join(problems) if problems else None


def _sweep_scratch() -> None:
    """Remove scratch folders whose host has died; never raises (a sweep must not stop an episode)."""
    try:
        folders = list(Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"))
    except OSError:
        return
    for folder in folders:
        host_pid = folder.name[len(SCRATCH_PREFIX) :].split("-")[0]
        try:
            if host_pid.isdigit() and not psutil.pid_exists(int(host_pid)):
                remove_tree(folder)  # what it cannot remove stays for the next sweep to try again
        except (OSError, psutil.Error):
            continue


class CellSandbox:
    def __init__(
        self,
        record: AgentRecord,
        level: SandboxLevel,
        layers: list[Layer],
        limits: Limits,
        root: Path,
        uid_lease: UidLease | None = None,
        budget: Budget | None = None,
        cells: int = 1,
    ) -> None:
        """``uid_lease``: the cell's uid, when the caller leased several at once; else one is leased here.
        ``budget``: the memory all the host's cells share, ``cells`` of them at once (needed with the
        memory layer). A record the host marked ``online`` keeps the host's network: no network layer,
        every other layer as ``layers`` says."""
        self.level = level
        self.layers = [layer for layer in layers if not (record.online and layer == Layer.NETWORK)]
        self._limits = limits
        self._spec = record.spec
        self._threads = record.threads
        agent_id = record.agent_id
        self.statuses: dict[Layer, str] = {}
        self.uid = self.gid = None
        self._uid_lease: UidLease | None = None
        if Layer.UID in layers:
            if os.geteuid() == 0:  # a uid no other live cell on the machine has, held until close()
                self._uid_lease = uid_lease or lease_uid()
                self.uid = self.gid = self._uid_lease.uid
            else:
                self.statuses[Layer.UID] = "unavailable: not root, so cannot switch to another user"
        self.scratch: Path | None = None
        if layers:
            self.scratch = root / f"agent-{agent_id}"
            self.scratch.mkdir(mode=0o700)
            if self.uid is not None and self.gid is not None:
                os.chown(self.scratch, self.uid, self.gid)
        if Layer.ENVIRONMENT in layers:
            self.statuses[Layer.ENVIRONMENT] = ACTIVE  # applied by the launcher, from environment()
        self._budget = budget
        self._cells = cells
        self.kill_cgroup = new_kill_cgroup(budget.folder_for("v2") if budget else None)
        self._limit_cgroups: list[CellCgroup] = []
        self.cpu_cgroup: CellCgroup | None = None
        self._memory_cgroup: CellCgroup | None = None
        self.memory: MemoryLimit | None = None  # the limit in force, once attached

    def environment(self) -> dict[str, str]:
        """What the cell starts with: the allow-list, its HOME, its thread budget and the spec's
        variables (with no environment layer, the host's own instead of the allow-list and HOME)."""
        return {**self.shared_environment(), **self._spec.env}

    def shared_environment(self) -> dict[str, str]:
        """``environment()`` but for the spec's own variables, which may be secrets (``env.NAME=@FILE``):
        what may pass through a zygote. A zygote forks every team's cells, and each inherits its memory,
        freed bytes included; so a spec's variables reach its cell in its SETUP instead (the cell sets
        them before it imports its policy)."""
        threads = thread_environment(self._threads)
        if Layer.ENVIRONMENT not in self.layers:
            return {**os.environ, **threads}
        home = str(self.scratch)
        user = f"policybox-agent-{self.uid if self.uid is not None else os.getuid()}"
        return {**host_environment(), "HOME": home, "TMPDIR": home, "USER": user, "LOGNAME": user, **threads}

    def attach(self, pid: int) -> None:
        """Put the new cell (which runs no policy code yet) into its cgroups."""
        if self.kill_cgroup is not None:
            try:
                self.kill_cgroup.add(pid)
            except OSError:
                self.kill_cgroup.remove()
                self.kill_cgroup = None
        if Layer.MEMORY in self.layers:
            self._limit_memory(pid)
        if Layer.PROCESSES in self.layers:
            self._limit(pid, "pids", self._limits.max_processes, Layer.PROCESSES)
        if Layer.CPU in self.layers:
            self._account(pid)

    def _account(self, pid: int) -> None:
        cgroup = new_accounting_cgroup(self.kill_cgroup)
        if cgroup is not None and cgroup is not self.kill_cgroup:
            self._limit_cgroups.append(cgroup)
            try:
                cgroup.add(pid)
            except OSError:
                cgroup = None
        if cgroup is None:
            self.statuses[Layer.CPU] = "unavailable: no cgroup can account the cell's CPU time here"
            return
        self.cpu_cgroup = cgroup
        self.statuses[Layer.CPU] = f"{ACTIVE}: {self._limits.cpu_limit_s} CPU s over all its processes (cgroup)"

    def cpu_seconds(self) -> float | None:
        """CPU time used so far by all of the cell's processes together, where a cgroup counts it."""
        return None if self.cpu_cgroup is None else self.cpu_cgroup.cpu_seconds()

    def _limit_memory(self, pid: int) -> None:
        """Its own memory cgroup, inside the host's budget, limited to what it asks for but at most the
        budget; with no memory cgroup, an address-space limit of its share of the budget instead."""
        assert self._budget is not None
        wanted = self._limits.memory_limit_mb * MIB
        limit = self._budget.cell_limit(wanted, self._cells)
        cgroup = self._limit(pid, "memory", limit, Layer.MEMORY, self._budget.folder_for("v1"))
        if cgroup is None:
            limit = self._budget.divided().cell_limit(wanted, self._cells)
            self.memory = MemoryLimit(mib=limit // MIB, enforced_by="address space (approximate)")
            return
        self._memory_cgroup = cgroup
        version = "v2" if cgroup is self.kill_cgroup else "v1"
        self.memory = MemoryLimit(mib=limit // MIB, enforced_by=f"cgroup {version}")
        budget = f"the host's budget of {self._budget.limit // MIB} MiB"
        if self._budget.version is None:
            where = f"at most 1/{self._cells} of {budget} (no budget cgroup here)"
        else:
            where = f"inside {budget} for all its cells"
        self.statuses[Layer.MEMORY] = f"{ACTIVE}: memory cgroup ({version}), limit {limit // MIB} MiB, {where}"

    def _limit(
        self, pid: int, controller: str, limit: int, layer: Layer, v1_folder: Path | None = None
    ) -> CellCgroup | None:
        """Put the cell into a cgroup limiting ``controller`` to ``limit``; the cgroup, or None (the
        layer's status says why)."""
        cgroup = new_limit_cgroup(controller, limit, self.kill_cgroup, v1_folder)
        if cgroup is None:
            self.statuses[layer] = f"unavailable: no usable {controller} cgroup on this machine"
            return None
        if cgroup is not self.kill_cgroup:
            self._limit_cgroups.append(cgroup)
            try:
                cgroup.add(pid)
            except OSError as exc:
                self.statuses[layer] = f"unavailable: cannot join the {controller} cgroup ({exc.strerror})"
                return None
        self.statuses[layer] = f"{ACTIVE}: {controller} cgroup, limit {limit}"
        return cgroup

    def plan(self) -> SandboxPlan:
        layers = [layer for layer in self.layers if layer not in HOST_SIDE and layer not in self.statuses]
        memory_cgroup = self.statuses.get(Layer.MEMORY, "").startswith(ACTIVE)
        if Layer.MEMORY in self.layers and not memory_cgroup:
            layers.append(Layer.MEMORY)  # no cgroup holds it: the cell sets an address-space limit instead
        readable = [str(Path(p).parent if p.endswith(".py") else p) for p in self._policy_paths()]
        return SandboxPlan(
            level=self.level,
            layers=layers,
            uid=self.uid,
            gid=self.gid,
            scratch=str(self.scratch) if self.scratch else None,
            readable=readable,
            cpu_seconds=self._limits.cpu_limit_s,
            file_size_bytes=self._limits.file_size_limit_mb * MIB,
            disk_bytes=self._limits.disk_limit_mb * MIB,
            disk_files=self._limits.disk_limit_files,
            open_files=self._limits.max_open_files,
            processes=self._limits.max_processes,
            address_space_bytes=None if memory_cgroup or self.memory is None else self.memory.mib * MIB,
        )

    def _policy_paths(self) -> list[str]:
        file_class = self._spec.file_and_class
        paths = [*self._spec.python_path, *([file_class[0]] if file_class else [])]
        return paths + ([self._spec.data_path] if self._spec.data_path else [])

    def out_of_memory(self) -> str | None:
        """Which limit was reached when the kernel's OOM killer killed a process of this cell; None if
        it killed none. Told apart by which cgroup's own limit held memory back: the cell's, or the
        budget's; neither means the whole machine ran out."""
        cgroup = self._memory_cgroup
        if cgroup is None or cgroup.oom_kills() == 0:
            return None
        assert self.memory is not None  # set with the memory cgroup
        if cgroup.limit_reached():
            return f"its own memory limit of {self.memory.mib} MiB was reached"
        if self._budget is not None and self._budget.reached():
            return f"the host's memory budget of {self._budget.limit // MIB} MiB for all its cells was reached"
        return "the machine ran out of memory"

    def kill(self) -> None:
        if self.kill_cgroup is not None:
            self.kill_cgroup.kill()

    def close(self) -> None:
        """Kill what is left in the cell's cgroups and remove them."""
        for cgroup in [self.kill_cgroup, *self._limit_cgroups]:
            if cgroup is not None:
                cgroup.kill_and_remove()
        if self._uid_lease is not None:
            if self.scratch is not None:
                remove_tree(self.scratch)  # nothing owned by the uid may outlive its lease
            self._uid_lease.release()
