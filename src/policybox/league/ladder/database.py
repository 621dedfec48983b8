"""A ladder's database: one schema for SQLite and PostgreSQL (SQLAlchemy Core), versioned and migrated.

SQLite, in the ladder's folder, is the default: opened in WAL mode, so the one writer (``ladder run``)
and any number of readers (``ladder status``, the web page) never block each other. A PostgreSQL
server (``--db postgresql://...``) takes the same schema for a ladder run on a cluster.

**Versions.** The schema's version is a row of ``meta``. Opening a database applies the migrations it
lacks, in one transaction, so a database of an older policybox is brought up to date, never misread;
one from a newer policybox is refused, naming both versions. A migration is a plain function here
rather than an Alembic script: the schema is small and made by code, a ladder's database is embedded
in its folder, and a list of functions keyed by version is what Alembic's runtime would reduce to,
without its ini file, environment script and revision files to ship and keep apart from the code.

**Who writes what.** Each table has one module that writes it (and holds the reads the run loop,
submissions and tokens make of it): ``names``, ``versions`` and ``qualifications``
``version_store``; ``matches``, ``match_seats``, ``seat_counts`` and ``ratings`` ``match_store``;
``teams``, ``tokens``, ``token_uses``, ``sessions`` and ``owners`` ``team_store``; ``scrimmages``
``scrimmage_store``; ``finals`` and ``final_matches`` ``final_store``; ``meta`` this module (its
schema version, the ladder's id and settings) but for the run's heartbeat (``heartbeat``). What
the views read is ``reads``.

**Whose database.** ``meta`` also holds the ladder's id; a folder's ``ladder.json`` names the id it
expects, so a folder pointed at another ladder's database is refused.

**Text a policy controls** -- its exception messages, tracebacks, log tails, setup output, the
rejection and suspension reasons quoting them, results, specs -- goes through ``PolicyText`` and
``PolicyJSON`` columns, which make every string storable on both databases (``storable``).

Errors a user meets -- a server that does not answer, a database that is not a ladder's -- are
``LadderError`` with one clear message; a full disk is ``policybox.storage.StorageFull``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Connection,
    CursorResult,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    create_engine,
    event,
    inspect,
    select,
)
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from policybox.errors import PolicyboxError, install_command
from policybox.lines import first_line
from policybox.storage import Resource, StorageFull, what_ran_out

SCHEMA_VERSION_KEY = "schema_version"
LADDER_ID_KEY = "ladder_id"
CONNECT_TIMEOUT_S = 5
SHM_REGION = 32768  # SQLite's -shm file grows in regions of this size
MAX_TEXT = 1 << 20  # characters of one stored string: what policybox writes is far shorter; a policy's is cut


class MatchState(StrEnum):
    """A match's state: a rated one's (``matches.state``) or a final's (``final_matches.state``)."""

    SCHEDULED = "scheduled"  # stored with its seed and seats, not played yet: a killed run plays it again
    PLAYED = "played"
    VOID = "void"  # the machinery failed it every time: it counts for nobody


class FinalStage(StrEnum):
    """A final's life (``finals.state``): ``ladder run`` waits while one is open."""

    OPEN = "open"  # being played, or stopped before its end: ``ladder final`` continues it
    DONE = "done"


class LadderError(PolicyboxError):
    """A ladder's folder or database the user pointed at cannot be used; the message says why."""


class FilesChanged(LadderError):
    """A SQLite database's files were made unwritable or removed under this process (``check_files``).

    Its engine is then never closed: closing a SQLite connection writes to the ``-shm`` file's memory
    map, which now kills the process with SIGBUS. A command that meets it ends at once (``os._exit``),
    so that nor does the interpreter's exit close them."""

    end_at_once = True  # read by the CLI (policybox.cli.common.guarded)


_UNSAFE: set[str] = set()  # the SQLite databases whose files changed under this process


def dispose(engine: Engine) -> None:
    """Close an engine's connections -- unless its database's files changed under it (FilesChanged)."""
    if engine.url.database is None or engine.url.database.split("?")[0].removeprefix("file:") not in _UNSAFE:
        engine.dispose()


def now() -> str:
    """The time now as every table stores it: ISO UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_id(inserted: CursorResult[Any]) -> int:
    """The id of the row an insert made."""
    key = inserted.inserted_primary_key
    assert key is not None  # every table's insert here has an integer primary key
    return int(key[0])


def storable(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` as every database can store it: a NUL (which PostgreSQL's text cannot hold) becomes the
    visible escape ``\\x00``, a lone surrogate (which no UTF-8 encoder writes) its escape ``\\udcff``,
    and text past ``limit`` characters is cut, saying so. Any other text is stored exactly."""
    text = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - len(_CUT)] + _CUT


_CUT = " [cut: too long to store]"


def _storable_json(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(key)): _storable_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_storable_json(item) for item in value]
    return value


class PolicyText(TypeDecorator[str]):
    """A text column that may hold what a policy controls: each value made ``storable`` on its way in
    (its length kept within the column's, when it has one)."""

    impl = Text
    cache_ok = True

    def __init__(self, length: int | None = None) -> None:
        super().__init__()
        self.length = length
        self.impl = String(length) if length else Text()  # type: ignore[assignment]  # the stub types impl as the class, Text; SQLAlchemy takes an instance of any String

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return None if value is None else storable(value, self.length or MAX_TEXT)


class PolicyJSON(TypeDecorator[Any]):
    """A JSON column that may hold what a policy controls: every string in it (keys too) ``storable``."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return _storable_json(value)


metadata = MetaData()

meta = Table("meta", metadata, Column("key", String(64), primary_key=True), Column("value", Text, nullable=False))

names = Table(
    "names",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(40), nullable=False, unique=True),
    Column("retired", Boolean, nullable=False, default=False),
    Column("created_at", String(32), nullable=False),
)

versions = Table(
    "versions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name_id", ForeignKey("names.id"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("digest", String(64), nullable=False),  # of what was submitted (policybox.files.version_files)
    # Of what it plays with, once qualified: its files, its setup script's output, its environment's lock.
    Column("played_digest", String(64)),
    Column("spec", PolicyJSON, nullable=False),  # its PolicySpec, env values masked (cells get versions/specs/ID.json)
    Column("source", PolicyText, nullable=False),  # what was submitted, as given (env values masked)
    Column("state", String(16), nullable=False),  # policybox.league.ladder.life.VersionState
    Column("reason", PolicyText),  # why it is rejected or suspended
    Column("submitted_at", String(32), nullable=False),
    Column("qualified_at", String(32)),
    Column("activated_after", Integer),  # the last match stored before it became active (rerate replays it there)
    Column("mu", Float),
    Column("sigma", Float),
    Column("matches", Integer, nullable=False, default=0),
    Column("last_match", Integer),  # the id of the last match it played
    Column("failing_streak", Integer, nullable=False, default=0),  # consecutive matches with a terminal failure
    Column("void_streak", Integer, nullable=False, default=0),  # consecutive matches of it that were void
    Column("forfeits", Integer, nullable=False, default=0),
    Column("score_sum", Float, nullable=False, default=0.0),  # of its episode scores: the reward's moments
    Column("score_squares", Float, nullable=False, default=0.0),
    Column("statuses", JSON, nullable=False, default=dict),  # its agent results per status
    Column("timeouts", Integer, nullable=False, default=0),
    Column("invalid_actions", Integer, nullable=False, default=0),
    UniqueConstraint("name_id", "number"),
)

qualifications = Table(
    "qualifications",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("version_id", ForeignKey("versions.id"), nullable=False),
    Column("outcome", String(16), nullable=False),  # qualified | rejected
    Column("reason", PolicyText),
    Column("setup_output", PolicyText),
    Column("result", PolicyJSON),  # its validation episode's EpisodeResult, if it got that far
    Column("finished_at", String(32), nullable=False),
)

matches = Table(
    "matches",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("seed", Integer, nullable=False),
    Column("state", String(16), nullable=False),  # MatchState
    Column("scheduled_at", String(32), nullable=False),
    Column("played_at", String(32)),
    Column("reason", PolicyText),  # why a match is void (the machinery failed it every time)
    Column("result", PolicyJSON),  # its EpisodeResult (secrets masked)
    Column("stamp", JSON),  # what it was played with (policybox.league.ladder.stamp); None before schema version 5
)

match_seats = Table(
    "match_seats",
    metadata,
    Column("match_id", ForeignKey("matches.id"), primary_key=True),
    Column("seat", Integer, primary_key=True),
    Column("version_id", ForeignKey("versions.id"), nullable=False),
    Column("reward", Float),
    Column("status", String(16)),
    Column("failure_kind", PolicyText(200)),
    Column("failure_step", Integer),
    Column("failure_message", PolicyText),
    Column("log_tail", PolicyText),  # the team's own: never shown to another
    Column("timeouts", Integer),
    Column("invalid_actions", Integer),
    Column("p50_ms", Float),
    Column("p99_ms", Float),
)

ratings = Table(
    "ratings",
    metadata,
    Column("match_id", ForeignKey("matches.id"), primary_key=True),
    Column("version_id", ForeignKey("versions.id"), primary_key=True),
    Column("mu", Float, nullable=False),
    Column("sigma", Float, nullable=False),
    Column("score", Float, nullable=False),  # its episode score in that match
    Column("forfeited", Boolean, nullable=False),
)

seat_counts = Table(
    "seat_counts",
    metadata,
    Column("version_id", ForeignKey("versions.id"), primary_key=True),
    Column("seat", Integer, primary_key=True),
    Column("plays", Integer, nullable=False),
)

Index("match_seats_by_version", match_seats.c.version_id, match_seats.c.match_id)
Index("matches_by_state", matches.c.state, matches.c.id)
Index("ratings_by_version", ratings.c.version_id, ratings.c.match_id)
V1_TABLES = [meta, names, versions, qualifications, matches, match_seats, ratings, seat_counts]

# Schema version 2: teams, which submit over the web page with a token, and own the names they submit.
teams = Table(
    "teams",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(40), nullable=False, unique=True),
    Column("created_at", String(32), nullable=False),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("team_id", ForeignKey("teams.id"), nullable=False),
    Column("digest", String(64), nullable=False, unique=True),  # sha256 of the token: the token itself is never kept
    Column("created_at", String(32), nullable=False),
)

owners = Table(
    "owners",
    metadata,
    Column("name_id", ForeignKey("names.id"), primary_key=True),
    Column("team_id", ForeignKey("teams.id"), nullable=False),
)
V2_TABLES = [teams, tokens, owners]


# Schema version 3: tokens that can be revoked. A login cookie names a session (made at login, ended
# at logout or when its token is revoked), never the token; ``ladder serve`` notes when each token and
# session was last used. Both tables are the web page's to write; ``tokens`` stays the organiser's.
token_uses = Table(
    "token_uses",
    metadata,
    Column("token_id", ForeignKey("tokens.id"), primary_key=True),
    Column("last_used", String(32), nullable=False),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("digest", String(64), nullable=False, unique=True),  # sha256 of the cookie's session id, never the id
    Column("token_id", ForeignKey("tokens.id"), nullable=False),  # the token it logged in with
    Column("created_at", String(32), nullable=False),
    Column("last_seen", String(32), nullable=False),
)
V3_TABLES = [token_uses, sessions]


# Schema version 6: finals (``ladder final``). A final freezes the field -- the playing version of
# every ranked name when it opens -- and plays the balanced schedule over it; its matches are its
# own (never rated, never in ``matches``), each stored before it is played (so a killed final plays
# it again) with its placing once played. While a final is ``open``, ``ladder run`` waits.
finals = Table(
    "finals",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("created_at", String(32), nullable=False),
    Column("state", String(16), nullable=False),  # FinalStage
    Column("version_ids", JSON, nullable=False),  # the frozen field
    Column("rounds", Integer, nullable=False),  # whole cycles of the balanced schedule (seating.cycle)
    Column("seed", Integer, nullable=False),
)

final_matches = Table(
    "final_matches",
    metadata,
    Column("final_id", ForeignKey("finals.id"), primary_key=True),
    Column("number", Integer, primary_key=True),  # its place in the final's schedule, then the separating matches
    Column("seed", Integer, nullable=False),
    Column("seats", JSON, nullable=False),  # the version id in each seat
    Column("state", String(16), nullable=False),  # MatchState
    Column("reason", PolicyText),  # why it is void
    Column("placing", JSON),  # groups of names, best first (a group: a shared place)
    Column("result", PolicyJSON),  # its EpisodeResult (secrets masked)
    Column("played_at", String(32)),
    Column("stamp", JSON),  # what it was played with (policybox.league.ladder.stamp), as a rated match's
)
FINALS_TABLES = [finals, final_matches]

# Schema version 8: scrimmages. A team asks for unrated matches of one of its names against a name it
# chooses (``policybox.league.ladder.scrimmage``); each is stored when asked for, with its seed and
# seats (so a killed run plays it again), then played by ``ladder run`` beside the rated matches. It
# is never rated and never counted on the board: its own table, apart from ``matches``.
scrimmages = Table(
    "scrimmages",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("team_id", ForeignKey("teams.id"), nullable=False),  # who asked (its hourly cap counts these)
    Column("version_id", ForeignKey("versions.id"), nullable=False),  # the asking team's version
    Column("opponent_id", ForeignKey("versions.id"), nullable=False),  # the version it chose to meet
    Column("requested_at", String(32), nullable=False),
    Column("seed", Integer, nullable=False),
    Column("seats", JSON, nullable=False),  # the version id in each seat
    Column("state", String(16), nullable=False),  # MatchState
    Column("reason", PolicyText),  # why it is void
    Column("result", PolicyJSON),  # its EpisodeResult (secrets masked)
    Column("played_at", String(32)),
)
Index("scrimmages_by_team", scrimmages.c.team_id, scrimmages.c.requested_at)
Index("scrimmages_by_state", scrimmages.c.state, scrimmages.c.id)


def _create_v1(connection: Connection) -> None:
    metadata.create_all(connection, tables=V1_TABLES)


def _add_teams_v2(connection: Connection) -> None:
    metadata.create_all(connection, tables=V2_TABLES)


def _add_sessions_v3(connection: Connection) -> None:
    metadata.create_all(connection, tables=V3_TABLES)


def _supersede_v4(connection: Connection) -> None:
    """Schema version 4: a version replaced by a newer qualified version of its name is ``superseded``
    (before, it stayed ``active`` or ``suspended``, though only the newest played)."""
    later = versions.alias("later")
    newer = (
        select(later.c.id)
        .where(
            later.c.name_id == versions.c.name_id,
            later.c.number > versions.c.number,
            later.c.state.in_(["active", "suspended"]),
        )
        .exists()
    )
    connection.execute(
        versions.update().where(versions.c.state.in_(["active", "suspended"]), newer).values(state="superseded")
    )


def _add_stamp_v5(connection: Connection) -> None:
    """Schema version 5: each match's ``stamp``. A database made since has it from ``_create_v1``
    (which makes ``matches`` as it is now); an older one gets the column, its matches none."""
    if "stamp" not in {column["name"] for column in inspect(connection).get_columns("matches")}:
        kind = JSON().compile(dialect=connection.dialect)
        connection.exec_driver_sql(f"ALTER TABLE matches ADD COLUMN stamp {kind}")


def _add_finals_v6(connection: Connection) -> None:
    """Schema version 6: the finals (``ladder final``) and their matches, never rated."""
    metadata.create_all(connection, tables=FINALS_TABLES)


def _add_streaks_v7(connection: Connection) -> None:
    """Schema version 7: each version's ``void_streak`` (a version whose matches keep voiding is
    suspended) and ``played_digest`` (what a stamp compares). A database made since has them from
    ``_create_v1``; an older one gets them, every version's void streak 0 and no played digest (its
    stamps fall back to the submitted digest)."""
    have = {column["name"] for column in inspect(connection).get_columns("versions")}
    if "void_streak" not in have:
        connection.exec_driver_sql("ALTER TABLE versions ADD COLUMN void_streak INTEGER NOT NULL DEFAULT 0")
    if "played_digest" not in have:
        connection.exec_driver_sql("ALTER TABLE versions ADD COLUMN played_digest VARCHAR(64)")


def _add_scrimmages_v8(connection: Connection) -> None:
    """Schema version 8: scrimmages, a team's unrated matches against a name it chooses."""
    metadata.create_all(connection, tables=[scrimmages])


# MIGRATIONS[n] brings a database from schema version n to n + 1. A migration never changes: a new
# schema is a new function appended here (and a test that opens a database of the version before).
MIGRATIONS: list[Callable[[Connection], None]] = [
    _create_v1,
    _add_teams_v2,
    _add_sessions_v3,
    _supersede_v4,
    _add_stamp_v5,
    _add_finals_v6,
    _add_streaks_v7,
    _add_scrimmages_v8,
]
SCHEMA_VERSION = len(MIGRATIONS)


def connect(url: str, read_only: bool = False) -> Engine:
    """An engine for ``url`` (``sqlite:///PATH`` or ``postgresql+psycopg://...``). SQLite gets WAL and a
    busy timeout, so that readers and the one writer never wait on each other for long; a read-only
    SQLite engine cannot write even by mistake. A PostgreSQL URL without its driver installed is a
    ``LadderError`` saying how to install it."""
    if url.startswith("sqlite:"):
        path = url.split("///", 1)[1]
        target = f"sqlite:///file:{path}?mode=ro&uri=true" if read_only else url
        # Transactions are begun here, not by the driver, so that a writer's is BEGIN IMMEDIATE: it
        # takes the write lock at once, and two writers queue instead of failing on a stale read.
        engine = create_engine(target, connect_args={"timeout": 30, "isolation_level": None})
        event.listen(engine, "connect", _sqlite_pragmas)

        def check(*_: Any) -> None:
            check_files(path, read_only)

        event.listen(
            engine, "begin", lambda connection: connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")
        )
        for before_it_writes in ("begin", "before_cursor_execute", "commit"):  # SQLite writes its -shm map at each
            event.listen(engine, before_it_writes, check, insert=True)
        return engine
    url = url.replace("postgresql://", "postgresql+psycopg://", 1) if url.startswith("postgresql://") else url
    try:  # SQLAlchemy imports the driver here, before any connection
        return create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT_S})
    except ImportError as exc:
        raise LadderError(
            f"a PostgreSQL database needs its driver, which cannot be imported here ({exc}): install it with "
            f"{install_command('postgresql')}"
        ) from None


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA mmap_size=0")  # the database file is read, never mapped (see check_files)
    cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the writer, nor it them
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=FULL")  # a stored match survives a power cut, as the journal does
    cursor.close()


def check_files(database: str, read_only: bool = False) -> None:
    """Before each transaction, that a SQLite database's files are still there and writable -- by
    their path, as the next process would find them.

    SQLite maps the WAL's index (the ``-shm`` file) into memory in every process that uses the
    database, writers and readers alike, and writes to it there. A process whose mapped page can no
    longer be written -- the file made immutable (``chattr +i``), its filesystem gone read-only or
    shut down, the file truncated -- is killed by SIGBUS at that write, with no message. No SQLite
    setting avoids the mapping but exclusive locking, which would lock every reader out while
    ``ladder run`` runs; ``PRAGMA mmap_size=0`` keeps the database file itself unmapped (a Python
    build may map it by default). So each transaction, statement and commit is run only after each
    file is found writable (``stat`` and ``access``, microseconds; never ``open``: closing a file
    would drop every POSIX lock SQLite holds on it in this process): a file that is not is one
    FilesChanged naming it, and the command ends there (exit 2) before SQLite touches the mapping.
    (A change in the microseconds between the check and SQLite's write can still kill the process:
    only the ladder's owner, root, can make one, its folder being 0700.) A reader checks the ``-shm``
    file (it writes there too) and reads the others."""
    for suffix in ("", "-wal", "-shm"):
        path = database + suffix
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            if not suffix:  # the side files are made by SQLite when it first opens the database
                _UNSAFE.add(database)
                raise FilesChanged(
                    f"the ladder's database {path} is gone (moved or removed while in use): put it back "
                    "where it was, then run the command again"
                ) from None
            continue
        if not os.access(path, os.R_OK if read_only and suffix != "-shm" else os.R_OK | os.W_OK):
            _UNSAFE.add(database)
            raise FilesChanged(
                f"the ladder's database {path} cannot be written (read-only, immutable or not permitted): make "
                "it writable again (chattr -i, chmod u+rw, a read-write mount), then run the command again"
            )
        if suffix == "-shm" and size < SHM_REGION:  # SQLite's own is never shorter while in use
            _UNSAFE.add(database)
            raise FilesChanged(
                f"the ladder's database file {path} was truncated by another process while in use: stop every "
                "ladder command using it, then run the command again"
            )


def create(engine: Engine, ladder_id: str, settings: dict[str, Any]) -> None:
    """Make a new ladder's schema in an empty database, with its id and settings."""
    with transaction(engine) as connection:
        if _tables(connection):
            raise LadderError(f"{shown(engine)} is not empty: a new ladder needs an empty database")
        for migrate in MIGRATIONS:
            migrate(connection)
        connection.execute(
            meta.insert(),
            [
                {"key": SCHEMA_VERSION_KEY, "value": str(SCHEMA_VERSION)},
                {"key": LADDER_ID_KEY, "value": ladder_id},
                {"key": "settings", "value": json.dumps(settings)},
            ],
        )


def schema_version(engine: Engine) -> int:
    """The schema version a ladder's database holds (0: no ladder's)."""
    with transaction(engine) as connection:
        if "meta" not in _tables(connection):
            return 0
        found = connection.execute(select(meta.c.value).where(meta.c.key == SCHEMA_VERSION_KEY)).scalar()
        return int(found or 0)


def open_schema(engine: Engine, ladder_id: str) -> dict[str, Any]:
    """Check that the database is this ladder's and bring its schema up to date; the ladder's settings."""
    with transaction(engine) as connection:
        if "meta" not in _tables(connection):
            raise LadderError(f"{shown(engine)} holds no ladder")
        values = dict(connection.execute(select(meta.c.key, meta.c.value)).all())
        if values.get(LADDER_ID_KEY) != ladder_id:
            raise LadderError(f"{shown(engine)} is the database of another ladder (id {values.get(LADDER_ID_KEY)})")
        found = int(values.get(SCHEMA_VERSION_KEY, "0"))
        if found > SCHEMA_VERSION:
            raise LadderError(
                f"{shown(engine)} has schema version {found}, made by a newer policybox; this one knows "
                f"versions up to {SCHEMA_VERSION}: upgrade policybox to use it"
            )
        for migrate in MIGRATIONS[found:]:
            migrate(connection)
        if found < SCHEMA_VERSION:
            connection.execute(meta.update().where(meta.c.key == SCHEMA_VERSION_KEY).values(value=str(SCHEMA_VERSION)))
        settings: dict[str, Any] = json.loads(values["settings"])
        return settings


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


@contextlib.contextmanager
def transaction(engine: Engine) -> Iterator[Connection]:
    """One transaction: committed whole, or rolled back whole. A server that cannot be reached is a
    LadderError; a full disk is StorageFull (the transaction rolled back, the database intact)."""
    with _translated(engine), engine.begin() as connection:
        yield connection


@contextlib.contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """One connection for reads (what the views show: ``policybox.league.ladder.reads``), never committed,
    its errors translated as ``transaction``'s are: a database that cannot be used is one LadderError."""
    with _translated(engine), engine.connect() as connection:
        yield connection


@contextlib.contextmanager
def _translated(engine: Engine) -> Iterator[None]:
    """The database's errors a user meets, as policybox's: a LadderError or StorageFull."""
    try:
        yield
    except OperationalError as exc:
        raise _user_error(engine, exc) from None
    except DBAPIError as exc:
        if _is_disk_full(exc):
            raise _full(engine) from None
        raise


def _user_error(engine: Engine, exc: OperationalError) -> PolicyboxError:
    if _is_disk_full(exc):
        return _full(engine)
    reason = first_line(str(exc.orig).strip()) if exc.orig is not None else str(exc)
    return LadderError(f"the ladder's database {shown(engine)} cannot be used: {reason}")


def _is_disk_full(exc: SQLAlchemyError) -> bool:
    """SQLite's ``database or disk is full`` (SQLITE_FULL), PostgreSQL's DiskFull (SQLSTATE 53100)."""
    orig = getattr(exc, "orig", None)
    return "database or disk is full" in str(orig) or getattr(orig, "sqlstate", None) == "53100"


def _full(engine: Engine) -> StorageFull:
    """SQLite: the database file's own disk (space or inodes); a server's: its space."""
    if engine.url.get_backend_name() == "sqlite":
        where = Path(engine.url.database or ".").absolute()
        resource = what_ran_out(errno.ENOSPC, where)
    else:
        where, resource = Path(shown(engine)), Resource.SPACE
    full = StorageFull(where, resource, "writing")
    return full.with_outcome("the transaction was rolled back: the ladder is as it was", "run the same command")


def shown(engine: Engine) -> str:
    """The database as a message names it: its URL without a password."""
    return engine.url.render_as_string(hide_password=True)
