"""Copying a folder an entrant controls into one of ours: what a setup script made, read from its live cell.

The folder is hostile, and something in the cell might still be changing it while it is read. So
nothing in it is ever followed: each entry is looked at with ``lstat`` and opened relative to its
parent's descriptor with ``O_NOFOLLOW`` -- a symlink planted anywhere, to ``/etc/shadow`` or to a
folder of the host's, is refused, not read (and read through ``/proc/<pid>/root``, an absolute link
would resolve in the host's own root, not the cell's) -- then checked again with ``fstat`` once
open, so that what was checked is what is read; a FIFO swapped in meanwhile cannot block the open
(``O_NONBLOCK``). Only plain files and folders are copied, at most ``max_entries`` of them,
``max_bytes`` in all and ``MAX_DEPTH`` deep, with modes of our choosing (folders 0755; files 0644,
or 0755 when executable), into a temporary sibling of the target that is renamed into place whole:
a refused folder leaves nothing behind.

What the entrant's folder does wrong is a ``HarvestRefused``; a fault on our side of the copy (a full
disk) is raised as itself.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from policybox.errors import PolicyboxError
from policybox.storage import writing
from policybox.submission import move_into_place, new_file

MAX_DEPTH = 64  # each level holds a descriptor open while it is copied
CHUNK = 1 << 20
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
NOT_KEPT = "cannot be kept"  # how a refused copy is told (policybox.files.cell_jobs)
T = TypeVar("T")


class HarvestRefused(PolicyboxError):
    """The folder holds something that may not be copied (a symlink, a FIFO, too much), or cannot be read."""


def harvest(source: Path, target: Path, *, max_entries: int, max_bytes: int) -> None:
    """Copy the folder ``source`` (the last part of which must not be a symlink) to ``target``, a new
    folder in an existing parent; unless ``target`` already exists (another run made it first)."""
    with writing(target.parent, "creating"):
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        top = _read(lambda: os.open(source, OPEN_FLAGS | os.O_DIRECTORY), "the folder itself")
        try:
            _Copy(max_entries, max_bytes).folder(top, staging, "", 0)
        finally:
            os.close(top)
        staging.chmod(0o755)  # readable by a cell's uid once bound back; the parent stays private
        with writing(target):
            move_into_place(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _read(action: Callable[[], T], shown: str) -> T:
    """Do something to the entrant's folder; what it refuses is its fault, so a HarvestRefused."""
    try:
        return action()
    except OSError as exc:
        raise HarvestRefused(f"{shown} cannot be read: {exc.strerror or exc}") from None


class _Copy:
    """One copy's running counts, and the walk that keeps them."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.entries = self.bytes = 0

    def folder(self, fd: int, into: Path, shown: str, depth: int) -> None:
        """Copy the entries of the open folder ``fd`` into ``into``, which exists."""
        with _read(lambda: os.scandir(fd), shown or "the folder itself") as entries:
            for entry in entries:
                self.entries += 1
                if self.entries > self.max_entries:
                    raise HarvestRefused(f"it holds more than {self.max_entries} files and folders")
                self.entry(fd, entry.name, into / entry.name, f"{shown}/{entry.name}" if shown else entry.name, depth)

    def entry(self, parent: int, name: str, into: Path, shown: str, depth: int) -> None:
        kind = stat.S_IFMT(_read(lambda: os.stat(name, dir_fd=parent, follow_symlinks=False), shown).st_mode)
        if kind not in (stat.S_IFREG, stat.S_IFDIR):
            raise HarvestRefused(f"{shown} is {_described(kind)}: only plain files and folders are kept")
        if kind == stat.S_IFDIR and depth >= MAX_DEPTH:
            raise HarvestRefused(f"{shown} is more than {MAX_DEPTH} folders deep")
        fd = _read(lambda: os.open(name, OPEN_FLAGS, dir_fd=parent), shown)
        try:
            opened = os.fstat(fd)
            if stat.S_IFMT(opened.st_mode) != kind:
                raise HarvestRefused(f"{shown} changed while it was copied")
            if kind == stat.S_IFDIR:
                with writing(into, "creating"):
                    into.mkdir(mode=0o755)
                    into.chmod(0o755)  # whatever the umask
                self.folder(fd, into, shown, depth + 1)
            else:
                self.file(fd, into, shown, opened.st_mode & 0o111 != 0)
        finally:
            os.close(fd)

    def file(self, fd: int, into: Path, shown: str, executable: bool) -> None:
        with writing(into), new_file(into, 0o755 if executable else 0o644) as sink:
            while chunk := _read(lambda: os.read(fd, CHUNK), shown):
                self.bytes += len(chunk)
                if self.bytes > self.max_bytes:
                    raise HarvestRefused(f"it holds more than {self.max_bytes} bytes")
                sink.write(chunk)


def _described(kind: int) -> str:
    names = {stat.S_IFLNK: "a symlink", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}
    return names.get(kind, f"a device or special file (mode {kind:#o})")
