"""Each command imports what it uses and nothing heavier: ``--help`` costs about what typer costs, ``run``
starts without the database, the web server or the statistics, and ``ladder status`` without the web.

Judged from outside, on the modules a real ``python -m policybox`` process imported (``-X importtime``,
which lists every import as it happens, whatever the command then does), never on a timing: the time
these imports take is ``benchmarks/bench_cli.py``'s to measure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

WEB = {"starlette", "uvicorn", "jinja2"}
DATABASE = {"sqlalchemy"}
STATISTICS = {"scipy", "openskill"}
# What --help needs none of: no game, no array, no table, no database, no statistics, no web.
HEAVY = WEB | DATABASE | STATISTICS | {"numpy", "rich", "mettagrid", "yaml", "torch", "policybox.episode"}


def imported(*args: str, cwd: Path | None = None) -> set[str]:
    """The modules ``policybox ARGS`` imported, top-level packages and policybox's own modules."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "policybox", *args], capture_output=True, text=True, cwd=cwd
    )
    assert run.returncode == 0, run.stderr[-2000:]
    names = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")} - {
        "package"
    }  # the header line's column name
    return {name for name in names if name.startswith("policybox.")} | {name.split(".")[0] for name in names}


@pytest.mark.parametrize(
    "args", [["--help"], ["run", "--help"], ["ladder", "--help"], ["ladder", "init", "--help"], ["evaluate", "--help"]]
)
def test_help_imports_typer_and_the_settings_alone(args):
    loaded = imported(*args)
    assert "typer" in loaded and "policybox.settings" in loaded  # the options are the settings' fields
    assert loaded & HEAVY == set()


def test_run_imports_no_database_web_or_statistics(tmp_path):
    loaded = imported("run", "-p", "random", "-n", "2", "--steps", "5", "--mode", "inline", cwd=tmp_path)
    assert "policybox.episode" in loaded  # it played
    assert loaded & (WEB | DATABASE | STATISTICS) == set()


def test_evaluate_and_versus_import_no_database_or_web_and_no_scipy(tmp_path):
    """Their results folder's summary rates the policies (OpenSkill): that much statistics they need."""
    quick = ["--steps", "5", "--mode", "inline", "-n", "2"]
    evaluate = imported(
        "evaluate", "-p", "random", "-p", "noop", "--episodes", "2", "--out", "board", *quick, cwd=tmp_path
    )
    versus = imported("versus", "noop", "random", "--max-episodes", "2", "--out", "ab", *quick, cwd=tmp_path)
    for loaded in (evaluate, versus):
        assert "policybox.league.evaluate.results_folder" in loaded  # it played into its folder
        assert loaded & (WEB | DATABASE | {"scipy"}) == set()


def test_a_ladders_reads_import_no_web(tmp_path):
    from policybox import EpisodeSettings, Ladder, LadderSettings

    with Ladder.create(tmp_path / "cup", LadderSettings(settings=EpisodeSettings(steps=5), agents=2)) as ladder:
        ladder.submit("idle", "noop", check=False)
    for args in (["status"], ["show"], ["matches"]):
        loaded = imported("ladder", *args, str(tmp_path / "cup"), *(["idle"] if args == ["show"] else []))
        assert "sqlalchemy" in loaded  # it read the ladder
        assert loaded & WEB == set(), args
