"""``policybox ladder``: a continuous leaderboard in a folder and a database (see policybox.league.ladder.folder).

Like ``policybox.cli.app``, this module holds every ladder command's options and help, and imports a
command's work when it runs: the database layer (SQLAlchemy) by the commands that open a ladder, the
web server (Starlette, uvicorn, Jinja2) by ``serve`` alone.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from policybox.cli.options import (
    ALPHA,
    BACKEND,
    BETA,
    EFFECT,
    MATCH_WORKERS,
    MAX_EPISODES,
    POLICY_HELP,
    RAY_ADDRESS,
    WORKERS,
    with_episode_options,
    with_ladder_options,
)
from policybox.league.choices import Backend
from policybox.league.web import UPLOAD_CAP, MiB

if TYPE_CHECKING:
    from policybox.league.ladder import run_loop
    from policybox.league.ladder.folder import LadderFolder

ladder_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="A continuous leaderboard: submissions qualified, matched and rated as they arrive, in a database.",
)
DIR = Annotated[Path, typer.Argument(metavar="DIR", help="The ladder's folder.")]
NAME = Annotated[str, typer.Argument(metavar="NAME", help="A submission's name: [a-z0-9][a-z0-9_-]{0,39}.")]
TEAM = Annotated[str, typer.Argument(metavar="TEAM", help="The team: [a-z0-9][a-z0-9_-]{0,39}.")]
JSON = Annotated[bool, typer.Option("--json", help="Print it as JSON instead of a table.")]


def _open(folder: Path, read_only: bool = False) -> LadderFolder:
    """The ladder in ``folder``. The database layer (SQLAlchemy) is imported here, by the ladder's
    commands only: ``policybox run`` and ``evaluate`` start without it."""
    from policybox.league.ladder.folder import LadderFolder

    return LadderFolder.open(folder, read_only=read_only)


@ladder_app.command()
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
    from policybox.cli.common import console, guarded
    from policybox.inert import shown
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
            console.print(shown(f"ladder {folder}: {settings.env}, {agents} seats, {limit}, {where} ({database})"))


@ladder_app.command()
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
    from policybox.cli.common import console, guarded
    from policybox.inert import shown
    from policybox.league.views import queue_page

    with guarded("nothing was submitted"), _open(folder) as ladder:
        version = ladder.submit(name, spec, team=team, check=check)
        eta = queue_page.queue_eta(ladder, version.name, version.number)
        when = eta.line if eta is not None else "it qualifies when its name is reinstated"
        console.print(shown(f"{version.label} submitted ({version.digest[:12]}); {when}"))


@ladder_app.command()
def retire(folder: DIR, name: NAME) -> None:
    """Take NAME out of matchmaking and refuse its submissions until `ladder reinstate`; its history and
    ratings stay."""
    from policybox.cli.common import console, guarded
    from policybox.inert import shown

    with guarded("nothing was changed"), _open(folder) as ladder:
        ladder.retire(name)
        console.print(shown(f"{name} is retired"))


@ladder_app.command()
def reinstate(folder: DIR, name: NAME) -> None:
    """Bring a retired NAME back and lift its current version's suspension: it plays again."""
    from policybox.cli.common import console, guarded
    from policybox.inert import shown

    with guarded("nothing was changed"), _open(folder) as ladder:
        version = ladder.reinstate(name)
        console.print(shown(f"{name} is reinstated: {version.label} is {version.state}"))


@ladder_app.command("run")
def run_ladder(
    folder: DIR,
    matches: Annotated[
        int | None,
        typer.Option(min=1, metavar="N", help="Stop after N matches are stored, played or void (default: never)."),
    ] = None,
    workers: MATCH_WORKERS = None,
    backend: BACKEND = "local",
    ray_address: RAY_ADDRESS = None,
) -> None:
    """Qualify what is queued and play matches, storing each with its ratings, until stopped (Ctrl-C)
    or until N matches are played. One run per ladder at a time; a killed run is carried on by the next."""
    from policybox.cli.common import console, guarded
    from policybox.inert import shown

    with guarded("every stored match is kept; run it again to carry on"), _open(folder) as ladder:
        progress = _run_with_progress(ladder, matches, workers, backend, ray_address)
    note = f" ({progress.note})" if progress.note else ""
    void = f" ({progress.void} void)" if progress.void else ""
    console.print(
        shown(
            f"{progress.played} matches played{void}; {progress.qualified} versions qualified, {progress.rejected} "
            f"rejected, {progress.suspended} suspended{note}"
        )
    )


def _run_with_progress(
    ladder: LadderFolder, matches: int | None, workers: int | None, backend: Backend, ray_address: str | None
) -> run_loop.Progress:
    from rich.live import Live
    from rich.text import Text

    from policybox.cli.common import console
    from policybox.inert import shown
    from policybox.league.ladder import run_loop

    with Live(Text(""), console=console, transient=True, auto_refresh=False) as live:

        def show(progress: run_loop.Progress) -> None:
            if console.is_terminal:
                live.update(shown(progress_line(progress, time.monotonic())), refresh=True)

        return run_loop.run(ladder, matches, workers, backend, ray_address, show)


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


@ladder_app.command()
def final(
    folder: DIR,
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
    workers: MATCH_WORKERS = None,
    backend: BACKEND = "local",
    ray_address: RAY_ADDRESS = None,
    show_only: Annotated[
        bool, typer.Option("--show", help="Show the latest final without playing (or starting) one.")
    ] = False,
    json: JSON = False,
) -> None:
    """A final ranking with its uncertainty: freeze the field (each ranked name's playing version),
    play the balanced schedule over it -- unrated -- and rank by a Plackett-Luce fit with intervals,
    rank probabilities and groups. While it is open, ladder run plays nothing and new submissions wait.
    A final that is stopped continues, run again."""
    from policybox.cli import tables
    from policybox.cli.common import console, guarded
    from policybox.inert import shown
    from policybox.league.ladder.final import latest_final, play_final

    with (
        guarded("every stored match of the final is kept; run it again to carry on"),
        _open(folder, read_only=show_only) as ladder,
    ):
        if show_only:
            result = latest_final(ladder)
            if result is None:
                raise typer.BadParameter(f"{folder} has had no final", param_hint="DIR")
        else:
            result = play_final(ladder, rounds, until_separated, workers, backend, ray_address)
    if json:
        console.print_json(result.model_dump_json())
        return
    void = f", {result.void} void" if result.void else ""
    console.print(
        shown(
            f"final {result.id} ({result.state}): {result.played} of {result.scheduled} matches played{void}, "
            f"{result.rounds} round{'s' if result.rounds != 1 else ''} over {', '.join(result.versions)}"
        )
    )
    if result.retired:
        console.print(
            shown(f"retired since it opened (still in its ranking: the field is frozen): {', '.join(result.retired)}")
        )
    tables.show_final(console, result.ranking)
    if result.separate:
        command = f"policybox ladder final {folder} --until-separated {result.until_separated}"
        console.print(shown(f"{result.separate}: {command}", "yellow"))


@ladder_app.command()
def status(folder: DIR, json: JSON = False) -> None:
    """Whether `ladder run` is playing the ladder (playing, idle, or stopped since when), then the
    standings: one row per name (its playing version), best first."""
    from policybox.cli import tables
    from policybox.cli.common import console, guarded
    from policybox.league.views import standings

    with guarded("nothing was changed"), _open(folder, read_only=True) as ladder:
        board = standings.standings(ladder)
    if json:
        console.print_json(board.model_dump_json())
    else:
        tables.show_standings(console, board)


@ladder_app.command()
def show(folder: DIR, name: NAME, json: JSON = False) -> None:
    """One name: its versions, rating history, head-to-head, seats, recent matches and failures (with log tails)."""
    from policybox.cli import tables
    from policybox.cli.common import console, guarded
    from policybox.league.views import name_page

    with guarded("nothing was changed"), _open(folder, read_only=True) as ladder:
        page = name_page.name_page(ladder, name, private=True)
    if json:
        console.print_json(page.model_dump_json())
    else:
        tables.show_name(console, page)


@ladder_app.command("test")
def test_name(
    folder: DIR,
    name: NAME,
    base: Annotated[
        str | None,
        typer.Option(metavar="vN", help="A: the version B is tested against (default: the qualified one before B)."),
    ] = None,
    alpha: ALPHA = 0.05,
    beta: BETA = 0.05,
    effect: EFFECT = 0.2,
    max_episodes: MAX_EPISODES = 2000,
    workers: WORKERS = None,
    out: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Results folder (default: the ladder's tests/NAME-vA-vB)."),
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of a line.")] = False,
) -> None:
    """Is NAME's playing version (B) better than an earlier one (A)? policybox versus inside the ladder:
    paired episodes against its other names' playing versions, in its game, with its seats and limits,
    until the sequential test decides. Not rated: the ladder's database is only read, the episodes
    kept in the results folder, and the same command resumes there. Exit code 0 for any verdict, 1
    when some episodes could not be played, 2 for bad input (an unknown name or version, say).
    """
    from policybox.cli.common import check_folder, guarded
    from policybox.cli.verdict import live_line, show_result
    from policybox.league.evaluate import ladder_trial

    with guarded("finished episodes are kept; run the same command to resume"), _open(folder, read_only=True) as ladder:
        if out is not None:
            check_folder(out, "--out")
        with live_line(json) as update:
            result = ladder_trial.test(
                ladder, name, base, alpha, beta, effect, max_episodes, workers, out, on_state=update
            )
    show_result(result, out or ladder_trial.results_folder(ladder, result.a, result.b), json)
    raise typer.Exit(1 if result.incomplete else 0)


@ladder_app.command("matches")
def list_matches(
    folder: DIR,
    json: JSON = False,
    limit: Annotated[int, typer.Option(min=1, metavar="N", help="The latest N matches.")] = 50,
) -> None:
    """The matches played, newest first (a match scheduled but not yet played is not listed)."""
    from policybox.cli import tables
    from policybox.cli.common import console, guarded
    from policybox.league.views import match_list

    with guarded("nothing was changed"), _open(folder, read_only=True) as ladder:
        found = match_list.match_list(ladder, limit)
    if json:
        console.print_json(found.model_dump_json())
    else:
        tables.show_matches(console, found)


@ladder_app.command()
def rerate(folder: DIR) -> None:
    """Recompute every rating from the stored matches and compare with the live ones: exit 0 when they
    are equal, 1 (listing each difference) when not."""
    from policybox.cli.common import console, guarded
    from policybox.inert import shown

    with guarded("nothing was changed"), _open(folder) as ladder:
        differences = ladder.rerate()
    if not differences:
        console.print("rerate: every rating equals a replay of the stored matches")
        raise typer.Exit(0)
    for version, live, replayed in differences:
        console.print(shown(f"{version.label}: live {live}, replayed {replayed}"))
    raise typer.Exit(1)


@ladder_app.command()
def prune(
    folder: DIR,
    keep_logs: Annotated[
        int | None,
        typer.Option(min=0, metavar="N", help="Keep the latest N matches' log folders (default: the ladder's)."),
    ] = None,
    keep_replays: Annotated[
        int | None,
        typer.Option(min=0, metavar="N", help="Keep the latest N matches' replays (default: the ladder's)."),
    ] = None,
    keep_logs_hours: Annotated[
        float | None,
        typer.Option(
            min=0, metavar="H", help="Also keep the log folders younger than H hours (default: the ladder's, 24)."
        ),
    ] = None,
) -> None:
    """Delete the log folders and replays of all but the latest matches (the ladder's --keep-logs,
    --keep-logs-hours and --keep-replays, or these, this once), as `ladder run` does as it plays, and
    the environments no version uses; say what it freed. The database keeps every result and log tail."""
    from policybox.cli.common import console, guarded
    from policybox.inert import shown
    from policybox.league.ladder import retention

    with guarded("what was deleted is gone; the rest is kept"), _open(folder) as ladder:
        freed = retention.prune(ladder, keep_logs, keep_replays, environments=True, keep_logs_hours=keep_logs_hours)
    console.print(shown(f"prune: {freed}"))


@ladder_app.command()
def token(
    folder: DIR,
    team: TEAM,
    revoke: Annotated[
        bool,
        typer.Option("--revoke", help="Revoke every token of TEAM instead, and end its web sessions (log it out)."),
    ] = False,
) -> None:
    """Print a new token for TEAM: with it the team submits over the web page (`ladder serve`), and
    sees its own log tails. Its first submission of a name makes the team that name's owner. Only a
    hash of the token is kept: this is the one time it is shown. With --revoke, every token of TEAM
    stops working at once, on every page and API call, and every session it logged in ends; the team
    keeps its names, and a new token lets it in again."""
    from policybox.cli.common import console, guarded
    from policybox.inert import shown

    with guarded("nothing was changed"), _open(folder) as ladder:
        if not revoke:
            typer.echo(ladder.token(team))
            return
        revoked, ended = ladder.revoke(team)
        console.print(shown(f"{team}: {revoked} tokens revoked, {ended} web sessions ended"))


@ladder_app.command("tokens")
def list_tokens(folder: DIR, json: JSON = False) -> None:
    """Every token, by team: its number, when it was made and last used (to the minute), its open web
    sessions. Never the token itself: the ladder keeps only its hash."""
    from policybox.cli import tables
    from policybox.cli.common import console, guarded
    from policybox.league.views import token_list

    with guarded("nothing was changed"), _open(folder, read_only=True) as ladder:
        found = token_list.tokens(ladder)
    if json:
        console.print_json(found.model_dump_json())
    else:
        tables.show_tokens(console, found)


@ladder_app.command()
def serve(
    folder: DIR,
    host: Annotated[
        str, typer.Option(metavar="HOST", help="The address to listen on; put a TLS proxy in front for others.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, metavar="PORT", help="The port to listen on.")] = 8000,
    max_upload_mb: Annotated[
        int, typer.Option(min=1, metavar="MB", help="The largest upload a team may send (a zip and its form), in MiB.")
    ] = UPLOAD_CAP // MiB,
    max_connections: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="Connections kept open at once; one more is closed as it comes (at most the descriptor limit).",
        ),
    ] = 1000,
    request_timeout: Annotated[
        float,
        typer.Option(
            min=0.1,
            metavar="S",
            help="How long a connection may take to send a whole request's headers before it is closed.",
        ),
    ] = 10.0,
    keep_alive: Annotated[
        int, typer.Option(min=1, metavar="S", help="How long an idle connection is kept after a response (uvicorn's).")
    ] = 5,
    backlog: Annotated[
        int,
        typer.Option(min=1, metavar="N", help="Connections the kernel queues before they are accepted (uvicorn's)."),
    ] = 64,
) -> None:
    """Serve the ladder's web page and JSON API (/api/...) while `ladder run` plays it: the standings,
    each name, each match, the queue; teams log in and submit with their tokens (`ladder token`)."""
    import uvicorn

    from policybox.cli.common import console, guarded
    from policybox.inert import shown
    from policybox.league.web import serving
    from policybox.league.web.app import make_app

    with guarded("nothing was changed"):
        app = make_app(folder, upload_cap=max_upload_mb * MiB)
        sock = serving.listen(host, port)  # a port in use: one message, before any URL is announced
    connections = min(max_connections, serving.descriptor_room(backlog))
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        http=serving.guarded(connections, request_timeout),
        h11_max_incomplete_event_size=serving.HEADERS_CAP,
        timeout_keep_alive=keep_alive,
        backlog=backlog,
    )
    console.print(shown(f"ladder {folder}: http://{host}:{port}/ (up to {connections} connections; Ctrl-C stops)"))
    # uvicorn stops gracefully on Ctrl-C or SIGTERM (requests in flight are answered) and returns.
    server = uvicorn.Server(config)
    with sock:
        server.run(sockets=[sock])
    if not server.started:
        raise typer.Exit(3)  # what uvicorn.run exits with when it could not start (it said why)
