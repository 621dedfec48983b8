"""``policybox ladder``: a continuous leaderboard in a folder and a database (see policybox.league.ladder.folder).

The group and its commands in the order its help lists them; here those that make a ladder, take its
submissions, show it and tidy it, with their options and help. Those that play are in
``policybox.cli.ladder_play``, those of the web in ``policybox.cli.ladder_web``. Like ``policybox.cli.app``,
each command imports its work when it runs: the database layer (SQLAlchemy) by the commands that open a
ladder (``policybox.cli.common.open_ladder``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from policybox.cli import ladder_play, ladder_web
from policybox.cli.options import (
    DIR,
    JSON,
    NAME,
    POLICY_HELP,
    with_episode_options,
    with_keep_options,
    with_ladder_options,
)


@with_ladder_options
@with_episode_options
def init(
    folder: DIR,
    episode: dict[str, Any],
    ladder: dict[str, Any],
    db: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="A PostgreSQL database for the ladder (postgresql://USER:PASSWORD@HOST/DB, empty); "
            "default: SQLite in DIR.",
        ),
    ] = None,
) -> None:
    """Make a ladder in DIR (a new or empty folder): its game, its settings and its database. Every
    match has a wall-clock limit: --episode-timeout-s, or by default steps x act_timeout_ms / 1000 x 0.5
    (a bot that thinks for more than half its deadline on average then forfeits, disabled, instead of
    holding a worker); start-up has --init-timeout-s of its own."""
    from policybox.cli.common import guarded, say
    from policybox.league.ladder.folder import LadderFolder
    from policybox.league.ladder.settings import LadderSettings
    from policybox.settings import DEFAULT_AGENTS, EpisodeSettings, agent_count

    with guarded("nothing was made"):
        settings = EpisodeSettings.from_options(episode)
        agents = agent_count(settings, episode["agents"], DEFAULT_AGENTS)
        ladder_settings = LadderSettings.from_options(settings, agents, ladder)
        with LadderFolder.create(folder, ladder_settings, db) as made:
            where = "SQLite in the folder" if db is None else "PostgreSQL"
            database = made.engine.url.render_as_string(hide_password=True)
            limit = f"a match's limit {ladder_settings.episode_limit_s:g} s"
            say(f"ladder {folder}: {settings.env}, {agents} seats, {limit}, {where} ({database})")


def submit(
    folder: DIR,
    name: NAME,
    spec: Annotated[
        str,
        typer.Argument(
            metavar="SPEC",
            help=POLICY_HELP.replace("Policy for the agents, repeatable; agent i plays the (i mod n)-th -p. ", ""),
        ),
    ],
    team: Annotated[
        str | None,
        typer.Option(
            metavar="TEAM",
            help="Submit as TEAM (one with a token): NAME must be new (it becomes the team's) or the team's, "
            "within the team's limits (--submissions-per-hour, --names-per-team of ladder init), as over the "
            "web page. Without it the submission is the organiser's: no limit applies.",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Refuse (exit 2) a policy that cannot be built in its cell, as run and evaluate do (a spec with a "
            "setup_script is built at qualification, after its script). --no-check stores it: its qualification "
            "rejects it, with the reason.",
        ),
    ] = True,
) -> None:
    """Submit SPEC as NAME's next version: its policy is built in a cell (no step played), then its
    files are copied into the ladder; it qualifies at the next `ladder run` (it says its place in the
    queue, and an ETA while one runs). A policy that cannot be
    built, or the same content as NAME's latest version, is refused (exit 2)."""
    from policybox.cli.common import guarded, open_ladder, say
    from policybox.league.views import queue_page

    with guarded("nothing was submitted"), open_ladder(folder) as ladder:
        version = ladder.submit(name, spec, team=team, check=check)
        eta = queue_page.queue_eta(ladder, version.name, version.number)
        when = eta.line if eta is not None else "it qualifies when its name is reinstated"
        say(f"{version.label} submitted ({version.digest[:12]}); {when}")


def retire(folder: DIR, name: NAME) -> None:
    """Take NAME out of matchmaking and refuse its submissions until `ladder reinstate`; its history and
    ratings stay."""
    from policybox.cli.common import guarded, open_ladder, say

    with guarded("nothing was changed"), open_ladder(folder) as ladder:
        ladder.retire(name)
        say(f"{name} is retired")


def reinstate(folder: DIR, name: NAME) -> None:
    """Bring a retired NAME back and lift its current version's suspension: it plays again."""
    from policybox.cli.common import guarded, open_ladder, say

    with guarded("nothing was changed"), open_ladder(folder) as ladder:
        version = ladder.reinstate(name)
        say(f"{name} is reinstated: {version.label} is {version.state}")


def status(folder: DIR, json: JSON = False) -> None:
    """Whether `ladder run` is playing the ladder (playing, idle, or stopped since when), then the
    standings: one row per name (its playing version), best first."""
    from policybox.cli import ladder_tables
    from policybox.cli.common import show_page
    from policybox.league.views import standings

    show_page(folder, standings.standings, ladder_tables.show_standings, json)


def show(folder: DIR, name: NAME, json: JSON = False) -> None:
    """One name: its versions, rating history, head-to-head, seats, recent matches and failures (with log tails)."""
    from policybox.cli import ladder_tables
    from policybox.cli.common import show_page
    from policybox.league.views import name_page

    show_page(folder, lambda ladder: name_page.name_page(ladder, name, private=True), ladder_tables.show_name, json)


def matches(
    folder: DIR,
    json: JSON = False,
    limit: Annotated[int, typer.Option(min=1, metavar="N", help="The latest N matches.")] = 50,
) -> None:
    """The matches played, newest first (a match scheduled but not yet played is not listed)."""
    from policybox.cli import ladder_tables
    from policybox.cli.common import show_page
    from policybox.league.views import match_list

    show_page(folder, lambda ladder: match_list.match_list(ladder, limit), ladder_tables.show_matches, json)


def rerate(folder: DIR) -> None:
    """Recompute every rating from the stored matches and compare with the live ones: exit 0 when they
    are equal, 1 (listing each difference) when not."""
    from policybox.cli.common import console, guarded, open_ladder, say

    with guarded("nothing was changed"), open_ladder(folder) as ladder:
        differences = ladder.rerate()
    if not differences:
        console.print("rerate: every rating equals a replay of the stored matches")
        raise typer.Exit(0)
    for version, live, replayed in differences:
        say(f"{version.label}: live {live}, replayed {replayed}")
    raise typer.Exit(1)


@with_keep_options
def prune(folder: DIR, keep: dict[str, Any]) -> None:
    """Delete the log folders and replays of all but the latest matches (the ladder's --keep-logs,
    --keep-logs-hours and --keep-replays, or these, this once), as `ladder run` does as it plays, and
    the environments no version uses; say what it freed. The database keeps every result and log tail."""
    from policybox.cli.common import guarded, open_ladder, say
    from policybox.league.ladder import retention

    with guarded("what was deleted is gone; the rest is kept"), open_ladder(folder) as ladder:
        freed = retention.prune(ladder, **keep, environments=True)
    say(f"prune: {freed}")


ladder_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="A continuous leaderboard: submissions qualified, matched and rated as they arrive, in a database.",
)
for command in (
    init,
    submit,
    retire,
    reinstate,
    ladder_play.run,
    ladder_play.final,
    status,
    show,
    ladder_play.test,
    matches,
    rerate,
    prune,
    ladder_web.token,
    ladder_web.tokens,
    ladder_web.serve,
):
    ladder_app.command()(command)
