"""What a team takes home (issue 43, must-have 6): its agents' whole logs and its versions' files as a
zip, from its own pages and from the API with its token, for its own seats only; a match's replay,
which shows every seat as the match page does, for anyone.

The crawl: team beta, logged in through the form, follows every link of every page it can reach, and
asks the API for each of team alpha's seats' logs and versions' files: each of alpha's is 403, each of
its own 200; nobody logged in gets 403 for both teams'. Judged from outside: HTTP answers, the zips'
entries and bytes, and what beta's crawl ever read.
"""

from __future__ import annotations

import io
import json
import re
import zipfile

from helpers.take_home import BOT, DEEP, NOTES, TEAMS, Cup, secret
from helpers.web import auth
from starlette.testclient import TestClient

TAIL_BYTES = 4096  # what a page shows of a log: the whole log is longer
HREF = re.compile(r'href="(/[^"]*)"')
# An organiser's command line, not the pages' titles ("policybox ladder") nor the rules' command that
# plays the starter at home ("policybox run --env game.yaml -p ./bot"), a participant's:
ORGANISERS_COMMAND = re.compile(r"policybox ladder [a-z-]|policybox run (?!--env )[a-z-]|ladder status")


def seats_of(client: TestClient, team: str) -> list[tuple[int, int]]:
    """(match, seat) of every seat the team's bot played."""
    matches = client.get("/api/matches").json()["matches"]
    return [(m["id"], s["seat"]) for m in matches for s in m["seats"] if s["name"] == f"{team}bot"]


def downloads(client: TestClient, team: str, api: bool) -> list[str]:
    """The paths of a team's downloads: each of its seats' logs, its version's files."""
    prefix = "/api" if api else ""
    logs = [f"{prefix}/matches/{match}/seats/{seat}/log" for match, seat in seats_of(client, team)]
    return [*logs, f"{prefix}/names/{team}bot/v1/files.zip"]


def log_in(client: TestClient, cup: Cup, team: str) -> None:
    answer = client.post("/login", data={"token": cup.tokens[team]}, headers={"Sec-Fetch-Site": "same-origin"})
    assert answer.status_code == 200 and f'<strong id="team">{team}</strong>' in answer.text


# ---------------------------------------------------------------------------------------------
# What a team takes home


def test_a_team_downloads_its_agents_whole_logs_with_its_token(take_home_cup, take_home_client):
    seats, alpha = seats_of(take_home_client, "alpha"), auth(take_home_cup.tokens, "alpha")
    assert seats
    for match, seat in seats:
        answer = take_home_client.get(f"/api/matches/{match}/seats/{seat}/log", headers=alpha)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "text/plain; charset=utf-8"
        assert f'filename="match-{match}-seat-{seat}-alphabot-v1.log"' in answer.headers["content-disposition"]
        log = answer.text
        assert log.startswith(secret("alpha")) and len(log.encode()) > TAIL_BYTES  # the whole log, not its tail
        tail = take_home_client.get(f"/api/matches/{match}", headers=alpha).json()["agents"][seat]["log_tail"]
        assert secret("alpha") not in tail and log.rstrip().endswith(tail.rstrip().splitlines()[-1])
        assert secret("beta") not in log


def test_a_team_downloads_its_versions_files_as_a_zip_and_nothing_planted_is_followed(take_home_cup, take_home_client):
    alpha = auth(take_home_cup.tokens, "alpha")
    answer = take_home_client.get("/api/names/alphabot/v1/files.zip", headers=alpha)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/zip"
    assert 'filename="alphabot-v1.zip"' in answer.headers["content-disposition"]
    with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
        # No evil, up or pipe:
        assert sorted(archive.namelist()) == sorted([DEEP, "bot.py", "notes/readme.txt", "policy_spec.json"])
        assert archive.read(DEEP) == b"at the bottom"
        assert archive.read("bot.py").decode() == BOT and archive.read("notes/readme.txt").decode() == NOTES
        assert json.loads(archive.read("policy_spec.json"))["init_kwargs"] == {"team": "alpha"}
        assert all((entry.external_attr >> 16) & 0o777 == 0o644 for entry in archive.infolist())
    again = take_home_client.get("/names/alphabot/v1/files.zip", headers=alpha)
    assert again.content == answer.content  # the page's path, the same bytes: the same files give the same zip


def test_a_replay_is_everyones_as_its_match_page_is(take_home_cup, take_home_client):
    match, _ = seats_of(take_home_client, "alpha")[0]
    answers = [
        take_home_client.get(f"/matches/{match}/replay", headers=auth(take_home_cup.tokens, team))
        for team in (None, *TEAMS)
    ]
    assert all(a.status_code == 200 and a.content == answers[0].content for a in answers)


def test_what_is_not_there_is_a_404_that_says_what(take_home_cup, take_home_client):
    own = auth(take_home_cup.tokens, "alpha")
    assert take_home_client.get("/api/matches/1/seats/9/log", headers=own).json() == {
        "error": "match 1 has no seat 9: its seats are 0 to 3"
    }
    assert take_home_client.get("/api/matches/999/seats/0/log", headers=own).status_code == 404
    assert take_home_client.get(f"/api/matches/{2**70}/seats/0/log", headers=own).status_code == 404
    assert take_home_client.get("/api/names/alphabot/v9/files.zip", headers=own).json() == {
        "error": "this ladder has no version alphabot@v9"
    }
    assert take_home_client.get("/api/names/%00/v1/files.zip", headers=own).status_code == 404
    assert take_home_client.get(f"/api/names/alphabot/v{2**70}/files.zip", headers=own).status_code == 404


# ---------------------------------------------------------------------------------------------
# Another team, or nobody: 403


def crawl(client: TestClient, start: str = "/") -> dict[str, int]:
    """Every path reachable by links from ``start`` (this site's own, not its static files nor logout),
    each fetched once as the client is: its status."""
    seen: dict[str, int] = {}
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        answer = client.get(path)
        seen[path] = answer.status_code
        if answer.headers.get("content-type", "").startswith("text/html"):
            for link in HREF.findall(answer.text):
                if not link.startswith(("/static/", "/logout")) and link not in seen:
                    todo.append(link.replace("&amp;", "&"))
    return seen


def test_crawled_as_another_team_every_download_of_alphas_is_403(take_home_cup, take_home_client):
    log_in(take_home_client, take_home_cup, "beta")
    statuses = crawl(take_home_client)
    read = "".join(take_home_client.get(path).text for path in statuses)
    assert secret("alpha") not in read and "ALPHA-WHOLE-LOG-SECRET" not in read
    own = downloads(take_home_client, "beta", api=False)
    assert set(own) <= set(statuses), "its own match and name pages link each of its downloads"
    assert all(statuses[path] == 200 for path in own)
    assert {path: code for path, code in statuses.items() if code != 200 and not path.endswith("/replay")} == {}
    for path in downloads(take_home_client, "alpha", api=False) + downloads(take_home_client, "alpha", api=True):
        answer = take_home_client.get(path)
        assert answer.status_code == 403, path
        assert "log in with that team" in answer.text and secret("alpha") not in answer.text
    for path in downloads(take_home_client, "alpha", api=True):
        for team, status in (("beta", 403), ("alpha", 200)):  # beta's token: the same as its session
            assert take_home_client.get(path, headers=auth(take_home_cup.tokens, team)).status_code == status, path


def test_nobody_logged_in_gets_403_for_every_teams_download(take_home_cup, take_home_client):
    for team in TEAMS:
        for path in downloads(take_home_client, team, api=False) + downloads(take_home_client, team, api=True):
            answer = take_home_client.get(path)
            assert answer.status_code == 403, path
    no_teams = take_home_client.get("/api/names/walker/v1/files.zip", headers=auth(take_home_cup.tokens, "alpha"))
    assert no_teams.status_code == 403


# ---------------------------------------------------------------------------------------------
# The pages: links for a team's own seats, no organiser's command, the sandbox folded


def test_the_match_page_links_a_teams_own_downloads_only(take_home_cup, take_home_client):
    match, seat = seats_of(take_home_client, "alpha")[0]
    log = f'href="/matches/{match}/seats/{seat}/log"'
    pages = {
        team: take_home_client.get(f"/matches/{match}", headers=auth(take_home_cup.tokens, team)).text
        for team in (None, *TEAMS)
    }
    assert log in pages["alpha"] and 'href="/names/alphabot/v1/files.zip"' in pages["alpha"]
    assert all(log not in pages[team] and "alphabot/v1/files.zip" not in pages[team] for team in (None, "beta"))
    assert 'id="take-home"' not in pages[None]
    name = {
        team: take_home_client.get("/names/alphabot", headers=auth(take_home_cup.tokens, team)).text
        for team in (None, *TEAMS)
    }
    assert 'href="/names/alphabot/v1/files.zip"' in name["alpha"]
    assert all("files.zip" not in name[team] for team in (None, "beta"))


def test_no_page_shows_an_organisers_command_and_the_sandbox_is_folded(take_home_cup, take_home_client):
    for team in (None, *TEAMS):
        take_home_client.cookies.clear()
        for path in [*crawl(take_home_client), "/final", "/login", "/submit"]:
            answer = take_home_client.get(path, headers=auth(take_home_cup.tokens, team))
            if answer.headers["content-type"].startswith("text/html"):  # a page (the JSON keeps them: docs/web.md)
                assert not ORGANISERS_COMMAND.search(answer.text), (path, ORGANISERS_COMMAND.search(answer.text))
    refused = take_home_client.post("/api/submit", headers={"Authorization": "Bearer not-a-token"})
    bad_login = take_home_client.post(
        "/login", data={"token": "not-a-token"}, headers={"Sec-Fetch-Site": "same-origin"}
    )
    assert refused.status_code == bad_login.status_code == 401
    assert not ORGANISERS_COMMAND.search(refused.text + bad_login.text)
    match = take_home_client.get("/matches/1").text
    isolation = match.index('<details id="isolation"><summary>How this match was isolated</summary>')
    assert isolation < match.index('<table id="layers">') < match.index("</details>", isolation)
    assert (
        take_home_client.get("/api/matches/1").json()["check_command"] == "policybox run --ladder DIR --match 1"
    )  # docs'
