"""Submitting over HTTP: ``POST /api/submit`` with ``Authorization: Bearer TOKEN``, and the submit
page's form with the login cookie; each a multipart form of ``name`` and ``file`` (a submission
zip for the ladder's game, MettaGrid's or PettingZoo's: ``game_of``).

Both run what ``ladder submit`` runs -- ``Ladder.submit(name, zip, team=...)``, every check of it, the
name's owner checked again in the transaction that stores it -- on the upload saved to a temporary
file. The request body is capped as it streams in (``Site.upload_cap``; past 1 MiB Starlette spools
it to an unnamed temporary file, never to memory), the zip's unpacked size by the ladder's own caps
(``LadderSettings.zip_limits``). No valid token: 401; another team's name: 403; a retired name: 409; too large (the body
or what the zip unpacks to): 413; over one of the team's limits: 429 (with
Retry-After when waiting frees it); as many uploads being processed as the server takes at once: 503
(with Retry-After); anything else wrong -- a file that is not a zip (named as sent), a policy that
cannot be built -- 400 with the message. Nothing is stored for any of them, and no file of the upload
outlives its request.

Everything done with the upload once it is received -- saving, unpacking, the build check in a cell
(``policybox.league.ladder.build_check``), hashing and copying it into the ladder -- runs in the
uploads' own pool of threads (``policybox.league.web.checks``), each team's one at a time and within
its limits: the event loop, and the threads page views use, go on answering meanwhile.
"""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePath
from urllib.parse import urlencode

from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from policybox.envs import split_env
from policybox.errors import PolicyboxError
from policybox.files.version_files import NAME_PATTERN
from policybox.league.ladder.folder import NotOwner, TeamLimit, Version
from policybox.league.ladder.life import Retired
from policybox.league.ladder.settings import LadderSettings
from policybox.league.views import game_facts, queue_page
from policybox.league.views.pulse import Eta
from policybox.league.web import render
from policybox.league.web.body import capped, size
from policybox.league.web.checks import ChecksBusy
from policybox.league.web.site import Site
from policybox.league.web.viewer import Viewer, bearer, identify, require_same_origin, viewer
from policybox.storage import StorageFull
from policybox.submission import GZIP_MAGIC, TooLarge

UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
NEEDS_TOKEN = (
    "a team's token is needed: send Authorization: Bearer TOKEN (the ladder's organiser gives each team its own)"
)
NAME_KEPT = 100  # of a refused name, shown again in the form: a name is at most 40 characters
FAMILY_NAMES = {"mettagrid": "MettaGrid", "pettingzoo": "PettingZoo", "kaggle": "Kaggle"}
# Retired: the organiser's decision (only ladder reinstate undoes it); anything else an upload gets wrong is a 400.
STATUSES: dict[type[PolicyboxError], int] = {NotOwner: 403, Retired: 409, StorageFull: 507, TooLarge: 413}


def game_of(settings: LadderSettings) -> str:
    """The ladder's game as its pages name it: its family and the game (a config file by its name
    alone, never its path on the organiser's machine)."""
    family, target = split_env(settings.settings.env)
    if family == "mettagrid" and target.endswith((".yaml", ".yml", ".json")):
        game = PurePath(target).name
    else:
        game = game_facts.public_target(target) if family == "pettingzoo" else target
    return f"{FAMILY_NAMES.get(family, family)} game {game}"


def bad_form(settings: LadderSettings) -> str:
    return (
        "send a multipart form with name (the submission's name) and file (a submission zip for this ladder's "
        f"{game_of(settings)})"
    )


class Submitted(BaseModel):
    """What ``POST /api/submit`` answers (201): the version made, queued for qualification."""

    name: str
    version: int
    digest: str
    state: str
    team: str = Field(description="The team that submitted it, and owns the name")
    page: str = Field(description="The name's page")
    queue: Eta | None = Field(
        default=None,
        description="Its place in the queue and when it qualifies (an ETA from the rate the ladder plays at, or "
        "when the ladder runs again if it is stopped); None: it is out of the queue already",
    )


async def submit_api(request: Request) -> Response:
    site = request.app.state.site
    who = await run_in_threadpool(identify, site, bearer(request))
    if who.team is None:
        raise HTTPException(401, NEEDS_TOKEN, headers={"WWW-Authenticate": "Bearer"})
    return render.json(await _receive(request, site, who.team), 201)


def submit_page(request: Request) -> Response:
    """The form; after a submission through it (``?submitted=NAME&version=N``), with when that version
    qualifies -- read now, so that a reload tells it anew."""
    site = request.app.state.site
    context = _form_context(site, viewer(site, request), None)
    context["submitted"] = _submitted(site, request.query_params.get("submitted"), request.query_params.get("version"))
    return render.page(request, "submit.html", context)


def _submitted(site: Site, name: str | None, version: str | None) -> dict[str, object] | None:
    """What the submit page says of a version just submitted: its label, its page and when it qualifies
    (nothing for what is not a version of this ladder)."""
    if not (name and version and NAME_PATTERN.fullmatch(name) and version.isascii() and version.isdigit()):
        return None
    number = int(version[:9])  # no name has a billion versions
    if not queue_page.has_version(site.reader, name, number):
        return None
    return {
        "label": f"{name} v{number}",
        "page": f"/names/{name}",
        "eta": queue_page.queue_eta(site.reader, name, number),
    }


async def submit_form(request: Request) -> Response:
    """The submit page's form: on success, 303 to the name's page; else the form again, with why."""
    require_same_origin(request)
    site = request.app.state.site
    who = await run_in_threadpool(viewer, site, request)
    sent: dict[str, str] = {}  # the name the form sent: shown again in the form with why it was refused
    try:
        if who.team is None:
            raise HTTPException(401, "log in with your team's token first")
        submitted = await _receive(request, site, who.team, sent)
    except HTTPException as exc:
        context = _form_context(site, who, exc.detail, sent.get("name", ""))
        page = render.page(request, "submit.html", context, exc.status_code)
        page.headers.update(exc.headers or {})  # a limit's Retry-After
        return page
    query = urlencode({"submitted": submitted.name, "version": submitted.version})
    return RedirectResponse(f"{request.app.url_path_for('submit')}?{query}", 303)  # the page says when it qualifies


def _form_context(site: Site, who: Viewer, message: str | None, name: str = "") -> dict[str, object]:
    game = game_of(site.reader.settings)
    return {
        "viewer": who,
        "json_url": None,
        "message": message,
        "cap": size(site.upload_cap),
        "game": game,
        "name": name[:NAME_KEPT],
        "submitted": None,
    }


async def _receive(request: Request, site: Site, team: str, sent: dict[str, str] | None = None) -> Submitted:
    """Submit what the request's form holds as ``team``'s; ``sent`` gets the name it was sent under,
    once read."""
    async with capped(request, site.upload_cap).form(max_files=1, max_fields=1) as form:
        name, upload = form.get("name"), form.get("file")
        if sent is not None and isinstance(name, str):
            sent["name"] = name
        if not isinstance(name, str) or not isinstance(upload, UploadFile):
            raise HTTPException(400, bad_form(site.reader.settings))
        work = functools.partial(_submit, site, name.strip(), upload, team)
        try:
            version = await site.build_checks.run(team, work)
        except PolicyboxError as exc:
            raise _refusal(exc) from None
    page = str(request.app.url_path_for("name", name=version.name))
    eta = await run_in_threadpool(queue_page.queue_eta, site.reader, version.name, version.number)
    return Submitted(
        name=version.name,
        version=version.number,
        digest=version.digest,
        state=version.state,
        team=team,
        page=page,
        queue=eta,
    )


def _submit(site: Site, name: str, upload: UploadFile, team: str) -> Version:
    """The upload as a file of a temporary folder, submitted from there (in the uploads' pool):
    ``ladder.submit`` copies what it keeps into the ladder, so the folder goes when it returns."""
    ladder = site.writer
    with tempfile.TemporaryDirectory(prefix="policybox-upload-") as folder:
        kept = Path(folder) / "upload"
        with kept.open("wb") as file:
            shutil.copyfileobj(upload.file, file)
        tar = is_gzip(kept)
        if not (tar or zipfile.is_zipfile(kept)):  # named as it was sent (data: escaped), not as it is kept
            sent = PurePath(upload.filename or "").name[:100] or "the file sent"
            raise HTTPException(
                400, f"{sent} is not a zip or tar.gz file: send a submission zip for this {game_of(ladder.settings)}"
            )
        given = file_name(upload.filename, tar)
        kept.rename(Path(folder) / given)
        with site.build_checks.building(team, ladder.settings.submissions_per_hour):
            return ladder.submit(name, given, base_dir=Path(folder), team=team)


def _refusal(exc: PolicyboxError) -> HTTPException:
    """Why an upload was not stored, as its HTTP answer; over a limit, with Retry-After when waiting helps."""
    if isinstance(exc, TeamLimit | ChecksBusy):
        retry = {} if exc.retry_after_s is None else {"Retry-After": str(exc.retry_after_s)}
        return HTTPException(503 if isinstance(exc, ChecksBusy) else 429, str(exc), headers=retry)
    return HTTPException(next((code for kind, code in STATUSES.items() if isinstance(exc, kind)), 400), str(exc))


def file_name(given: str | None, tar: bool = False) -> str:
    """The upload's file name as the version's source shows it: its last part in plain characters, ending
    in .zip, or .tar.gz for a tar.gz (as its first bytes say, whatever its name says)."""
    suffix = ".tar.gz" if tar else ".zip"
    name = UNSAFE.sub("_", PurePath(given or "").name).lstrip(".")[:100]
    name = name if name.endswith(suffix) else f"{name}{suffix}"
    return f"upload{suffix}" if name == suffix else name


def is_gzip(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(len(GZIP_MAGIC)) == GZIP_MAGIC
