"""A ladder's files are the host's alone: no cell and no setup script reads another team's secrets in
the ladder's folder -- its database and side files, ladder.json, logs, replays, the version store --
whatever the mode of the folder above; and a folder other users may read is warned about (``ladder
init``, ``ladder run``, ``policybox doctor --ladder``), an old one made private by ``ladder run``.

Judged from outside: the files' modes on disk, the attacker's log files and what the ladder stored of
it (its setup output, its qualification, its matches), the commands' exit codes and stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from conftest import POLICIES, Ran, policy, policybox
from sqlalchemy import select

from policybox.ladder import Ladder
from policybox.league.ladder import private
from policybox.league.ladder.schema import match_seats, matches, names, qualifications, versions

SIDE_FILES = ("ladder.db-wal", "ladder.db-shm")
GAME = str(Path(__file__).parents[1] / "examples" / "moves.yaml")


def init(folder: Path, *extra: str) -> Ran:
    args = ["ladder", "init", str(folder), "--env", GAME, "--steps", "20", "--placement-matches", "1", *extra]
    made = policybox(*args, columns=300)
    assert made.returncode == 0, made.stderr
    return made


@pytest.fixture(params=["tmp", "srv"])
def open_folder(request) -> Path:
    """A fresh 0755 folder under /tmp (which cells see masked) or under /srv (which they see as it is)."""
    parent = Path(tempfile.mkdtemp(prefix="policybox-ladder-files-", dir=f"/{request.param}"))
    parent.chmod(0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


# -- the attack ----------------------------------------------------------------------------------


def test_no_cell_and_no_setup_script_reads_another_teams_secrets(open_folder, tmp_path):
    secret = {kind: f"pbx-secret-{uuid.uuid4().hex}" for kind in ("printed", "unprinted", "in_file", "decoy")}
    theirs = [secret["printed"], secret["unprinted"], secret["in_file"]]
    decoy = open_folder / "decoy.txt"  # beside the ladder, readable by anyone: the attack's control
    decoy.write_text(secret["decoy"])
    decoy.chmod(0o644)
    folder = open_folder / "cup"
    init(folder, "--replays")

    # The victim: its secrets in its spec's env, its printed log, its stored log tail and its files.
    victim = tmp_path / "victim" / "blabber.py"
    victim.parent.mkdir()
    victim.write_text((POLICIES / "blabber.py").read_text() + f"\n# the team's own notes: {secret['in_file']}\n")
    spec = f"{victim}:Blabber,env.PRINTED={secret['printed']},env.UNPRINTED={secret['unprinted']}"
    for name, source in [("victim", spec), ("noop", "noop"), ("random", "random")]:
        unchecked = ["--no-check"] if name == "victim" else []  # it fails on purpose: stored to fail in its match
        assert policybox("ladder", "submit", str(folder), name, source, *unchecked, columns=300).returncode == 0
    first = policybox("ladder", "run", str(folder), "--workers", "2", "--matches", "1", columns=300)
    assert first.returncode == 0, first.stderr
    assert _planted(folder, secret)

    # The attackers: a policy, and a setup script, each walking up and through /proc.
    snoop = policy("ladder_snoop.py:Snoop")
    assert policybox("ladder", "submit", str(folder), "snoop", snoop, columns=300).returncode == 0
    made = policybox("ladder", "submit", str(folder), "builder", str(_setup_team(tmp_path / "builder")), columns=300)
    assert made.returncode == 0, made.stderr
    # Only the attackers can play now, so the run's matches wait for the setup script, which runs beside play.
    for name in ("victim", "noop", "random"):
        assert policybox("ladder", "retire", str(folder), name, columns=300).returncode == 0
    second = policybox("ladder", "run", str(folder), "--workers", "2", "--matches", "2", columns=300)
    assert second.returncode == 0, second.stderr

    snooped = [log for log in folder.glob("logs/*/agent-*.log") if "SNOOP-DONE" in log.read_text(errors="replace")]
    setup_output = _stored_of(folder, "builder")["setup_output"]
    assert len(snooped) >= 4 and "SNOOP-DONE" in setup_output  # it ran: in qualification, in matches, as setup
    for text in [*(log.read_text(errors="replace") for log in snooped), setup_output]:
        assert "SNOOP-OWN-FILE read" in text  # it reads what it may, and prints it
        assert not [value for value in theirs if value in text], text[-3000:]
        if open_folder.parent == Path("/srv"):  # outside the masked folders, the walk up gets there
            assert secret["decoy"] in text
    for name in ("snoop", "builder"):
        stored = json.dumps(_stored_of(folder, name))
        assert not [value for value in theirs if value in stored]
    assert not [value for value in theirs if value in _matches_text(folder)]
    assert_private(folder)
    assert {path.name for path in folder.iterdir()} >= {"ladder.db", "ladder.json", "run.lock", "logs", "replays"}


def assert_private(folder: Path) -> None:
    """The folder 0700; everything directly in it, and the logs in their folders, with no bit for anyone
    but the owner. (A replay keeps the mode MettaGrid writes it with: only the owner may enter replays/.)"""
    assert mode(folder) == 0o700
    for path in [*folder.iterdir(), *folder.glob("logs/*"), *folder.glob("logs/*/*")]:
        assert mode(path) == (0o700 if path.is_dir() else 0o600), path


def _setup_team(folder: Path) -> Path:
    """A submission whose setup script is the snooper, run as a script, and whose policy is too."""
    folder.mkdir()
    shutil.copy(POLICIES / "ladder_snoop.py", folder / "snoop.py")
    shutil.copy(POLICIES / "ladder_snoop.py", folder / "setup.py")
    (folder / "cogames.toml").write_text('[policy]\nclass_path = "snoop.Snoop"\nsetup_script = "setup.py"\n')
    return folder


def _planted(folder: Path, secret: dict[str, str]) -> bool:
    """The victim's secrets are where the ladder keeps them (so the attack had something to find)."""
    logs = "".join(log.read_text(errors="replace") for log in folder.glob("logs/*/agent-*.log"))
    specs = "".join(path.read_text() for path in folder.glob("versions/specs/*.json"))
    files = b"".join(path.read_bytes() for path in folder.glob("versions/files/**/*.py"))
    stored = json.dumps(_stored_of(folder, "victim"))
    return (
        secret["printed"] in logs
        and secret["printed"] in stored
        and secret["unprinted"] in specs
        and secret["in_file"].encode() in files
    )


def _stored_of(folder: Path, name: str) -> dict:
    """What the ladder stored of ``name``'s v1: its version row and its qualification."""
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        found = connection.execute(
            select(versions, qualifications.c.reason.label("why"), qualifications.c.setup_output)
            .add_columns(qualifications.c.result)
            .join(names, names.c.id == versions.c.name_id)
            .join(qualifications, qualifications.c.version_id == versions.c.id)
            .where(names.c.name == name)
        ).one()
        return {key: value for key, value in found._mapping.items()}


def _matches_text(folder: Path) -> str:
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        rows = connection.execute(select(matches.c.result)).scalars().all()
        seats = connection.execute(select(match_seats.c.log_tail, match_seats.c.failure_message)).all()
    return json.dumps([rows, [list(seat) for seat in seats]])


# -- made private, and warned about --------------------------------------------------------------


@pytest.mark.storage
def test_init_makes_a_private_folder_even_in_an_open_one_on_either_database(tmp_path, database_url):
    folder = Path(tempfile.mkdtemp(dir=tmp_path))  # an empty folder that exists already, 0755
    folder.chmod(0o755)
    extra = ["--db", database_url] if database_url.startswith("postgresql") else []
    made = init(folder, *extra)
    assert made.stderr == ""  # nothing to warn about: it could make it private
    assert_private(folder)
    assert {path.name for path in folder.iterdir()} == {"ladder.json", "logs", *(["ladder.db"] if not extra else [])}


def test_init_warns_about_a_folder_it_cannot_make_private_and_still_makes_the_ladder(tmp_path):
    """A folder of another user's (a shared disk's, 0777): init, without the power to chmod what it does
    not own (CAP_FOWNER), says so in one line, makes the ladder all the same, and exits 0."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, 65534, 65534)
    shared.chmod(0o777)
    args = ["ladder", "init", str(shared), "--env", GAME, "--steps", "20"]
    # A process of its own: it runs without CAP_FOWNER, which this process has.
    made = subprocess.run(
        ["setpriv", "--bounding-set", "-fowner", "--inh-caps", "-fowner", sys.executable, "-m", "policybox", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert made.returncode == 0, made.stderr
    warning = f"Warning: {shared}: other users may list and enter it (mode 0777), and it cannot be made private "
    assert made.stderr == f"{warning}(Operation not permitted): chmod 700 {shared}\n"
    assert mode(shared) == 0o777 and mode(shared / "ladder.db") == 0o600 and mode(shared / "logs") == 0o700


def old_ladder(folder: Path) -> list[Path]:
    """Open the folder up as the previous policybox made it (0755 folders, 0644 files); what it opened."""
    opened = [folder, *folder.iterdir()]
    for path in opened:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return opened


def test_run_makes_an_old_ladder_private_and_says_so_path_by_path(tmp_path):
    folder = tmp_path / "cup"
    init(folder)
    for name in ("noop", "random"):
        assert policybox("ladder", "submit", str(folder), name, name, columns=300).returncode == 0
    first = policybox("ladder", "run", str(folder), "--matches", "1", columns=300)
    assert first.returncode == 0 and first.stderr == ""  # private: nothing to say
    opened = old_ladder(folder)
    assert {path.name for path in opened} >= {"ladder.db", "ladder.json", "run.lock", "logs", "versions"}

    run = policybox("ladder", "run", str(folder), "--matches", "1", columns=300)
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    expected = {_tightened(path) for path in opened}
    side_files = {_tightened(folder / name) for name in SIDE_FILES}  # SQLite made them with the database's mode
    assert expected <= set(lines) <= expected | side_files and len(lines) == len(set(lines))  # one line a path
    assert_private(folder)


def _tightened(path: Path) -> str:
    if path.is_dir():
        return f"Warning: {path}: other users may list and enter it (mode 0755); made it 0700"
    return f"Warning: {path}: other users may read it (mode 0644); made it 0600"


def test_doctor_shows_who_may_read_a_ladder_and_the_chmod_that_closes_it(tmp_path):
    folder = tmp_path / "cup"
    init(folder)
    not_a_ladder = policybox("doctor", "--ladder", str(tmp_path), columns=300)
    assert not_a_ladder.returncode == 2
    assert not_a_ladder.stderr.splitlines() == [
        f"Error: {tmp_path} is not a ladder (it has no ladder.json): give --ladder a ladder's folder"
    ]
    private = policybox("doctor", "--ladder", str(folder), columns=300)  # the folder, ladder.db, ladder.json, logs/
    ladder_rows = private.stdout.split(f"who may read ladder {folder}")[1]
    assert ladder_rows.count(" yes ") == 4 and "│ no " not in ladder_rows and "chmod" not in ladder_rows
    assert private.returncode == (1 if "│ no " in private.stdout else 0)  # its rows, the layers' only

    old_ladder(folder)
    opened = policybox("doctor", "--ladder", str(folder), columns=300)
    assert opened.returncode == 1
    assert f"other users may list and enter it (mode 0755): chmod 700 {folder}" in opened.stdout
    assert f"other users may read it (mode 0644): chmod 600 {folder / 'ladder.db'}" in opened.stdout
    assert mode(folder) == 0o755  # doctor looks, it changes nothing


def test_making_a_folder_private_follows_no_symlink_in_it_and_says_what_it_changed(tmp_path):
    """A symlink in the folder (to a file of the system, say) is neither followed nor changed: root's
    ``ladder run`` never chmods what a link points at. The folder itself, given as a link, is."""
    outside = tmp_path / "outside.txt"
    outside.write_text("not the ladder's")
    outside.chmod(0o644)
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    (real / "ladder.db").write_text("")
    (real / "ladder.db").chmod(0o640)
    (real / "link").symlink_to(outside)
    (tmp_path / "cup").symlink_to(real)
    with pytest.warns(private.FolderWarning) as warned:
        private.make_private(tmp_path / "cup", tell=True)
    assert [str(warning.message) for warning in warned] == [
        f"{tmp_path / 'cup'}: other users may list and enter it (mode 0755); made it 0700",
        f"{tmp_path / 'cup' / 'ladder.db'}: other users may read it (mode 0640); made it 0600",
    ]
    assert mode(real) == 0o700 and mode(real / "ladder.db") == 0o600 and mode(outside) == 0o644
    assert not [entry for entry in private.checked(tmp_path / "cup") if entry.exposed]
