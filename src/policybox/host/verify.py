"""The host's own check of a cell's sandbox, from outside the cell: its /proc entries, not its word.

A cell reports the layers it applied in READY, after its policy was imported -- and a policy can
patch policybox's modules inside its cell to report anything. So the host reads what the kernel
shows of the cell (``/proc/<pid>/status``, ``ns/``, ``limits``, ``mountinfo``, ``cwd``) and keeps
a layer ``active`` only where that confirms it. Landlock leaves no trace in /proc: it stays the
cell's word, marked ``active (cell-reported)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from policybox.sandbox import ACTIVE, CELL_REPORTED, Layer, SandboxPlan

Check = Callable[[Path, SandboxPlan], str | None]  # None when confirmed, else what /proc shows instead


def verified_statuses(pid: int, plan: SandboxPlan, claims: dict[str, str]) -> dict[str, str]:
    """Each layer of ``plan`` the cell applied: its claim where /proc confirms it, else why not."""
    proc = Path(f"/proc/{pid}")
    statuses = {}
    for layer in plan.layers:
        claim = claims.get(layer)
        if claim is None:
            statuses[layer] = "unavailable: the cell did not report it"
        elif not claim.startswith(ACTIVE):
            statuses[layer] = claim
        elif layer not in CHECKS:
            statuses[layer] = CELL_REPORTED + claim.removeprefix(ACTIVE)
        elif (contradiction := _run(CHECKS[layer], proc, plan)) is not None:
            statuses[layer] = f"unavailable: the cell reported it active, but {contradiction}"
        else:
            statuses[layer] = claim
    return statuses


def _run(check: Check, proc: Path, plan: SandboxPlan) -> str | None:
    try:
        return check(proc, plan)
    except OSError as exc:
        return f"its /proc entry could not be read ({exc.strerror})"


def _read(proc: Path, name: str) -> str:
    return (proc / name).read_text(errors="replace")


def _uid(proc: Path, plan: SandboxPlan) -> str | None:
    ids = re.search(r"^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", _read(proc, "status"), re.M)
    if ids is None or {int(value) for value in ids.groups()} != {plan.uid}:
        return f"it runs as uid {ids.groups() if ids else '?'}"
    return None


def _namespace(kind: str) -> Check:
    def check(proc: Path, plan: SandboxPlan) -> str | None:
        if os.readlink(proc / "ns" / kind) == os.readlink(f"/proc/self/ns/{kind}"):
            return f"it shares the host's {kind} namespace"
        return None

    return check


def _filesystem(proc: Path, plan: SandboxPlan) -> str | None:
    """With root, the view is a mount namespace of its own; without, it is only a working folder."""
    return _namespace("mnt")(proc, plan) if Layer.UID in plan.layers else None


def _mount_at(proc: Path, target: str) -> tuple[str, str] | None:
    """(filesystem type, super options) of the topmost mount at ``target`` in the cell's view."""
    found = None
    for line in _read(proc, "mountinfo").splitlines():
        fields, _, rest = line.partition(" - ")
        if fields.split()[4] == target:
            fs_type, _, options = rest.split(" ", 2)
            found = (fs_type, options)
    return found


def _disk(proc: Path, plan: SandboxPlan) -> str | None:
    assert plan.scratch is not None
    mount = _mount_at(proc, plan.scratch)
    if mount is None or mount[0] != "tmpfs" or f"nr_inodes={plan.disk_files}" not in mount[1]:
        return f"its scratch is not a capped tmpfs ({mount})"
    return None


def _proc(proc: Path, plan: SandboxPlan) -> str | None:
    mount = _mount_at(proc, "/proc")
    if mount is None or not re.search(r"hidepid=(invisible|2)\b", mount[1]):
        return f"its /proc shows every process ({mount})"
    return None


def _rlimits(proc: Path, plan: SandboxPlan) -> str | None:
    limits = _read(proc, "limits")
    wanted = {
        "Max core file size": 0,
        "Max open files": plan.open_files,
        "Max file size": plan.file_size_bytes,
        "Max processes": plan.processes,
        "Max cpu time": plan.cpu_seconds,
    }
    for name, value in wanted.items():
        soft = re.search(rf"^{name}\s+(\S+)", limits, re.M)
        if soft is None or soft[1] != str(value):
            return f"its {name.lower()} is {soft[1] if soft else '?'}, not {value}"
    return None


def _address_space(proc: Path, plan: SandboxPlan) -> str | None:
    soft = re.search(r"^Max address space\s+(\S+)", _read(proc, "limits"), re.M)
    if soft is None or soft[1] != str(plan.address_space_bytes):
        return f"its address space is {soft[1] if soft else '?'}"
    return None


def _seccomp(proc: Path, plan: SandboxPlan) -> str | None:
    status = _read(proc, "status")
    if not re.search(r"^Seccomp:\s+2$", status, re.M) or not re.search(r"^NoNewPrivs:\s+1$", status, re.M):
        return "it has no seccomp filter"
    return None


CHECKS: dict[str, Check] = {
    Layer.UID: _uid,
    Layer.NETWORK: _namespace("net"),
    Layer.IPC: _namespace("ipc"),
    Layer.FILESYSTEM: _filesystem,
    Layer.DISK: _disk,
    Layer.PROC: _proc,
    Layer.RLIMITS: _rlimits,
    Layer.MEMORY: _address_space,  # only cell-applied when no memory cgroup holds the cell
    Layer.SECCOMP: _seccomp,
}
