"""A stamp on every match, and ``policybox run --ladder DIR --match ID``: a stored match played again
ends the same; one whose environment changed since names what changed (policybox's version, a
version's files); an unknown match is one clear error; a match of an older schema has no stamp."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Ran, policybox
from helpers.environments import INDEX, OLD, submission
from helpers.ladders import GAME, WANDERER, rps_ladder
from helpers.setups import BUILD, team
from sqlalchemy import func, select, update
from starlette.testclient import TestClient

from policybox import EpisodeSettings, LadderSettings, __version__
from policybox.ladder import Ladder
from policybox.league.ladder import database, schema
from policybox.league.ladder.schema import match_seats, matches
from policybox.league.web.app import make_app


@pytest.fixture(scope="module")
def cup(tmp_path_factory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("stamp") / "cup"
    with rps_ladder(folder):
        pass
    yield folder


def again(folder: Path, match_id: int, tmp_path: Path) -> Ran:
    return policybox("run", "--ladder", folder, "--match", str(match_id), "--log-dir", tmp_path / "logs")


def test_every_match_is_stamped_and_its_page_shows_the_stamp_and_the_command(cup):
    with TestClient(make_app(cup)) as client:
        page = client.get("/api/matches/1").json()
        html = client.get("/matches/1").text
    stamp = page["stamp"]
    assert stamp["policybox"] == __version__ and set(stamp["packages"]) == {"pettingzoo"}
    assert stamp["seed"] == page["seed"] and len(stamp["config_sha256"]) == 64
    seated = {f"{agent['name']}@v{agent['version']}" for agent in page["agents"]}
    assert set(stamp["versions"]) == seated and all(len(digest) == 64 for digest in stamp["versions"].values())
    assert page["check_command"] == "policybox run --ladder DIR --match 1"
    assert stamp["config_sha256"] in html
    assert "policybox run" not in html  # the organiser's command: in the JSON and the docs, not on a team's page


def test_a_stored_match_played_again_ends_the_same(cup, tmp_path):
    ran = again(cup, 1, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "match 1 played again: every reward and status as stored" in ran.stdout
    assert "changed" not in ran.stderr


def test_a_postgresql_ladders_matches_are_stamped_and_played_again_the_same(tmp_path, postgres_url):
    with (
        rps_ladder(tmp_path / "cup", matches=2, database=postgres_url) as ladder,
        ladder.engine.connect() as connection,
    ):
        stamps = connection.execute(select(matches.c.stamp).order_by(matches.c.id)).scalars().all()
    assert len(stamps) == 2 and all(stamp["policybox"] == __version__ for stamp in stamps)
    ran = again(tmp_path / "cup", 2, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "match 2 played again: every reward and status as stored" in ran.stdout


def test_another_policybox_version_in_the_stamp_is_named(cup, tmp_path):
    with Ladder.open(cup) as ladder, database.transaction(ladder.engine) as connection:
        stamp = connection.execute(select(matches.c.stamp).where(matches.c.id == 2)).scalar_one()
        connection.execute(update(matches).where(matches.c.id == 2).values(stamp={**stamp, "policybox": "0.0.1"}))
    ran = again(cup, 2, tmp_path)
    assert ran.returncode == 0, ran.stderr  # it still ends the same
    assert f"policybox was 0.0.1, is {__version__}" in ran.stderr


def test_a_version_whose_files_changed_on_disk_is_named_with_the_seats_that_differ(tmp_path):
    with rps_ladder(tmp_path / "cup", ("rock", "scissors"), matches=1) as ladder:
        rock = ladder.stored(1).spec  # rock@v1: its kept copy of rps_bots.py
    kept = Path(rock.class_path.split(":")[0]) if ":" in rock.class_path else None
    assert kept is not None and kept.is_file(), rock
    mode = kept.stat().st_mode
    kept.chmod(0o600)
    defined = "class Rock(_Always):\n    move = "
    kept.write_text(kept.read_text().replace(f"{defined}0", f"{defined}1"))  # rock plays paper now
    kept.chmod(mode)
    ran = again(tmp_path / "cup", 1, tmp_path)
    assert ran.returncode == 1, ran.stderr
    assert "match 1 played again differs from the stored result" in ran.stderr
    assert "rock@v1's files changed on disk" in ran.stderr  # scissors@v1's too: the two share one kept file
    assert ran.stderr.count("reward was") == 2  # both seats: rock now plays paper, and loses


def test_an_unknown_match_is_one_clear_error(cup, tmp_path):
    for match_id in ("999", "0"):
        ran = again(cup, int(match_id), tmp_path)
        assert ran.returncode == 2 and f"this ladder has no played match {match_id}" in ran.stderr, ran.stderr
        assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    ran = policybox("run", "--match", "1")
    assert ran.returncode == 2 and "give --ladder DIR" in ran.stderr, ran.stderr


def test_a_database_of_schema_4_gets_the_stamp_column_its_matches_none(tmp_path):
    folder = tmp_path / "cup"
    with rps_ladder(folder, ("rock", "paper"), matches=1) as ladder, ladder.engine.begin() as connection:
        connection.exec_driver_sql("ALTER TABLE matches DROP COLUMN stamp")
        connection.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="4"))
    ran = again(folder, 1, tmp_path)  # migrates it to the current schema first
    assert ran.returncode == 0, ran.stderr
    assert "match 1 has no stamp (stored before policybox kept them)" in ran.stderr
    with TestClient(make_app(folder)) as client:
        assert client.get("/api/matches/1").json()["stamp"] is None
        assert "No stamp: this match was stored before policybox kept them." in client.get("/matches/1").text


def test_a_match_of_a_plain_a_built_and_a_set_up_version_played_again_names_no_change(tmp_path):
    """The three kinds of version: a plain one, one built into an environment (its requirements), one
    whose setup script made its checkpoint. Their match, played again on the unchanged ladder, names no
    change: each version's digest covers what it plays with (its files, what its setup script made, its
    environment's lock), not only what was submitted. A file the script made, changed on disk since,
    is named."""

    settings = EpisodeSettings(env=GAME, steps=10, index_url=INDEX)
    made = LadderSettings(settings=settings, agents=4, versions_per_match=3, placement_matches=0)
    with Ladder.create(tmp_path / "cup", made) as ladder:
        ladder.submit("built", str(submission(tmp_path / "built", OLD, f"more-itertools=={OLD}\n")))
        ladder.submit("scripted", str(team(tmp_path / "scripted", BUILD)))
        assert ladder.run(matches=1, workers=1).played == 1  # once both are set up: a match of the two
        ladder.submit("plain", WANDERER)
        seated: set[int] = set()
        while len(seated) < 3:  # once plain has qualified (no setup of its own: a run's end stops nothing)
            assert ladder.run(matches=1, workers=1).played == 1
            with ladder.engine.connect() as connection:
                match = connection.execute(select(func.max(match_seats.c.match_id))).scalar_one()
                seats = select(match_seats.c.version_id).where(match_seats.c.match_id == match)
                seated = set(connection.execute(seats).scalars())
            assert match < 10, "no match seated all three versions"
        scripted = ladder.stored(2).spec  # pointing into what its script made
    ran = again(tmp_path / "cup", match, tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"match {match} played again: every reward and status as stored" in ran.stdout
    assert "changed" not in ran.stderr, ran.stderr

    weights = Path(str(scripted.data_path))
    mode = weights.stat().st_mode
    weights.chmod(0o600)
    weights.write_text("changed since")
    weights.chmod(mode)
    ran = again(tmp_path / "cup", match, tmp_path)
    assert "scripted@v1's files changed on disk" in ran.stderr, ran.stderr
    assert "plain@v1" not in ran.stderr and "built@v1" not in ran.stderr
