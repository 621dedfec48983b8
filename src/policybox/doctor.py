"""Which sandbox layers work on this machine: found by starting a real cell with every layer and
letting a probe policy try to get past each one (``policybox.probe``), then checking from outside."""

from __future__ import annotations

import functools
import json
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from policybox.episode import EpisodeSettings, run_episode
from policybox.probe import MARK
from policybox.sandbox import ACTIVE, Layer, SandboxLevel
from policybox.spec import PolicySpec

SECRET = "POLICYBOX_DOCTOR_SECRET"


@dataclass(frozen=True)
class LayerCheck:
    layer: Layer
    works: bool
    detail: str


@functools.cache
def diagnose() -> tuple[LayerCheck, ...]:
    """Every layer, whether it works here and why (not); cached for the life of this process."""
    with tempfile.TemporaryDirectory(prefix="policybox-doctor-") as folder, _udp_listener() as listener:
        outside = Path(folder) / "outside.txt"
        spec = PolicySpec(
            class_path="policybox.probe.SandboxProbe",
            init_kwargs={
                "host_pid": os.getpid(),
                "udp_port": listener.getsockname()[1],
                "secret_name": SECRET,
                "outside": str(outside),
            },
        )
        os.environ[SECRET] = "the host's secret"
        try:
            settings = EpisodeSettings(steps=1, sandbox=SandboxLevel.STANDARD, seccomp=True)
            agent = run_episode([spec], settings, Path(folder) / "logs").agents[0]
        finally:
            del os.environ[SECRET]
        breaches = _probe_report(Path(agent.log_path)) if agent.log_path else {}
        breaches["network"] = breaches.get("network") or _received(listener)
        breaches["landlock"] = breaches.get("landlock") or (f"{outside} was written" if outside.exists() else None)
    if agent.failure is not None and agent.failure.phase == "init":
        return tuple(LayerCheck(layer, False, f"probe cell failed: {agent.failure.one_line()}") for layer in Layer)
    return tuple(_check(layer, agent.sandbox.get(layer), breaches.get(layer)) for layer in Layer)


def _check(layer: Layer, status: str | None, breach: str | None) -> LayerCheck:
    if status is None:
        return LayerCheck(layer, False, "not applied")
    if not status.startswith(ACTIVE):
        return LayerCheck(layer, False, status.removeprefix("unavailable: "))
    if breach:
        return LayerCheck(layer, False, f"applied, but the probe got through: {breach}")
    return LayerCheck(layer, True, status.removeprefix(ACTIVE).lstrip(": ") or "verified")


def unavailable(layers: list[Layer]) -> list[LayerCheck]:
    return [check for check in diagnose() if check.layer in layers and not check.works]


def _probe_report(log: Path) -> dict[str, str | None]:
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    return {}


def _udp_listener() -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.setblocking(False)
    return listener


def _received(listener: socket.socket) -> str | None:
    try:
        listener.recv(64)
    except BlockingIOError:
        return None
    return "the host's UDP listener received the probe's packet"
