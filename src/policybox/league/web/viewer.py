"""Who is asking -- a team, known by its token or its login session, or nobody -- and the login and
logout forms.

A team's token reaches the app as ``Authorization: Bearer TOKEN`` (the API) or through the login
form, which makes a server-side session: a random id, set as the cookie (HttpOnly, SameSite=Strict,
Secure over HTTPS), of which the database keeps only the sha256, with the token it was made with.
Logging out deletes the session, so the cookie's value replayed afterwards is nobody's; revoking a
team's tokens (``ladder token DIR TEAM --revoke``) deletes them and every session made with them.
The cookie never holds the token: a stolen cookie is one session, ended at logout.

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

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from policybox.league.ladder import team_store
from policybox.league.ladder.database import transaction
from policybox.league.web import render
from policybox.league.web.body import capped
from policybox.league.web.site import Site

COOKIE = "policybox_session"
FORM_CAP = 4096  # a login form holds one token
NO_TOKEN = "that is not a token of this ladder: ask its organiser for your team's token"

Lookup = Callable[[Connection, str], team_store.Credential | None]


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
    """The team whose token it is, with its names; nobody for no token or one the ladder does not hold."""
    return _seen(site, _read(site, team_store.credential, token), None)


def viewer(site: Site, request: Request) -> Viewer:
    """Who sends ``request``: by its Authorization header, else by its login cookie's session."""
    token = bearer(request)
    if token is not None:
        return identify(site, token)
    session = request.cookies.get(COOKIE)
    return _seen(site, _read(site, team_store.session_credential, session), session)


def _read(site: Site, lookup: Lookup, secret: str | None) -> team_store.Credential | None:
    if not secret:
        return None
    with transaction(site.reader.engine) as connection:
        return lookup(connection, secret)


def _seen(site: Site, found: team_store.Credential | None, session: str | None) -> Viewer:
    if found is None:
        return NOBODY
    site.note_use(found.token_id, session)
    return Viewer(found.team, frozenset(site.reader.names_of(found.team)))


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
    """Check the token the form sends; for a good one, a new session, its id set as the cookie (303 to
    the standings)."""
    require_same_origin(request)
    async with capped(request, FORM_CAP).form(max_fields=1, max_files=0) as form:
        token = form.get("token")
    session = await run_in_threadpool(_log_in, request.app.state.site, token.strip() if isinstance(token, str) else "")
    if session is None:
        return render.page(request, "login.html", {"viewer": NOBODY, "json_url": None, "message": NO_TOKEN}, 401)
    response = RedirectResponse(request.app.url_path_for("standings"), 303)
    response.set_cookie(COOKIE, session, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


def _log_in(site: Site, token: str) -> str | None:
    """A new session for ``token`` (None if it is not one of the ladder's): made through the writer."""
    found = _read(site, team_store.credential, token)
    if found is None:
        return None
    with transaction(site.writer.engine) as connection:
        return team_store.new_session(connection, found.token_id)


async def logout(request: Request) -> Response:
    """End the cookie's session (its id is nobody's from now on) and drop the cookie."""
    require_same_origin(request)
    session = request.cookies.get(COOKIE)
    if session:
        await run_in_threadpool(_log_out, request.app.state.site, session)
    response = RedirectResponse(request.app.url_path_for("standings"), 303)
    response.delete_cookie(COOKIE, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


def _log_out(site: Site, session: str) -> None:
    with transaction(site.writer.engine) as connection:
        team_store.end_session(connection, session)
