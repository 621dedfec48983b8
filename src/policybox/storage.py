"""A full disk: a write that fails for want of room becomes one ``StorageFull`` naming the folder and what ran out.

Every file policybox writes for its user -- an evaluation's results, tournament and summary, the
result of ``run --out``, replays, agents' logs and their folders -- is written inside ``writing``,
which turns the errors of a full filesystem into ``StorageFull``: ENOSPC, for want of bytes or of
inodes (told apart with ``statvfs``), and EDQUOT. Other errors pass through unchanged. Whoever
stops on it adds what is kept and how to go on (``with_outcome``); the CLI shows its message and
exits 1 (not 2: it is no mistake of the user's, and nothing written is lost).

A later database write (the ladder's SQLAlchemy engine) reports the same error in its own words:
SQLite's ``OperationalError: database or disk is full`` (SQLITE_FULL), PostgreSQL's ``DiskFull``
(SQLSTATE 53100), both raised as ``sqlalchemy.exc.OperationalError``. The ladder's transaction
helper catches those (by ``exc.orig``: the sqlite3 message, or psycopg's ``errors.DiskFull``) and
raises ``StorageFull(database_file, what_ran_out(errno.ENOSPC, database_file))`` (a server's own
disk: ``Resource.SPACE``) with ``with_outcome`` saying the transaction was rolled back, so the CLI
needs nothing new.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

from policybox.errors import PolicyboxError

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class Resource(StrEnum):
    """What a full filesystem ran out of."""

    SPACE = "space"
    INODES = "inodes"
    QUOTA = "quota"


PROBLEM = {
    Resource.SPACE: "no space left on the filesystem of {folder}",
    Resource.INODES: "no inodes left on the filesystem of {folder}",
    Resource.QUOTA: "the disk quota is used up on the filesystem of {folder}",
}
REMEDY = {
    Resource.SPACE: "free space",
    Resource.INODES: "delete files to free inodes",
    Resource.QUOTA: "free space within the quota",
}


class StorageFull(PolicyboxError):
    """A file could not be written: its filesystem has no space or inodes left, or a quota is used up.

    ``path`` is the file (or folder) being written; the message names ``folder`` (by default its
    parent) and the file within it, what ran out, what is kept and what to do. ``result`` holds the
    finished work the write was to save, when there is some (``run_episode``: the result of an
    episode whose replay could not be written)."""

    def __init__(self, path: Path, resource: Resource, action: str = "writing") -> None:
        super().__init__(path, resource, action)  # as the args, so that it pickles (worker to driver)
        self.path, self.resource, self.action = path, resource, action
        self.folder = path.parent
        self.kept: str | None = None
        self.retry = "run again"
        self.result: Any = None

    def with_outcome(self, kept: str, retry: str, folder: Path | None = None) -> StorageFull:
        """The same error, saying what is kept and what to do next (``retry``), and naming ``folder``
        (the results folder, say) when the file is in it."""
        told = StorageFull(self.path, self.resource, self.action)
        told.folder = folder if folder is not None and self.path.is_relative_to(folder) else self.folder
        told.kept, told.retry, told.result = kept, retry, self.result
        return told

    @property
    def problem(self) -> str:
        """What ran out where, in a few words: ``no space left on the filesystem of board/``."""
        return PROBLEM[self.resource].format(folder=f"{self.folder}/")

    def __str__(self) -> str:
        shown = self.path.relative_to(self.folder) if self.path.is_relative_to(self.folder) else self.path
        head = f"{self.problem} ({self.action} {shown})"
        if self.kept:
            head += f": {self.kept}"
        return f"{head}; {REMEDY[self.resource]} and {self.retry}"


def what_ran_out(error_number: int, path: Path) -> Resource:
    """Which resource an ENOSPC or EDQUOT while writing ``path`` ran out of: a quota, the
    filesystem's inodes (when ``statvfs`` shows none left to use), or else its space."""
    if error_number == errno.EDQUOT:
        return Resource.QUOTA
    existing = next((p for p in (path, *path.absolute().parents) if p.exists()), Path("/"))
    try:
        stats = os.statvfs(existing)
    except OSError:
        return Resource.SPACE
    # f_files is 0 where a filesystem has no fixed number of inodes (btrfs): then it was bytes.
    return Resource.INODES if stats.f_files and stats.f_favail == 0 else Resource.SPACE


def full_error(exc: OSError, path: Path, action: str = "writing") -> StorageFull | None:
    """``exc`` as a StorageFull when it says the filesystem of ``path`` is full; None otherwise."""
    if exc.errno not in FULL_ERRNOS:
        return None
    return StorageFull(path, what_ran_out(exc.errno, path), action)


@contextlib.contextmanager
def writing(path: Path, action: str = "writing") -> Iterator[None]:
    """Raise StorageFull for a full filesystem met inside this block, which writes ``path``
    (``action``: "writing", or "creating" for a folder)."""
    try:
        yield
    except OSError as exc:
        full = full_error(exc, path, action)
        if full is None:
            raise
        raise full from exc


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, however many short writes that takes (a filling disk takes
    what fits, then refuses the rest with ENOSPC)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` via a temporary file and a rename, so a reader never sees
    half a file. On a full disk: StorageFull, with ``path`` as it was and no temporary file left."""
    with writing(path):
        fd, tmp = tempfile.mkstemp(dir=path.parent.resolve(), prefix=f".{path.name}.", suffix=".tmp")
        try:
            with open(fd, "wb", buffering=0) as handle:  # unbuffered: nothing is left to flush at close
                write_all(handle.fileno(), text.encode())
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
