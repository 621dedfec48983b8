"""One path to a ladder's database: the views' reads (``database.reading``, ``policybox.league.ladder.reads``)
translate a database that cannot be used as a write does (one LadderError: a 503 on the web page, exit 2
on the command line), and what is not there is a NotFound (a 404 on the web page)."""

from __future__ import annotations

import pytest
from helpers.ladders import api_ladder, ladder_command
from sqlalchemy import text
from starlette.testclient import TestClient

from policybox.errors import NotFound, PolicyboxError
from policybox.ladder import Ladder
from policybox.league.ladder import database
from policybox.league.ladder.database import LadderError, reading, transaction
from policybox.league.views import conduct, match_page, name_page, queue_page, standings
from policybox.league.web.app import make_app


def test_a_read_and_a_write_translate_a_database_error_the_same_way(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'ladder.db'}")
    try:
        messages = []
        for opened in (reading, transaction):
            with pytest.raises(LadderError) as failed, opened(engine) as connection:
                connection.execute(text("SELECT * FROM nowhere"))
            messages.append(str(failed.value))
        assert messages[0] == messages[1]
        assert messages[0].startswith("the ladder's database sqlite:///")
        assert messages[0].endswith("cannot be used: no such table: nowhere")
    finally:
        database.dispose(engine)


def _break(ladder: Ladder) -> None:
    """The names table gone from under the views (as a database an operator's script damaged)."""
    with transaction(ladder.engine) as connection:
        connection.execute(text("ALTER TABLE names RENAME TO gone"))


def test_every_view_of_a_database_that_cannot_be_used_is_one_message(tmp_path):
    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        ladder.submit("walker", "noop", check=False)
        with TestClient(make_app(folder)) as client:
            _break(ladder)
            views = (standings.standings, queue_page.queue, conduct.conduct)
            for view in (*views, lambda opened: name_page.name_page(opened, "walker")):
                with pytest.raises(LadderError, match="cannot be used: no such table: names"):
                    view(ladder)
            answer = client.get("/api/standings")
            assert answer.status_code == 503 and "cannot be used at the moment" in answer.json()["error"]
    status = ladder_command("status", str(folder))
    assert status.returncode == 2 and "cannot be used: no such table: names" in status.stderr
    assert "Traceback" not in status.stderr


def test_what_is_not_there_is_not_found_a_404_and_exit_2(tmp_path):
    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        for missing in (
            lambda: name_page.name_page(ladder, "nobody"),
            lambda: match_page.match_page(ladder, 7),
            lambda: match_page.match_replay(ladder, 7),
            lambda: ladder.retire("nobody"),
            lambda: ladder.revoke("nobody"),
        ):
            with pytest.raises(NotFound) as found:
                missing()
            assert isinstance(found.value, PolicyboxError)
        with TestClient(make_app(folder)) as client:
            for path in ("/names/nobody", "/api/names/nobody", "/matches/7", "/api/matches/7/replay"):
                assert client.get(path).status_code == 404, path
    missing = ladder_command("retire", str(folder), "nobody")
    assert missing.returncode == 2 and "this ladder has no submission called 'nobody'" in missing.stderr
