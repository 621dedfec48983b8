"""The ``policybox ladder`` commands that play: ``run`` (matches, rated), ``final`` (a frozen field's
ranking) and ``test`` (a versus test inside the ladder, unrated). Their options and help; each imports
its work as it runs. Registered in the ``ladder`` group by ``policybox.cli.ladder_commands``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from policybox.cli.options import (
    DIR,
    JSON,
    NAME,
    RESULT_JSON,
    with_runner_options,
    with_test_options,
    with_workers_option,
)

if TYPE_CHECKING:
    from policybox.league.ladder import run_loop
    from policybox.league.ladder.folder import LadderFolder


@with_runner_options
def run(
    folder: DIR,
    runner: dict[str, Any],
    matches: Annotated[
        int | None,
        typer.Option(min=1, metavar="N", help="Stop after N matches are stored, played or void (default: never)."),
    ] = None,
) -> None:
    """Qualify what is queued and play matches, storing each with its ratings, until stopped (Ctrl-C)
    or until N matches are played. One run per ladder at a time; a killed run is carried on by the next."""
    from policybox.cli.common import guarded, open_ladder, say

    with guarded("every stored match is kept; run it again to carry on"), open_ladder(folder) as ladder:
        progress = _run_with_progress(ladder, matches, runner)
    note = f" ({progress.note})" if progress.note else ""
    void = f" ({progress.void} void)" if progress.void else ""
    say(
        f"{progress.played} matches played{void}; {progress.qualified} versions qualified, {progress.rejected} "
        f"rejected, {progress.suspended} suspended{note}"
    )


def _run_with_progress(ladder: LadderFolder, matches: int | None, runner: dict[str, Any]) -> run_loop.Progress:
    from rich.live import Live
    from rich.text import Text

    from policybox.cli.common import console
    from policybox.inert import shown
    from policybox.league.ladder import run_loop

    with Live(Text(""), console=console, transient=True, auto_refresh=False) as live:

        def show(progress: run_loop.Progress) -> None:
            if console.is_terminal:
                live.update(shown(progress_line(progress, time.monotonic())), refresh=True)

        return run_loop.run(ladder, matches, **runner, on_progress=show)


def progress_line(progress: run_loop.Progress, now: float) -> str:
    """``ladder run``'s progress line: the run's state first, then what it did. Its counts of versions
    say "versions", so that "suspended" is never read as the ladder's state."""
    minutes = (now - progress.started) / 60
    rate = f", {progress.played / minutes:.1f} a minute" if minutes > 0 else ""
    state = "playing" if progress.in_flight else "idle"
    line = (
        f"ladder run {state}: {progress.played} matches played{rate}, {progress.in_flight} in flight · versions: "
        f"{progress.qualified} qualified, {progress.rejected} rejected, {progress.suspended} suspended"
    )
    return line + (f" · {progress.note}" if progress.note else "")


@with_runner_options
def final(
    folder: DIR,
    runner: dict[str, Any],
    rounds: Annotated[
        int,
        typer.Option(
            min=1,
            max=1000,
            metavar="R",
            help="Cycles of the balanced schedule: every name plays equally often, in every seat equally often.",
        ),
    ] = 2,
    until_separated: Annotated[
        int,
        typer.Option(
            min=0,
            metavar="N",
            help="Then up to N more matches for the pairs whose order is still uncertain (stops once none is).",
        ),
    ] = 0,
    show_only: Annotated[
        bool, typer.Option("--show", help="Show the latest final without playing (or starting) one.")
    ] = False,
    json: JSON = False,
) -> None:
    """A final ranking with its uncertainty: freeze the field (each ranked name's playing version),
    play the balanced schedule over it -- unrated -- and rank by a Plackett-Luce fit with intervals,
    rank probabilities and groups. While it is open, ladder run plays nothing and new submissions wait.
    A final that is stopped continues, run again."""
    from policybox.cli import result_tables
    from policybox.cli.common import console, guarded, open_ladder, say
    from policybox.league.ladder.final import latest_final, play_final

    with (
        guarded("every stored match of the final is kept; run it again to carry on"),
        open_ladder(folder, read_only=show_only) as ladder,
    ):
        if show_only:
            result = latest_final(ladder)
            if result is None:
                raise typer.BadParameter(f"{folder} has had no final", param_hint="DIR")
        else:
            result = play_final(ladder, rounds, until_separated, **runner)
    if json:
        console.print_json(result.model_dump_json())
        return
    void = f", {result.void} void" if result.void else ""
    say(
        f"final {result.id} ({result.state}): {result.played} of {result.scheduled} matches played{void}, "
        f"{result.rounds} round{'s' if result.rounds != 1 else ''} over {', '.join(result.versions)}"
    )
    if result.retired:
        say(f"retired since it opened (still in its ranking: the field is frozen): {', '.join(result.retired)}")
    result_tables.show_final(console, result.ranking)
    if result.separate:
        command = f"policybox ladder final {folder} --until-separated {result.until_separated}"
        say(f"{result.separate}: {command}", "yellow")


@with_workers_option
@with_test_options
def test(
    folder: DIR,
    name: NAME,
    test: dict[str, Any],
    runner: dict[str, Any],
    base: Annotated[
        str | None,
        typer.Option(metavar="vN", help="A: the version B is tested against (default: the qualified one before B)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Results folder (default: the ladder's tests/NAME-vA-vB)."),
    ] = None,
    json: RESULT_JSON = False,
) -> None:
    """Is NAME's playing version (B) better than an earlier one (A)? policybox versus inside the ladder:
    paired episodes against its other names' playing versions, in its game, with its seats and limits,
    until the sequential test decides. Not rated: the ladder's database is only read, the episodes
    kept in the results folder, and the same command resumes there. Exit code 0 for any verdict, 1
    when some episodes could not be played, 2 for bad input (an unknown name or version, say).
    """
    from policybox.cli.common import check_folder, guarded, open_ladder
    from policybox.cli.verdict import live_line, show_result
    from policybox.league.evaluate import ladder_trial

    with (
        guarded("finished episodes are kept; run the same command to resume"),
        open_ladder(folder, read_only=True) as ladder,
    ):
        if out is not None:
            check_folder(out, "--out")
        with live_line(json) as update:
            result = ladder_trial.test(ladder, name, base, **test, **runner, out=out, on_state=update)
    show_result(result, out or ladder_trial.results_folder(ladder, result.a, result.b), json)
    raise typer.Exit(1 if result.incomplete else 0)
