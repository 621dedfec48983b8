"""The web app as the tests read it through a client (Starlette's TestClient or httpx): every GET
route with the ladder's values filled in, everything one viewer sees, an upload, and the markup
payload that must stay text. Its pytest fixture (``fresh``: an empty ladder to submit to, with two
teams' tokens) is loaded by conftest.py as a plugin."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from helpers.ladders import api_ladder

PAYLOAD = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"


def auth(tokens: dict[str, str], team: str | None) -> dict[str, str]:
    """The headers of a request as ``team`` (its bearer token, from ``tokens``), or as nobody (``None``)."""
    return {} if team is None else {"Authorization": f"Bearer {tokens[team]}"}


def every_route(client: TestClient, one_each: bool = False) -> list[str]:
    """A path for every GET route of the app, taken from ``app.routes`` (so that a new route is walked
    too) and filled with every value of its parameters the ladder has: each name, each match, each team. The
    static files (the package's own) are left out; a final's matches by their number, when it had one.
    ``one_each``: one path of each route (its first values), for what a route does alike for all."""
    played = client.get("/api/matches").json()["matches"]
    rows = client.get("/api/standings").json()["rows"]
    values = {
        "name": [row["name"] for row in rows],
        "match": [match["id"] for match in played],
        "seat": [0],  # every match has a seat 0
        "version": [1],  # and every name a version 1
        "team": sorted({row["team"] for row in rows if row["team"]}),
        "scrimmage": [1, 2],
        "number": [match["number"] for match in (client.get("/api/final").json()["final"] or {}).get("matches", [])],
    }
    paths = []
    for route in client.app.routes:
        if isinstance(route, Route) and "GET" in (route.methods or ()):
            parameters = list(route.param_convertors)
            for filled in itertools.islice(
                itertools.product(*(values[p] for p in parameters)), 1 if one_each else None
            ):
                paths.append(route.path_format.format(**dict(zip(parameters, filled, strict=True))))
    return paths


def _taken_home(path: str, answer) -> bool:
    """A team's download (``web.downloads``), refused to anyone but its team (403), or not there (404: a
    log no longer kept, a version with no files)."""
    return path.endswith(("/log", "/files.zip")) and answer.status_code in (403, 404)


def own_scrimmages(client: TestClient, headers: dict[str, str]) -> set[int]:
    """The scrimmages the viewer's team asked for, as its team page lists them (404 to anyone else)."""
    teams = client.get("/api/standings").json()["rows"]
    pages = [
        client.get(f"/api/teams/{team}", headers=headers).json()
        for team in {row["team"] for row in teams if row["team"]}
    ]
    return {row["id"] for page in pages for row in page["scrimmages"]}


def _scrimmage_of(path: str) -> int:
    return int(path.split("/scrimmages/")[1].split("/")[0])


def everything_seen(client: TestClient, headers: dict[str, str]) -> str:
    """Every answer of every GET route (pages, their JSON, files) as one viewer gets them, as one text."""
    seen = []
    for path in every_route(client):
        answer = client.get(path, headers=headers)
        shown = "/scrimmages/" not in path or _scrimmage_of(path) in own_scrimmages(client, headers)
        assert answer.status_code == (200 if shown else 404) or path.endswith("/replay") or _taken_home(path, answer), (
            path,
            answer.text,
        )
        seen.append(answer.text)
    return "\n".join(seen)


def upload(
    client: httpx.Client,
    path: Path,
    name: str,
    headers: dict[str, str] | None = None,
    url: str = "/api/submit",
    sent_as: str = "",
) -> httpx.Response:
    """POST the zip at ``path`` as submission ``name`` to ``url`` (the API, or the form's ``/submit``), the
    file named as ``sent_as`` says, else as its own name."""
    with path.open("rb") as file:
        files = {"file": (sent_as or path.name, file, "application/zip")}
        return client.post(url, data={"name": name}, files=files, headers=headers)


@pytest.fixture
def fresh(tmp_path, database_url) -> Iterator[tuple[Path, dict[str, str]]]:
    """An empty ladder (no match played) with two teams' tokens."""
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        tokens = {team: ladder.token(team) for team in ("gamma", "delta")}
    yield folder, tokens
