"""Running a one-off job -- a setup script, an environment's build -- in a cell, and keeping what it made.

The job is a ``policybox.files.setup_policy.CellJob``: a policy that does its work as it loads, so the
cell's READY means it succeeded. It runs in one cell under the settings' sandbox, limits and launcher
(a zygote of the settings' preload), as a version's later cells run: it can write only its scratch
folder -- a tmpfs capped by ``--disk-limit-mb`` and ``--disk-limit-files`` -- and everything it starts
is in the cell's cgroup; the job kills all of it before READY.

After READY, while the cell still lives, the host copies ``COPY`` out of the cell's scratch folder --
through ``/proc/<pid>/root``, the one place its tmpfs can be seen from -- with
``policybox.files.harvest`` (hostile files: nothing followed, only plain files and folders, within the
same limits) into ``out``, in a folder only root may enter.

A job that fails, runs out of time, or leaves what may not be kept is the entrant's failure: its
reason is returned. A failure of the machinery -- the zygote dies, the disk of ``out`` is full -- is
raised, to be retried.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from policybox.files.harvest import NOT_KEPT, HarvestRefused, harvest
from policybox.files.setup_policy import COPY, SWEEP_S
from policybox.game import open_env
from policybox.host.output import log_tail
from policybox.host.record import AgentRecord
from policybox.host.sandbox import wanted_layers
from policybox.host.zygote import ZygoteError, zygote_for
from policybox.results import Failure
from policybox.sandbox import SandboxLevel
from policybox.settings import EpisodeSettings, agent_count, zygote_preload
from policybox.spec import PolicySpec
from policybox.startup import agent_records, check_strict, start_pool
from policybox.submission import private_folder

MIB = 1024 * 1024


def run_job(
    job: PolicySpec, what: str, settings: EpisodeSettings, out: Path, timeout_s: float, *, online: bool = False
) -> tuple[str | None, str]:
    """Run ``job`` -- a CellJob's spec, given ``timeout_s`` -- in one cell under ``settings``, and keep
    what it left in ``COPY`` in ``out``, a new folder (its parent is made private; an ``out`` another
    run made first is kept). Why it failed (None: it did not), saying ``what`` it was ("the setup
    script"), and the tail of its output. ``online``: the cell keeps the host's network (every other
    layer stays), for a job that runs no entrant code -- a wheels-only build's -- and for no other."""
    limits = settings.limits.model_copy(
        update={"init_timeout_s": settings.limits.init_timeout_s + timeout_s + SWEEP_S}  # the job runs at start-up
    )
    settings = settings.model_copy(update={"mode": "process", "replay": None, "limits": limits})
    if settings.sandbox == SandboxLevel.STRICT:
        check_strict(settings)  # a layer missing here is the machine's to fix, not the entrant's fault
    out = private_folder(out.parent).resolve() / out.name
    with tempfile.TemporaryDirectory(prefix="policybox-job-") as temp:
        workdir = None if wanted_layers(settings.sandbox, settings.seccomp) else Path(temp) / "work"
        kwargs = {**job.init_kwargs, "timeout_s": timeout_s, "workdir": workdir and str(workdir)}
        job = job.model_copy(update={"init_kwargs": kwargs})
        # One seat, so one cell whatever the game's setup of it: the thread budget needs no game open yet.
        [record] = agent_records([job], settings, Path(temp) / "logs", ["job"], [{}])
        record.online = online
        if workdir is not None:
            workdir.mkdir()
        why = _run_cell(record, what, settings, out, workdir)
        tail = (log_tail(record.log_path) if record.log_path else None) or ""
    return why, tail


def _run_cell(record: AgentRecord, what: str, settings: EpisodeSettings, out: Path, workdir: Path | None) -> str | None:
    """Start the job's cell; once it is READY, copy what the job left into ``out``. Why it failed, or None."""
    env = open_env(settings, agent_count(settings, None, 1))
    try:
        with contextlib.ExitStack() as cells:
            zygote = zygote_for(zygote_preload(settings), cells) if settings.launcher == "zygote" else None
            pool = start_pool([record], [env.cell_setup(record.agent_id)], settings, zygote, cells)
            if record.failure is not None:
                if zygote is not None and not zygote.alive:  # it took the cell with it: not the job's doing
                    raise ZygoteError(f"the zygote died while {what} ran")
                return _reason(record.failure, what)
            scratch = workdir or pool.scratch_view(record.agent_id)
            assert scratch is not None  # a ready cell of process mode with a sandbox has a scratch folder
            limits = settings.limits
            try:
                harvest(scratch / COPY, out, max_entries=limits.disk_limit_files, max_bytes=limits.disk_limit_mb * MIB)
            except HarvestRefused as exc:
                return f"what {what} made {NOT_KEPT}: {exc}"
    finally:
        env.close()
    return None


def _reason(failure: Failure, what: str) -> str:
    return failure.message if failure.kind == "SetupFailed" else f"the cell of {what} failed: {failure.one_line()}"
