"""Running a version's setup script once, sandboxed, and keeping what it made.

MettaGrid runs a submission's ``setup_script`` on its own host: ``python SCRIPT`` in the submission's
folder, failing on a non-zero exit or after 300 s. policybox runs it as a job in one cell
(``policybox.files.cell_jobs``: the settings' sandbox, limits and launcher, as the version's later
cells run): the cell's policy is ``policybox.files.setup_policy.SetupScript``, which copies the
version's files (bound read-only) into its scratch folder and runs the script in that copy. What the
copy holds when the script is done is harvested into ``out``, in a folder only root may enter; later
cells get it read-only, like any policy's files. The outcome's spec points there and has no setup
script left to run.

A script that fails, runs out of time, or leaves what may not be kept rejects the version, with its
output as the reason. A failure of the machinery -- the zygote dies, the disk of ``out`` is full --
is raised, to be retried.

``prepared`` does the same for ``policybox run`` and ``evaluate``: once per spec with a script, into a
folder that is reused once it holds the result. ``prepare_version`` is a ladder's: the script, then the
version's environment (``files.environments``), both in a setup worker, beside play.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from policybox.files.cell_jobs import run_job
from policybox.files.environments import EnvironmentRefused, with_environment
from policybox.files.package_source import package_source
from policybox.files.packing import spec_roots, with_paths
from policybox.files.version_files import Stored, keep_spec
from policybox.inert import inert
from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec
from policybox.startup import PolicyRefused
from policybox.submission import private_folder

SETUP_TIMEOUT_S = 300.0  # MettaGrid's
RUNNER = "policybox.files.setup_policy.SetupScript"
OUTPUT_CHARS = 8000
REFUSAL_CHARS = 800
VERSIONS = "versions"


@dataclass(frozen=True)
class SetupOutcome:
    """Whether the setup script succeeded, its output's tail (why not, first, if it did not; inert:
    control characters escaped), and the spec of what it made (None when it failed). Where its
    environment cannot be built (``prepare_version``; its script, if any, ran), ``refused`` says why in
    public -- one line, no path of the host's, no uv output -- and ``output`` ends with the refusal in
    full, uv's words and the organiser's indexes and folders among them: for the version's team alone."""

    ok: bool
    output: str
    spec: PolicySpec | None
    refused: str | None = None  # ``EnvironmentRefused.public``: shown to everyone


def run_setup(stored: Stored, settings: EpisodeSettings, out: Path, timeout_s: float) -> SetupOutcome:
    """Run ``stored``'s setup script once in a cell and keep what it made in ``out``, a new folder (its
    parent is made private; an ``out`` another run made first is kept)."""
    script, folder = _script_and_folder(stored)
    runner = PolicySpec(
        class_path=RUNNER,
        data_path=str(stored.files),
        init_kwargs={"script": script, "folder": folder},
        env=stored.spec.env,  # the script is the entrant's code as much as its policy is
        name=f"setup {script}",
    )
    why, tail = run_job(runner, "the setup script", settings, out, timeout_s)
    spec = None if why else result_spec(stored, out)
    why = why or (_missing_checkpoint(spec) if spec else None)
    output = inert(f"{why}\n{tail}" if why else tail)[-OUTPUT_CHARS:]
    return SetupOutcome(ok=why is None, output=output, spec=None if why else spec)


def prepare_version(
    stored: Stored, settings: EpisodeSettings, out: Path, timeout_s: float, environments: Path, label: str
) -> SetupOutcome:
    """A ladder's version made ready to play, in a setup worker so that play goes on meanwhile: its setup
    script run into ``out`` (``run_setup``), if it has one, then its environment built or found under
    ``environments`` (``files.environments``, in cells of their own), if it declares requirements -- a
    refusal naming it as ``label``, its public reason apart from its detail. The outcome's spec is the
    one to play."""
    outcome = (
        run_setup(stored, settings, out, timeout_s) if stored.spec.setup_script else SetupOutcome(True, "", stored.spec)
    )
    if not outcome.ok or outcome.spec is None or not outcome.spec.requirements:
        return outcome
    try:
        spec = with_environment(outcome.spec, environments, package_source(settings), label)
    except EnvironmentRefused as refused:
        private = inert(f"{outcome.output}\n{refused}" if outcome.output else str(refused))[-OUTPUT_CHARS:]
        return SetupOutcome(ok=False, output=private, spec=None, refused=refused.public)
    return SetupOutcome(ok=True, output=outcome.output, spec=spec)


def _script_and_folder(stored: Stored) -> tuple[str, str]:
    """The setup script, relative to the folder it runs in (the root of the spec's files that holds
    it), and that folder, relative to the version's files."""
    spec, files = stored.spec, stored.files
    if spec.setup_script is None or files is None:
        raise ValueError(f"policy {spec.display_name} has no setup script")
    script = Path(spec.setup_script)
    folder = next(root for root in spec_roots(spec) if script.is_relative_to(root))
    return str(script.relative_to(folder)), str(folder.relative_to(files))


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
