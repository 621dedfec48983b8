"""An episode's start-up: its agents' records (thread budget, log, whether they need torch), the cells
that play them started and ready (a ``CellPool``), and what refuses an episode before any step --
a strict sandbox this machine lacks, a spec not prepared, a policy that cannot be built in its cell.

Below the episode loop (``policybox.episode``), which plays what starts here, and used as it is by a
cell job (``policybox.files.cell_jobs``) and the MettaGrid wrapper (``policybox.mettagrid``).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from policybox.errors import SpecError
from policybox.game import open_env
from policybox.host import torch_use
from policybox.host.cell_groups import cell_count, cell_groups
from policybox.host.cell_pool import CellPool
from policybox.host.diagnosis import unavailable
from policybox.host.inline_pool import InlinePool
from policybox.host.launcher import Launcher, SpawnLauncher, ZygoteLauncher
from policybox.host.output import log_tail
from policybox.host.process_pool import ProcessPool
from policybox.host.record import AgentRecord
from policybox.host.sandbox import wanted_layers
from policybox.host.zygote import Zygote, zygote_for
from policybox.layers import check_one_process
from policybox.sandbox import SandboxLevel, SandboxUnavailable
from policybox.settings import EpisodeSettings, Mode, zygote_preload
from policybox.spec import PolicySpec
from policybox.storage import writing
from policybox.threads import cell_threads


def check_strict(settings: EpisodeSettings) -> None:
    """Refuse a strict episode unless every layer works here (as ``policybox doctor`` finds)."""
    if settings.mode != "process":
        raise SandboxUnavailable("a strict sandbox needs --mode process: inline mode runs policies in the host")
    missing = unavailable(wanted_layers(SandboxLevel.STRICT, seccomp=True))
    if missing:
        reasons = "; ".join(f"{check.layer}: {check.detail}" for check in missing)
        raise SandboxUnavailable(f"strict sandbox refused, layers missing on this machine: {reasons}")


class PolicyRefused(SpecError):
    """A policy cannot be built in its cell: the message names each such policy and why."""


def refusal(records: Sequence[AgentRecord], tidy: Callable[[str], str] | None = None) -> PolicyRefused | None:
    """The refusal of the policies whose agents failed while being built, if any (one line each);
    ``tidy`` rewrites each failure's message first (before it is cut to a line)."""
    failed: dict[str, str] = {}
    for record in records:
        failure = record.failure
        if failure is not None and failure.phase == "init" and record.status.is_terminal:
            if tidy is not None:
                failure = failure.model_copy(update={"message": tidy(failure.message)})
            tail = log_tail(record.log_path) if failure.kind == "Crashed" and record.log_path else None
            why = failure.one_line() + (f"; its log ends: {tail.strip()[-300:]}" if tail and tail.strip() else "")
            failed.setdefault(record.spec.display_name, f"{record.spec.display_name} cannot be built: {why}")
    return PolicyRefused("; ".join(failed.values())) if failed else None


def check_policies(
    specs: Sequence[PolicySpec],
    settings: EpisodeSettings,
    agents: int,
    zygote: Zygote | None = None,
    tidy: Callable[[str], str] | None = None,
) -> None:
    """Build each distinct policy once as an episode would -- in a cell, under its sandbox and start-up
    deadline (or inline) -- and raise ``PolicyRefused`` for those that cannot be built (``tidy``: as
    ``refusal``). Specs are tried a game's worth of seats at a time; no step is played."""
    distinct = list({spec.model_dump_json(): spec for spec in specs}.values())
    env = open_env(settings, agents)
    try:
        with tempfile.TemporaryDirectory(prefix="policybox-check-") as logs:
            for start in range(0, len(distinct), agents):
                batch = distinct[start : start + agents]
                setups = [env.cell_setup(agent_id) for agent_id in range(len(batch))]
                entrants = list(map(str, range(len(batch))))
                records = agent_records(batch, settings, Path(logs) / str(start), entrants, setups)
                with contextlib.ExitStack() as cells:
                    start_pool(records, setups, settings, zygote, cells)
                    if refused := refusal(records, tidy):
                        raise refused
    finally:
        env.close()


def agent_records(
    specs: Sequence[PolicySpec],
    settings: EpisodeSettings,
    log_dir: Path | None,
    entrants: Sequence[str],
    cell_envs: Sequence[dict[str, Any]],
    agent_ids: Sequence[int] | None = None,
) -> list[AgentRecord]:
    """One record per agent, ``specs[i]`` for agent ``agent_ids[i]`` (default: i), playing for
    ``entrants[i]`` (its submission: which seats may share a cell) with ``cell_envs[i]`` as the game's
    setup of its cell half, with its cell's thread budget -- the cores divided among the cells
    ``start_pool`` will start -- and log file."""
    ids = range(len(specs)) if agent_ids is None else agent_ids
    resolve = settings.game.adapter.resolve_shorthand
    torch = {id(spec): torch_use.needs_torch(spec, resolve) for spec in specs}  # once a spec
    cells = cell_count(entrants, cell_envs, settings.cells_applied)
    return [
        AgentRecord(
            agent_id,
            spec,
            entrant,
            cell_threads(spec.env, settings.threads_per_cell, cells),
            _log_path(log_dir, agent_id, settings.mode),
            torch=torch[id(spec)],
        )
        for agent_id, spec, entrant in zip(ids, specs, entrants, strict=True)
    ]


def start_pool(
    records: list[AgentRecord],
    cell_envs: Sequence[dict[str, Any]],
    settings: EpisodeSettings,
    zygote: Zygote | None,
    stack: contextlib.ExitStack,
) -> CellPool:
    """Start the cells (or inline runtimes) that play ``records`` -- one per record, or per policy
    (``settings.cells_applied``) -- and wait until each is ready or has failed; they are stopped when ``stack``
    closes. ``cell_envs[i]`` is the environment's setup for the cell half of ``records[i]``. A spec
    whose setup script has not run is refused before any cell starts."""
    check_prepared([record.spec for record in records])
    if settings.mode == "inline":
        check_one_process([record.spec for record in records])
    groups = cell_groups(records, cell_envs, settings.cells_applied)
    launcher = _launcher(settings, zygote, stack) if settings.mode == "process" else None
    pool: CellPool = (
        ProcessPool(groups, settings.limits, settings.sandbox, settings.seccomp, launcher)
        if launcher is not None
        else InlinePool(groups)
    )
    stack.enter_context(pool)
    pool.start([group.setup_message(settings.seed, settings.limits.log_limit_bytes) for group in groups])
    return pool


def check_prepared(specs: Sequence[PolicySpec]) -> None:
    """Refuse a spec that still has a setup script or requirements: built without what its script makes,
    or without its packages, it would fail in ways that blame nobody. ``policybox.files.setup_scripts``
    runs the script in a cell and gives the spec of its result; ``policybox.files.environments`` builds
    the environment and gives the spec that imports from it."""
    for spec in specs:
        if spec.requirements:
            raise SpecError(
                f"policy {spec.display_name} declares requirements ({', '.join(spec.requirements)}) whose environment "
                "must be built first: policybox run and evaluate build it; from Python, "
                "policybox.files.environments.with_environments"
            )
        if spec.setup_script:
            raise SpecError(
                f"policy {spec.display_name} has a setup script ({spec.setup_script}) that must run first, in a "
                "cell: policybox run, evaluate and ladder submit run it; from Python, "
                "policybox.files.setup_scripts.prepared"
            )


def _launcher(settings: EpisodeSettings, zygote: Zygote | None, stack: contextlib.ExitStack) -> Launcher:
    if settings.launcher == "spawn":
        return SpawnLauncher()
    if zygote is None:
        zygote = zygote_for(zygote_preload(settings), stack)
    elif set(settings.preload) - set(zygote.preload):
        raise ValueError(f"the zygote given preloads {zygote.preload}, not {settings.preload}")
    return ZygoteLauncher(zygote)


def _log_path(log_dir: Path | None, agent_id: int, mode: Mode) -> Path | None:
    """Where agent ``agent_id``'s output goes: a 0600 file (made by the host's output pump) in a 0700
    folder, so that nothing -- another cell included -- reads an agent's output but the operator."""
    if mode != "process" or log_dir is None:
        return None
    with writing(log_dir, "creating"):
        log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_dir.chmod(0o700)
    return log_dir / f"agent-{agent_id}.log"
