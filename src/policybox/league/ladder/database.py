"""A ladder's database, opened and used: its engines, its transactions and reads, and the errors a
user meets, for SQLite and PostgreSQL alike. Its tables are ``schema``; its versions, ``migrations``.

SQLite, in the ladder's folder, is the default: opened in WAL mode, so the one writer (``ladder run``)
and any number of readers (``ladder status``, the web page) never block each other. A PostgreSQL
server (``--db postgresql://...``) takes the same schema for a ladder run on a cluster.

Errors a user meets -- a server that does not answer, a database that is not a ladder's -- are
``LadderError`` with one clear message; a full disk is ``policybox.storage.StorageFull``.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, CursorResult, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from policybox.errors import PolicyboxError, install_command
from policybox.lines import first_line
from policybox.storage import Resource, StorageFull, what_ran_out

CONNECT_TIMEOUT_S = 5
SHM_REGION = 32768  # SQLite's -shm file grows in regions of this size


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


def new_id(inserted: CursorResult[Any]) -> int:
    """The id of the row an insert made."""
    key = inserted.inserted_primary_key
    assert key is not None  # every table's insert here has an integer primary key
    return int(key[0])


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
