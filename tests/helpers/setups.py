"""Submissions with a setup script that makes their checkpoint: the script, a team's package around it,
and one whose script sleeps in a child process (a stall to stop)."""

from __future__ import annotations

import json
import signal
import textwrap
import uuid
from pathlib import Path

from conftest import POLICIES

BUILD = """
import os
from pathlib import Path
manifest = Path("cogames.toml").exists() or Path("policy_spec.json").exists()
print("setting up in", os.getcwd(), "with its manifest:", manifest, "and TEAM_MODE", os.environ.get("TEAM_MODE"))
Path("ckpt").mkdir()
Path("ckpt/weights.txt").write_text("built-by-setup")
"""


def team(folder: Path, script: str, manifest: str = "cogames.toml") -> Path:
    """A submission whose checkpoint its setup script is to make."""
    (folder / "teambot").mkdir(parents=True)
    (folder / "teambot" / "__init__.py").write_text("")
    (folder / "teambot" / "policy.py").write_text((POLICIES / "packed.py").read_text())
    (folder / "setup.py").write_text(textwrap.dedent(script))
    fields = {"class_path": "teambot.policy.Packed", "data_path": "ckpt/weights.txt", "setup_script": "setup.py"}
    if manifest == "cogames.toml":
        (folder / manifest).write_text("[policy]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items()))
    else:
        (folder / manifest).write_text(json.dumps({**fields, "policy_env_interface": None, "env": {"TEAM_MODE": "x"}}))
    return folder


WAKE = signal.SIGUSR1


def sleeper(folder: Path, seconds: float, marker: str) -> Path:
    """A submission whose setup script sleeps ``seconds`` in a child process whose command line holds
    ``marker`` (so that a leftover is found by it), then makes the checkpoint. ``wake`` ends the sleep
    early, as a success: the child exits 0 on ``WAKE``."""
    sleep = f"import signal, sys, time; signal.signal({int(WAKE)}, lambda *_: sys.exit(0)); time.sleep({seconds})"
    child = f"[sys.executable, '-c', {sleep!r}, '{marker}']"
    return team(folder, f"import subprocess, sys\nsubprocess.run({child}, check=True)\n" + BUILD)


def unique_marker() -> str:
    return f"marker-{uuid.uuid4().hex}"
