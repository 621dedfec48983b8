"""A ladder: a folder and a database in which submissions become versions, qualify, play and are rated.

``Ladder.create(DIR, settings)`` makes one; every later use opens it from its folder
(``Ladder.open(DIR)``): ``DIR/ladder.json`` holds its id and, for a PostgreSQL ladder, the server's
URL (the file is 0600: the URL may hold a password); a SQLite ladder's database is
``DIR/ladder.db``. Versions' files are kept under ``DIR/versions`` (root-only, content-addressed),
agents' logs under ``DIR/logs``. ``ladder run`` plays it (``policybox.league.scheduler``); what it
shows is ``policybox.league.board``'s; ``policybox.ladder.Ladder`` is all of it in one object.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import IntegrityError

from policybox.envs import split_env
from policybox.episode import EpisodeSettings, check_shorthands
from policybox.league import store, versions
from policybox.league.database import (
    SCHEMA_VERSION,
    LadderError,
    connect,
    create,
    dispose,
    open_schema,
    schema_version,
    transaction,
)
from policybox.league.ranking import RankBy
from policybox.league.tournament import Seating
from policybox.spec import PolicySpec, SpecError, parse_policy_arg
from policybox.storage import write_atomically, writing
from policybox.submission import private_folder

FOLDER_FILE = "ladder.json"
SQLITE_FILE = "ladder.db"
REPLAYS = "replays"  # the folder of the matches' replays, match-000001.json.z, when the ladder writes them
LOCK_FILE = "run.lock"


class LadderSettings(BaseModel):
    """How a ladder plays: stored in its database when it is made, the same for every match."""

    model_config = ConfigDict(extra="forbid")

    settings: EpisodeSettings = Field(description="How every match is played; each match's seed derives from its seed")
    agents: int = Field(ge=1, le=1024, description="Seats of every match")
    seating: Seating = Field(default="rotate", description="How the chosen versions share the seats")
    versions_per_match: int = Field(default=2, ge=2, description="Different versions in a match (at most the seats)")
    placement_matches: int = Field(default=5, ge=0, description="Matches a new version plays before the others pick")
    suspend_after: int = Field(
        default=5, ge=1, description="Consecutive matches with a failed agent (error, crashed, disabled) that suspend"
    )
    setup_timeout_s: float = Field(default=300.0, gt=0, description="How long a version's setup script may run")
    rank_by: RankBy = Field(default="forfeit", description="The ranking rule (policybox.league.ranking)")
    replays: bool = Field(
        default=False, description="Write each match's MettaGrid replay to DIR/replays/ (a MettaGrid game, played here)"
    )


class Ladder:
    """An open ladder: its folder, its settings and its database."""

    def __init__(self, folder: Path, settings: LadderSettings, database_url: str, engine: Any) -> None:
        self.folder, self.settings, self.database_url, self.engine = folder, settings, database_url, engine

    @classmethod
    def create(cls, folder: str | Path, settings: LadderSettings, database: str | None = None) -> Ladder:
        """Make a ladder in ``folder`` (new or empty), its database SQLite in the folder or ``database``
        (a PostgreSQL URL, whose database must be empty)."""
        folder = Path(folder).absolute()  # the versions' specs name their files by absolute paths
        if settings.replays and split_env(settings.settings.env)[0] != "mettagrid":
            raise LadderError("--replays: replays are MettaGrid's format; a PettingZoo game cannot write one")
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise LadderError(f"{folder} is not an empty folder: a new ladder needs a folder of its own")
        with writing(folder, "creating"):
            folder.mkdir(parents=True, exist_ok=True)
        url = database or f"sqlite:///{(folder / SQLITE_FILE).absolute()}"
        ladder_id = uuid.uuid4().hex
        engine = connect(url)
        create(engine, ladder_id, settings.model_dump(mode="json"))
        write_atomically(folder / FOLDER_FILE, json.dumps({"ladder_id": ladder_id, "database": database}, indent=2))
        (folder / FOLDER_FILE).chmod(0o600)
        return cls(folder, settings, url, engine)

    @classmethod
    def open(cls, folder: str | Path, read_only: bool = False) -> Ladder:
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

    def __enter__(self) -> Ladder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -----------------------------------------------------------------------------------------
    # Submissions

    def submit(self, name: str, source: str, base_dir: Path | None = None, team: str | None = None) -> store.Version:
        """``source`` (any -p form) as the next version of ``name``, queued for qualification. Its files
        are copied into the ladder first; the same content as the name's latest version is refused.
        A new version of a retired name brings the name back. With ``team`` (a submission over the web
        page), the name must be new -- it becomes the team's -- or the team's own."""
        versions.check_name(name)
        if team is not None:  # refused before any file is copied; checked again when it is stored
            with transaction(self.engine) as connection:
                _check_owner(connection, name, team)
        check_shorthands([parse_policy_arg(source, base_dir)], self.settings.settings)  # before anything is copied
        kept = versions.store(source, private_folder(self.folder / "versions", LadderError), base_dir)
        try:
            return self._add(name, source, kept, team)
        except IntegrityError:  # another submission of this name was stored at the same moment
            raise SpecError(f"another submission of {name} arrived at the same moment: submit again") from None

    def _add(self, name: str, source: str, kept: versions.Stored, team: str | None) -> store.Version:
        """Store the version -- checking again, inside the transaction, who owns the name."""
        with transaction(self.engine) as connection:
            if team is not None:
                _check_owner(connection, name, team)
            latest = store.latest_version(connection, name)
            if latest is not None and latest.digest == kept.digest:
                raise SpecError(f"{source} holds the same content as {latest.label}: there is nothing new to submit")
            version = store.add_version(
                connection, name, kept.digest, kept.spec.redacted().model_dump(mode="json"), _shown(source)
            )
            self.keep(version.id, kept)
            store.set_retired(connection, name, False)
            if team is not None and version.number == 1:
                store.claim(connection, name, team)
        return version

    def keep(self, version_id: int, kept: versions.Stored) -> None:
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

    def stored(self, version_id: int) -> versions.Stored:
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
        return versions.Stored(PolicySpec.model_validate(record["spec"]), record["digest"], files)

    def token(self, team: str) -> str:
        """A new token with which ``team`` submits over the web page (its first submission of a name
        makes the team that name's owner)."""
        versions.check_name(team)
        with transaction(self.engine) as connection:
            return store.new_token(connection, team)

    def team_of(self, token: str) -> str | None:
        with transaction(self.engine) as connection:
            return store.team_of(connection, token)

    def owner_of(self, name: str) -> str | None:
        with transaction(self.engine) as connection:
            return store.owner_of(connection, name)

    def names_of(self, team: str) -> set[str]:
        """The names ``team`` owns (those whose first version it submitted)."""
        with transaction(self.engine) as connection:
            return store.names_of(connection, team)

    def retire(self, name: str) -> None:
        """Take ``name`` out of matchmaking; its history and ratings stay."""
        with transaction(self.engine) as connection:
            self._known(connection, name)
            store.set_retired(connection, name, True)

    def reinstate(self, name: str) -> store.Version:
        """Lift the suspension of ``name``'s current version (and a retirement): it plays again."""
        with transaction(self.engine) as connection:
            self._known(connection, name)
            current = store.current_versions(connection).get(name)
            if current is None or current.state != "suspended":
                raise SpecError(f"{name} has no suspended version to reinstate")
            store.set_state(connection, current.id, "active", None)
            store.reset_streak(connection, current.id)
            store.set_retired(connection, name, False)
            return store.version_by_id(connection, current.id)

    def _known(self, connection: Any, name: str) -> None:
        if store.name_row(connection, name) is None:
            raise SpecError(f"this ladder has no submission called {name!r}")

    # -----------------------------------------------------------------------------------------
    # The one runner

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Hold the ladder's run lock: one ``ladder run`` at a time. The kernel releases it when the
        process dies, however it dies, so a killed run never blocks the next."""
        with writing(self.folder / LOCK_FILE, "creating"):
            handle = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(handle, 32, 0).decode(errors="replace").strip() or "another process"
                raise LadderError(
                    f"{self.folder} is being run already (by pid {holder}): one ladder run at a time"
                ) from None
            os.ftruncate(handle, 0)
            os.pwrite(handle, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.close(handle)  # closing it releases the lock

    # -----------------------------------------------------------------------------------------
    # Audit

    def rerate(self) -> list[tuple[store.Version, tuple[float, float] | None, tuple[float, float] | None]]:
        """Every rating recomputed from the stored matches; each version whose live rating differs, with
        both (none, when the ladder's live ratings are a replay of its results, as they must be)."""
        with transaction(self.engine) as connection:
            replayed = store.replayed_ratings(connection, self.settings.rank_by)
            live = store.live_ratings(connection)
            return [
                (store.version_by_id(connection, version_id), live.get(version_id), replayed.get(version_id))
                for version_id in sorted(set(live) | set(replayed))
                if live.get(version_id) != replayed.get(version_id)
            ]


class NotOwner(SpecError):
    """A team submitted a name that another team (or the organiser) owns."""


def _check_owner(connection: Any, name: str, team: str) -> None:
    """A team submits only a new name (it becomes the team's) or a name it owns."""
    if store.name_row(connection, name) is not None and store.owner_of(connection, name) != team:
        raise NotOwner(f"{name} belongs to another team (or to the organiser): choose another name")


def _shown(source: str) -> str:
    """What was submitted, as results may show it: an inline ``env.NAME=value`` masked."""
    parts = source.split(",")
    return ",".join(part.split("=", 1)[0] + "=***" if part.strip().startswith("env.") else part for part in parts)
