"""The web app of one ladder: its routes. What each answers is in the modules beside this one."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from policybox.errors import NotFound
from policybox.league.ladder.database import LadderError
from policybox.league.views.game_facts import GameUnreadable
from policybox.league.web import UPLOAD_CAP, downloads, pages, render, scrimmages, upload, viewer
from policybox.league.web.headers import SecurityHeaders
from policybox.league.web.site import Site

STATIC = Path(__file__).parent / "static"


def make_app(folder: str | Path, upload_cap: int = UPLOAD_CAP) -> Starlette:
    """The ladder in ``folder`` as a web page and a JSON API (its database opened now, closed when the
    app shuts down); a submission's request body at most ``upload_cap`` bytes."""
    site = Site.open(folder, upload_cap)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            site.close()

    routes = [
        *(route for page in pages.PAGES for route in page.routes()),
        Route("/matches/{match:int}/replay", pages.replay, name="replay"),
        Route("/api/matches/{match:int}/replay", pages.replay_frames, name="api:replay"),
        Route("/final/matches/{number:int}/replay", pages.final_replay, name="final-replay"),
        Route("/api/final/matches/{number:int}/replay", pages.final_replay_frames, name="api:final-replay"),
        Route("/rules/starter.zip", pages.starter, name="starter"),
        Route("/rules/game", pages.game, name="game"),
        *downloads.ROUTES,
        Route("/submit", upload.submit_page, name="submit"),
        Route("/submit", upload.submit_form, methods=["POST"]),
        Route("/api/submit", upload.submit_api, methods=["POST"], name="api:submit"),
        Route("/scrimmage", scrimmages.scrimmage_form, methods=["POST"], name="ask_scrimmage"),
        Route("/api/scrimmage", scrimmages.scrimmage_api, methods=["POST"], name="api:ask_scrimmage"),
        Route("/scrimmages/{scrimmage:int}/replay", scrimmages.scrimmage_replay, name="scrimmage_replay"),
        Route("/login", viewer.login_page, name="login"),
        Route("/login", viewer.login, methods=["POST"]),
        Route("/logout", viewer.logout, methods=["POST"], name="logout"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(SecurityHeaders)],
        exception_handlers={
            HTTPException: render.http_error,
            NotFound: render.not_found,
            LadderError: render.database_unusable,
            GameUnreadable: render.game_unreadable,
        },
        lifespan=lifespan,
    )
    app.state.site = site
    return app
