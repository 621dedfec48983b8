"""What ``policybox evaluate`` does: merge a tournament file with the options given, play the tournament
into its results folder with a progress bar, show the leaderboard, write the report when asked.

Imported when ``evaluate`` runs, not before (``policybox.cli.app``); the report's modules (Jinja2, the
database layer) only with ``--report``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from policybox.cli.common import check_folder, console, guarded, say
from policybox.cli.options import EPISODE_OPTION_NAMES, given
from policybox.cli.result_tables import show_final, show_summary
from policybox.errors import SpecError
from policybox.league.choices import Evaluation, Runner
from policybox.league.evaluate import VERSUS_FILE
from policybox.league.evaluate.results_folder import Progress as EvaluationProgress
from policybox.league.evaluate.results_folder import as_final, load_summary
from policybox.league.evaluate.results_folder import play_tournament as play_into
from policybox.league.play.seating import cycle
from policybox.league.play.tournament import Tournament, entrants, game_file_relative_to, load_tournament_file
from policybox.league.views.summary import Summary
from policybox.settings import DEFAULT_AGENTS, EpisodeSettings, agent_count, validated

# What a tournament file may hold: the policies, evaluate's own options, the runner's and the episode's, by their names.
TOURNAMENT_KEYS = {"policies"} | set(Evaluation.model_fields) | set(Runner.model_fields) | EPISODE_OPTION_NAMES


def show_results_folder(folder: Path) -> None:
    """``evaluate --summary DIR``: the leaderboard of a results folder, played before (of a versus
    folder, said to be one, with its verdict first)."""
    with guarded("nothing was changed"):
        board = load_summary(folder)
    if (folder / VERSUS_FILE).is_file():
        _show_versus(folder)
    _show_summary(board)
    raise typer.Exit(0)


def _show_versus(folder: Path) -> None:
    """What makes a versus folder's leaderboard not its answer: its verdict, and where it is kept."""
    from policybox.cli.verdict import show_verdict  # versus's modules (scipy): for a versus folder only
    from policybox.league.evaluate.versus import VersusResult

    say(
        f"{folder} is a versus folder: its answer is the paired test's verdict, kept in {folder / VERSUS_FILE} "
        "(the same policybox versus command prints it again, playing no finished pair). The leaderboard "
        "below ranks each policy by its reward over all its episodes, not by the test.",
        "yellow",
    )
    try:
        result = VersusResult.model_validate_json((folder / VERSUS_FILE).read_text())
    except (OSError, ValueError):
        say(f"{folder / VERSUS_FILE} is not a versus result this policybox can read", "yellow")
        return
    show_verdict(result)


def play_tournament(ctx: typer.Context, options: dict[str, Any], tournament_file: Path | None, report: bool) -> None:
    """``policybox evaluate``, its options as the command took them: the episode's and the runner's in
    ``options``, its own in ``ctx.params``."""
    with guarded("finished episodes are kept; run the same command to resume"):
        values, from_file = _tournament_values(ctx, tournament_file, options)
        own = validated(Evaluation, {name: values[name] for name in Evaluation.model_fields if name in values})
        tournament, out_dir = _tournament(values, own, tournament_file, from_file)
        runner = validated(Runner, {name: values[name] for name in Runner.model_fields if name in values})
        check_folder(out_dir, "--out")
        board = _played(tournament, out_dir, own.replays, runner)
    _show_summary(board)
    say(f"results: {out_dir}")
    if report:
        from policybox.league.report import write_report  # Jinja2 and the database layer, only when asked

        with guarded("the results are kept; policybox report DIR writes the report"):
            say(f"report: {write_report(out_dir)}")
    raise typer.Exit(0 if board.episodes_done == board.episodes_expected else 1)


def _tournament_values(
    ctx: typer.Context, tournament_file: Path | None, options: dict[str, Any]
) -> tuple[dict[str, Any], set[str]]:
    """The tournament's values -- the file's, overridden by every option given on the command line --
    and the names of those that came from the file."""
    values = {name: value for name, value in {**ctx.params, **options}.items() if name in TOURNAMENT_KEYS}
    if tournament_file is None:
        return values, set()
    from_file = load_tournament_file(tournament_file)
    unknown = set(from_file) - TOURNAMENT_KEYS
    if unknown:
        raise SpecError(f"tournament file {tournament_file}: unknown keys {sorted(unknown)}")
    explicit = {name: value for name, value in values.items() if given(ctx, name)}
    return {**values, **from_file, **explicit}, set(from_file) - set(explicit)


def _tournament(
    values: dict[str, Any], own: Evaluation, tournament_file: Path | None, from_file: set[str]
) -> tuple[Tournament, Path]:
    """The tournament and its results folder. Paths the file gives are relative to the file's folder;
    paths given on the command line, to the current folder."""
    if not values.get("policies"):
        raise SpecError("give the policies: -p SPEC (repeatable), or policies: in a tournament file")
    if not own.out:
        raise SpecError("give a results folder: --out DIR, or out: in a tournament file")
    base = tournament_file.parent if tournament_file else Path.cwd()
    out_dir = base / own.out if "out" in from_file else own.out
    if "env" in from_file:
        values = {**values, "env": game_file_relative_to(values["env"], base)}
    settings = EpisodeSettings.from_options({k: v for k, v in values.items() if k in EPISODE_OPTION_NAMES})
    tournament = validated(
        Tournament,
        {
            "entrants": entrants(values["policies"], base if "policies" in from_file else None),
            "episodes": own.episodes,
            "agents": agent_count(settings, values.get("agents"), DEFAULT_AGENTS),
            "seating": own.seating,
            "settings": settings,
            "rank_by": own.rank_by,
        },
    )
    if own.final:
        tournament = as_final(tournament)
        length = cycle(len(tournament.entrants), tournament.agents)
        say(f"final: balanced seating, {tournament.episodes} episodes (whole cycles of {length})", "dim")
    return tournament, out_dir


def _played(tournament: Tournament, out_dir: Path, replays: bool, runner: Runner) -> Summary:
    """The tournament played into ``out_dir`` under a progress bar; its summary."""
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} episodes/s · {task.fields[failures]} agent failures"),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("episodes", total=tournament.episodes, rate="-", failures=0)
        said_kept = False

        def update(progress: EvaluationProgress) -> None:
            nonlocal said_kept
            if progress.kept and not said_kept:
                say(f"resuming: {progress.kept} of {progress.total} episodes already done in {out_dir}")
                said_kept = True
            rate = "-" if progress.rate is None else f"{progress.rate:.2f}"
            bar.update(task, completed=progress.done, rate=rate, failures=progress.failures)

        return play_into(tournament, out_dir, replays=replays, on_progress=update, **dict(runner))


def _show_summary(board: Summary) -> None:
    show_summary(console, board)
    if board.final is not None:
        show_final(console, board.final)
