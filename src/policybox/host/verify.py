"""The host's own check of a cell's sandbox, from outside the cell: its /proc entries, not its word.

A cell reports the layers it applied in READY, after its policy was imported -- and a policy can
patch policybox's modules inside its cell to report anything. So the host reads what the kernel
shows of the cell (``/proc/<pid>/status``, ``ns/``, ``limits``, ``mountinfo``, ``cwd``) and keeps
a layer ``active`` only where that confirms it, described in its own words (what /proc shows),
never the cell's. Landlock leaves no trace in /proc: it stays the cell's word, marked
``active (cell-reported)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from policybox.sandbox import ACTIVE, CELL_REPORTED, Layer, SandboxPlan

Check = Callable[[Path, SandboxPlan], tuple[bool, str]]  # (confirmed, what /proc shows)


def verified_statuses(pid: int, plan: SandboxPlan, claims: dict[str, str]) -> dict[Layer, str]:
    """Each layer of ``plan`` the cell applied: its claim where /proc confirms it, else why not."""
    proc = Path(f"/proc/{pid}")
    statuses: dict[Layer, str] = {}
    for layer in plan.layers:
        claim = claims.get(layer)
        if claim is None:
            statuses[layer] = "unavailable: the cell did not report it"
        elif not claim.startswith(ACTIVE):
            statuses[layer] = claim
        elif layer not in CHECKS:
            statuses[layer] = CELL_REPORTED + claim.removeprefix(ACTIVE)
        else:
            confirmed, seen = _run(CHECKS[layer], proc, plan)
            statuses[layer] = f"{ACTIVE}: {seen}" if confirmed else f"unavailable: reported active, but {seen}"
    return statuses


def _run(check: Check, proc: Path, plan: SandboxPlan) -> tuple[bool, str]:
    try:
        return check(proc, plan)
    except OSError as exc:
        return False, f"its /proc entry could not be read ({exc.strerror})"


def _read(proc: Path, name: str) -> str:
    return (proc / name).read_text(errors="replace")


def _uid(proc: Path, plan: SandboxPlan) -> tuple[bool, str]:
    ids = re.search(r"^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", _read(proc, "status"), re.M)
    uids = {int(value) for value in ids.groups()} if ids else set()
    return uids == {plan.uid}, f"uid {', '.join(map(str, sorted(uids))) or '?'}"


def _namespace(kind: str) -> Check:
    def check(proc: Path, plan: SandboxPlan) -> tuple[bool, str]:
        own = os.readlink(proc / "ns" / kind)
        if own == os.readlink(f"/proc/self/ns/{kind}"):
            return False, f"it shares the host's {kind} namespace"
        return True, f"own {kind} namespace {own}"

    return check


def _filesystem(proc: Path, plan: SandboxPlan) -> tuple[bool, str]:
    """With root, the view is a mount namespace of its own; without, it is only a working folder."""
    if Layer.UID not in plan.layers:
        return True, f"scratch {plan.scratch} (no private view without root)"
    confirmed, seen = _namespace("mnt")(proc, plan)
    return confirmed, f"scratch {plan.scratch}, {seen}" if confirmed else seen


def _mount_at(proc: Path, target: str) -> tuple[str, str] | None:
    """(filesystem type, super options) of the topmost mount at ``target`` in the cell's view."""
    found = None
    for line in _read(proc, "mountinfo").splitlines():
        fields, _, rest = line.partition(" - ")
        if fields.split()[4] == target:
            fs_type, _, options = rest.split(" ", 2)
            found = (fs_type, options)
    return found


def _disk(proc: Path, plan: SandboxPlan) -> tuple[bool, str]:
    assert plan.scratch is not None
    mount = _mount_at(proc, plan.scratch)
    if mount is None or mount[0] != "tmpfs" or f"nr_inodes={plan.disk_files}" not in mount[1]:
        return False, f"its scratch is not a capped tmpfs ({mount})"
    size = re.search(r"size=(\w+)", mount[1])
    return True, f"scratch tmpfs size={size[1] if size else '?'}, nr_inodes={plan.disk_files}"


def _proc(proc: Path, plan: SandboxPlan) -> tuple[bool, str]:
    mount = _mount_at(proc, "/proc")
    if mount is None or not re.search(r"hidepid=(invisible|2)\b", mount[1]):
        return False, f"its /proc shows every process ({mount})"
    return True, "/proc with hidepid=invisible"


def _rlimits(proc: Path, plan: SandboxPlan) -> tuple[bool, str]:
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
            return False, f"its {name.lower()} is {soft[1] if soft else '?'}, not {value}"
    return True, "core, open files, file size, processes and CPU limits as planned"


def _address_space(proc: Path, plan: SandboxPlan) -> tuple[bool, str]:
    soft = re.search(r"^Max address space\s+(\S+)", _read(proc, "limits"), re.M)
    confirmed = soft is not None and soft[1] == str(plan.address_space_bytes)
    seen = f"{int(soft[1]) // 2**20} MiB" if soft and soft[1].isdigit() else "?"
    return confirmed, f"address-space limit {seen} (approximate)"


def _seccomp(proc: Path, plan: SandboxPlan) -> tuple[bool, str]:
    status = _read(proc, "status")
    filtered = re.search(r"^Seccomp:\s+2$", status, re.M) and re.search(r"^NoNewPrivs:\s+1$", status, re.M)
    return bool(filtered), "seccomp filter mode, no_new_privs" if filtered else "it has no seccomp filter"


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
