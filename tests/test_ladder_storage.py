"""The ladder's storage against the worst entrant, on SQLite and a real PostgreSQL server: text a policy
controls (NUL bytes, invalid UTF-8, lone surrogates) is stored, a record the database refuses voids
that match (or rejects that version) and the run goes on, a retired name never plays, and a database
that cannot be used is one message and exit 2.

Judged from outside: what ``Ladder.run`` returns, the database's rows, the commands' exit codes and
output, and whether the next run still works.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request

import pytest
from conftest import policy
from helpers.ladders import (
    GAME,
    WANDERER,
    activate,
    api_ladder,
    ladder_command,
    ladder_process,
    played,
    start_run,
    wait_until,
)
from helpers.servers import serving
from sqlalchemy import select, text

from policybox.ladder import Ladder
from policybox.league.ladder.database import transaction
from policybox.league.ladder.schema import match_seats, matches, names, qualifications, versions

pytestmark = pytest.mark.storage  # every test here on SQLite and on PostgreSQL


def attack(name: str) -> str:
    return policy(f"storage_attacks.py:{name}")


def seats_of(ladder: Ladder, name: str) -> list:
    query = (
        select(match_seats, matches.c.state)
        .join(versions, versions.c.id == match_seats.c.version_id)
        .join(names, names.c.id == versions.c.name_id)
        .join(matches, matches.c.id == match_seats.c.match_id)
        .where(names.c.name == name)
    )
    with ladder.engine.connect() as connection:
        return connection.execute(query).all()


def test_nul_bytes_bad_utf8_and_surrogates_from_policies_are_stored_and_the_ladder_goes_on(tmp_path, database_url):
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url, suspend_after=2) as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
        ladder.submit("nulinit", attack("NulInInit"), check=False)  # raises RuntimeError("x\x00y") when it is made
        for name in ("nulmatch", "nulcrash"):  # raise / exit 7 at step 10, after printing NULs and bad UTF-8
            ladder.submit(name, attack("NulInMatch" if name == "nulmatch" else "NulThenCrash"))
            activate(ladder, name)
        progress = ladder.run(matches=6, workers=2)
        assert (progress.played, progress.qualified, progress.rejected) == (6, 2, 1)

        rows = {row.name: row for row in ladder.standings().rows}
        assert rows["nulinit"].state == "rejected" and "RuntimeError" in rows["nulinit"].reason
        assert "x\\x00y" in rows["nulinit"].reason  # the NUL shown as its escape
        raised = [seat for seat in seats_of(ladder, "nulmatch") if seat.state == "played"]
        crashed = [seat for seat in seats_of(ladder, "nulcrash") if seat.state == "played"]
        assert raised and {seat.status for seat in raised} == {"error"}
        assert crashed and {seat.status for seat in crashed} == {"crashed"}
        for seat in raised:  # every byte of it there, NUL and surrogates as their visible escapes
            assert "x\\x00y \\udcff lone surrogate \\ud800" in seat.failure_message
        for seat in raised + crashed:  # the log tails: NUL escaped, bad UTF-8 replaced
            assert "\\x00before\\x00" in seat.log_tail and "\ufffd" in seat.log_tail
        for name in ("walker", "noop"):
            assert rows[name].state == "active" and rows[name].matches >= 1 and rows[name].rating is not None
        assert ladder.rerate() == []

    for command in (["status", str(folder)], ["show", str(folder), "nulmatch"], ["show", str(folder), "nulinit"]):
        shown = ladder_command(*command)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert "rejected" in ladder_command("status", str(folder)).stdout
    again = ladder_command("run", str(folder), "--workers", "1", "--matches", "2")
    assert again.returncode == 0 and "2 matches played" in again.stdout, again.stderr
    assert ladder_command("rerate", str(folder)).returncode == 0


REFUSE_SQLITE = [
    "CREATE TRIGGER refuse_match BEFORE UPDATE ON matches WHEN NEW.id = 2 AND NEW.state = 'played' "
    "BEGIN SELECT RAISE(ABORT, 'the operator refuses this row'); END",
    "CREATE TRIGGER refuse_qualification BEFORE INSERT ON qualifications "
    "WHEN NEW.outcome = 'qualified' AND NEW.version_id = 3 "
    "BEGIN SELECT RAISE(ABORT, 'the operator refuses this row'); END",
]
REFUSE_POSTGRESQL = [
    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "RAISE EXCEPTION 'the operator refuses this row' USING ERRCODE = 'data_exception'; END $$",
    "CREATE TRIGGER refuse_match BEFORE UPDATE ON matches FOR EACH ROW "
    "WHEN (NEW.id = 2 AND NEW.state = 'played') EXECUTE FUNCTION refuse()",
    "CREATE TRIGGER refuse_qualification BEFORE INSERT ON qualifications FOR EACH ROW "
    "WHEN (NEW.outcome = 'qualified' AND NEW.version_id = 3) EXECUTE FUNCTION refuse()",
]


def test_a_record_the_database_refuses_voids_its_match_or_rejects_its_version_and_the_run_goes_on(
    tmp_path, database_url
):
    """The database (a trigger of the operator's: SQLite's is a constraint failure, PostgreSQL's a data
    exception) refuses match 2's result and version 3's qualification: the match is void and the
    version rejected, each with the platform's reason; every other match is stored and rated."""
    with api_ladder(tmp_path / "cup", database_url) as ladder:
        for name, spec in [("walker", WANDERER), ("noop", "noop"), ("random", "random")]:
            ladder.submit(name, spec)
        with transaction(ladder.engine) as connection:
            for statement in REFUSE_SQLITE if database_url.startswith("sqlite") else REFUSE_POSTGRESQL:
                connection.execute(text(statement))
        progress = ladder.run(matches=4, workers=1)
        assert (progress.played, progress.void, progress.qualified, progress.rejected) == (3, 1, 2, 1)
        with ladder.engine.connect() as connection:
            states = dict(connection.execute(select(matches.c.id, matches.c.state)).all())
            void_reason = connection.execute(select(matches.c.reason).where(matches.c.id == 2)).scalar()
            refused = connection.execute(select(qualifications).where(qualifications.c.version_id == 3)).one()
        assert states == {1: "played", 2: "void", 3: "played", 4: "played"}
        assert void_reason == "the database refused this match's data: the operator refuses this row"
        assert refused.outcome == "rejected" and refused.reason == (
            "the database refused this version's qualification record: the operator refuses this row"
        )
        rows = {row.name: row for row in ladder.standings().rows}
        assert rows["random"].state == "rejected" and rows["random"].reason == refused.reason
        assert rows["walker"].matches == rows["noop"].matches == 3  # the void match counts for nobody
        assert ladder.rerate() == []
        assert ladder.run(matches=1, workers=1).played == 1  # and the next run plays on


REFUSE_VOIDER_SQLITE = [
    "CREATE TRIGGER refuse_voider BEFORE UPDATE ON matches WHEN NEW.state = 'played' AND EXISTS "
    "(SELECT 1 FROM match_seats WHERE match_seats.match_id = NEW.id AND match_seats.version_id = 1) "
    "BEGIN SELECT RAISE(ABORT, 'the operator refuses this row'); END",
]
REFUSE_VOIDER_POSTGRESQL = [
    "CREATE FUNCTION refuse_voider() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF NEW.state = 'played' AND EXISTS (SELECT 1 FROM match_seats WHERE match_id = NEW.id AND version_id = 1) "
    "THEN RAISE EXCEPTION 'the operator refuses this row' USING ERRCODE = 'data_exception'; END IF; "
    "RETURN NEW; END $$",
    "CREATE TRIGGER refuse_voider BEFORE UPDATE ON matches FOR EACH ROW EXECUTE FUNCTION refuse_voider()",
]


def test_a_version_whose_matches_keep_voiding_is_suspended_and_its_opponents_are_not(tmp_path, database_url):
    """Every match that seats version 1 is void (the database refuses it). That version is suspended once
    it has two void matches in a row, more than any opponent's, with the reason; the opponents it voided
    matches with stay active, and play on among themselves."""
    with api_ladder(tmp_path / "cup", database_url, suspend_after=2) as ladder:
        for name, spec in [("voider", "random"), ("walker", WANDERER), ("noop", "noop"), ("idle", "noop")]:
            ladder.submit(name, spec)
        with transaction(ladder.engine) as connection:
            for statement in REFUSE_VOIDER_SQLITE if database_url.startswith("sqlite") else REFUSE_VOIDER_POSTGRESQL:
                connection.execute(text(statement))
        progress = ladder.run(matches=8, workers=1)
        rows = {row.name: row for row in ladder.standings().rows}
    assert progress.void >= 2 and progress.played >= 3 and progress.suspended == 1
    assert rows["voider"].state == "suspended" and rows["voider"].matches == 0
    assert rows["voider"].reason.startswith("its last ")
    assert "matches were void; the last: the database refused this match's data" in rows["voider"].reason
    assert all(rows[name].state == "active" and rows[name].matches >= 1 for name in ("walker", "noop", "idle"))


def test_a_retired_names_queued_version_is_not_qualified_until_it_is_back(tmp_path, database_url):
    with api_ladder(tmp_path / "cup", database_url) as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
        ladder.submit("later", "random")
        ladder.retire("later")
        progress = ladder.run(matches=2, workers=1)
        assert (progress.played, progress.qualified) == (2, 2)
        rows = {row.name: row for row in ladder.standings().rows}
        assert rows["later"].state == "retired" and rows["later"].matches == 0
        with ladder.engine.connect() as connection:
            queued = connection.execute(
                select(versions.c.state).join(names, names.c.id == versions.c.name_id).where(names.c.name == "later")
            ).scalar_one()
            assert queued == "qualifying"  # still queued, not qualified (nor rejected) while it is retired
            assert not connection.execute(select(qualifications)).all()[2:]  # walker's and noop's alone
        assert seats_of(ladder, "later") == []
        ladder.reinstate("later")  # the organiser's decision: only reinstate brings the name back
        ladder.submit("later", policy("seeded_random.py:SeededRandom"))
        assert ladder.run(matches=1, workers=1).qualified == 2  # both of its versions, now


def test_a_killed_runs_match_that_seats_a_retired_name_is_voided_not_replayed(tmp_path, database_url):
    folder = tmp_path / "cup"
    args = ["init", str(folder), "--env", GAME, "--steps", "60", "--placement-matches", "0", "--seed", "5"]
    made = ladder_command(*args, *([] if database_url.startswith("sqlite") else ["--db", database_url]))
    assert made.returncode == 0, made.stderr
    for name, spec in [("walker", WANDERER), ("noop", "noop"), ("random", "random")]:
        assert ladder_command("submit", str(folder), name, spec).returncode == 0
    run = start_run(folder)
    try:
        wait_until(lambda: played(folder) >= 2, what="2 matches")
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # kill -9: its matches in flight stay scheduled
        run.wait(timeout=60)
    # Read as the next run reads it, read-write: SQLite's read-only connection to a WAL database whose writer
    # was killed can read a snapshot without the writer's last commit (a match stored as played still
    # scheduled here) until a writer recovers the WAL's index -- seen in 2 of 3 fresh-clone runs.
    with Ladder.open(folder) as ladder, ladder.engine.connect() as connection:
        left = connection.execute(select(matches.c.id).where(matches.c.state == "scheduled")).scalars().all()
        assert left, "the kill left no scheduled match"
        seated = {
            row.name
            for row in connection.execute(
                select(names.c.name)
                .join(versions, versions.c.name_id == names.c.id)
                .join(match_seats, match_seats.c.version_id == versions.c.id)
                .where(match_seats.c.match_id == left[0])
            )
        }
        before = {name: row.matches for name, row in ladder_rows(connection).items()}
    retired = sorted(seated)[0]
    assert ladder_command("retire", str(folder), retired).returncode == 0
    resumed = ladder_command("run", str(folder), "--workers", "1", "--matches", "2")
    assert resumed.returncode == 0, resumed.stderr
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        assert ladder_rows(connection)[retired].matches == before[retired]  # it played no more
        its = seats_of(ladder, retired)
        for match_id in left:
            state, reason = connection.execute(
                select(matches.c.state, matches.c.reason).where(matches.c.id == match_id)
            ).one()
            if any(seat.match_id == match_id for seat in its):
                assert (state, reason) == ("void", f"{retired} retired: a retired name never plays")
            else:
                assert state == "played"
        assert not [seat for seat in its if seat.match_id > max(left) and seat.state != "void"]
    assert ladder_command("rerate", str(folder)).returncode == 0


def ladder_rows(connection) -> dict:
    query = select(names.c.name, versions.c.matches).join(versions, versions.c.name_id == names.c.id)
    return {row.name: row for row in connection.execute(query)}


@pytest.fixture
def ext4(tmp_path):
    """A small ext4 filesystem of its own (a loop device), mounted: ``chattr +i`` is obeyed there by the
    pages SQLite maps, as on a server's disk (tmpfs lets a mapping write on)."""
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4") or not shutil.which("losetup"):
        pytest.skip("a loop-mounted ext4 needs root, mkfs.ext4 and losetup")
    image, point = tmp_path / "disk.img", tmp_path / "disk"
    point.mkdir()
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    device = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True, text=True, check=True)
    device = device.stdout.strip()
    try:
        subprocess.run(["mount", device, str(point)], check=True)
        yield point
    finally:
        subprocess.run(["chattr", "-R", "-i", str(point)], check=False, capture_output=True)
        subprocess.run(["umount", "-l", str(point)], check=False)
        subprocess.run(["losetup", "-d", device], check=False)


def _made_immutable_under_a_run(folder, files: list[str], url: str) -> tuple[int, str]:
    """Start ``ladder run``, make the database's files immutable once it has played 2 more matches:
    how the run ended (its exit code, its stderr)."""
    before = played(folder)
    run = start_run(folder)
    try:
        wait_until(lambda: played(folder) >= before + 2, what="2 matches")
        assert urllib.request.urlopen(f"{url}/api/standings", timeout=60).status == 200
        subprocess.run(["chattr", "+i", *files], check=True)  # read-only, even for root
        _, stderr = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=60)
    return run.returncode, stderr


def one_error_line(run: subprocess.CompletedProcess | tuple, *needles: str) -> None:
    """Exit 2, never a signal death, and one line saying what to do, naming the database."""
    returncode, stderr = (run.returncode, run.stderr) if hasattr(run, "returncode") else run
    assert returncode == 2, (returncode, stderr)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in stderr, stderr
    assert all(needle in lines[0] for needle in needles), stderr


def test_a_database_made_read_only_or_moved_under_a_running_ladder_is_one_message_and_exit_2(ext4):
    """#26 saw SIGBUS: SQLite maps the -shm file, and a write to a mapped page of an immutable file is
    a bus error. Each command now ends with exit 2 and one line; the next run, files restored, plays.
    A change that lands between the check and SQLite's write still kills the run (the stated limit):
    such an attempt is made again, up to 3 times."""
    folder = ext4 / "cup"
    assert ladder_command("init", str(folder), "--env", GAME, "--steps", "30").returncode == 0
    for name, spec in [("walker", WANDERER), ("noop", "noop")]:
        assert ladder_command("submit", str(folder), name, spec).returncode == 0
    files = [str(folder / f"ladder.db{suffix}") for suffix in ("", "-wal", "-shm")]

    with serving(folder, ext4.parent / "serve.log") as (url, serve):
        for _ in range(3):
            ended = _made_immutable_under_a_run(folder, files, url)
            if ended[0] != -signal.SIGBUS:
                break
            # The limit docs/security.md states: the files changed in the microseconds between the
            # check and SQLite's write to its -shm map (a busy machine widens them). Again, restored;
            # without the check every attempt ends so, and the test fails.
            subprocess.run(["chattr", "-i", *files], check=True)
        one_error_line(ended, files[0], "cannot be written", "make it writable again")
        for path in ("/api/standings", "/"):  # the page: 503 and a message (the files named on its stderr)
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(f"{url}{path}", timeout=60)
            assert answer.value.code == 503 and b"cannot be used at the moment" in answer.value.read()
        assert serve.poll() is None  # still serving, not killed
    assert serve.returncode >= 0 and "make it writable again" in (ext4.parent / "serve.log").read_text()
    # As processes of their own: a command that meets a changed database ends its process at once.
    one_error_line(ladder_process("status", str(folder)), "ladder.db", "make it writable again")
    one_error_line(ladder_process("run", str(folder), "--matches", "1"), "ladder.db", "cannot be written")
    subprocess.run(["chattr", "-i", *files], check=True)
    again = ladder_command("run", str(folder), "--workers", "1", "--matches", "1")
    assert again.returncode == 0 and ladder_command("rerate", str(folder)).returncode == 0, again.stderr

    run = start_run(folder)
    try:
        logs = set((folder / "logs").iterdir())  # waited for by its files: this test reads no database now
        wait_until(lambda: len(set((folder / "logs").iterdir()) - logs) >= 2, what="a match")
        moved = ext4 / "moved"
        folder.rename(moved)  # the folder moved away under the run
        _, stderr = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=60)
    one_error_line((run.returncode, stderr), "put", "back")
    one_error_line(ladder_process("status", str(folder)), "is not a ladder")
    shutil.rmtree(folder, ignore_errors=True)  # what its workers made there again (their logs' folders)
    moved.rename(folder)
    again = ladder_command("run", str(folder), "--workers", "1", "--matches", "1")
    assert again.returncode == 0 and ladder_command("rerate", str(folder)).returncode == 0, again.stderr


def test_a_qualification_the_machinery_fails_every_time_is_a_rejection_not_retried_for_good(tmp_path):
    """Every zygote dies as it starts (its --preload cannot be imported: the machinery's failure, not
    the versions'). Each version's validation episode fails three times, then the version is rejected
    saying so -- the run ends, instead of trying them again at every turn."""
    from policybox import EpisodeSettings, LadderSettings
    from policybox.ladder import Ladder as PublicLadder

    settings = EpisodeSettings(env=GAME, steps=10, preload=["policybox_no_such_module"])
    with PublicLadder.create(tmp_path / "cup", LadderSettings(settings=settings, agents=2)) as ladder:
        ladder.submit("walker", WANDERER, check=False)
        ladder.submit("noop", "noop")
        progress = ladder.run(matches=1, workers=1)
        rows = {row.name: row for row in ladder.standings().rows}
    assert (progress.rejected, progress.played) == (2, 0)
    for name in ("walker", "noop"):
        assert rows[name].state == "rejected"
        assert rows[name].reason.startswith("its validation episode could not be run: the platform failed it 3 times")


def test_a_frame_that_once_voided_every_match_is_its_senders_forfeit(tmp_path):
    """The hostile review's attack: a policy sends an ERROR frame of JSON nested 5,000 deep at step 1.
    The host's episode once died with a RecursionError, and the ladder voided the match, for nobody.
    Now every match is stored and rated: the sender's agents failed, and it forfeits."""
    with api_ladder(tmp_path / "cup") as ladder:
        ladder.submit("forger", policy("frame_forger.py:FrameForger", **{"kw.attack": "step_error_deep"}))
        ladder.submit("walker", WANDERER)
        for name in ("forger", "walker"):
            activate(ladder, name)
        progress = ladder.run(matches=2, workers=1)
        assert (progress.played, progress.void) == (2, 0)
        seats = seats_of(ladder, "forger")
        with ladder.engine.connect() as connection:
            forfeits = connection.execute(select(versions.c.forfeits).where(versions.c.id == 1)).scalar()
    assert {(seat.state, seat.status, seat.failure_kind) for seat in seats} == {("played", "error", "ProtocolError")}
    assert forfeits == 2
