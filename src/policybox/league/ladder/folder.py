"""A ladder: a folder and a database in which submissions become versions, qualify, play and are rated.

``Ladder.create(DIR, settings)`` makes one; every later use opens it from its folder
(``Ladder.open(DIR)``): ``DIR/ladder.json`` holds its id and, for a PostgreSQL ladder, the server's
URL (the file is 0600: the URL may hold a password); a SQLite ladder's database is
``DIR/ladder.db``. Versions' files are kept under ``DIR/versions`` (root-only, content-addressed),
agents' logs under ``DIR/logs``. The folder is 0700 and everything directly in it private
(``policybox.league.ladder.private``): no cell, and no other user, reads any of it. ``ladder run`` plays
it (``policybox.league.ladder.run_loop``); what it shows is ``policybox.league.views``';
``policybox.ladder.Ladder`` is all of it in one object.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError

from policybox.errors import NotFound, PolicyboxError, SpecError
from policybox.files import version_files
from policybox.game import check_shorthands
from policybox.league.ladder import life, match_store, private, team_store, version_store
from policybox.league.ladder.build_check import check_builds
from policybox.league.ladder.database import LadderError, connect, dispose, transaction
from policybox.league.ladder.migrations import SCHEMA_VERSION, create, open_schema, schema_version
from policybox.league.ladder.settings import LadderSettings
from policybox.league.ladder.version_store import (
    Version as Version,  # a submission's new version: part of the folder's API
)
from policybox.spec import PolicySpec, parse_policy_arg
from policybox.storage import write_atomically, writing
from policybox.submission import private_folder

FOLDER_FILE = "ladder.json"
SQLITE_FILE = "ladder.db"
REPLAYS = "replays"  # the folder of the matches' replays, match-000001.json.z, when the ladder writes them
LOCK_FILE = "run.lock"
LOGS = "logs"  # the agents' logs, a folder per match and qualification
HOUR = timedelta(hours=1)


class LadderFolder:
    """An open ladder: its folder, its settings and its database."""

    def __init__(self, folder: Path, settings: LadderSettings, database_url: str, engine: Any) -> None:
        self.folder, self.settings, self.database_url, self.engine = folder, settings, database_url, engine

    @property
    def environments(self) -> Path:
        """Where its versions' requirements are built (``policybox.files.environments``): the settings'
        ``environments`` folder, else ``environments/`` in the ladder's."""
        given = self.settings.settings.environments
        return Path(given) if given else self.folder / "environments"

    @classmethod
    def create(cls, folder: str | Path, settings: LadderSettings, database: str | None = None) -> LadderFolder:
        """Make a ladder in ``folder`` (new or empty), its database SQLite in the folder or ``database``
        (a PostgreSQL URL, whose database must be empty)."""
        folder = Path(folder).absolute()  # the versions' specs name their files by absolute paths
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise LadderError(f"{folder} is not an empty folder: a new ladder needs a folder of its own")
        url = database or f"sqlite:///{(folder / SQLITE_FILE).absolute()}"
        engine = connect(url)  # a PostgreSQL driver that is not installed is refused before the folder is made
        with writing(folder, "creating"):
            folder.mkdir(parents=True, exist_ok=True)
            private.make_private(folder, tell=False)  # the host's alone (policybox.league.ladder.private)
            (folder / LOGS).mkdir(mode=0o700)
            if database is None:  # SQLite gives its -wal and -shm files the database file's mode
                os.close(os.open(folder / SQLITE_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        ladder_id = uuid.uuid4().hex
        create(engine, ladder_id, settings.model_dump(mode="json"))
        write_atomically(folder / FOLDER_FILE, json.dumps({"ladder_id": ladder_id, "database": database}, indent=2))
        (folder / FOLDER_FILE).chmod(0o600)
        return cls(folder, settings, url, engine)

    @classmethod
    def open(cls, folder: str | Path, read_only: bool = False) -> LadderFolder:
        """The ladder in ``folder``; its database's schema brought up to date (unless ``read_only``)."""
        folder = Path(folder).absolute()
        marker = folder / FOLDER_FILE
        if not marker.is_file():
            raise LadderError(
                f"{folder} is not a ladder (it has no {FOLDER_FILE}): make one with policybox ladder init"
            )
        try:
            described = json.loads(marker.read_text())
            ladder_id, database = described["ladder_id"], described.get("database")
        except OSError as exc:
            raise LadderError(f"{marker} cannot be read ({exc.strerror}): is its filesystem still there?") from None
        except (ValueError, KeyError, TypeError):
            raise LadderError(f"{marker} is not a ladder's {FOLDER_FILE}") from None
        url = database or f"sqlite:///{(folder / SQLITE_FILE).absolute()}"
        read_only = read_only and database is None  # a PostgreSQL reader never blocks the writer anyway
        if read_only and 0 < schema_version(engine := connect(url, read_only=True)) < SCHEMA_VERSION:
            engine.dispose()  # an older schema: migrated once by a writer, then read like any other
            writer = connect(url)
            try:
                open_schema(writer, ladder_id)
            finally:
                writer.dispose()
        engine = connect(url, read_only=read_only)
        settings = LadderSettings.model_validate(open_schema(engine, ladder_id))
        return cls(folder, settings, url, engine)

    def close(self) -> None:
        dispose(self.engine)

    def __enter__(self) -> LadderFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -----------------------------------------------------------------------------------------
    # Submissions

    def submit(
        self, name: str, source: str, base_dir: Path | None = None, team: str | None = None, check: bool = True
    ) -> Version:
        """``source`` (any -p form) as the next version of ``name``, queued for qualification. Its files
        are copied into the ladder first -- once its policy is built in a cell (``check_builds``: one that
        cannot be built is refused, ``PolicyRefused``; with ``check`` False it is stored, and rejected at
        qualification instead); the same content as the name's latest version is refused, and so is a
        retired name (``life.Retired``: only ``reinstate`` brings it back). With ``team`` (a submission
        over the web page), the name must be new -- it becomes the team's -- or the team's own."""
        version_files.check_name(name)
        if team is not None:
            version_files.check_name(team, "team name")
        with transaction(self.engine) as connection:  # refused before any file is copied; checked again when stored
            if team is not None:
                _check_owner(connection, name, team)
                _check_limits(connection, name, team, self.settings)
            _check_retired(connection, name)
        kept_in = private_folder(self.folder / "versions", LadderError)
        with tempfile.TemporaryDirectory(dir=kept_in, prefix=".unpacking-") as scratch:  # a zip's files, until kept
            spec = parse_policy_arg(source, base_dir, self.settings.zip_limits(), Path(scratch))
            check_shorthands([spec], self.settings.settings)  # before anything is copied
            if check:
                check_builds(spec, self.settings.episode_settings, self.settings.agents, Path(scratch))  # in a cell
            kept = version_files.keep_spec(spec, kept_in)
        try:
            return self._add(name, source, kept, team)
        except IntegrityError:  # another submission of this name was stored at the same moment
            raise SpecError(f"another submission of {name} arrived at the same moment: submit again") from None

    def _add(self, name: str, source: str, kept: version_files.Stored, team: str | None) -> Version:
        """Store the version -- checking again, inside the transaction, who owns the name and the
        team's limits (its row locked: parallel submissions are counted one after another)."""
        with transaction(self.engine) as connection:
            if team is not None:
                _check_owner(connection, name, team)
                _check_limits(connection, name, team, self.settings)
            _check_retired(connection, name)
            latest = version_store.latest_version(connection, name)
            if latest is not None and latest.digest == kept.digest:
                raise SpecError(f"{source} holds the same content as {latest.label}: there is nothing new to submit")
            version = version_store.add_version(
                connection, name, kept.digest, kept.spec.redacted().model_dump(mode="json"), _shown(source)
            )
            self.keep(version.id, kept)
            if team is not None and version.number == 1:
                team_store.claim(connection, name, team)
        return version

    def keep(self, version_id: int, kept: version_files.Stored) -> None:
        """Keep what a version's cells are given -- its spec with its env values, and where its files
        are -- in a root-only file of the folder: the database (which the web page reads) holds the
        spec with every env value masked."""
        folder = private_folder(self.folder / "versions" / "specs", LadderError)
        record = {
            "spec": kept.spec.model_dump(mode="json"),
            "digest": kept.digest,
            "files": kept.files and str(kept.files),
        }
        path = folder / f"{version_id}.json"
        write_atomically(path, json.dumps(record))
        path.chmod(0o600)

    def kept_specs(self) -> list[PolicySpec]:
        """The spec of every version ``keep`` kept (each its cells are given)."""
        folder = self.folder / "versions" / "specs"
        return [PolicySpec.model_validate(json.loads(path.read_text())["spec"]) for path in folder.glob("*.json")]

    def stored(self, version_id: int) -> version_files.Stored:
        """What ``keep`` kept of a version: the spec its cells are given."""
        path = self.folder / "versions" / "specs" / f"{version_id}.json"
        try:
            record = json.loads(path.read_text())
        except OSError as exc:  # the folder moved or removed under a run, its filesystem gone
            raise LadderError(
                f"{path} cannot be read ({exc.strerror}): put the ladder's folder back where it was, then run "
                "the command again"
            ) from None
        files = None if record["files"] is None else Path(record["files"])
        return version_files.Stored(PolicySpec.model_validate(record["spec"]), record["digest"], files)

    def token(self, team: str) -> str:
        """A new token with which ``team`` submits over the web page (its first submission of a name
        makes the team that name's owner)."""
        version_files.check_name(team, "team name")
        with transaction(self.engine) as connection:
            return team_store.new_token(connection, team)

    def revoke(self, team: str) -> tuple[int, int]:
        """Revoke every token of ``team`` and end every web session made with one: (tokens, sessions)."""
        version_files.check_name(team, "team name")
        with transaction(self.engine) as connection:
            if not team_store.is_team(connection, team):
                raise NotFound(f"this ladder has no team called {team!r}: policybox ladder tokens DIR lists them")
            return team_store.revoke(connection, team)

    def team_of(self, token: str) -> str | None:
        with transaction(self.engine) as connection:
            return team_store.team_of(connection, token)

    def owner_of(self, name: str) -> str | None:
        with transaction(self.engine) as connection:
            return team_store.owner_of(connection, name)

    def names_of(self, team: str) -> set[str]:
        """The names ``team`` owns (those whose first version it submitted)."""
        with transaction(self.engine) as connection:
            return team_store.names_of(connection, team)

    def retire(self, name: str) -> None:
        """Take ``name`` out of matchmaking, and refuse its submissions, until ``reinstate``; its history
        and ratings stay."""
        with transaction(self.engine) as connection:
            self._known(connection, name)
            version_store.set_retired(connection, name, True)

    def reinstate(self, name: str) -> Version:
        """Bring a retired ``name`` back and lift its current version's suspension (``life.reinstate``):
        it plays again, and takes submissions. Its current version (else its latest)."""
        with transaction(self.engine) as connection:
            self._known(connection, name)
            current = version_store.current_versions(connection).get(name)
            retired = version_store.name_row(connection, name).retired
            decided = life.reinstate(name, retired, None if current is None else (current.id, current.state))
            if decided.lift is not None:
                version_store.set_state(connection, decided.lift, life.VersionState.ACTIVE, None)
                version_store.reset_streak(connection, decided.lift)
            if decided.unretire:
                version_store.set_retired(connection, name, False)
            found = version_store.latest_version(connection, name)
            assert found is not None
            return found if current is None else version_store.version_by_id(connection, current.id)

    def _known(self, connection: Any, name: str) -> None:
        if version_store.name_row(connection, name) is None:
            raise NotFound(f"this ladder has no submission called {name!r}")

    # -----------------------------------------------------------------------------------------
    # The one runner

    @contextlib.contextmanager
    def running(self, command: str) -> Iterator[None]:
        """Hold the ladder's run lock as ``command`` (``ladder run``, ``ladder final``): one at a time.
        The kernel releases it when the process dies, however it dies, so a killed run never blocks the
        next. The lock file says who holds it -- its pid, its command and since when -- so that the
        command refused names the one to stop.

        Then make the folder private again, warning about each path other users could read: the run
        is what starts cells, so it closes what an older policybox (0755 and 0644) or a ``chmod`` left
        open rather than only warning -- nothing but the ladder's own commands, run by its owner,
        needs to read its files."""
        with writing(self.folder / LOCK_FILE, "creating"):
            handle = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LadderError(_held(os.pread(handle, 4096, 0).decode(errors="replace"))) from None
            os.ftruncate(handle, 0)
            since = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
            os.pwrite(handle, f"{os.getpid()}\n{command}\n{since}\n".encode(), 0)
            private.make_private(self.folder, tell=True)
            yield
        finally:
            os.close(handle)  # closing it releases the lock

    # -----------------------------------------------------------------------------------------
    # Audit

    def rerate(self) -> list[tuple[Version, tuple[float, float] | None, tuple[float, float] | None]]:
        """Every rating recomputed from the stored matches; each version whose live rating differs, with
        both (none, when the ladder's live ratings are a replay of its results, as they must be)."""
        with transaction(self.engine) as connection:
            replayed = match_store.replayed_ratings(connection, self.settings.rank_by)
            live = match_store.live_ratings(connection)
            return [
                (version_store.version_by_id(connection, version_id), live.get(version_id), replayed.get(version_id))
                for version_id in sorted(set(live) | set(replayed))
                if live.get(version_id) != replayed.get(version_id)
            ]


def _held(lock: str) -> str:
    """Why the run lock cannot be had, from what its holder wrote in it: its pid, command and start
    (an older policybox's holder wrote its pid alone)."""
    pid, command, since = (part.strip() for part in [*lock.split("\n"), "", "", ""][:3])
    known = pid.isascii() and pid.isdigit()
    who = ", ".join(([f"pid {pid}"] if known else []) + ([f"since {since}"] if since else []))
    how = f"Ctrl-C where it runs, or kill {pid}" if known else "Ctrl-C where it runs"
    return (
        f"a policybox {command or 'ladder run or ladder final'}{f' ({who})' if who else ''} is playing this "
        f"ladder: one at a time -- stop it first ({how}), then run this again"
    )


def _check_retired(connection: Any, name: str) -> None:
    row = version_store.name_row(connection, name)
    life.check_submission(name, row is not None and row.retired)


class NotOwner(SpecError):
    """A team submitted a name that another team (or the organiser) owns."""


def _check_owner(connection: Any, name: str, team: str) -> None:
    """A team submits only a new name (it becomes the team's) or a name it owns."""
    if version_store.name_row(connection, name) is not None and team_store.owner_of(connection, name) != team:
        raise NotOwner(f"{name} belongs to another team (or to the organiser): choose another name")


class TeamLimit(PolicyboxError):
    """A team's submission over one of the ladder's limits; the message names the limit, its setting
    and when it frees up, ``retry_after_s`` in how many seconds (None: not by waiting)."""

    def __init__(self, message: str, retry_after_s: int | None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def _check_limits(connection: Any, name: str, team: str, settings: LadderSettings) -> None:
    """A team makes at most ``submissions_per_hour`` submissions in any hour, and owns at most
    ``names_per_team`` names (retired ones not counted)."""
    team_id = team_store.lock_team(connection, team)
    if team_id is None:
        raise SpecError(f"this ladder has no team {team!r}: make it a token first (policybox ladder token DIR {team})")
    now, most = datetime.now(UTC), settings.submissions_per_hour
    recent = team_store.submissions_since(connection, team_id, (now - HOUR).isoformat(timespec="seconds"))
    if len(recent) >= most:
        frees = datetime.fromisoformat(recent[len(recent) - most]) + HOUR
        wait_s = max(1, math.ceil((frees - now).total_seconds()))
        raise TeamLimit(
            f"team {team} has made {len(recent)} submissions in the last hour, the ladder's limit "
            f"(submissions_per_hour {most}, set by ladder init --submissions-per-hour): the next is "
            f"accepted from {frees:%H:%M:%S} UTC, in {wait_s} s",
            wait_s,
        )
    if version_store.name_row(connection, name) is None and (owned := team_store.names_owned(connection, team_id)) >= (
        settings.names_per_team
    ):
        raise TeamLimit(
            f"team {team} owns {owned} names, the ladder's limit (names_per_team {settings.names_per_team}, set "
            "by ladder init --names-per-team): submit a new version of one of them; a name frees up when the "
            "organiser retires it (policybox ladder retire)",
            None,
        )


def _shown(source: str) -> str:
    """What was submitted, as results may show it: an inline ``env.NAME=value`` masked."""
    parts = source.split(",")
    return ",".join(part.split("=", 1)[0] + "=***" if part.strip().startswith("env.") else part for part in parts)
