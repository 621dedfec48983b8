"""The ``policybox ladder`` commands of the web: ``serve`` (the pages and the JSON API) and the teams'
tokens that log in there (``token``, ``tokens``). Their options and help (``serve``'s the fields of
``policybox.league.web.server_settings.ServeSettings``); each imports its work as it
runs, the web server (Starlette, uvicorn, Jinja2) by ``serve`` alone. Registered in the ``ladder``
group by ``policybox.cli.ladder_commands``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from policybox.cli.options import DIR, JSON, TEAM, model_options, with_options
from policybox.league.web import MiB
from policybox.league.web.server_settings import ServeSettings


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
    from policybox.cli.common import guarded, open_ladder, say

    with guarded("nothing was changed"), open_ladder(folder) as ladder:
        if not revoke:
            typer.echo(ladder.token(team))
            return
        revoked, ended = ladder.revoke(team)
        say(f"{team}: {revoked} tokens revoked, {ended} web sessions ended")


def tokens(folder: DIR, json: JSON = False) -> None:
    """Every token, by team: its number, when it was made and last used (to the minute), its open web
    sessions. Never the token itself: the ladder keeps only its hash."""
    from policybox.cli import ladder_tables
    from policybox.cli.common import show_page
    from policybox.league.views import token_list

    show_page(folder, token_list.tokens, ladder_tables.show_tokens, json)


@with_options("web", model_options(ServeSettings, ServeSettings.model_fields))
def serve(folder: DIR, web: dict[str, Any]) -> None:
    """Serve the ladder's web page and JSON API (/api/...) while `ladder run` plays it: the standings,
    each name, each match, the queue; teams log in and submit with their tokens (`ladder token`)."""
    import uvicorn

    from policybox.cli.common import guarded, say
    from policybox.league.web import serving
    from policybox.league.web.app import make_app

    settings = ServeSettings(**web)
    with guarded("nothing was changed"):
        app = make_app(folder, upload_cap=settings.max_upload_mb * MiB)
        sock = serving.listen(settings.host, settings.port)  # a port in use: one message, before any URL is announced
    connections = min(settings.max_connections, serving.descriptor_room(settings.backlog))
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        http=serving.guarded(connections, settings.request_timeout),
        h11_max_incomplete_event_size=serving.HEADERS_CAP,
        timeout_keep_alive=settings.keep_alive,
        backlog=settings.backlog,
    )
    say(f"ladder {folder}: http://{settings.host}:{settings.port}/ (up to {connections} connections; Ctrl-C stops)")
    # uvicorn stops gracefully on Ctrl-C or SIGTERM (requests in flight are answered) and returns.
    server = uvicorn.Server(config)
    with sock:
        server.run(sockets=[sock])
    if not server.started:
        raise typer.Exit(3)  # what uvicorn.run exits with when it could not start (it said why)
