"""The web page (``policybox ladder serve``) through Starlette's TestClient, on SQLite and a real
PostgreSQL server: every page and its JSON, which are the same data; what each template receives,
pinned; who may see what (a team its own log tails and tracebacks, nobody a spec's env values);
every text a policy controls escaped; submitting over the API and through the form, with each
refusal and nothing stored; the headers every response carries; reading while ``ladder run`` writes.

Judged from outside: status codes, headers, the HTML (parsed) and JSON answers, and the database.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import POLICIES, policy
from helpers.ladders import EXAMPLES, WANDERER, activate, api_ladder, ladder_command, start_run, wait_until
from helpers.web import PAYLOAD, auth, every_route, everything_seen, upload
from helpers.zips import bot_zip
from markupsafe import escape
from sqlalchemy import select
from starlette.routing import Route
from starlette.testclient import TestClient

from policybox.ladder import Ladder
from policybox.league.ladder import scrimmage
from policybox.league.ladder.schema import names, owners, versions
from policybox.league.views import (
    match_list,
    match_page,
    name_page,
    plots,
    queue_page,
    scrimmage_page,
    standings,
    team_page,
)
from policybox.league.views.pulse import STOPPED_ETA
from policybox.league.views.templating import fixed
from policybox.league.web.app import make_app
from policybox.league.web.headers import CSP
from policybox.league.web.upload import file_name
from policybox.league.web.viewer import COOKIE, Viewer
from policybox.lines import FULL_TEXT

SECRET_VALUE = "env-secret-4b1d"
LOG_OF = {"alpha": "ALPHA-LOG-SECRET", "beta": "BETA-LOG-SECRET"}
TRACEBACK = "Traceback (most recent call last)"
REPLAY = b"a compressed MettaGrid replay"
PAGE_KEYS = {"request", "page", "viewer", "json_url", "plots", "has_final"}  # has_final: the nav links /final


@dataclass
class League:
    folder: Path
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def league(tmp_path_factory) -> Iterator[League]:
    """A ladder that has played 6 matches: the organiser's walker and secretive (a spec passing
    env.SECRET), team alpha's alphabot and team beta's betabot (each logs its team's secret and
    markup, and raises at step 5 of every match), and alpha's hostile, rejected with a script in
    its traceback; alpha's two scrimmages of alphabot against betabot. Match 1 has a replay file.
    On SQLite: every page's reads on PostgreSQL are
    ``test_the_pages_read_the_database_while_ladder_run_writes_it``'s."""
    folder = tmp_path_factory.mktemp("league") / "cup"
    with api_ladder(folder, suspend_after=10) as ladder:
        tokens = {team: ladder.token(team) for team in LOG_OF}
        ladder.submit("walker", WANDERER)
        ladder.submit("secretive", f"noop,env.SECRET={SECRET_VALUE}")
        for name in ("walker", "secretive"):  # playing from the first match: not still qualifying under load
            activate(ladder, name)
        for team in LOG_OF:
            ladder.submit(f"{team}bot", policy("web_bots.py:LogsThenRaises", **{"kw.team": team}), team=team)
            activate(ladder, f"{team}bot")
        # stored without the build check (which would refuse it at once), so that its qualification rejects it
        ladder.submit("hostile", policy("web_bots.py:HostileInInit"), team="alpha", check=False)
        scrimmage.ask(ladder, "alpha", "alphabot", "betabot", 2)  # played by the run: alpha's alone to see
        ladder.run(matches=6, workers=2)
        rows = {row.name: row for row in ladder.standings().rows}
    assert rows["hostile"].state == "rejected" and all(rows[n].matches for n in rows if n != "hostile")
    (folder / "replays").mkdir()
    (folder / "replays" / "match-000001.json.z").write_bytes(REPLAY)
    yield League(folder, tokens)


@pytest.fixture
def client(league) -> Iterator[TestClient]:
    with TestClient(make_app(league.folder)) as test_client:
        yield test_client


def every_page(client: TestClient) -> list[str]:
    """The path of every page the ladder has: standings, each name, the matches, each match, the queue."""
    standings = client.get("/api/standings").json()
    played = client.get("/api/matches").json()["matches"]
    return [
        "/",
        *(f"/names/{row['name']}" for row in standings["rows"]),
        "/matches",
        *(f"/matches/{match['id']}" for match in played),
        "/queue",
        *(f"/teams/{team}" for team in LOG_OF),
    ]


# ---------------------------------------------------------------------------------------------
# Pages and their JSON


def without_ago(model: dict) -> dict:
    """A page's data but the pulse's line, which says how long ago the run stopped at each request's moment."""
    return model | ({"pulse": model["pulse"] | {"line": None}} if "pulse" in model else {})


def test_each_page_is_rendered_from_the_json_it_links(league, client):
    """For every viewer, every page's template gets exactly the model its /api/ twin answers, and the
    page links that JSON."""
    for team in (None, "alpha", "beta"):
        for path in every_page(client):
            page = client.get(path, headers=auth(league.tokens, team))
            assert page.status_code == 200, (path, page.text)
            json_url = page.context["json_url"]
            assert json_url == ("/api/standings" if path == "/" else f"/api{path}")
            assert f'<link rel="alternate" type="application/json" href="{json_url}">' in page.text
            answer = client.get(json_url, headers=auth(league.tokens, team))
            assert answer.headers["content-type"] == "application/json"
            assert without_ago(answer.json()) == without_ago(page.context["page"].model_dump(mode="json")), path


def test_what_each_template_receives_is_pinned(league, client):
    expected = {
        "/": ("standings.html", standings.Standings, {"rewards"}),
        "/names/alphabot": ("name.html", name_page.NamePage, {"rating", "reward", "head_to_head"}),
        "/matches": ("matches.html", match_list.MatchList, set()),
        "/matches/1": ("match.html", match_page.MatchPage, set()),
        "/queue": ("queue.html", queue_page.Queue, set()),
        "/teams/alpha": ("team.html", team_page.TeamPage, {"alphabot v1"}),  # hostile was never rated
        "/scrimmages/1": ("scrimmage.html", scrimmage_page.ScrimmagePage, set()),
    }
    alpha = Viewer("alpha", frozenset({"alphabot", "hostile"}))
    for path, (template, model, plotted) in expected.items():
        page = client.get(path, headers=auth(league.tokens, "alpha"))
        assert page.template.name == template
        assert set(page.context) == PAGE_KEYS | ({"scrimmage"} if path == "/names/alphabot" else set())  # its form
        assert type(page.context["page"]) is model and page.context["viewer"] == alpha
        assert set(page.context["plots"]) == plotted and all(
            svg.startswith("<svg") for svg in page.context["plots"].values()
        )
    forms = {
        "/submit": ("submit.html", {"request", "viewer", "json_url", "message", "cap", "game", "name", "submitted"}),
        "/login": ("login.html", {"request", "viewer", "json_url", "message"}),
        "/names/nobody": ("error.html", {"request", "viewer", "json_url", "status", "message"}),
    }
    for path, (template, keys) in forms.items():
        page = client.get(path)
        assert page.template.name == template and set(page.context) == keys
    assert client.get("/submit").context["cap"] == "256 MiB"
    assert client.get("/submit").context["game"] == "MettaGrid game moves.yaml"


def test_a_page_holds_what_the_issue_asks_for(league, client):
    """Spot checks of what a person reads: the standings' columns, a name's plots and tables, a
    match's seats, latency, layers, seed and the command that replays it, its replay to download."""
    standings = client.get("/").text
    for header in (
        "rating (μ−3σ)",
        "vs next (rating)",
        "reward [95% interval]",
        "matches",
        "statuses",
        "version",
        "state",
    ):
        assert header in standings
    name = client.get("/names/walker")
    for heading in ("Rating", "Head-to-head", "Results per seat", "Recent matches", "Failures", "Versions"):
        assert f"<h2>{heading}</h2>" in name.text
    assert "W-D-L" in name.text and 'href="/matches/' in name.text
    match = client.get("/matches/1")
    page = match.context["page"]
    assert f'<td id="seed">{page.seed}</td>' in match.text and "policybox run --ladder DIR" in page.replay_command
    assert "policybox run" not in match.text and "p99 ms" in match.text  # the organiser's command: docs/web.md
    assert all(layer in match.text for layer in page.agents[0].sandbox)
    assert 'href="/matches/1/replay"' in match.text
    replay = client.get("/matches/1/replay")
    assert replay.content == REPLAY and "attachment" in replay.headers["content-disposition"]
    no_replay = client.get("/matches/2/replay")
    assert no_replay.status_code == 404 and "has no replay" in no_replay.text
    assert "not written for this match" in client.get("/matches/2").text


def test_errors_are_one_message_as_a_page_or_as_json(league, client):
    cases = [
        ("/names/nobody", 404, "this ladder has no submission called 'nobody'"),
        ("/matches/9999", 404, "this ladder has no played match 9999"),
        ("/matches?before=soon", 400, "give a match id"),
        ("/no/such/page", 404, "Not Found"),
    ]
    for path, status, message in cases:
        page = client.get(path)
        assert page.status_code == status and escape(message) in page.text and page.template.name == "error.html"
        if path.startswith(("/names", "/matches")):
            answer = client.get(f"/api{path}")
            assert answer.status_code == status and message in answer.json()["error"]
    assert client.post("/api/standings").status_code == 405
    hostile = client.get("/names/<img src=x onerror=alert(1)>")  # the path is text too
    assert hostile.status_code == 404 and "<img" not in hostile.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in hostile.text


def test_serve_refuses_a_folder_that_is_not_a_ladder(tmp_path):
    refused = ladder_command("serve", str(tmp_path), "--port", "9")
    assert refused.returncode == 2 and "is not a ladder" in refused.stderr and "Traceback" not in refused.stderr


def test_every_response_carries_the_security_headers(league, client):
    responses = [
        client.get("/"),
        client.get("/api/standings"),
        client.get("/names/walker"),
        client.get("/static/ladder.css"),
        client.get("/static/standings.js"),
        client.get("/names/nobody"),
        client.get("/api/names/nobody"),
        client.post("/api/submit"),
        client.post("/login", data={"token": "x"}),
        client.get("/matches/1/replay"),
    ]
    for response in responses:
        assert response.headers["content-security-policy"] == CSP, response.url
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
    assert CSP == (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'"
    )
    assert client.get("/api/standings").headers["cache-control"] == "no-store"  # live, and maybe a team's own


# ---------------------------------------------------------------------------------------------
# Who sees what


def test_a_team_sees_its_own_log_tails_and_tracebacks_and_no_one_elses(league, client):
    seen = {team: everything_seen(client, auth(league.tokens, team)) for team in (None, "alpha", "beta")}
    for team, secret in LOG_OF.items():
        assert secret in seen[team]
        assert all(secret not in text for other, text in seen.items() if other != team), secret
    assert TRACEBACK in seen["alpha"]  # hostile's reason, whole for its team
    assert TRACEBACK in seen["beta"]  # its own betabot's, from its matches
    assert TRACEBACK not in seen[None]
    hostile_frame = "raise RuntimeError(PAYLOAD)"  # alpha's hostile's own line, in its reason's traceback
    assert hostile_frame in seen["alpha"] and hostile_frame not in seen["beta"]
    rejected = client.get("/api/queue", headers=auth(league.tokens, "beta")).json()["rejected"]
    assert [row["name"] for row in rejected] == ["hostile"]
    first = f"agent 0 ended error: RuntimeError at start-up: {PAYLOAD}"
    assert rejected[0]["reason"] == f"{first} … {FULL_TEXT}"  # its first line only, saying where the rest is
    failures = client.get("/api/names/alphabot", headers=auth(league.tokens, "beta")).json()["failures"]
    assert failures and all(f["status"] == "error" and f["step"] == 5 and f["log_tail"] is None for f in failures)
    assert all(f["cause"] == "RuntimeError" for f in failures)
    own = client.get("/api/names/alphabot", headers=auth(league.tokens, "alpha")).json()["failures"]
    assert all(LOG_OF["alpha"] in f["log_tail"] for f in own)


def test_a_policys_message_past_its_first_line_is_its_teams_alone(league, client):
    """Each bot's exception has its team's secret on its message's second line (and so in its log
    tail): on no page, JSON answer or file of any route may another team or anybody read it."""
    seen = {team: everything_seen(client, auth(league.tokens, team)) for team in (None, "alpha", "beta")}
    for team in LOG_OF:
        secret = f"{team.upper()}-MESSAGE-SECRET"
        assert secret in seen[team]
        assert all(secret not in text for other, text in seen.items() if other != team), secret
    first_line = f"gave up {PAYLOAD}"
    match = client.get("/api/matches/1", headers=auth(league.tokens, "beta")).json()
    shown = {agent["name"]: agent["message"] for agent in match["agents"] if agent["message"]}
    assert shown.get("alphabot", first_line) == first_line  # another team's: its first line
    assert all(f["message"] == first_line for f in client.get("/api/names/alphabot").json()["failures"])


def test_a_bad_token_sees_what_anybody_sees(league, client):
    anybody = client.get("/api/names/alphabot").json()
    assert client.get("/api/names/alphabot", headers={"Authorization": "Bearer not-a-token"}).json() == anybody
    client.cookies.set(COOKIE, "not-a-token")
    assert client.get("/api/names/alphabot").json() == anybody


def test_no_page_or_answer_shows_an_env_value(league, client):
    for team in (None, "alpha", "beta"):
        assert SECRET_VALUE not in everything_seen(client, auth(league.tokens, team))
    assert "noop,env.SECRET=***" in client.get("/names/secretive").text  # the variable's name, never its value
    # Nor does the database the pages read: the value is only in the version's spec file, root's alone.
    with Ladder.open(league.folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        assert SECRET_VALUE not in json.dumps([row.spec for row in connection.execute(select(versions.c.spec))])
    holding = [p for p in (league.folder / "versions" / "specs").iterdir() if SECRET_VALUE in p.read_text()]
    assert len(holding) == 1 and stat.S_IMODE(holding[0].stat().st_mode) == 0o600


# ---------------------------------------------------------------------------------------------
# Inert content


class Tags(HTMLParser):
    """Every element's tag and attributes, as a browser's parser would build them."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Tags()
    parser.feed(html)
    return parser.found


def test_every_text_a_policy_controls_is_escaped_in_every_page(league, client):
    """As alpha, who sees the most (hostile's traceback, alphabot's logs): the payload appears in the
    pages only escaped; no page has an element or an event attribute it did not write itself."""
    shown_in = []
    for path in every_page(client):
        html = client.get(path, headers=auth(league.tokens, "alpha")).text
        assert "<script>document.title" not in html and "<img" not in html
        if str(escape(PAYLOAD)) in html:
            shown_in.append(path)
        for tag, attributes in elements(html):
            assert tag not in ("img", "iframe", "object", "embed"), (path, tag)
            assert not any(name.startswith("on") for name in attributes), (path, tag, attributes)
            if tag == "script":  # the site's own scripts only, each on its page
                script = {"/": "/static/standings.js", "/matches/1": "/static/replay.js"}.get(path)
                assert attributes == {"src": script, "defer": None}, (path, attributes)
    assert {"/", "/names/hostile", "/names/alphabot", "/queue"} <= set(shown_in)
    assert any(path.startswith("/matches/") for path in shown_in)  # a failure's message on its match


def test_a_plot_draws_a_hostile_label_as_text():
    label = PAYLOAD
    drawn = [
        plots.interval_plot([plots.Interval(label, 0.5, 0.25, 0.75)]),
        plots.heat_map([label], {(label, "other"): (0.5, label)}, label, ["other"]),
        plots.heat_map([label, "other"], {(label, "other"): (-1.0, "0-0-1")}, "square"),
        plots.rating_history([(1, 25.0, 8.0), (2, 26.0, 7.0)], title=label),
        plots.bars([(label, 1.0), ("other", None)], label, unit=label),
    ]
    for svg in drawn:
        root = ElementTree.fromstring(svg)  # well-formed: the label broke nothing open
        tags = {element.tag.split("}")[1] for element in root.iter()}
        assert tags <= {"svg", "text", "title", "line", "circle", "rect", "polygon", "polyline"}, tags
        assert not any(name.startswith("on") for element in root.iter() for name in element.attrib)
        assert any(label[:23] in (element.text or "") for element in root.iter())  # shown (labels are cut)


# ---------------------------------------------------------------------------------------------
# Submitting


def stored(folder: Path) -> tuple:
    """What a submission changes: the names, versions and owners tables, and the versions' folder."""
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        rows = tuple(tuple(connection.execute(select(table)).all()) for table in (names, versions, owners))
    return rows, sorted(str(p.relative_to(folder)) for p in (folder / "versions").rglob("*"))


def test_submitting_over_the_api(fresh, tmp_path):
    folder, tokens = fresh
    gamma, delta = ({"Authorization": f"Bearer {tokens[team]}"} for team in ("gamma", "delta"))
    good = bot_zip(tmp_path / "walker.zip")
    with TestClient(make_app(folder, upload_cap=64 * 1024)) as client:
        before = stored(folder)
        for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": f"Basic {tokens['gamma']}"}):
            refused = upload(client, good, "walker", headers)
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert "a team's token is needed" in refused.json()["error"]
        (tmp_path / "notes.zip").write_text("not a zip at all")
        bad_cases = [
            (upload(client, good, "Bad Name", gamma), 400, "'Bad Name' is not allowed: use 1 to 40 of a-z"),
            (upload(client, tmp_path / "notes.zip", "walker", gamma), 400, "is not a zip or tar.gz file"),
            (client.post("/api/submit", data={"name": "walker"}, headers=gamma), 400, "a multipart form with name"),
            (client.post("/api/submit", content=b"x" * 100_000, headers=gamma), 413, "takes (65,536 bytes)"),
        ]
        for response, status, message in bad_cases:
            assert response.status_code == status and message in response.json()["error"], response.text
        assert stored(folder) == before  # nothing stored for any of them

        made = upload(client, good, "walker", gamma)
        assert made.status_code == 201, made.text
        assert made.json() | {"digest": None} == {
            "name": "walker",
            "version": 1,
            "digest": None,
            "state": "qualifying",
            "team": "gamma",
            "page": "/names/walker",
            "queue": {
                "place": 1,
                "minutes": None,
                "line": f"place 1 in the queue; {STOPPED_ETA}",
            },  # no ladder run: it says so
        }
        assert client.get("/api/queue").json()["qualifying"][0]["name"] == "walker"
        assert client.get("/api/names/walker").json()["versions"][0]["source"] == "walker.zip"
        after = stored(folder)
        for response, status, message in [
            (upload(client, good, "walker", gamma), 400, "holds the same content as walker v1"),
            (upload(client, good, "walker", delta), 403, "walker belongs to another team"),
        ]:
            assert response.status_code == status and message in response.json()["error"]
        assert stored(folder) == after
        other = bot_zip(tmp_path / "hostile.zip", "HostileInStep", (POLICIES / "web_bots.py").read_text())
        assert upload(client, other, "walker", gamma).json()["version"] == 2  # its own name: the next version
    with Ladder.open(folder, read_only=True) as ladder:
        assert ladder.owner_of("walker") == "gamma" and ladder.names_of("gamma") == {"walker"}


def test_a_zip_of_one_folder_qualifies_from_the_web_and_the_command_line(fresh, tmp_path):
    """``zip -r delta.zip delta/`` is the commonest way to pack a folder: over the web page and with
    ``ladder submit`` it is read as that folder and qualifies; one that cannot be read so is refused with
    the command that packs it right."""
    folder, tokens = fresh
    with zipfile.ZipFile(tmp_path / "delta.zip", "w") as archive:
        archive.writestr("delta/policy_spec.json", json.dumps({"class_path": "bot.py:Wanderer"}))
        archive.writestr("delta/bot.py", (EXAMPLES / "wanderer.py").read_text())
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as archive:
        archive.writestr("delta/policy_spec.json", json.dumps({"class_path": "bot.py:Wanderer"}))
        archive.writestr("echo/bot.py", "")
    gamma = {"Authorization": f"Bearer {tokens['gamma']}"}
    with TestClient(make_app(folder)) as client:
        assert upload(client, tmp_path / "delta.zip", "delta", gamma).status_code == 201
        refused = upload(client, tmp_path / "two.zip", "echo", gamma)
        assert refused.status_code == 400
        assert "(it is in its folder delta/): " in refused.json()["error"]
        assert refused.json()["error"].endswith("e.g. cd delta && zip -r ../two.zip .")
    assert ladder_command("submit", folder, "deltacli", tmp_path / "delta.zip").returncode == 0
    refused_cli = ladder_command("submit", folder, "echo", tmp_path / "two.zip")
    assert refused_cli.returncode == 2 and "cd delta && zip -r ../two.zip ." in refused_cli.stderr
    with Ladder.open(folder) as ladder:
        ladder.run(matches=1, workers=1)
        assert {row.name: row.state for row in ladder.standings().rows} == {"delta": "active", "deltacli": "active"}


def test_a_body_over_the_cap_is_refused_while_it_streams(fresh):
    """Without a Content-Length (a chunked upload), the body is counted as it arrives."""
    folder, tokens = fresh
    gamma = {"Authorization": f"Bearer {tokens['gamma']}", "Content-Type": "multipart/form-data; boundary=b"}
    chunks = (b"x" * 8192 for _ in range(100))
    with TestClient(make_app(folder, upload_cap=64 * 1024)) as client:
        before = stored(folder)
        refused = client.post("/api/submit", content=chunks, headers=gamma)
        assert refused.status_code == 413
        assert refused.json()["error"] == "the request is larger than this ladder takes (65,536 bytes)"
        assert stored(folder) == before


def test_logging_in_and_submitting_through_the_form(fresh, tmp_path):
    folder, tokens = fresh
    own = "http://testserver"
    good = bot_zip(tmp_path / "walker.zip")
    with TestClient(make_app(folder)) as client:
        assert "Log in</a> with your team's token" in client.get("/submit").text
        refused = upload(client, good, "walker", {"Origin": own}, url="/submit")
        assert refused.status_code == 401 and "log in with your team" in refused.text
        wrong = client.post("/login", data={"token": "not-a-token"}, headers={"Origin": own})
        assert wrong.status_code == 401 and "that is not a token of this ladder" in wrong.text
        forged_forms = [
            {},
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site", "Origin": own},  # a sibling site's page: the browser's word wins
        ]
        for headers in forged_forms:
            forged = client.post("/login", data={"token": tokens["gamma"]}, headers=headers)
            assert forged.status_code == 403 and COOKIE not in forged.cookies

        login = client.post("/login", data={"token": tokens["gamma"]}, headers={"Origin": own}, follow_redirects=False)
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"]
        assert f"{COOKIE}=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert tokens["gamma"] not in cookie  # the cookie names a session, never the token
        assert "Secure" not in cookie  # plain HTTP here; over HTTPS it is (see below)
        assert '<strong id="team">gamma</strong>' in client.get("/").text
        assert 'id="submit"' in client.get("/submit").text

        before = stored(folder)
        forged = upload(client, good, "walker", {"Origin": "http://evil.example"}, url="/submit")
        assert forged.status_code == 403 and stored(folder) == before
        (tmp_path / "notes.zip").write_text("not a zip")
        bad = upload(client, tmp_path / "notes.zip", "walker", {"Origin": own}, url="/submit")
        assert bad.status_code == 400 and "is not a zip or tar.gz file" in bad.context["message"]
        assert stored(folder) == before
        made = client.post(
            "/submit",
            data={"name": "walker"},
            files={"file": ("walker.zip", good.read_bytes(), "application/zip")},
            headers={"Sec-Fetch-Site": "same-origin", "Origin": "null"},  # a browser's own form under no-referrer
            follow_redirects=False,
        )
        assert made.status_code == 303 and made.headers["location"] == "/submit?submitted=walker&version=1"
        answer = client.get(made.headers["location"]).context["submitted"]
        assert answer["page"] == "/names/walker" and answer["eta"].line.endswith(STOPPED_ETA)
        with Ladder.open(folder, read_only=True) as ladder:
            assert ladder.owner_of("walker") == "gamma"

        out = client.post("/logout", headers={"Origin": own}, follow_redirects=False)
        assert out.status_code == 303 and f'{COOKIE}=""' in out.headers["set-cookie"]
        client.cookies.clear()
        assert "log in" in client.get("/").text
    with TestClient(make_app(folder), base_url="https://ladder.example") as client:
        login = client.post("/login", data={"token": tokens["delta"]}, headers={"Origin": "https://ladder.example"})
        assert "Secure" in login.history[0].headers["set-cookie"]


def test_an_uploads_file_name_is_shown_in_plain_characters():
    assert file_name("walker.zip") == "walker.zip"
    assert file_name("../../etc/passwd") == "passwd.zip"
    assert file_name("bot,env.X=1 <b>.zip") == "bot_env.X_1__b_.zip"
    assert file_name(None) == file_name("") == file_name("...") == "upload.zip"


def test_numbers_read_as_the_live_standings_write_them():
    """``fixed`` rounds a tie away from zero, as JavaScript's toFixed (test_web_browser compares them)."""
    assert [fixed(0.0625), fixed(-0.0625), fixed(2.5, 0), fixed(-0.0), fixed(None)] == [
        "0.063",
        "-0.063",
        "3",
        "0.000",
        "—",
    ]


# ---------------------------------------------------------------------------------------------
# Reading while the ladder runs


@pytest.mark.storage
def test_the_pages_read_the_database_while_ladder_run_writes_it(tmp_path, database_url):
    """A real ``ladder run`` in another process plays; the app's answers follow it, match after match.
    Then every GET route answers, as a team and as anybody: each page's reads on each database."""
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        token = ladder.token("alpha")
        ladder.submit("walker", WANDERER, team="alpha")
        ladder.submit("noop", "noop")
    with TestClient(make_app(folder)) as client:
        run = start_run(folder)
        try:
            counts = [client.get("/api/standings").json()["matches"]]

            def more() -> bool:
                counts.append(client.get("/api/standings").json()["matches"])
                assert client.get("/").status_code == 200
                return counts[-1] >= counts[0] + 3

            wait_until(more, what="3 more matches seen through the app")
        finally:
            os.killpg(run.pid, signal.SIGTERM)
            run.communicate(timeout=120)
        assert counts == sorted(counts)  # never a step back
        for headers in ({}, {"Authorization": f"Bearer {token}"}):
            assert everything_seen(client, headers)


# ---------------------------------------------------------------------------------------------
# No 500: every route, every hostile value

HOSTILE = [
    "²",
    "-1",
    "9" * 30,
    "-" + "9" * 30,
    "0",
    "1e3",
    "名前",
    "%00",
    "%ff",
    "%c3%28",
    "x" * 10_000,
    "..",
    "%2e%2e",
]
HOSTILE_HEADERS = [
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer " + "x" * 10_000},
    {"Authorization": "Bearer \u00e9\u00ff".encode("latin-1")},
    {"Authorization": "Basic Zm9vOmJhcg=="},
    {"Authorization": "bearer  "},
    {"Cookie": f"{COOKIE}=" + "x" * 4000},
    {"Cookie": f'{COOKIE}="\\000\\377"'},
    {"Cookie": f"{COOKIE}=; {COOKIE}=x; {COOKIE}"},
    {"Cookie": "=;;=x;\u00e9=\u00e9".encode("latin-1")},
]
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]


def hostile_requests(client: TestClient) -> Iterator[tuple[str, str, dict]]:
    """(method, path, keyword arguments of the request) for every route of ``app.routes``: each
    parameter given each hostile value, each query given hostile values and unknown parameters, every
    method, bad credentials, and forms missing, repeating or swelling their fields (a route's hostile
    queries, methods and headers asked at one of its paths: it reads them alike for every name)."""
    valid = every_route(client, one_each=True)
    for route in client.app.routes:
        template = route.path_format if isinstance(route, Route) else f"{route.path}/{{path}}"
        parameters = re.findall(r"{(\w+)}", template)
        for value in HOSTILE:
            path = template.format(**dict.fromkeys(parameters, value))
            yield "GET", path, {}
            yield "POST", path, {}
    for path in {p.split("?")[0] for p in valid}:
        for value in HOSTILE:
            yield "GET", path, {"params": {"before": value, value[:50]: value}}
        for method in METHODS:
            yield method, path, {}
        for headers in HOSTILE_HEADERS:
            yield "GET", path, {"headers": headers}
    forms: list[dict] = [
        {},
        {"data": {"token": "x", "name": "y"}},
        {"data": {"token": ["a", "b"]}},
        {"data": {"name": "x" * 10_000}},
        {"data": {"token": "x" * 100_000}},
        {"content": b"\xff\xfe\x00" * 100, "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
        {"content": b"--b\r\n\r\n", "headers": {"Content-Type": "multipart/form-data; boundary=b"}},
        {"content": b"{}", "headers": {"Content-Type": "application/json"}},
        {"data": {"name": "walker\x00"}, "files": {"file": ("x.zip", b"PK", "application/zip")}},
        {"data": {"name": ["a", "b"]}, "files": {"file": ("x.zip", b"PK", "application/zip")}},
        {"data": {"name": "ok"}, "files": [("file", ("a.zip", b"PK")), ("file", ("b.zip", b"PK"))]},
        {"data": {"name": "ok"}, "files": {"upload": ("x.zip", b"PK", "application/zip")}},
    ]
    for route in client.app.routes:
        if isinstance(route, Route) and "POST" in (route.methods or ()) and not route.param_convertors:
            for form in forms:
                for headers in ({"Origin": "http://testserver"}, {"Authorization": "Bearer not-a-token"}):
                    yield "POST", route.path, form | {"headers": headers | form.get("headers", {})}


def test_no_route_answers_a_hostile_request_with_a_server_error(league):
    """Every route (from app.routes), every hostile value: a 4xx with a message, never a 5xx; under
    /api/ the message is JSON's ``{"error": ...}``."""
    with TestClient(make_app(league.folder), raise_server_exceptions=False) as client:
        asked = 0
        for method, path, arguments in hostile_requests(client):
            response = client.request(method, path, **arguments)
            asked += 1
            assert response.status_code < 500, (method, path[:200], arguments.keys(), response.text[:500])
            if response.status_code >= 400 and method != "HEAD":
                assert response.text.strip(), (method, path[:200])
                if response.request.url.path.startswith("/api"):  # as the server got it (dot segments gone)
                    said = (method, path[:200], response.status_code, response.text[:500])
                    assert response.headers["content-type"] == "application/json", said
                    assert isinstance(response.json()["error"], str), said
        assert asked > 500
