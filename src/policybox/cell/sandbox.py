"""The cell's half of its sandbox: the layers a process applies to itself, before any policy import.

Order matters. Namespaces and mounts need root, so they come first (the private filesystem view,
its scratch tmpfs and its /proc, see ``policybox.cell.mounts``); then resource limits; then
Landlock (while the cell is still single-threaded: Landlock binds only the calling thread and the
threads and processes started after it); then the switch to the cell's own uid, which drops every
capability; seccomp last, since it forbids the calls the earlier layers make. Each layer reports
"active" or why it is unavailable; in ``strict`` mode an unavailable layer is an error.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable

from policybox.cell import mounts
from policybox.cell.lifeline import die_with_parent
from policybox.sandbox import ACTIVE, Layer, SandboxLevel, SandboxPlan


class SandboxRefused(RuntimeError):
    """Strict mode and a layer that cannot be applied here."""


def apply(plan: SandboxPlan, parent_pid: int) -> dict[str, str]:
    """Apply the plan's layers to this process; each layer's status."""
    steps: list[tuple[Layer, Callable[[], str]]] = [
        (Layer.NETWORK, lambda: _unshare(mounts.CLONE_NEWNET)),
        (Layer.IPC, lambda: _unshare(mounts.CLONE_NEWIPC)),
        (Layer.FILESYSTEM, lambda: _filesystem(plan)),
        (Layer.DISK, lambda: _disk(plan)),
        (Layer.PROC, lambda: _proc(plan)),
        (Layer.RLIMITS, lambda: _rlimits(plan)),
        (Layer.MEMORY, lambda: _address_space(plan)),
        (Layer.LANDLOCK, lambda: _landlock(plan)),
        (Layer.UID, lambda: _switch_user(plan, parent_pid)),
        (Layer.SECCOMP, lambda: _seccomp()),
    ]
    statuses: dict[str, str] = {}
    for layer, step in steps:
        if layer not in plan.layers:
            continue
        try:
            statuses[layer] = step()
        except Exception as exc:  # each layer's failure is reported, not fatal (unless strict)
            statuses[layer] = f"unavailable: {exc}"
            if plan.level == SandboxLevel.STRICT:
                raise SandboxRefused(f"strict sandbox: layer {layer} failed: {exc}") from exc
    if plan.scratch is not None:
        os.chdir(plan.scratch)
    return statuses


def _unshare(namespace: int) -> str:
    mounts.unshare(namespace)  # a new network namespace has no interfaces at all: loopback stays down
    return ACTIVE


def _namespaced(plan: SandboxPlan) -> bool:
    """Whether this cell builds its own filesystem view (it needs root, and a uid to drop to)."""
    return Layer.UID in plan.layers and os.geteuid() == 0


def _filesystem(plan: SandboxPlan) -> str:
    assert plan.scratch is not None
    if not _namespaced(plan):
        return f"{ACTIVE}: scratch {plan.scratch}"
    mounts.enter_mount_namespace()
    masked = mounts.private_view(interpreter_paths(), [plan.scratch], plan.readable)
    return f"{ACTIVE}: scratch {plan.scratch}, private {', '.join(masked)}; policy files read-only"


def interpreter_paths() -> tuple[str, ...]:
    """What the cell's Python needs to reach: its installation, its import path, and policybox."""
    policybox_dir = os.path.dirname(os.path.dirname(__file__))  # an editable install is not on sys.path
    return (sys.base_prefix, sys.prefix, sys.exec_prefix, *sys.path, policybox_dir)


def plan_ahead() -> None:
    """Work every cell of this process would repeat, done once before the zygote forks them."""
    mounts.interpreter_masks(interpreter_paths())


def _disk(plan: SandboxPlan) -> str:
    assert plan.scratch is not None
    if not _namespaced(plan):
        raise RuntimeError("needs root for a private mount namespace")
    mounts.private_scratch(plan.scratch, plan.uid, plan.gid, plan.disk_bytes, plan.disk_files)
    return f"{ACTIVE}: scratch tmpfs, {plan.disk_bytes // 2**20} MiB, {plan.disk_files} files"


def _proc(plan: SandboxPlan) -> str:
    if not _namespaced(plan):
        raise RuntimeError("needs root for a private mount namespace")
    mounts.private_proc()
    return f"{ACTIVE}: hidepid=invisible"


def _rlimits(plan: SandboxPlan) -> str:
    limits = {
        resource.RLIMIT_NOFILE: plan.open_files,
        resource.RLIMIT_FSIZE: plan.file_size_bytes,
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_NPROC: plan.processes,  # counted per uid: this cell's own once it switches
    }
    for which, value in limits.items():
        resource.setrlimit(which, (value, value))
    # The hard CPU limit a little above the soft one: at the soft limit the kernel sends SIGXCPU (a
    # cause the host can name); at an equal hard limit it would send a bare SIGKILL instead.
    resource.setrlimit(resource.RLIMIT_CPU, (plan.cpu_seconds, plan.cpu_seconds + 5))
    return ACTIVE


def _address_space(plan: SandboxPlan) -> str:
    """Only used where no memory cgroup holds the cell; counts reserved, not used, memory."""
    assert plan.address_space_bytes is not None
    resource.setrlimit(resource.RLIMIT_AS, (plan.address_space_bytes, plan.address_space_bytes))
    return f"{ACTIVE}: address-space limit {plan.address_space_bytes // 2**20} MiB (approximate)"


def _landlock(plan: SandboxPlan) -> str:
    from policybox.cell import landlock

    assert plan.scratch is not None
    # TCP is the network layer's to deny: a cell the host lets keep its network (a wheels-only build)
    # has no network layer in its plan.
    block_tcp = Layer.NETWORK in plan.layers
    abi = landlock.restrict(read_only=["/"], read_write=[plan.scratch, "/dev/null"], block_tcp=block_tcp)
    return f"{ACTIVE}: ABI {abi}"


def _switch_user(plan: SandboxPlan, parent_pid: int) -> str:
    assert plan.uid is not None and plan.gid is not None
    os.setgroups([])
    os.setresgid(plan.gid, plan.gid, plan.gid)
    os.setresuid(plan.uid, plan.uid, plan.uid)
    die_with_parent(parent_pid)  # a change of credentials clears the parent-death signal: arm it again
    return f"{ACTIVE}: uid {plan.uid}"


def _seccomp() -> str:
    from policybox.cell import seccomp

    seccomp.install_denylist()
    return f"{ACTIVE}: {seccomp.summary()}"
