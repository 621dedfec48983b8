"""Asking for scrimmages over HTTP: ``POST /api/scrimmage`` with ``Authorization: Bearer TOKEN`` (a JSON
object or a form of ``name``, ``opponent`` and ``count``), and the name page's form (``POST /scrimmage``,
with the login cookie, from the site's own pages only: ``require_same_origin``); a scrimmage's replay
as a download, for its team.

Both run ``scrimmage.ask``, which checks everything in the transaction that stores them: no valid
token, 401; a name of another team's, 403; an unknown, retired or not playing name, the name itself
as its opponent, a count below 1 or above the hourly cap, 400; the cap used this hour, 429 with
Retry-After. Each answer's message names what to fix.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response

from policybox.errors import NotFound
from policybox.league.ladder import scrimmage
from policybox.league.ladder.folder import LadderFolder
from policybox.league.views import name_page, scrimmage_page
from policybox.league.web import render
from policybox.league.web.body import capped
from policybox.league.web.upload import NEEDS_TOKEN
from policybox.league.web.viewer import Viewer, bearer, identify, require_same_origin, viewer

BODY_CAP = 4096  # three short fields
COUNT = re.compile(r"[0-9]{1,6}")
BAD_BODY = (
    "send name (your team's name that plays), opponent (the name it meets) and count (how many scrimmages), "
    'as a form or a JSON object, e.g. {"name": "mybot", "opponent": "theirbot", "count": 3}'
)


class Scrimmages(BaseModel):
    """What ``POST /api/scrimmage`` answers (201): the scrimmages stored, waiting for ``ladder run``."""

    scrimmages: list[int] = Field(description="Their ids: each one's page is /scrimmages/ID")
    name: str
    version: int
    opponent: str
    opponent_version: int
    left: int = Field(description="Scrimmages the team may still ask for this hour")
    page: str = Field(description="The team's page, which lists them with their results")


def name_context(ladder: LadderFolder, page: Any, who: Viewer) -> dict[str, Any]:
    """The name page's scrimmage form, for the team that owns the name; nothing for anyone else."""
    assert isinstance(page, name_page.NamePage)
    if who.team is None or page.name not in who.owned:
        return {}
    return {"scrimmage": scrimmage_page.form(ladder, page.name, who.team)}


async def scrimmage_api(request: Request) -> Response:
    site = request.app.state.site
    who = await run_in_threadpool(identify, site, bearer(request))
    if who.team is None:
        raise HTTPException(401, NEEDS_TOKEN, headers={"WWW-Authenticate": "Bearer"})
    fields = await _fields(request)
    return render.json(await _ask(request, who.team, *fields), 201)


async def scrimmage_form(request: Request) -> Response:
    """The name page's form: on success, 303 to the team's page (its scrimmages); else the form again,
    with why and what was sent."""
    require_same_origin(request)
    site = request.app.state.site
    who = await run_in_threadpool(viewer, site, request)
    name, opponent, count = "", None, 1
    try:
        if who.team is None:
            raise HTTPException(401, "log in with your team's token first")
        name, opponent, count = await _fields(request)
        asked = await _ask(request, who.team, name, opponent, count)
    except HTTPException as exc:
        return await run_in_threadpool(_form_again, request, who, name, opponent, count, exc)
    return RedirectResponse(f"{asked.page}#scrimmages", 303)


def scrimmage_replay(request: Request) -> Response:
    """A scrimmage's replay as a download, for its team, where the ladder wrote one."""
    site = request.app.state.site
    who = viewer(site, request)
    page = scrimmage_page.scrimmage_page(site.reader, request.path_params["scrimmage"], who.team, set(who.owned))
    if page.replay_file is None:
        raise NotFound(f"scrimmage {page.id} has no replay: this ladder wrote none for it")
    path = scrimmage_page.replay_path(site.reader, page.id)
    return FileResponse(path, media_type="application/octet-stream", filename=page.replay_file)


async def _fields(request: Request) -> tuple[str, str, int]:
    """The request's name, opponent and count, from a JSON object or a form; 400 naming them otherwise."""
    body = capped(request, BODY_CAP)
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            values = json.loads(await body.body())
        except ValueError:
            raise HTTPException(400, BAD_BODY) from None
        values = values if isinstance(values, dict) else {}
    else:
        async with body.form(max_fields=3, max_files=0) as form:
            values = dict(form.items())
    name, opponent, count = values.get("name"), values.get("opponent"), values.get("count", 1)
    if isinstance(count, str) and COUNT.fullmatch(count.strip()):
        count = int(count)
    if not (isinstance(name, str) and isinstance(opponent, str) and type(count) is int):
        raise HTTPException(400, BAD_BODY)
    return name.strip(), opponent.strip(), count


async def _ask(request: Request, team: str, name: str, opponent: str, count: int) -> Scrimmages:
    try:
        asked = await run_in_threadpool(scrimmage.ask, request.app.state.site.writer, team, name, opponent, count)
    except scrimmage.ScrimmageRefused as exc:
        retry = {} if exc.retry_after_s is None else {"Retry-After": str(exc.retry_after_s)}
        raise HTTPException(exc.status, str(exc), headers=retry) from None
    return Scrimmages(
        scrimmages=asked.ids,
        name=asked.name,
        version=asked.version,
        opponent=asked.opponent,
        opponent_version=asked.opponent_version,
        left=asked.left,
        page=str(request.app.url_path_for("team", team=team)),
    )


def _form_again(
    request: Request, who: Viewer, name: str, opponent: str | None, count: int, exc: HTTPException
) -> Response:
    """The form alone, with the refusal and what was sent (for a name the team owns), at the refusal's status."""
    form = None
    if who.team is not None and name in who.owned:
        form = scrimmage_page.form(request.app.state.site.reader, name, who.team)
        form.count, form.opponent = count, opponent
    context = {"viewer": who, "json_url": None, "message": exc.detail, "scrimmage": form, "name": name}
    page = render.page(request, "scrimmage_form.html", context, exc.status_code)
    page.headers.update(exc.headers or {})  # the cap's Retry-After
    return page
