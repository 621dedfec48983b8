"""Sandbox vocabulary shared by host and cell: levels, layers, and the plan the host hands a cell.

A cell applies its plan's layers before any policy code is imported, and reports each layer as
active or unavailable (with the reason). ``standard`` applies what the machine supports, ``strict``
refuses to run unless every layer works, ``off`` applies none and says so in the result.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from policybox.errors import PolicyboxError

ACTIVE = "active"
# A layer only the cell itself can see (no trace of it in /proc): reported, not verified, by the host.
CELL_REPORTED = "active (cell-reported)"


class SandboxUnavailable(PolicyboxError, RuntimeError):
    """A strict sandbox was asked for and this machine cannot provide every layer."""


class SandboxLevel(StrEnum):
    STRICT = "strict"
    STANDARD = "standard"
    OFF = "off"


class Layer(StrEnum):
    """Each protection, as ``policybox doctor`` and every result name it."""

    UID = "uid"  # its own unprivileged uid/gid: cannot signal, ptrace or read other agents or the host
    NETWORK = "network"  # a fresh network namespace: no interfaces, no abstract unix sockets shared
    IPC = "ipc"  # its own IPC namespace: System V / POSIX shared memory and queues are private, die with it
    FILESYSTEM = "filesystem"  # private scratch as cwd and HOME; shared and root-only folders masked
    DISK = "disk"  # its scratch is a tmpfs of its own, capped in bytes and files, gone when it ends
    PROC = "proc"  # a /proc that shows only its own processes
    LANDLOCK = "landlock"  # everything read-only but its scratch folder; no TCP; no signals out
    RLIMITS = "rlimits"  # CPU seconds per process, open files, file size, no core dumps, process count
    CPU = "cpu"  # CPU seconds over all its processes, measured by the host in its cgroup
    MEMORY = "memory"  # cgroup memory limit (address-space rlimit where no cgroup is available)
    PROCESSES = "processes"  # pids cgroup: a fork bomb stays inside the cell
    ENVIRONMENT = "environment"  # only allow-listed variables and those the spec passes
    SECCOMP = "seccomp"  # syscalls no policy needs (ptrace, mount, namespaces, keyrings, ...) are refused


class SandboxPlan(BaseModel):
    """What one cell must apply; sent in SETUP. Paths are absolute; limits are already converted."""

    model_config = ConfigDict(extra="forbid")

    level: SandboxLevel
    layers: list[Layer]
    uid: int | None = None
    gid: int | None = None
    scratch: str | None = None
    readable: list[str] = []  # paths the cell must still see after masking (policy files, checkpoints)
    cpu_seconds: int
    file_size_bytes: int
    disk_bytes: int
    disk_files: int
    open_files: int
    processes: int
    address_space_bytes: int | None = None  # only when no memory cgroup holds the cell
