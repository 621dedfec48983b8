"""A team's page, its scrimmages and ``--one-per-team`` on a real ladder: scrimmages asked for over the
API and through the name page's form, played by a real ``ladder run`` beside rated matches, changing
no rating; the hourly cap, another team's name (403) and every bad request (one clear 400); a
scrimmage seen by its own team only; the board ranking each team's best name only."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.ladders import GAME, ladder_command, start_run, two_teams, wait_until
from sqlalchemy import func, select
from starlette.testclient import TestClient

from policybox.ladder import Ladder
from policybox.league.ladder import match_store, version_store
from policybox.league.ladder.folder import LadderFolder
from policybox.league.ladder.schema import match_seats, matches, ratings, scrimmages, versions
from policybox.league.views import standings
from policybox.league.web.app import make_app

SAME_SITE = {"Origin": "http://testserver"}


@dataclass
class Cup:
    folder: Path
    tokens: dict[str, str]

    def auth(self, team: str | None) -> dict[str, str]:
        return {} if team is None else {"Authorization": f"Bearer {self.tokens[team]}"}


def _cup(folder: Path, database: str | None = None, **settings) -> Cup:
    return Cup(folder, two_teams(folder, database, **settings))


@pytest.fixture
def cup(tmp_path, database_url) -> Cup:
    """A cup that has played nothing, with a cap of 4 scrimmages an hour (on PostgreSQL too for a test
    marked ``storage``)."""
    return _cup(tmp_path / "cup", database_url, scrimmages_per_hour=4)


@pytest.fixture(scope="module")
def played(tmp_path_factory) -> Iterator[tuple[Cup, dict]]:
    """A cup with replays that played 4 rated matches; then alpha asked for 3 scrimmages of alphabot
    against betabot over the API, and a real ``ladder run --matches 1`` played them beside one more
    rated match. With what the API answered alpha."""
    cup = _cup(tmp_path_factory.mktemp("played") / "cup", replays=True)
    with Ladder.open(cup.folder) as ladder:
        ladder.run(matches=4, workers=1)
    with TestClient(make_app(cup.folder)) as client:
        asked = client.post(
            "/api/scrimmage", json={"name": "alphabot", "opponent": "betabot", "count": 3}, headers=cup.auth("alpha")
        )
    assert asked.status_code == 201, asked.text
    ran = ladder_command("run", str(cup.folder), "--matches", "1", "--workers", "1")
    assert ran.returncode == 0, ran.stderr
    yield cup, asked.json()


@pytest.fixture
def client(cup) -> Iterator[TestClient]:
    with TestClient(make_app(cup.folder)) as test_client:
        yield test_client


def _ask(client: TestClient, cup: Cup, team: str | None, **fields):
    return client.post("/api/scrimmage", json=fields, headers=cup.auth(team))


# ---------------------------------------------------------------------------------------------
# Played by ladder run


def test_ladder_run_plays_scrimmages_and_no_rating_or_board_changes(played):
    cup, asked = played
    assert asked["scrimmages"] == [1, 2, 3] and asked["version"] == asked["opponent_version"] == 1
    with Ladder.open(cup.folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        states = connection.execute(select(scrimmages.c.state, scrimmages.c.seats)).all()
        assert [state for state, _ in states] == ["played"] * 3
        ids = {name: version_store.latest_version(connection, name).id for name in ("alphabot", "betabot")}
        # four seats, the two names dealt in turn as a tournament's rotate seating deals them
        assert all(sorted(seats) == sorted([ids["alphabot"], ids["betabot"]] * 2) for _, seats in states)
        assert states[0][1] != states[1][1]
        rated = connection.execute(select(func.count()).select_from(matches)).scalar()
        assert rated == 5  # the 4 before and the run's 1: no scrimmage is a match
        assert connection.execute(select(func.count(func.distinct(ratings.c.match_id)))).scalar() == rated
        # every rating is what the rated matches alone give, replayed in order (what ladder rerate checks)
        live, replayed = match_store.live_ratings(connection), match_store.replayed_ratings(connection, "forfeit")
        assert live.keys() == replayed.keys() and all(live[v] == pytest.approx(replayed[v]) for v in live)
        counted = dict(connection.execute(select(versions.c.id, versions.c.matches)).all())
        seated = connection.execute(
            select(match_seats.c.version_id, func.count(func.distinct(match_seats.c.match_id))).group_by(
                match_seats.c.version_id
            )
        ).all()
        assert counted == {version_id: 0 for version_id in counted} | dict(seated)  # no scrimmage counted
    assert ladder_command("rerate", str(cup.folder)).returncode == 0


def test_the_team_page_lists_its_scrimmages_with_results_and_replays_for_its_team_only(played):
    cup, _ = played
    with TestClient(make_app(cup.folder)) as client:
        own = client.get("/api/teams/alpha", headers=cup.auth("alpha")).json()
        assert [row["id"] for row in own["scrimmages"]] == [3, 2, 1]
        assert all(row["state"] == "played" and row["outcome"] in ("win", "draw", "loss") for row in own["scrimmages"])
        assert all(row["replay_file"] == f"scrimmage-{row['id']:06d}.json.z" for row in own["scrimmages"])
        assert own["scrimmage_quota"] == {"per_hour": 20, "used": 3, "left": 17, "frees_at": None}
        page = client.get("/teams/alpha", headers=cup.auth("alpha")).text
        assert 'href="/scrimmages/1"' in page and 'href="/scrimmages/1/replay"' in page
        replay = client.get("/scrimmages/1/replay", headers=cup.auth("alpha"))
        assert replay.status_code == 200 and replay.content and "attachment" in replay.headers["content-disposition"]
        detail = client.get("/api/scrimmages/1", headers=cup.auth("alpha")).json()
        assert detail["note"].startswith("unrated scrimmage")
        seats = {seat["name"]: seat for seat in detail["seats"]}
        assert "ALPHA-LOG-SECRET" in seats["alphabot"]["log_tail"]  # its own name's
        assert seats["betabot"]["log_tail"] is None and "BETA-MESSAGE-SECRET" not in str(detail)  # the other's
        assert "unrated scrimmage" in client.get("/scrimmages/1", headers=cup.auth("alpha")).text
        for team in (None, "beta"):
            other = client.get("/api/teams/alpha", headers=cup.auth(team)).json()
            assert other["scrimmages"] == [] and other["scrimmage_quota"] is None and not other["own"]
            for path in ("/scrimmages/1", "/api/scrimmages/1", "/scrimmages/1/replay"):
                answer = client.get(path, headers=cup.auth(team))
                assert answer.status_code == 404 and "only the team that asked" in answer.text, path


def test_the_team_page_shows_names_versions_rating_histories_and_what_is_left(played):
    cup, _ = played
    with TestClient(make_app(cup.folder)) as client:
        page = client.get("/api/teams/alpha").json()
        standings = {row["name"]: row for row in client.get("/api/standings").json()["rows"]}
        assert [n["name"] for n in page["names"]] == ["alphabot", "alphawalk"]
        for name in page["names"]:
            assert name["standing"] == standings[name["name"]]
            (version,) = name["versions"]
            assert len(version["history"]) == version["matches"] == standings[name["name"]]["matches"]
        ranks = [standings[n]["rank"] for n in ("alphabot", "alphawalk") if standings[n]["rank"] is not None]
        assert page["place"] == min(ranks)
        assert page["submissions"] == {"per_hour": 10, "used": 2, "left": 8, "frees_at": None}
        html = client.get("/teams/alpha")
        assert html.text.count('<figure class="rating-history">') == sum(
            1 for n in page["names"] for v in n["versions"] if v["history"]
        )
        assert "8 of 10 left" in html.text
        board_page = client.get("/").text  # the board and a name page link the team's page
        assert 'href="/teams/alpha"' in board_page and 'href="/teams/beta"' in board_page
        assert 'href="/teams/alpha"' in client.get("/names/alphabot").text
        assert 'href="/teams/' not in client.get("/names/walker").text  # the organiser's: no team
        missing = client.get("/teams/<script>alert(1)</script>")
        assert missing.status_code == 404 and "<script>alert" not in missing.text
        assert client.get("/api/teams/gamma").json() == {"error": "this ladder has no team called 'gamma'"}


# ---------------------------------------------------------------------------------------------
# Asking: the cap, ownership, bad requests


@pytest.mark.storage
def test_the_hourly_cap_is_enforced_and_its_refusal_says_when_it_frees(cup, client):
    first = _ask(client, cup, "alpha", name="alphabot", opponent="betabot", count=3)
    assert first.status_code == 201 and first.json()["left"] == 1
    over = _ask(client, cup, "alpha", name="alphawalk", opponent="walker", count=2)
    assert over.status_code == 429
    message = over.json()["error"]
    assert "cap is 4 an hour" in message and "scrimmages_per_hour" in message and "so 1 more now" in message
    assert re.search(r"from \d\d:\d\d:\d\d UTC, in \d+ s", message)
    assert 3500 <= int(over.headers["Retry-After"]) <= 3600
    assert _ask(client, cup, "alpha", name="alphawalk", opponent="walker", count=1).status_code == 201
    assert _ask(client, cup, "alpha", name="alphawalk", opponent="walker", count=1).status_code == 429
    assert _ask(client, cup, "beta", name="betabot", opponent="walker", count=4).status_code == 201  # beta's own
    with Ladder.open(cup.folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(scrimmages)).scalar() == 8


def test_another_team_cannot_ask_for_a_name_it_does_not_own(cup, client):
    refused = _ask(client, cup, "beta", name="alphabot", opponent="betabot", count=1)
    assert refused.status_code == 403
    assert refused.json()["error"] == (
        "alphabot is not a name of team beta: ask for scrimmages of one of yours (betabot)"
    )
    organisers = _ask(client, cup, "beta", name="walker", opponent="betabot", count=1)
    assert organisers.status_code == 403
    assert _ask(client, cup, None, name="betabot", opponent="walker", count=1).status_code == 401
    bad_token = client.post("/api/scrimmage", json={}, headers={"Authorization": "Bearer nope"})
    assert bad_token.status_code == 401


@pytest.mark.storage
def test_every_bad_request_is_one_clear_400(cup, client):
    with Ladder.open(cup.folder) as ladder:
        ladder.retire("walker")
    cases = [
        ({"name": "alphabot", "opponent": "nobody", "count": 1}, "this ladder has no name 'nobody'"),
        ({"name": "alphabot", "opponent": "walker", "count": 1}, "walker is retired"),
        ({"name": "alphabot", "opponent": "alphabot", "count": 1}, "alphabot cannot scrimmage against itself"),
        ({"name": "alphabot", "opponent": "betabot", "count": 0}, "count 0: ask for 1 to 4 scrimmages"),
        ({"name": "alphabot", "opponent": "betabot", "count": -2}, "count -2: ask for 1 to 4 scrimmages"),
        ({"name": "alphabot", "opponent": "betabot", "count": 5}, "count 5: ask for 1 to 4 scrimmages"),
        ({"name": "ghost", "opponent": "betabot", "count": 1}, "this ladder has no name 'ghost'"),
        ({"name": "alphabot", "count": 1}, "send name (your team's name that plays), opponent"),
        ({"name": "alphabot", "opponent": "betabot", "count": "three"}, "send name"),
        ({"name": "alphabot", "opponent": "betabot", "count": True}, "send name"),
    ]
    for fields, message in cases:
        answer = _ask(client, cup, "alpha", **fields)
        assert answer.status_code == 400 and message in answer.json()["error"], (fields, answer.text)
    not_json = client.post(
        "/api/scrimmage", content=b"{", headers=cup.auth("alpha") | {"Content-Type": "application/json"}
    )
    assert not_json.status_code == 400
    as_form = client.post(
        "/api/scrimmage", data={"name": "alphabot", "opponent": "betabot", "count": "2"}, headers=cup.auth("alpha")
    )
    assert as_form.status_code == 201 and as_form.json()["scrimmages"] == [1, 2]


def test_the_name_pages_form_asks_and_a_refusal_keeps_what_was_sent(cup, client):
    form = client.post("/login", data={"token": cup.tokens["alpha"]}, headers=SAME_SITE, follow_redirects=False)
    assert form.status_code == 303
    own = client.get("/names/alphabot").text
    assert 'id="scrimmage-form"' in own and '<option value="betabot">' in own
    assert '<option value="alphabot"' not in own  # never itself
    assert 'id="scrimmage-form"' not in client.get("/names/betabot").text  # another team's name: no form
    sent = {"name": "alphabot", "opponent": "betabot", "count": "2"}
    asked = client.post("/scrimmage", data=sent, headers=SAME_SITE, follow_redirects=False)
    assert asked.status_code == 303 and asked.headers["location"] == "/teams/alpha#scrimmages"
    assert '<span id="scrimmages-left">2</span> left now' in client.get("/names/alphabot").text
    refused = client.post("/scrimmage", data=sent | {"count": "3"}, headers=SAME_SITE)
    assert refused.status_code == 429 and "cap is 4 an hour" in refused.text
    assert '<option value="betabot" selected>' in refused.text and 'value="3"' in refused.text
    cross_site = client.post("/scrimmage", data=sent, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross_site.status_code == 403
    client.cookies.clear()
    anybody = client.post("/scrimmage", data=sent, headers=SAME_SITE)
    assert anybody.status_code == 401 and "log in" in anybody.text


# ---------------------------------------------------------------------------------------------
# One name per team on the board


def test_one_per_team_ranks_each_teams_best_name_only(tmp_path):
    cup = _cup(tmp_path / "cup", one_per_team=True, suspend_after=20)  # alphabot forfeits, ranked still
    with Ladder.open(cup.folder) as ladder:
        ladder.run(matches=6, workers=1)
    with LadderFolder.open(cup.folder) as ladder:
        rows = standings.standings(ladder).rows
        every = standings.standings(_without_one_per_team(ladder)).rows
    ranked = [row for row in rows if row.rank is not None]
    teams = [row.team for row in ranked if row.team is not None]
    assert len(teams) == len(set(teams))  # one row per team (the organiser's walker is its own)
    alpha = [row for row in every if row.team == "alpha" and row.rank is not None]
    assert len(alpha) == 2  # both of alpha's names would be ranked without it
    best, other = alpha  # best first: the ladder's rank order
    placed = {row.name: row for row in rows}
    assert placed[best.name].rank is not None and placed[best.name].team_best is None
    assert placed[other.name].rank is None and placed[other.name].team_best == best.name
    assert [row.name for row in ranked] == [row.name for row in every if row.rank is not None and row is not other]
    status = ladder_command("status", str(cup.folder))
    assert f"{other.name} is unranked: its team's best name, {best.name}, is ranked" in status.stdout
    with TestClient(make_app(cup.folder)) as client:
        assert f"ranked as its team&#39;s best name, {best.name}" in client.get("/").text
        assert client.get("/api/teams/alpha").json()["one_per_team"] is True


def _without_one_per_team(ladder: LadderFolder) -> LadderFolder:
    ladder.settings = ladder.settings.model_copy(update={"one_per_team": False})
    return ladder


def test_ladder_init_takes_one_per_team_and_the_scrimmage_cap(tmp_path):
    made = ladder_command("init", str(tmp_path / "cup"), "--env", GAME, "--one-per-team", "--scrimmages-per-hour", "7")
    assert made.returncode == 0, made.stderr
    with LadderFolder.open(tmp_path / "cup") as ladder:
        assert ladder.settings.one_per_team is True and ladder.settings.scrimmages_per_hour == 7
    shown = ladder_command("init", "--help").stdout
    assert "--one-per-team" in shown and "--scrimmages-per-hour" in shown
    refused = ladder_command("init", str(tmp_path / "other"), "--env", GAME, "--scrimmages-per-hour", "-1")
    assert refused.returncode == 2 and "scrimmages-per-hour" in refused.stderr


def test_a_schema_7_database_gets_the_scrimmages_table_and_keeps_its_data(tmp_path):
    """Schema 8 adds the scrimmages: a database without them (as schema 7 made it) is migrated when
    opened, every match as it was, and takes scrimmages."""
    from policybox.league.ladder import schema

    cup = _cup(tmp_path / "cup")
    with Ladder.open(cup.folder) as ladder:
        ladder.run(matches=1, workers=1)
    with Ladder.open(cup.folder) as ladder, ladder.engine.begin() as connection:
        scrimmages.drop(connection)
        connection.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="7"))
        kept = connection.execute(select(matches.c.id, matches.c.state, matches.c.result)).all()
    with TestClient(make_app(cup.folder)) as client:  # the server opens it: migrated first
        asked = _ask(client, cup, "alpha", name="alphawalk", opponent="walker", count=1)
        assert asked.status_code == 201 and asked.json()["scrimmages"] == [1]
    with Ladder.open(cup.folder) as ladder, ladder.engine.connect() as connection:
        version = connection.execute(select(schema.meta.c.value).where(schema.meta.c.key == "schema_version"))
        assert version.scalar() == "8"
        assert connection.execute(select(matches.c.id, matches.c.state, matches.c.result)).all() == kept


def test_a_ladder_made_with_no_scrimmages_takes_none(tmp_path):
    cup = _cup(tmp_path / "cup", scrimmages_per_hour=0)
    with TestClient(make_app(cup.folder)) as client:
        refused = _ask(client, cup, "alpha", name="alphabot", opponent="betabot", count=1)
        assert refused.status_code == 400 and "--scrimmages-per-hour 0" in refused.json()["error"]
        client.post("/login", data={"token": cup.tokens["alpha"]}, headers=SAME_SITE)
        page = client.get("/names/alphabot").text
        assert "This ladder takes no scrimmages." in page and 'id="scrimmage-form"' not in page


def test_scrimmages_files_are_pruned_by_counts_of_their_own(played, tmp_path):
    """A prune keeps the newest scrimmages' log folders and replays by the ladder's counts, as it keeps
    matches', and deletes the rest (on a copy of the played cup, which other tests read)."""
    import shutil

    folder = tmp_path / "cup"
    shutil.copytree(played[0].folder, folder, symlinks=True)
    names = [f"scrimmage-{n:06d}" for n in (1, 2, 3)]

    def on_disk() -> tuple[list[str], list[str]]:
        logs = sorted(p.name for p in (folder / "logs").iterdir() if p.name.startswith("scrimmage-"))
        replays = sorted(
            p.name.split(".")[0] for p in (folder / "replays").iterdir() if p.name.startswith("scrimmage-")
        )
        return logs, replays

    assert on_disk() == (names, names)
    pruned = ladder_command("prune", str(folder), "--keep-logs", "1", "--keep-replays", "2", "--keep-logs-hours", "0")
    assert pruned.returncode == 0, pruned.stderr
    assert on_disk() == (names[2:], names[1:])
    with TestClient(make_app(folder)) as client:  # its page still answers, its replay gone: a 404
        assert client.get("/api/scrimmages/1", headers=played[0].auth("alpha")).status_code == 200
        assert client.get("/scrimmages/1/replay", headers=played[0].auth("alpha")).status_code == 404


@pytest.mark.storage
def test_a_run_killed_with_scrimmages_waiting_loses_none_and_plays_none_twice(cup, client):
    """kill -9 of ``ladder run`` once it has stored a scrimmage, others still to play: the next run plays
    the rest, each scrimmage played exactly once (its result stored, nothing else), the ratings still
    those of the rated matches alone -- on SQLite and on PostgreSQL."""
    asked = _ask(client, cup, "alpha", name="alphabot", opponent="betabot", count=4)
    assert asked.status_code == 201, asked.text
    run = start_run(cup.folder, "--workers", "1")
    try:
        wait_until(lambda: _states(cup).count("played") >= 1, 300, "a scrimmage stored")
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # kill -9: mid-run, nothing said
        run.communicate(timeout=60)
    assert "scheduled" in _states(cup)  # killed with some still to play
    again = ladder_command("run", str(cup.folder), "--matches", "1", "--workers", "1")
    assert again.returncode == 0, again.stderr
    assert _states(cup) == ["played"] * 4
    with Ladder.open(cup.folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        results = connection.execute(select(scrimmages.c.result)).scalars().all()
        assert all(result["steps"] > 0 for result in results)
        live, replayed = match_store.live_ratings(connection), match_store.replayed_ratings(connection, "forfeit")
        assert live.keys() == replayed.keys() and all(live[v] == pytest.approx(replayed[v]) for v in live)
    assert ladder_command("rerate", str(cup.folder)).returncode == 0


def _states(cup: Cup) -> list[str]:
    with Ladder.open(cup.folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        return list(connection.execute(select(scrimmages.c.state).order_by(scrimmages.c.id)).scalars())
