"""Which sandbox layers work on this machine: found by starting a real cell with every layer and
letting a probe policy try to get past each one (``policybox.probe``), then checking from outside.

It sits in the host layer, below the episode: it starts its one cell with the pool and launcher an
episode uses (a cell forked by a zygote, the arena's cell half) and plays nothing, so the episode's
strict mode and the Ray backend can call it, and ``policybox doctor`` only presents what it finds."""

from __future__ import annotations

import functools
import json
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from policybox.envs import GameRequest, family
from policybox.host.cell_groups import CellGroup
from policybox.host.launcher import ZygoteLauncher
from policybox.host.process_pool import ProcessPool
from policybox.host.record import AgentRecord
from policybox.host.zygote import Zygote
from policybox.limits import Limits
from policybox.probe import MARK
from policybox.results import Failure
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
            record = _probe_cell(spec, Path(folder) / "probe.log")
        finally:
            del os.environ[SECRET]
        breaches = _probe_report(Path(folder) / "probe.log")
        breaches["network"] = breaches.get("network") or _received(listener)
        breaches["landlock"] = breaches.get("landlock") or (f"{outside} was written" if outside.exists() else None)
    if record.failure is not None and record.failure.phase == "init":
        return tuple(LayerCheck(layer, False, f"probe cell failed: {record.failure.one_line()}") for layer in Layer)
    return tuple(_check(layer, record.sandbox.get(layer), breaches.get(layer)) for layer in Layer)


def _probe_cell(spec: PolicySpec, log: Path) -> AgentRecord:
    """Start the probe in a cell with every layer (forked by a zygote, as an episode's cells are), let
    it report, stop it: its record holds the layers as the host verified them."""
    adapter = family("mettagrid")
    game = adapter.open_host(GameRequest("arena", {}, 1, 1, 0))  # only for the cell half's setup
    record = AgentRecord(0, spec, "probe", threads=1, log_path=log)
    cell = CellGroup([record], game.cell_setup(0))
    limits = Limits()
    try:
        with (
            Zygote(adapter.ZYGOTE_PRELOAD) as zygote,
            ProcessPool([cell], limits, SandboxLevel.STANDARD, True, ZygoteLauncher(zygote)) as pool,
        ):
            pool.start([cell.setup_message(0, limits.log_limit_bytes)])
    except Exception as exc:  # a zygote that cannot start: every layer unknown, and why
        record.failure = Failure(step=None, phase="init", kind=type(exc).__name__, message=str(exc))
    finally:
        game.close()
    return record


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
    if not log.is_file():
        return {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(MARK):
            report: dict[str, str | None] = json.loads(line[len(MARK) :])
            return report
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
