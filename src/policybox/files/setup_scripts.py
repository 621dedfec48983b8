"""Running a version's setup script once, sandboxed, and keeping what it made.

MettaGrid runs a submission's ``setup_script`` on its own host: ``python SCRIPT`` in the submission's
folder, failing on a non-zero exit or after 300 s. policybox runs it in one cell, under the settings'
sandbox, limits and launcher (a zygote of the settings' preload), as the version's later cells run:
the cell's policy is ``policybox.files.setup_policy.SetupScript``, which copies the version's files
(bound read-only) into its scratch folder and runs the script in that copy. The script can write
nowhere else -- the scratch folder is a tmpfs capped by ``--disk-limit-mb`` and ``--disk-limit-files``
-- and everything it starts is in the cell's cgroup; the runner kills all of it before READY.

After READY, while the cell still lives, the host copies the cell's copy out -- through
``/proc/<pid>/root``, the one place its tmpfs can be seen from -- with ``policybox.files.harvest``
(hostile files: nothing followed, only plain files and folders, within the same limits) into
``out``, in a folder only root may enter; later cells get it read-only, like any policy's files. The
outcome's spec points there and has no setup script left to run.

A script that fails, runs out of time, or leaves what may not be kept rejects the version, with its
output as the reason. A failure of the machinery -- the zygote dies, the disk of ``out`` is full --
is raised, to be retried.

``prepared`` does the same for ``policybox run`` and ``evaluate``: once per spec with a script, into a
folder that is reused once it holds the result.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from policybox.episode import PolicyRefused, agent_records, check_strict, log_tail, open_env, start_pool
from policybox.files.harvest import HarvestRefused, harvest
from policybox.files.packing import spec_roots, with_paths
from policybox.files.setup_policy import COPY, SWEEP_S
from policybox.files.version_files import Stored, keep_spec
from policybox.host.process_pool import ProcessPool
from policybox.host.record import AgentRecord
from policybox.host.sandbox import wanted_layers
from policybox.host.zygote import Zygote, ZygoteError
from policybox.inert import inert
from policybox.results import Failure
from policybox.sandbox import SandboxLevel
from policybox.settings import EpisodeSettings, agent_count, zygote_preload
from policybox.spec import PolicySpec
from policybox.submission import private_folder

SETUP_TIMEOUT_S = 300.0  # MettaGrid's
RUNNER = "policybox.files.setup_policy.SetupScript"
OUTPUT_CHARS = 8000
REFUSAL_CHARS = 800
VERSIONS = "versions"
MIB = 1024 * 1024


@dataclass(frozen=True)
class SetupOutcome:
    """Whether the setup script succeeded, its output's tail (why not, first, if it did not; inert:
    control characters escaped), and the spec of what it made (None when it failed)."""

    ok: bool
    output: str
    spec: PolicySpec | None


def run_setup(stored: Stored, settings: EpisodeSettings, out: Path, timeout_s: float) -> SetupOutcome:
    """Run ``stored``'s setup script once in a cell and keep what it made in ``out``, a new folder (its
    parent is made private; an ``out`` another run made first is kept)."""
    script, folder = _script_and_folder(stored)
    limits = settings.limits.model_copy(
        update={"init_timeout_s": settings.limits.init_timeout_s + timeout_s + SWEEP_S}  # the script runs at start-up
    )
    settings = settings.model_copy(update={"mode": "process", "replay": None, "limits": limits})
    if settings.sandbox == SandboxLevel.STRICT:
        check_strict(settings)  # a layer missing here is the machine's to fix, not the version's fault
    out = private_folder(out.parent).resolve() / out.name
    with tempfile.TemporaryDirectory(prefix="policybox-setup-") as temp:
        workdir = None if wanted_layers(settings.sandbox, settings.seccomp) else Path(temp) / "work"
        kwargs = {"script": script, "folder": folder, "timeout_s": timeout_s, "workdir": workdir and str(workdir)}
        runner = PolicySpec(
            class_path=RUNNER,
            data_path=str(stored.files),
            init_kwargs=kwargs,
            env=stored.spec.env,  # the script is the entrant's code as much as its policy is
            name=f"setup {script}",
        )
        [record] = agent_records([runner], settings, Path(temp) / "logs")
        if workdir is not None:
            workdir.mkdir()
        why = _run_cell(record, settings, out, workdir)
        tail = (log_tail(record.log_path) if record.log_path else None) or ""
    spec = None if why else result_spec(stored, out)
    why = why or (_missing_checkpoint(spec) if spec else None)
    output = inert(f"{why}\n{tail}" if why else tail)[-OUTPUT_CHARS:]
    return SetupOutcome(ok=why is None, output=output, spec=None if why else spec)


def _script_and_folder(stored: Stored) -> tuple[str, str]:
    """The setup script, relative to the folder it runs in (the root of the spec's files that holds
    it), and that folder, relative to the version's files."""
    spec, files = stored.spec, stored.files
    if spec.setup_script is None or files is None:
        raise ValueError(f"policy {spec.display_name} has no setup script")
    script = Path(spec.setup_script)
    folder = next(root for root in spec_roots(spec) if script.is_relative_to(root))
    return str(script.relative_to(folder)), str(folder.relative_to(files))


def _run_cell(record: AgentRecord, settings: EpisodeSettings, out: Path, workdir: Path | None) -> str | None:
    """Start the runner's cell; once it is READY, copy what the script left into ``out``. Why the
    version is rejected, or None."""
    env = open_env(settings, agent_count(settings, None, 1))
    try:
        with contextlib.ExitStack() as cells:
            zygote = cells.enter_context(Zygote(zygote_preload(settings))) if settings.launcher == "zygote" else None
            pool = start_pool([record], [env.cell_setup(record.agent_id)], settings, zygote, cells)
            if record.failure is not None:
                if zygote is not None and not zygote.alive:  # it took the cell with it: not the script's doing
                    raise ZygoteError("the zygote died while the setup script ran")
                return _reason(record.failure)
            assert isinstance(pool, ProcessPool)  # mode is process
            scratch = workdir or pool.scratch_view(record.agent_id)
            assert scratch is not None  # a ready cell with a sandbox has a scratch folder
            limits = settings.limits
            try:
                harvest(scratch / COPY, out, max_entries=limits.disk_limit_files, max_bytes=limits.disk_limit_mb * MIB)
            except HarvestRefused as exc:
                return f"what the setup script made cannot be kept: {exc}"
    finally:
        env.close()
    return None


def _reason(failure: Failure) -> str:
    return failure.message if failure.kind == "SetupFailed" else f"the setup cell failed: {failure.one_line()}"


def result_spec(stored: Stored, out: Path) -> PolicySpec:
    """The version's spec moved from its stored files into ``out`` (what its setup script made), with
    no script left to run."""
    files = stored.files
    assert files is not None
    spec = with_paths(stored.spec, lambda raw: str(out / Path(raw).relative_to(files)))
    return spec.model_copy(update={"setup_script": None})


def _missing_checkpoint(spec: PolicySpec) -> str | None:
    if spec.data_path and not Path(spec.data_path).exists():
        return f"the setup script did not make the checkpoint (data_path) {Path(spec.data_path).name}"
    return None


def prepared(
    specs: Sequence[PolicySpec], settings: EpisodeSettings, folder: Path, timeout_s: float = SETUP_TIMEOUT_S
) -> list[PolicySpec]:
    """``specs`` ready to play: each with a setup script stored under ``folder``, its script run once
    into ``folder/<digest>/`` -- or that folder reused, when an earlier call made it -- and replaced
    by the spec of the result; the others as they are. PolicyRefused names each whose script failed."""
    folder = private_folder(folder)
    outcomes: dict[str, SetupOutcome] = {}
    for spec in specs:
        if spec.setup_script and (key := spec.model_dump_json()) not in outcomes:
            outcomes[key] = _prepare(spec, settings, folder, timeout_s)
    refused = {
        spec.display_name: f"{spec.display_name} cannot be built: {outcome.output[-REFUSAL_CHARS:].strip()}"
        for spec in specs
        if (outcome := outcomes.get(spec.model_dump_json())) and not outcome.ok
    }
    if refused:
        raise PolicyRefused("; ".join(refused.values()))
    return [outcomes[spec.model_dump_json()].spec or spec if spec.setup_script else spec for spec in specs]


def _prepare(spec: PolicySpec, settings: EpisodeSettings, folder: Path, timeout_s: float) -> SetupOutcome:
    stored = keep_spec(spec, folder / VERSIONS)
    out = folder / stored.digest
    if not out.is_dir():
        return run_setup(stored, settings, out, timeout_s)
    played = result_spec(stored, out.resolve())  # made by an earlier run
    why = _missing_checkpoint(played)
    return SetupOutcome(ok=why is None, output=why or "", spec=None if why else played)


@contextlib.contextmanager
def prepared_for_now(specs: Sequence[PolicySpec], settings: EpisodeSettings) -> Iterator[list[PolicySpec]]:
    """``prepared`` into a temporary folder, removed when the block ends (``policybox run``)."""
    if not any(spec.setup_script for spec in specs):
        yield list(specs)
        return
    with tempfile.TemporaryDirectory(prefix="policybox-setup-") as folder:
        yield prepared(specs, settings, Path(folder))
