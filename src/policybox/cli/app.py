"""The ``policybox`` command line: every command's options and help, and where its work is.

This module is what every command, ``--help`` included, pays for before it starts: it imports typer
and the options (``policybox.cli.options``: pydantic and the settings models) and nothing else of
policybox's. A command imports its work when it runs -- ``run``'s in ``policybox.cli.run_command``,
``evaluate``'s in ``policybox.cli.evaluate_command``, the others' below -- so that ``--help`` costs
about what typer costs, and no command imports what it does not use (``tests/test_cli_imports.py``).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from policybox.cli.ladder_commands import ladder_app
from policybox.cli.options import (
    POLICIES,
    RESULT_JSON,
    given,
    with_cluster_option,
    with_episode_options,
    with_evaluation_options,
    with_run_options,
    with_runner_options,
    with_test_options,
    with_workers_option,
)
from policybox.league.evaluate import REPORT_FILE

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help and errors: readable at 80 columns, paths never broken by a box
    help="Run multi-agent episodes with every agent's policy in its own OS process.",
)


def _version(value: bool) -> None:
    if value:
        import policybox

        typer.echo(f"policybox {policybox.__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Run multi-agent episodes with every agent's policy in its own OS process."""
    warnings.showwarning = _show_warning


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    """``policybox.cli.common.show_warning``, whose rich is imported only when there is a warning to show."""
    from policybox.cli.common import show_warning

    show_warning(message, category, filename, lineno, file, line)


@app.command()
@with_run_options
def run(
    ctx: typer.Context,
    episode: dict[str, Any],
    policies: POLICIES = None,
    ladder: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Play as this ladder plays (its game, steps, seats and limits; options given here override "
            "them), a -p NAME@vN being that version's stored files: a match page's command plays the match again.",
        ),
    ] = None,
    match: Annotated[
        int | None,
        typer.Option(
            metavar="ID",
            min=0,
            max=2**63 - 1,
            help="With --ladder: play the ladder's match ID again (its seed, its seats' versions) and compare "
            "with the stored result: exit 0 when every reward and status is the same, 1 when any differs "
            "(saying what changed since: policybox, the game, its config, a version's files).",
        ),
    ] = None,
    final: Annotated[
        int | None,
        typer.Option(
            metavar="F",
            min=1,
            max=2**63 - 1,
            help="With --ladder and --match N: play match N of the ladder's final F again (numbered from 0 in "
            "schedule order, as its log folder final-F-0000N), compared the same way.",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write the episode result as JSON to this file.")
    ] = None,
    log_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Folder for per-agent logs (policy stdout/stderr). Default: ./policybox-logs/<time>-seed<N>.",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Refuse (exit 2) a policy that cannot be built in its cell, before any step. --no-check plays "
            "the episode anyway: its agents fail, the others play on.",
        ),
    ] = True,
) -> None:
    """Play one episode and print every agent's policy, reward and status.

    Exit code 0 when every agent ended with status ok, 1 when any did not, the game itself raised (the
    result is written either way) or a file could not be written for a full disk, 2 for bad input.
    """
    from policybox.cli.run_command import play_one

    play_one(ctx, episode, policies, ladder, (match, final), out, log_dir, check)


@app.command()
@with_episode_options
@with_runner_options
@with_evaluation_options
def evaluate(
    ctx: typer.Context,
    episode: dict[str, Any],
    runner: dict[str, Any],
    evaluation: dict[str, Any],
    tournament_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="[TOURNAMENT]",
            help="A YAML/JSON tournament file: policies, episodes, agents, out, and any option below by its "
            "name (act_timeout_ms: 500); options given here override it.",
        ),
    ] = None,
    policies: POLICIES = None,
    summary: Annotated[
        Path | None, typer.Option("--summary", metavar="DIR", help="Print the summary of a results folder and exit.")
    ] = None,
    report: Annotated[
        bool,
        typer.Option(
            "--report", help=f"At the end, write DIR/{REPORT_FILE}: the leaderboard as one self-contained page."
        ),
    ] = False,
) -> None:
    """Play a tournament: many isolated episodes, seats rotated, scores with intervals and ratings.

    Re-running the same command resumes: finished episodes are kept, the rest are played. Exit code 0
    when every episode finished, 1 when some could not or the folder's disk is full (what is written
    is kept), 2 for bad input (nothing is touched).
    """
    from policybox.cli.evaluate_command import play_tournament, show_results_folder

    if summary is not None:
        show_results_folder(summary)
    else:
        play_tournament(ctx, {**episode, **runner, **evaluation}, tournament_file, report)


@app.command()
@with_episode_options
@with_workers_option
@with_test_options
def versus(
    ctx: typer.Context,
    episode: dict[str, Any],
    test: dict[str, Any],
    runner: dict[str, Any],
    a: Annotated[str, typer.Argument(metavar="A", help="The base version: a -p SPEC (see --against).")],
    b: Annotated[str, typer.Argument(metavar="B", help="The version tested against it: a -p SPEC.")],
    against: Annotated[
        list[str] | None,
        typer.Option(
            metavar="SPEC",
            help="An opponent (a -p SPEC), repeatable: A and B take turns in the same seats against them. "
            "None: A and B play each other, swapping seats.",
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(metavar="DIR", help="Results folder: evaluate's files, and versus.json with the verdict."),
    ] = Path("versus-results"),
    json: RESULT_JSON = False,
) -> None:
    """Is B better than A? Paired episodes -- the same seed and seats, once with A and once with B --
    until a sequential test decides: B better, B not better, or undecided at the cap.

    The test may be read at every pair without raising its error rates (alpha: B found better when it
    is not; beta: B found not better when it is better by --effect). Without --seed the run's seed is
    secret, so no policy can tell its episodes from a ladder's matches. Re-running the same command
    resumes: no finished pair is played again. Exit code 0 for any verdict, 1 when some episodes could
    not be played or the folder's disk is full (what is written is kept), 2 for bad input.
    """
    from policybox.cli.common import check_folder, guarded
    from policybox.cli.verdict import live_line, show_result
    from policybox.league.evaluate.versus import versus as play_versus

    if not given(ctx, "seed"):
        episode = {**episode, "seed": None}  # secret, kept in the folder: episodes no policy tells from a match
    with guarded("finished episodes are kept; run the same command to resume"):
        check_folder(out, "--out")
        with live_line(json) as update:
            result = play_versus(a, b, against or (), **test, **runner, out=out, on_state=update, **episode)
    show_result(result, out, json)
    raise typer.Exit(1 if result.incomplete else 0)


@app.command()
def report(
    folder: Annotated[
        Path, typer.Argument(metavar="DIR", help="A results folder of policybox evaluate, or a ladder's folder.")
    ],
    out: Annotated[
        Path | None, typer.Option(metavar="FILE", help=f"Where to write the page (default: DIR/{REPORT_FILE}).")
    ] = None,
    private: Annotated[
        bool, typer.Option("--private", help="Readable by you alone (0600), not by every user (0644).")
    ] = False,
) -> None:
    """Write a results folder or a ladder as one self-contained HTML page: the standings, the reward
    intervals, head-to-head, latency, seats and failures.

    The page works offline and can be shared: inline SVG plots, no script, nothing fetched, and every
    text a policy controls escaped; the file is readable by others unless --private. Exit code 0 when
    it is written, 1 for a full disk, 2 for bad input.
    """
    from policybox.cli.common import check_writable, guarded, say
    from policybox.league.report import publish, render, report_data, unreachable_folder

    with guarded("no report was written"):
        data = report_data(folder)
        target = out or folder / REPORT_FILE
        check_writable(target, REPORT_FILE)
        publish(target, render(data), private)
    say(f"report: {target}")
    if not private and (closed := unreachable_folder(target)) is not None:
        closed_note = f"its folder {closed} is closed to other users: to share it, copy it out or use --out FILE"
        say(closed_note)


@app.command()
@with_cluster_option
def doctor(
    runner: dict[str, Any],
    ladder: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Also check a ladder's folder: which of its paths other users (and so cells) may read, "
            "and the chmod that closes each.",
        ),
    ] = None,
) -> None:
    """Show which sandbox layers work on this machine, found by trying each in a real cell.

    Exit code 0 when every layer works (so --sandbox strict can run) on every machine checked, and the
    ladder's folder (--ladder) is private; 1 otherwise.
    """
    from policybox.cli.doctor_command import diagnose

    diagnose(runner["ray_address"], ladder)


app.add_typer(ladder_app, name="ladder")


def main() -> None:
    app()
