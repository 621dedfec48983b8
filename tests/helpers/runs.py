"""``policybox run`` in this process, as the fault tests judge it: the result file, exit code and output."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from policybox.cli import app
from policybox.results import EpisodeResult


def policybox_run(folder: Path, *args: str) -> tuple[EpisodeResult, int, str]:
    """``policybox run ARGS --out ... --log-dir ...`` in this process: (result file, exit code, output).
    With ``--no-check``: a policy that cannot be built plays its episode as a failed agent, contained."""
    out = folder / "result.json"
    where = ["--out", str(out), "--log-dir", str(folder / "logs"), "--no-check"]
    run = CliRunner().invoke(app, ["run", *args, *where], env={"COLUMNS": "300"})
    assert run.exit_code in (0, 1), run.output
    return EpisodeResult.model_validate_json(out.read_text()), run.exit_code, run.output
