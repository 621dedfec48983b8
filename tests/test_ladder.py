"""``policybox ladder`` as an organiser runs it, on SQLite and on a real PostgreSQL server: submissions
qualify or are rejected, matches are chosen, played and rated; versions arrive while it runs; a
``kill -9`` and a restart lose and repeat nothing; ``rerate`` equals the live ratings.

Judged from outside: the commands' exit codes and output, the database (read with the ladder's own
views and SQL), and the processes left (psutil).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from conftest import policy, remount
from helpers.ladders import (
    GAME,
    WANDERER,
    activate,
    api_ladder,
    ladder_command,
    played,
    process_tree,
    start_run,
    wait_until,
)
from helpers.replays import load_replay
from helpers.setups import BUILD, team
from helpers.workers import WorkerKiller
from sqlalchemy import func, select

from policybox.ladder import Ladder
from policybox.league.ladder.schema import match_seats, matches, names, ratings, versions
from policybox.league.views import match_page, standings

PLACEMENT = 3


@pytest.fixture
def ladder_folder(tmp_path, database_url):
    """A ladder on the moves arena (4 seats, 2 versions a match), its database SQLite in its folder or
    a fresh PostgreSQL database."""
    folder = tmp_path / "cup"
    args = ["init", str(folder), "--env", GAME, "--steps", "60", "--placement-matches", str(PLACEMENT)]
    args += ["--suspend-after", "3", "--seed", "11"]
    if database_url.startswith("postgresql"):
        args += ["--db", database_url]
    made = ladder_command(*args)
    assert made.returncode == 0, made.stderr
    return folder


@pytest.mark.storage
def test_a_ladder_plays_qualifies_rejects_survives_a_kill_and_rerates_exactly(ladder_folder):
    folder = ladder_folder
    for name, spec in [("wanderer", WANDERER), ("random", "random"), ("noop", "noop")]:
        assert ladder_command("submit", str(folder), name, spec).returncode == 0
    crasher = ladder_command("submit", str(folder), "crasher", policy("faults.py:RaiseInInit"), "--no-check")
    assert crasher.returncode == 0  # stored without the build check: its qualification rejects it
    same = ladder_command("submit", str(folder), "random", "random")
    assert same.returncode == 2 and "the same content as random v1" in same.stderr

    run = start_run(folder)
    seen: list[psutil.Process] = []
    try:
        wait_until(lambda: played(folder) >= 4, what="4 matches")
        second = ladder_command("run", str(folder), "--matches", "1")
        assert second.returncode == 2 and "a policybox ladder run (pid " in second.stderr  # one run at a time
        # Submissions while it runs: a fifth name, and a v2 of random.
        assert ladder_command("submit", str(folder), "seeded", policy("seeded_random.py:SeededRandom")).returncode == 0
        assert ladder_command("submit", str(folder), "random", policy("stateful.py:Stateful")).returncode == 0
        wait_until(
            lambda: getattr(_version(folder, "random", 2), "state", None) == "active", what="random v2 to qualify"
        )
        wait_until(lambda: played(folder) >= 14, what="14 matches")
        seen = process_tree(run.pid)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # kill -9, in the middle of matches
        run.wait(timeout=60)
    wait_until(lambda: not [p for p in seen if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], 60, "cells")
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        left = connection.execute(select(matches.c.id, matches.c.seed).where(matches.c.state == "scheduled")).all()
        left_seats = {m.id: _seats(connection, m.id) for m in left}
        known = set(connection.execute(select(matches.c.id)).scalars())  # every match stored before the kill
        before = played(folder)

    resumed = ladder_command("run", str(folder), "--workers", "2", "--matches", "10")
    assert resumed.returncode == 0, resumed.stderr
    assert "10 matches played" in resumed.stdout

    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        rows = connection.execute(select(matches.c.id, matches.c.state, matches.c.seed).order_by(matches.c.id)).all()
        # None lost (each counted once: below). Not ids 1..n: PostgreSQL's sequence keeps the id of an
        # insert the kill rolled back, so a killed run may leave a gap that no match ever had.
        assert known <= {r.id for r in rows}
        assert (
            all(r.state in ("played", "void") for r in rows) and sum(r.state == "played" for r in rows) == before + 10
        )
        for match in left:  # the matches in flight at the kill, played again with their seed and seats
            replayed = next(r for r in rows if r.id == match.id)
            assert (replayed.state, replayed.seed, _seats(connection, match.id)) == (
                "played",
                match.seed,
                left_seats[match.id],
            )
        _check_rated_once(connection)
        _check_placement_first(connection, _version(folder, "random", 2).id)
        board = standings.standings(ladder)

    rows_by_name = {row.name: row for row in board.rows}
    assert rows_by_name["crasher"].state == "rejected" and rows_by_name["crasher"].rank is None
    assert "bad configuration for this policy" in rows_by_name["crasher"].reason
    assert rows_by_name["random"].version == 2 and rows_by_name["seeded"].matches >= PLACEMENT
    order = [row.name for row in board.rows if row.rank is not None]
    # noop never moves, scores 0 and loses every match. Who leads is not asked: how many matches the
    # late entrants (seeded, random v2) played before the kill depends on the machine's speed.
    assert order[-1] == "noop"
    assert rows_by_name["wanderer"].reward.mean > rows_by_name["noop"].reward.mean == 0

    rerate = ladder_command("rerate", str(folder))
    assert rerate.returncode == 0 and "every rating equals a replay" in rerate.stdout
    status = json.loads(ladder_command("status", str(folder), "--json").stdout)
    assert [row["name"] for row in status["rows"]] == [row.name for row in board.rows]
    assert set(status["rows"][0]) >= {"rank", "name", "version", "state", "rating", "matches", "reward", "statuses"}


def _version(folder: Path, name: str, number: int):
    """The version's row, or None before it is submitted."""
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        query = select(versions).join(names, names.c.id == versions.c.name_id)
        return connection.execute(query.where(names.c.name == name, versions.c.number == number)).first()


def _seats(connection, match_id: int) -> list[int]:
    query = select(match_seats.c.version_id).where(match_seats.c.match_id == match_id).order_by(match_seats.c.seat)
    return [row.version_id for row in connection.execute(query)]


def _check_rated_once(connection) -> None:
    """Every played match has one rating row per version in it, and no other."""
    for match_id, count in connection.execute(
        select(matches.c.id, func.count(ratings.c.version_id))
        .outerjoin(ratings, ratings.c.match_id == matches.c.id)
        .where(matches.c.state == "played")
        .group_by(matches.c.id)
    ):
        assert count == len(set(_seats(connection, match_id))), match_id


def _check_placement_first(connection, version_id: int) -> None:
    """Once it qualified, a new version plays its placement matches first: of the matches scheduled
    after it qualified (but for those already in flight), it is in every one until it has them --
    or the other newcomer is (both place at once)."""
    qualified_after = connection.execute(select(versions.c.activated_after).where(versions.c.id == version_id)).scalar()
    later = (
        connection.execute(
            select(matches.c.id)
            .where(matches.c.id > qualified_after + 4, matches.c.state == "played")
            .order_by(matches.c.id)
        )
        .scalars()
        .all()
    )
    its = [m for m in later if version_id in _seats(connection, m)]
    assert len(its) >= PLACEMENT and its[PLACEMENT - 1] <= later[2 * PLACEMENT - 1]


def test_bad_input_is_one_clear_message_and_changes_nothing(tmp_path, database_url):
    folder = tmp_path / "cup"
    assert ladder_command("init", str(folder), "--env", GAME, "--steps", "20").returncode == 0
    before = _snapshot(folder)
    cases = [
        (["submit", str(folder), "Bad Name", "random"], "submission name 'Bad Name' is not allowed: use 1 to 40"),
        (["submit", str(folder), "bot", "./no_such_bot.py:Bot"], "does not exist"),
        (["submit", str(folder), "bot", "randm"], "unknown policy shorthand 'randm'"),
        (["submit", str(folder), "bot", str(tmp_path / "missing.zip")], "does not exist"),
        (["show", str(folder), "nobody"], "this ladder has no submission called 'nobody'"),
        (["retire", str(folder), "nobody"], "this ladder has no submission called 'nobody'"),
        (["reinstate", str(folder), "nobody"], "this ladder has no submission called 'nobody'"),
        (["status", str(tmp_path)], "is not a ladder"),
        (["init", str(folder), "--env", GAME], "is not an empty folder"),
    ]
    for args, message in cases:
        run = ladder_command(*args)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert message in " ".join(run.stderr.split()) and "Traceback" not in run.stderr, (args, run.stderr)
    (tmp_path / "bad.zip").write_bytes(b"not a zip at all")
    bad_zip = ladder_command("submit", str(folder), "bot", str(tmp_path / "bad.zip"))
    assert bad_zip.returncode == 2 and "is not a zip or tar.gz file" in bad_zip.stderr
    assert _snapshot(folder) == before  # nothing stored or changed by any of them


def _snapshot(folder: Path) -> tuple:
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        return tuple(tuple(connection.execute(select(table)).all()) for table in (versions, matches, names))


def test_another_ladders_database_and_a_newer_schema_are_refused(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        assert ladder_command("init", str(folder), "--env", GAME).returncode == 0
    (second / "ladder.db").unlink()
    (second / "ladder.db").symlink_to(first / "ladder.db")  # the second folder now points at the first's database
    other = ladder_command("status", str(second))
    assert other.returncode == 2 and "is the database of another ladder" in other.stderr
    with Ladder.open(first) as ladder, ladder.engine.begin() as connection:
        from policybox.league.ladder.schema import meta

        connection.execute(meta.update().where(meta.c.key == "schema_version").values(value="99"))
    newer = ladder_command("status", str(first))
    assert newer.returncode == 2 and "has schema version 99, made by a newer policybox" in newer.stderr


def test_a_database_server_that_does_not_answer_is_one_message(tmp_path):
    run = ladder_command(
        "init", str(tmp_path / "cup"), "--env", GAME, "--db", "postgresql://ladder:secret@127.0.0.1:9/ladder"
    )
    assert run.returncode == 2 and "cannot be used" in run.stderr and "secret" not in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "cup" / "ladder.json").exists()


@pytest.mark.storage
def test_a_schema_6_database_gets_the_version_streaks_and_keeps_its_data(tmp_path, database_url):
    """Schema 7 adds each version's void streak and played digest: a database without them (as schema 6
    made it) is migrated, every row as it was, each version's void streak 0."""
    from sqlalchemy import text

    from policybox.league.ladder import migrations, schema

    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
        ladder.run(matches=1, workers=1)
    with Ladder.open(folder) as ladder, ladder.engine.begin() as connection:
        for column in ("void_streak", "played_digest"):
            connection.execute(text(f"ALTER TABLE versions DROP COLUMN {column}"))
        connection.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="6"))
        kept = connection.execute(text("SELECT id, digest, state, matches FROM versions ORDER BY id")).all()
    with Ladder.open(folder) as ladder, ladder.engine.connect() as connection:
        version = connection.execute(select(schema.meta.c.value).where(schema.meta.c.key == "schema_version"))
        assert version.scalar() == str(migrations.SCHEMA_VERSION)  # 7, and every later one
        rows = connection.execute(select(versions.c.id, versions.c.digest, versions.c.state, versions.c.matches))
        assert [tuple(row) for row in rows] == [tuple(row) for row in kept]
        assert set(connection.execute(select(versions.c.void_streak)).scalars()) == {0}
    with Ladder.open(folder) as ladder:
        assert {row.name for row in ladder.standings().rows} == {"walker", "noop"}


def test_consecutive_failing_matches_suspend_a_version_and_reinstate_lifts_it(tmp_path):
    with api_ladder(tmp_path / "cup") as ladder:
        ladder.submit("steady", "noop")
        ladder.submit("crasher", policy("faults.py:SegfaultInStep"))  # dies at step 10 of every match
        activate(ladder, "crasher")
        ladder.run(matches=5, workers=1)
        row = next(r for r in ladder.standings().rows if r.name == "crasher")
        # Suspended at its 3rd failing match in a row; the one already in flight then is still counted.
        assert row.state == "suspended" and 3 <= row.matches <= 4
        assert "failed in 3 matches in a row" in row.reason and "SIGSEGV" in row.reason
        assert row.statuses == {"crashed": 2 * row.matches} and row.forfeits == row.matches  # 2 seats a match
        assert ladder.run(matches=2, workers=1).played == 0  # nobody left to play against
        ladder.reinstate("crasher")
        assert next(r for r in ladder.standings().rows if r.name == "crasher").state == "active"
        assert ladder.run(matches=1, workers=1).played == 1
        assert ladder.rerate() == []


def test_a_lost_worker_never_counts_against_a_policy_and_its_match_is_played_again(tmp_path):
    with api_ladder(tmp_path / "cup") as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("pacer", policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.05"}))  # a match lasts 1.5 s
        ladder.run(matches=1, workers=1)  # both qualified, one match played
        killer = WorkerKiller(after_s=0.2)
        killer.start()
        progress = ladder.run(matches=4, workers=1)
        killer.join()
        assert killer.killed and progress.played == 4
        with ladder.engine.connect() as connection:
            states = connection.execute(select(matches.c.state).order_by(matches.c.id)).scalars().all()
        assert states == ["played"] * 5  # none void, none twice
        rows = {row.name: row for row in ladder.standings().rows}
        assert all(row.statuses == {"ok": 10} for row in rows.values())  # 5 matches x 2 seats, all ok
        assert ladder.rerate() == []


@pytest.mark.storage
def test_a_database_of_an_older_schema_is_migrated_and_keeps_its_data(tmp_path, database_url):
    """A ladder made at schema version 1 (before teams existed) opens with this policybox: migrated to
    the current version in one transaction, every match, version and rating as it was."""
    from policybox.league.ladder import migrations, schema

    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
        ladder.run(matches=2, workers=1)
        before = _snapshot(folder)
    with Ladder.open(folder) as ladder, ladder.engine.begin() as connection:  # make it a version-1 database
        for table in reversed(schema.V2_TABLES + schema.V3_TABLES + schema.FINALS_TABLES + [schema.scrimmages]):
            table.drop(connection)
        connection.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="1"))
    status = ladder_command("status", str(folder))  # a reader: it has the database migrated first
    assert status.returncode == 0, status.stderr
    with Ladder.open(folder) as ladder, ladder.engine.connect() as connection:
        version = connection.execute(select(schema.meta.c.value).where(schema.meta.c.key == "schema_version"))
        assert version.scalar() == str(migrations.SCHEMA_VERSION) == "8"
        assert connection.execute(select(func.count()).select_from(schema.teams)).scalar() == 0
        assert connection.execute(select(func.count()).select_from(schema.scrimmages)).scalar() == 0  # made by v8
    assert _snapshot(folder) == before


def test_a_full_disk_stops_a_run_with_one_message_and_the_next_run_carries_on(tmp_path):
    """The ladder's folder (its SQLite database and its logs) on a small disk that fills as it plays:
    one message naming what ran out, exit 1, the database intact; with room again the run goes on."""

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    point = tmp_path / "disk"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(point)], check=True)
    try:
        folder = point / "cup"
        assert ladder_command("init", str(folder), "--env", GAME, "--steps", "30").returncode == 0
        for name, spec in [("walker", WANDERER), ("noop", "noop")]:
            assert ladder_command("submit", str(folder), name, spec).returncode == 0
        full = ladder_command("run", str(folder), "--workers", "1")  # until the disk is full
        assert full.returncode == 1, full.stdout + full.stderr
        assert "no space left on the filesystem of" in full.stderr and "Traceback" not in full.stderr
        remount(point, "size=64m")
        assert ladder_command("rerate", str(folder)).returncode == 0  # intact: the ratings replay exactly
        before = played(folder)
        resumed = ladder_command("run", str(folder), "--workers", "1", "--matches", "3")
        assert resumed.returncode == 0, resumed.stderr
        assert played(folder) >= before + 3 and ladder_command("rerate", str(folder)).returncode == 0
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_lost_database_connection_leaves_the_ladder_intact_and_the_next_run_carries_on(tmp_path, postgres_url):
    """The server cuts every connection of the ladder's database while it runs: the run either
    reconnects and goes on, or stops with one message; either way nothing is half stored."""
    from sqlalchemy import create_engine, text

    folder = tmp_path / "cup"
    assert ladder_command("init", str(folder), "--env", GAME, "--steps", "30", "--db", postgres_url).returncode == 0
    for name, spec in [("walker", WANDERER), ("noop", "noop")]:
        assert ladder_command("submit", str(folder), name, spec).returncode == 0
    run = start_run(folder, "--matches", "12")
    admin = create_engine(postgres_url.rsplit("/", 1)[0] + "/postgres")
    database = postgres_url.rsplit("/", 1)[1]
    try:
        wait_until(lambda: played(folder) >= 2, what="2 matches")
        with admin.connect() as connection:
            for _ in range(20):
                connection.execute(
                    text(
                        "select pg_terminate_backend(pid) from pg_stat_activity "
                        "where datname = :d and pid <> pg_backend_pid()"
                    ),
                    {"d": database},
                )
                time.sleep(0.05)
        stdout, stderr = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        admin.dispose()
    assert run.returncode in (0, 1, 2) and "Traceback" not in stderr, stderr
    if run.returncode:
        assert "cannot be used" in stderr  # one message naming the database
    resumed = ladder_command("run", str(folder), "--workers", "1", "--matches", "2")
    assert resumed.returncode == 0, resumed.stderr
    assert ladder_command("rerate", str(folder)).returncode == 0
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        # Every match the cut run scheduled was played (or voided) by the next, none is left half stored.
        # (Its ids may skip one: PostgreSQL's sequences are not transactional, and an insert the cut
        # connection rolled back keeps the id it was given.)
        states = set(connection.execute(select(matches.c.state)).scalars())
        assert states <= {"played", "void"} and "played" in states, states
        _check_rated_once(connection)


def test_a_team_submits_only_names_it_owns(tmp_path):
    with api_ladder(tmp_path / "cup") as ladder:
        alpha, beta = ladder.token("alpha"), ladder.token("beta")
        assert ladder.team_of(alpha) == "alpha" and ladder.team_of(beta) == "beta" and ladder.team_of("nope") is None
        ladder.submit("alphabot", "noop", team="alpha")
        assert ladder.owner_of("alphabot") == "alpha"
        ladder.submit("alphabot", "random", team="alpha")  # its own name: v2
        with pytest.raises(Exception, match="belongs to another team"):
            ladder.submit("alphabot", WANDERER, team="beta")
        ladder.submit("house", "noop")  # the organiser's, from the command line
        with pytest.raises(Exception, match="belongs to another team"):
            ladder.submit("house", "random", team="alpha")
    run = ladder_command("token", str(tmp_path / "cup"), "gamma")
    assert run.returncode == 0 and len(run.stdout.strip()) >= 40
    with Ladder.open(tmp_path / "cup") as ladder:
        assert ladder.team_of(run.stdout.strip()) == "gamma"
    stored = b"".join(path.read_bytes() for path in (tmp_path / "cup").glob("ladder.db*"))  # with the WAL
    for token in (alpha, beta, run.stdout.strip()):
        assert token.encode() not in stored  # only a hash of each is kept


def test_a_setup_script_runs_once_in_a_cell_at_qualification_and_a_failing_one_rejects(tmp_path):
    """MettaGrid's cogames.toml submissions with a setup_script: the script makes the checkpoint the
    policy loads when it plays; a script that fails rejects its version with the script's output."""

    good = team(tmp_path / "good", BUILD)
    bad = team(tmp_path / "bad", "print('cannot build: no compiler here')\nraise SystemExit(3)\n")
    # One setup worker: the failing script ends before the good one starts, so before any match (a run that
    # reaches its matches stops the setups still running).
    with api_ladder(tmp_path / "cup", setup_workers=1) as ladder:
        ladder.submit("failing", str(bad))
        ladder.submit("built", str(good))
        ladder.submit("noop", "noop")
        ladder.run(matches=2, workers=1)
        rows = {row.name: row for row in ladder.standings().rows}
        assert rows["built"].state == "active" and rows["built"].matches >= 1
        assert rows["failing"].state == "rejected" and "cannot build: no compiler here" in rows["failing"].reason
        kept = ladder.stored(_version(ladder.folder, "built", 1).id)
        assert kept.spec.setup_script is None and Path(kept.spec.data_path).read_text() == "built-by-setup"
        assert stat.S_IMODE(os.stat(kept.files).st_mode) & 0o022 == 0  # nobody but root may change it


def test_a_ladder_with_replays_keeps_each_matchs_replay_and_refuses_what_cannot_write_them(tmp_path):

    from policybox.league.ladder.database import LadderError

    with api_ladder(tmp_path / "cup", replays=True) as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
        assert ladder.run(matches=2, workers=1).played == 2
        files = sorted((tmp_path / "cup" / "replays").iterdir())  # none for the qualification episodes
        assert [f.name for f in files] == ["match-000001.json.z", "match-000002.json.z"]
        for match_id, file in enumerate(files, start=1):
            assert load_replay(file)["max_steps"] == 30
            page = match_page.match_page(ladder, match_id)
            assert page.replay_file == file.name  # the page offers it, by its name only
        with pytest.raises(LadderError, match="writes replays, which --backend ray cannot"):
            ladder.run(matches=1, backend="ray")
        ours = {p.pid for p in process_tree(os.getpid())}  # (the other test worker's ray is not ours)
        assert not [p for p in psutil.process_iter(["name"]) if p.pid in ours and p.info["name"] == "raylet"]
