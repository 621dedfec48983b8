"""A team's downloads (``policybox.league.views.take_home``): its agent's whole log from a match and its
version's files as a zip, each at a page's path and at the same path under ``/api/``. Who asks is
known as for every page (``web.viewer``): by ``Authorization: Bearer TOKEN``, else by the login
session; anyone but the owning team gets 403, and the file is never opened for them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from policybox.league.views import take_home
from policybox.league.views.take_home import Download, NotYours
from policybox.league.web.viewer import viewer

CHUNK = 1 << 16
LOG = "/matches/{match:int}/seats/{seat:int}/log"
FILES = "/names/{name}/v{version:int}/files.zip"


def seat_log(request: Request) -> Response:
    """Its agent's whole log, to the team whose seat it was."""
    site, params = request.app.state.site, request.path_params
    owned = set(viewer(site, request).owned)
    return _answer(lambda: take_home.seat_log(site.reader, params["match"], params["seat"], owned))


def version_files(request: Request) -> Response:
    """The version's files as a zip, to the team that owns its name."""
    site, params = request.app.state.site, request.path_params
    owned = set(viewer(site, request).owned)
    return _answer(lambda: take_home.version_files(site.reader, params["name"], params["version"], owned))


def _answer(fetch: Callable[[], Download]) -> Response:
    try:
        download = fetch()
    except NotYours as exc:
        raise HTTPException(403, str(exc)) from None
    headers = {"Content-Disposition": f'attachment; filename="{download.filename}"'}
    close = BackgroundTask(download.file.close)  # also when the generator is never run to its end
    return StreamingResponse(_chunks(download.file), media_type=download.media_type, headers=headers, background=close)


def _chunks(file: BinaryIO) -> Iterator[bytes]:
    try:
        while chunk := file.read(CHUNK):
            yield chunk
    finally:
        file.close()


ROUTES = [
    Route(LOG, seat_log, name="seat_log"),
    Route(f"/api{LOG}", seat_log, name="api:seat_log"),
    Route(FILES, version_files, name="version_files"),
    Route(f"/api{FILES}", version_files, name="api:version_files"),
]
