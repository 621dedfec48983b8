"""The pages: each is one of ``policybox.league.views``' views, fetched once per request (Datasette's one
data function per page) and answered as JSON under ``/api/`` or as HTML rendered from that same
model, with the plots drawn from it. Nothing here computes what a page shows.

What a viewer may see follows from who it is, decided here once per request: the names its team
owns get their log tails and whole messages; every other name shows their first lines
(``visibility.public`` and ``visibility.own`` keep that rule, for every view).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from policybox.league.ladder.folder import REPLAYS, LadderFolder
from policybox.league.ranking import Reward
from policybox.league.views import (
    final_page,
    match_list,
    match_page,
    name_page,
    plots,
    queue_page,
    rules,
    scrimmage_page,
    standings,
    team_page,
    visibility,
)
from policybox.league.web import render, scrimmages
from policybox.league.web.viewer import Viewer, viewer

MATCHES_SHOWN = 50
MATCHES_QUERY = frozenset({"before", "name", "opponent"})
ASCII_NUMBER = re.compile(r"[0-9]{1,19}")

Data = Callable[[LadderFolder, Request, Viewer], BaseModel]
Context = Callable[[LadderFolder, Any, Viewer], dict[str, Any]]  # what a page's template gets besides its model


def _no_plots(model: Any) -> dict[str, str]:
    return {}


def _no_context(ladder: LadderFolder, model: Any, who: Viewer) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Page:
    """A page at ``path`` and its JSON at ``api``: the model ``data`` returns, rendered by ``template``."""

    name: str
    path: str
    api: str
    template: str
    data: Data
    plots: Callable[[Any], dict[str, str]] = _no_plots
    context: Context = _no_context  # e.g. a form for the viewer's team: never in the JSON

    def routes(self) -> list[Route]:
        return [Route(self.path, self.html, name=self.name), Route(self.api, self.json, name=f"api:{self.name}")]

    def model(self, request: Request) -> tuple[BaseModel, Viewer]:
        """The page's data for whoever asks (a name or match the ladder does not have: NotFound, a 404)."""
        site = request.app.state.site
        who = viewer(site, request)
        return self.data(site.reader, request, who), who

    def json(self, request: Request) -> Response:
        return render.json(self.model(request)[0])

    def html(self, request: Request) -> Response:
        model, who = self.model(request)
        api = request.app.url_path_for(f"api:{self.name}", **request.path_params)
        context = {
            "page": model,
            "viewer": who,
            "json_url": f"{api}?{request.url.query}" if request.url.query else str(api),
            "plots": self.plots(model),
            "has_final": final_page.has_final(request.app.state.site.reader),
            **self.context(request.app.state.site.reader, model, who),
        }
        return render.page(request, self.template, context)


# ---------------------------------------------------------------------------------------------
# Each page's data: one view's call


def _standings(ladder: LadderFolder, request: Request, who: Viewer) -> standings.Standings:
    return standings.standings(ladder, set(who.owned))


def _name(ladder: LadderFolder, request: Request, who: Viewer) -> name_page.NamePage:
    name = request.path_params["name"]
    return name_page.name_page(ladder, name, private=name in who.owned)


def _matches(ladder: LadderFolder, request: Request, who: Viewer) -> match_list.MatchList:
    query = request.query_params
    if unknown := sorted(set(query) - MATCHES_QUERY):
        known = ", ".join(f"{key}=" for key in sorted(MATCHES_QUERY))
        raise HTTPException(400, f"/matches takes no {unknown[0][:40]!r}: it takes {known} (e.g. name=alphabot)")
    before = query.get("before")
    # ASCII digits (str.isdigit takes "²"), and few enough for a database's integer
    if before is not None and not (ASCII_NUMBER.fullmatch(before) and int(before) <= visibility.ID_MAX):
        raise HTTPException(400, f"before={before[:40]!r}: give a match id, e.g. before=100")
    name, opponent = query.get("name"), query.get("opponent")
    if opponent is not None and name is None:
        raise HTTPException(400, "opponent= goes with name=: e.g. /matches?name=alphabot&opponent=betabot")
    return match_list.match_list(ladder, MATCHES_SHOWN, None if before is None else int(before), name, opponent)


def _match(ladder: LadderFolder, request: Request, who: Viewer) -> match_page.MatchPage:
    return match_page.match_page(ladder, request.path_params["match"], private_for=set(who.owned))


def _queue(ladder: LadderFolder, request: Request, who: Viewer) -> queue_page.Queue:
    return queue_page.queue(ladder, set(who.owned))


def _rules(ladder: LadderFolder, request: Request, who: Viewer) -> rules.Rules:
    return rules.rules(ladder, request.app.state.site.upload_cap)


def _final(ladder: LadderFolder, request: Request, who: Viewer) -> final_page.FinalPage:
    return final_page.final_page(ladder)


def _team(ladder: LadderFolder, request: Request, who: Viewer) -> team_page.TeamPage:
    team = request.path_params["team"]
    return team_page.team_page(ladder, team, own=team == who.team)


def _scrimmage(ladder: LadderFolder, request: Request, who: Viewer) -> scrimmage_page.ScrimmagePage:
    return scrimmage_page.scrimmage_page(ladder, request.path_params["scrimmage"], who.team, set(who.owned))


def _final_match(ladder: LadderFolder, request: Request, who: Viewer) -> final_page.FinalMatchPage:
    return final_page.final_match(ladder, request.path_params["number"])


# ---------------------------------------------------------------------------------------------
# Plots, drawn from the page's model


def _intervals(rewards: list[tuple[str, Reward | None]]) -> list[plots.Interval]:
    """Each name's reward interval; a name with no reward yet has none."""
    return [plots.Interval(name, reward.mean, *reward.ci95) for name, reward in rewards if reward is not None]


def _standings_plots(page: standings.Standings) -> dict[str, str]:
    return {"rewards": plots.interval_plot(_intervals([(row.name, row.reward) for row in page.rows]))}


def _name_plots(page: name_page.NamePage) -> dict[str, str]:
    met = [o for o in page.head_to_head if o.matches]
    cells = {(page.name, o.name): (o.balance, o.record) for o in met}
    return {
        "rating": plots.rating_history([(p.match, p.rating.mu, p.rating.sigma) for p in page.history]),
        "reward": plots.interval_plot(_intervals([(page.name, page.standing.reward)])),
        "head_to_head": plots.heat_map([page.name], cells, "W-D-L against each opponent", [o.name for o in met]),
    }


def _team_plots(page: team_page.TeamPage) -> dict[str, str]:
    """Each version's rating history, by ``NAME vN``: a version that was never rated has none."""
    return {
        f"{name.name} v{version.version}": plots.rating_history(
            [(p.match, p.rating.mu, p.rating.sigma) for p in version.history],
            f"{name.name} v{version.version}: rating, mu and ±sigma, per match",
        )
        for name in page.names
        for version in name.versions
        if version.history
    }


STANDINGS = Page("standings", "/", "/api/standings", "standings.html", _standings, _standings_plots)
NAME = Page("name", "/names/{name}", "/api/names/{name}", "name.html", _name, _name_plots, scrimmages.name_context)
MATCHES = Page("matches", "/matches", "/api/matches", "matches.html", _matches)
MATCH = Page("match", "/matches/{match:int}", "/api/matches/{match:int}", "match.html", _match)
QUEUE = Page("queue", "/queue", "/api/queue", "queue.html", _queue)
RULES = Page("rules", "/rules", "/api/rules", "rules.html", _rules)
FINAL = Page("final", "/final", "/api/final", "final.html", _final)
FINAL_MATCH = Page(
    "final-match", "/final/matches/{number:int}", "/api/final/matches/{number:int}", "final_match.html", _final_match
)
TEAM = Page("team", "/teams/{team}", "/api/teams/{team}", "team.html", _team, _team_plots)
SCRIMMAGE = Page(
    "scrimmage", "/scrimmages/{scrimmage:int}", "/api/scrimmages/{scrimmage:int}", "scrimmage.html", _scrimmage
)
PAGES = [STANDINGS, NAME, MATCHES, MATCH, QUEUE, RULES, FINAL, FINAL_MATCH, TEAM, SCRIMMAGE]


def replay_frames(request: Request) -> Response:
    """A match's kept MettaGrid replay as the page's player (static/replay.js) draws it: 404 without one."""
    return JSONResponse(match_page.match_replay(request.app.state.site.reader, request.path_params["match"]))


def replay(request: Request) -> Response:
    """A match's replay as a download, where the ladder wrote one (the match page's data says)."""
    page = MATCH.model(request)[0]
    assert isinstance(page, match_page.MatchPage)
    if page.replay_file is None:
        raise HTTPException(404, f"match {page.id} has no replay: this ladder wrote none for it")
    path = request.app.state.site.reader.folder / REPLAYS / page.replay_file
    return FileResponse(path, media_type="application/octet-stream", filename=page.replay_file)


def final_replay_frames(request: Request) -> Response:
    """A final's kept MettaGrid replay as its match page's player draws it: 404 without one."""
    ladder = request.app.state.site.reader
    return JSONResponse(final_page.final_match_replay(ladder, request.path_params["number"]))


def final_replay(request: Request) -> Response:
    """The replay of a match of the latest final, as a download, where the ladder kept one (``/final`` says)."""
    ladder = request.app.state.site.reader
    number = request.path_params["number"]
    final = final_page.final_page(ladder).final
    found = next((match for match in final.matches if match.number == number), None) if final else None
    if found is None or found.replay is None:
        raise HTTPException(404, f"the latest final has no replay of its match {number}")
    path = ladder.folder / REPLAYS / found.replay
    return FileResponse(path, media_type="application/octet-stream", filename=found.replay)


def starter(request: Request) -> Response:
    """A minimal submission for this ladder's game, which qualifies as it is (``views.rules``)."""
    body = rules.starter_zip(request.app.state.site.reader)
    headers = {"Content-Disposition": 'attachment; filename="starter.zip"'}
    return Response(body, media_type="application/zip", headers=headers)


def game(request: Request) -> Response:
    """The ladder's game as ``policybox run --env`` takes it (``views.game_facts``): its config file, say."""
    name, body = rules.game_file(request.app.state.site.reader)
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return Response(body, media_type="application/octet-stream", headers=headers)
