"""Who is asking -- a team, known by its token, or nobody -- and the login and logout forms.

A team's token reaches the app as ``Authorization: Bearer TOKEN`` (the API) or as the cookie the
login form sets. The cookie holds the token itself (HttpOnly, SameSite=Strict, Secure over HTTPS)
rather than a signed session: the app keeps no session state and no signing key to guard and
rotate, every request is checked by the ladder's own lookup (it stores only a token's sha256), and a
token deleted from the database ends every session that used it at once.

Forms that change state (login, logout, submit) resist cross-site request forgery twice over: the
cookie is SameSite=Strict, so no request another site starts carries it, and the form must come
from one of this site's own pages. The browser says where a request comes from in headers no page
can set: ``Sec-Fetch-Site`` (every current browser), which must be ``same-origin``; without it,
``Origin``, which must be this site's. (Not Origin first: under this site's ``Referrer-Policy:
no-referrer`` a browser sends ``Origin: null`` with its own forms.) A per-form token would need
server state or a second cookie to check it against; these headers need neither. The API reads
only the Authorization header, which no other site's page can make a browser send.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from policybox.league.web import render
from policybox.league.web.body import capped
from policybox.league.web.site import Site

COOKIE = "policybox_token"
FORM_CAP = 4096  # a login form holds one token
NO_TOKEN = (
    "that is not a token of this ladder: its organiser makes one for your team with policybox ladder token DIR TEAM"
)


@dataclass(frozen=True)
class Viewer:
    """A team and the names it owns; ``team`` None for anybody else."""

    team: str | None = None
    owned: frozenset[str] = frozenset()


NOBODY = Viewer()


def bearer(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, if the request has one."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def identify(site: Site, token: str | None) -> Viewer:
    """The team whose token it is, with its names; nobody for no token or one the ladder never made."""
    team = site.reader.team_of(token) if token else None
    return NOBODY if team is None else Viewer(team, frozenset(site.reader.names_of(team)))


def viewer(site: Site, request: Request) -> Viewer:
    """Who sends ``request``: by its Authorization header, else by its login cookie."""
    return identify(site, bearer(request) or request.cookies.get(COOKIE))


def require_same_origin(request: Request) -> None:
    """Refuse (403) a form that did not come from one of this site's own pages."""
    own = f"{request.url.scheme}://{request.url.netloc}"
    site = request.headers.get("sec-fetch-site")
    if site == "same-origin" or (site is None and request.headers.get("origin") == own):
        return
    raise HTTPException(
        403,
        f"this form is taken only from the ladder's own pages ({own}); a program submits with "
        "POST /api/submit and an Authorization header",
    )


def login_page(request: Request) -> Response:
    who = viewer(request.app.state.site, request)
    return render.page(request, "login.html", {"viewer": who, "json_url": None, "message": None})


async def login(request: Request) -> Response:
    """Check the token the form sends; a good one is set as the cookie (303 to the standings)."""
    require_same_origin(request)
    form = await capped(request, FORM_CAP).form(max_fields=1, max_files=0)
    token = str(form.get("token") or "").strip()
    who = await run_in_threadpool(identify, request.app.state.site, token)
    if who.team is None:
        return render.page(request, "login.html", {"viewer": NOBODY, "json_url": None, "message": NO_TOKEN}, 401)
    response = RedirectResponse(request.app.url_path_for("standings"), 303)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


async def logout(request: Request) -> Response:
    require_same_origin(request)
    response = RedirectResponse(request.app.url_path_for("standings"), 303)
    response.delete_cookie(COOKIE, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response
