"""SandboxProbe: a policy that, inside a real cell, tries to get past each sandbox layer and prints
what happened as one JSON line to its log. ``policybox doctor`` runs it; it never really plays. It
has the shape of every family's policies (MettaGrid's ``agent_policy``/``step``, PettingZoo's
``act``) and imports none, so the doctor depends on no game.

Each check targets its own layer only (Landlock also blocks TCP and signals, so the uid check reads
the host's /proc/<pid>/environ instead of signalling it, and the network check sends UDP). The
filesystem check also imports what real policies import -- each game family's shorthand policies --
since a private view that hides the interpreter's files (say, a virtualenv reached through a
symlink) breaks every policy while every layer looks applied.
"""

from __future__ import annotations

import json
import os
import resource
import socket
from collections.abc import Callable
from pathlib import Path

MARK = "POLICYBOX-PROBE "


class SandboxProbe:
    def __init__(
        self, *env_info: object, host_pid: int, udp_port: int, secret_name: str, outside: str, **kwargs: object
    ) -> None:
        checks = {
            "uid": _attempt(lambda: Path(f"/proc/{host_pid}/environ").read_bytes(), "read the host's environ"),
            "network": _attempt(lambda: _send_udp(udp_port), "sent a UDP packet to the host"),
            "filesystem": _scratch_is_cwd() or _policy_imports(),
            "proc": _other_processes(),
            "landlock": _attempt(lambda: Path(outside).write_text("escaped"), f"wrote {outside}"),
            "rlimits": None if resource.getrlimit(resource.RLIMIT_CORE)[1] == 0 else "core dumps allowed",
            "environment": "the host's secret is visible" if secret_name in os.environ else None,
            "seccomp": None if "Seccomp:\t2" in Path("/proc/self/status").read_text() else "no seccomp filter",
        }
        print(MARK + json.dumps(checks), flush=True)

    def agent_policy(self, agent_id: int) -> SandboxProbe:
        return self

    def step(self, observation: object) -> str:
        return "noop"

    def act(self, observation: object) -> int:
        return 0


def _scratch_is_cwd() -> str | None:
    return None if os.getcwd() == os.environ.get("HOME") else "cwd is not the scratch folder"


def _policy_imports() -> str | None:
    """None when this cell can import every installed game family's shorthand policies."""
    import importlib

    from policybox.envs import FAMILIES, family

    for name in FAMILIES:
        try:
            class_path = family(name).resolve_shorthand("random")
        except ImportError:  # the family's library is not installed: no policy of it can play here anyway
            continue
        try:
            importlib.import_module(class_path.rpartition(".")[0])
        except Exception as exc:
            return f"policies cannot be imported in a cell: {class_path}: {type(exc).__name__}: {exc}"
    return None


def _other_processes() -> str | None:
    others = [pid for pid in os.listdir("/proc") if pid.isdigit() and int(pid) != os.getpid()]
    return f"/proc shows {len(others)} other processes" if others else None


def _send_udp(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"probe", ("127.0.0.1", port))


def _attempt(action: Callable[[], object], breach: str) -> str | None:
    """None when the action is refused (the layer held), else a description of the breach."""
    try:
        action()
    except OSError:
        return None
    return breach
