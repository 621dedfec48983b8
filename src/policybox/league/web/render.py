"""How the web app answers: HTML from its Jinja templates, JSON from a view's model, errors as either.

The templates are rendered in ``policybox.league.views.templating``'s environment, the report's too:
autoescape on, the same filters.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.templating import Jinja2Templates

from policybox.league.views.templating import environment

API = "/api/"
templates = Jinja2Templates(env=environment)


def page(request: Request, template: str, context: dict[str, Any], status: int = 200) -> Response:
    """``template`` rendered with ``context`` (every template gets ``viewer`` and ``json_url`` too)."""
    return templates.TemplateResponse(request, template, context, status_code=status)


def json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


def error(request: Request, status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    """An error as JSON (``{"error": message}``) under ``/api/``, else as a page."""
    if request.url.path.startswith(API) or request.url.path == API.rstrip("/"):
        return JSONResponse({"error": message}, status, headers=headers)
    context = {"status": status, "message": message, "viewer": None, "json_url": None}
    response = page(request, "error.html", context, status)
    response.headers.update(headers or {})
    return response


async def database_unusable(request: Request, exc: Exception) -> Response:
    """A database that cannot be used now (made read-only, removed, a server gone: a LadderError): 503,
    the visitor told to come back; the full message, which names the files, on the server's stderr."""
    print(f"policybox ladder serve: {exc}", file=sys.stderr, flush=True)
    return error(request, 503, "the ladder's database cannot be used at the moment: try again later")


async def game_unreadable(request: Request, exc: Exception) -> Response:
    """The ladder's game cannot be opened (``GameUnreadable``: its file gone or broken): 503, the visitor
    told to come back; the full message, which names the organiser's file, on the server's stderr."""
    print(f"policybox ladder serve: {exc}", file=sys.stderr, flush=True)
    return error(request, 503, "the ladder's game cannot be read at the moment: try again later")


async def not_found(request: Request, exc: Exception) -> Response:
    """What a page asked for is not there (``NotFound``: a name, a match, a replay): 404 with its message."""
    return error(request, 404, str(exc))


async def http_error(request: Request, exc: Exception) -> Response:
    """The app's handler of every HTTPException (a 404 for a path no route has among them)."""
    assert isinstance(exc, HTTPException)
    return error(request, exc.status_code, exc.detail, exc.headers)
