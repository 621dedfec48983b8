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
HEAVY = WEB | DATABASE | STATISTICS | {"numpy", "rich", "mettagrid", "yaml", "torch"}
HEAVY |= {"policybox.episode", "policybox.startup"}  # the episode loop, and the starting of cells


def imported(*args: str, cwd: Path | None = None, ok: tuple[int, ...] = (0,)) -> set[str]:
    """The modules ``policybox ARGS`` imported, top-level packages and policybox's own modules."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "policybox", *args], capture_output=True, text=True, cwd=cwd
    )
    assert run.returncode in ok, run.stderr[-2000:]
    names = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")} - {
        "package"
    }  # the header line's column name
    return {name for name in names if name.startswith("policybox.")} | {name.split(".")[0] for name in names}


COMMANDS = ["run", "evaluate", "versus", "report", "doctor", "ladder"]
LADDER_COMMANDS = [
    "init",
    "submit",
    "retire",
    "reinstate",
    "run",
    "final",
    "status",
    "show",
    "test",
    "matches",
    "rerate",
    "prune",
    "token",
    "tokens",
    "serve",
]


@pytest.mark.parametrize(
    "args", [[], *([command] for command in COMMANDS), *(["ladder", command] for command in LADDER_COMMANDS)]
)
def test_every_commands_help_imports_typer_and_the_settings_alone(args):
    """Each command's entry point, as a process: its help, for which nothing heavy is imported."""
    loaded = imported(*args, "--help")
    assert "typer" in loaded and "policybox.settings" in loaded  # the options are the settings' fields
    assert loaded & HEAVY == set()


def test_doctor_imports_no_database_nor_web_and_report_no_web_server(tmp_path):
    """The doctor tries each layer in a cell, nothing else; the report renders a page (Jinja2, and the
    database layer: it reports a ladder too) but serves none."""
    doctor = imported("doctor", cwd=tmp_path, ok=(0, 1))  # 1: a layer this machine lacks
    assert "policybox.host.diagnosis" in doctor and doctor & (WEB | DATABASE | STATISTICS) == set()
    quick = ["--steps", "5", "--mode", "inline", "-n", "2"]
    imported("evaluate", "-p", "random", "-p", "noop", "--episodes", "2", "--out", "board", *quick, cwd=tmp_path)
    report = imported("report", "board", cwd=tmp_path)
    assert "jinja2" in report and report & {"starlette", "uvicorn", "scipy"} == set()


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
