"""Tokens that can be revoked and login sessions that end, on SQLite and a real PostgreSQL server:
logging out makes the old cookie nobody's, ``ladder token DIR TEAM --revoke`` makes the team's
tokens and sessions nobody's, ``ladder tokens`` lists them without ever printing one, and a schema
version 2 database (before sessions) is migrated with its tokens still valid.

Judged from outside: HTTP status and body with the old cookie or token, the commands' exit codes and
output, and the database's tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers.ladders import api_ladder, ladder_command
from helpers.web import upload
from helpers.zips import bot_zip
from sqlalchemy import func, select
from starlette.testclient import TestClient

from policybox.ladder import Ladder
from policybox.league.ladder import migrations, schema, team_store
from policybox.league.web.app import make_app
from policybox.league.web.viewer import COOKIE

OWN = {"Origin": "http://testserver"}
TEAM_SHOWN = '<strong id="team">'


@pytest.fixture
def cup(tmp_path, database_url) -> Iterator[tuple[Path, str]]:
    """An empty ladder with one token of team gamma."""
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        token = ladder.token("gamma")
    yield folder, token


def log_in(client: TestClient, token: str) -> str:
    """Log in through the form; the cookie's value."""
    response = client.post("/login", data={"token": token}, headers=OWN, follow_redirects=False)
    assert response.status_code == 303, response.text
    return response.cookies[COOKIE]


def as_cookie(client: TestClient, value: str, path: str = "/") -> str:
    client.cookies.clear()
    client.cookies.set(COOKIE, value)
    return client.get(path).text


def table_text(folder: Path, table) -> str:
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        return json.dumps([list(map(str, row)) for row in connection.execute(select(table))])


def test_logging_out_ends_the_session_its_cookie_named(cup, tmp_path):
    folder, token = cup
    walker = bot_zip(tmp_path / "walker.zip")
    with TestClient(make_app(folder)) as client:
        session = log_in(client, token)
        assert session != token and token not in session
        assert session not in table_text(folder, schema.sessions)  # only its hash is kept
        assert TEAM_SHOWN + "gamma" in as_cookie(client, session)
        out = client.post("/logout", headers=OWN, follow_redirects=False)
        assert out.status_code == 303
        # The old cookie replayed, as a thief who copied it would: nobody, and no submission.
        assert TEAM_SHOWN not in as_cookie(client, session)
        refused = upload(client, walker, "walker", OWN, url="/submit")
        assert refused.status_code == 401 and "log in with your team" in refused.text
        assert TEAM_SHOWN not in as_cookie(client, token)  # nor is a token taken for a session
        assert TEAM_SHOWN + "gamma" in as_cookie(client, log_in(client, token))  # the token still logs in


def test_revoking_a_teams_tokens_ends_its_sessions_and_its_api_access(cup, tmp_path):
    folder, token = cup
    walker = bot_zip(tmp_path / "walker.zip")
    with TestClient(make_app(folder)) as client:
        session = log_in(client, token)
        client.cookies.clear()
        assert upload(client, walker, "walker", {"Authorization": f"Bearer {token}"}).status_code == 201
        listed = ladder_command("tokens", str(folder), "--json")
        assert listed.returncode == 0, listed.stderr
        (row,) = json.loads(listed.stdout)["tokens"]
        assert row["team"] == "gamma" and row["sessions"] == 1 and row["last_used"] is not None
        table = ladder_command("tokens", str(folder))
        assert table.returncode == 0 and "gamma" in table.stdout
        for output in (listed.stdout, table.stdout):
            assert token not in output and session not in output

        revoked = ladder_command("token", str(folder), "gamma", "--revoke")
        assert revoked.returncode == 0, revoked.stderr
        assert revoked.stdout.strip() == "gamma: 1 tokens revoked, 1 web sessions ended"
        refused = upload(client, walker, "walker", {"Authorization": f"Bearer {token}"})
        assert refused.status_code == 401 and "a team's token is needed" in refused.json()["error"]
        assert TEAM_SHOWN not in as_cookie(client, session)
        client.cookies.clear()
        again = client.post("/login", data={"token": token}, headers=OWN)
        assert again.status_code == 401
        assert json.loads(ladder_command("tokens", str(folder), "--json").stdout) == {"tokens": []}

        fresh = ladder_command("token", str(folder), "gamma")
        assert fresh.returncode == 0
        assert TEAM_SHOWN + "gamma" in as_cookie(client, log_in(client, fresh.stdout.strip()))
    with Ladder.open(folder, read_only=True) as ladder:
        assert ladder.owner_of("walker") == "gamma"  # the team keeps its names


def test_revoking_an_unknown_team_is_one_clear_error(cup):
    folder, _ = cup
    for team, message in [("nobody", "this ladder has no team called 'nobody'"), ("Bad Team", "is not allowed")]:
        refused = ladder_command("token", str(folder), team, "--revoke")
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.storage
def test_a_schema_version_2_database_is_migrated_and_its_tokens_still_work(cup):
    """A ladder made before sessions existed (schema v2: the v3 tables dropped) opens migrated."""
    folder, token = cup
    with Ladder.open(folder) as ladder, ladder.engine.begin() as connection:
        for table in reversed(schema.V3_TABLES):
            table.drop(connection)
        connection.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="2"))
    listed = ladder_command("tokens", str(folder), "--json")  # a reader: it has the database migrated first
    assert listed.returncode == 0, listed.stderr
    assert [row["team"] for row in json.loads(listed.stdout)["tokens"]] == ["gamma"]
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        version = connection.execute(select(schema.meta.c.value).where(schema.meta.c.key == "schema_version"))
        assert version.scalar() == str(migrations.SCHEMA_VERSION) == "8"
        assert connection.execute(select(func.count()).select_from(schema.sessions)).scalar() == 0
    with TestClient(make_app(folder)) as client:
        assert TEAM_SHOWN + "gamma" in as_cookie(client, log_in(client, token))


def test_a_session_idle_for_longer_than_its_limit_is_over(cup):
    folder, token = cup
    with TestClient(make_app(folder)) as client:
        kept, idle = log_in(client, token), log_in(client, token)
        long_ago = (datetime.now(UTC) - team_store.SESSION_IDLE - timedelta(minutes=1)).isoformat(timespec="seconds")
        with Ladder.open(folder) as ladder, ladder.engine.begin() as connection:
            last = connection.execute(select(func.max(schema.sessions.c.id))).scalar()
            connection.execute(schema.sessions.update().where(schema.sessions.c.id == last).values(last_seen=long_ago))
        assert TEAM_SHOWN not in as_cookie(client, idle)
        assert TEAM_SHOWN + "gamma" in as_cookie(client, kept)
