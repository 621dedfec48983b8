"""Sandbox vocabulary shared by host and cell: levels, layers, and the plan the host hands a cell.

A cell applies its plan's layers before any policy code is imported, and reports each layer as
active or unavailable (with the reason). ``standard`` applies what the machine supports, ``strict``
refuses to run unless every layer works, ``off`` applies none and says so in the result.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

ACTIVE = "active"


class SandboxUnavailable(RuntimeError):
    """A strict sandbox was asked for and this machine cannot provide every layer."""


class SandboxLevel(StrEnum):
    STRICT = "strict"
    STANDARD = "standard"
    OFF = "off"


class Layer(StrEnum):
    """Each protection, as ``policybox doctor`` and every result name it."""

    UID = "uid"  # its own unprivileged uid/gid: cannot signal, ptrace or read other agents or the host
    NETWORK = "network"  # a fresh network namespace: no interfaces, no abstract unix sockets shared
    FILESYSTEM = "filesystem"  # a private scratch folder as cwd and HOME; unreadable folders masked
    LANDLOCK = "landlock"  # everything read-only but its scratch folder; no TCP; no signals out
    RLIMITS = "rlimits"  # CPU seconds, open files, file size, no core dumps, process count
    MEMORY = "memory"  # cgroup memory limit (address-space rlimit where no cgroup is available)
    PROCESSES = "processes"  # pids cgroup: a fork bomb stays inside the cell
    ENVIRONMENT = "environment"  # only allow-listed variables and those the spec passes
    SECCOMP = "seccomp"  # syscalls no policy needs (ptrace, mount, bpf, ...) fail with EPERM


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
    open_files: int
    processes: int
    address_space_bytes: int | None = None  # only when no memory cgroup holds the cell
