"""The ``policybox ladder`` commands of the web: ``serve`` (the pages and the JSON API) and the teams'
tokens that log in there (``token``, ``tokens``). Their options and help; each imports its work as it
runs, the web server (Starlette, uvicorn, Jinja2) by ``serve`` alone. Registered in the ``ladder``
group by ``policybox.cli.ladder_commands``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from policybox.cli.options import DIR, JSON, TEAM
from policybox.league.web import UPLOAD_CAP, MiB


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
    from policybox.cli import tables
    from policybox.cli.common import show_page
    from policybox.league.views import token_list

    show_page(folder, token_list.tokens, tables.show_tokens, json)


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

    from policybox.cli.common import guarded, say
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
    say(f"ladder {folder}: http://{host}:{port}/ (up to {connections} connections; Ctrl-C stops)")
    # uvicorn stops gracefully on Ctrl-C or SIGTERM (requests in flight are answered) and returns.
    server = uvicorn.Server(config)
    with sock:
        server.run(sockets=[sock])
    if not server.started:
        raise typer.Exit(3)  # what uvicorn.run exits with when it could not start (it said why)
