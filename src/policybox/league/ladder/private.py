"""A ladder's folder is the host's alone: which of its paths other users may read, and closing them.

Cells run as users of their own (``policybox.host.uids``) and may read any file other users may read:
Landlock makes the filesystem read-only, not hidden (README, "Security model"). A ladder's folder holds
every team's log tails, tracebacks and setup output (its database), every version's files and env
secrets (``versions/``), and the logs. So the folder is 0700 and everything directly in it (the
database and its side files, ladder.json, run.lock, logs/, replays/, versions/) has no bit for its
group or others: then nothing under it can be reached by another user, whatever the modes further in
(a version's own files stay readable by a cell's uid: the cell gets them bound back past the closed
folder, ``policybox.cell.mounts``) and whatever the mode of the folder above.

A group bit counts as exposed too: cells hold no group (they drop every supplementary group and run
with a gid of their own), but other people on the machine may.
"""

from __future__ import annotations

import os
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

OTHERS = 0o077  # the bits for the group and for others


class FolderWarning(UserWarning):
    """A ladder's file that other users may read, or that could not be made private."""


@dataclass(frozen=True)
class Entry:
    """A path of a ladder's folder and its mode."""

    path: Path
    mode: int
    is_folder: bool

    @property
    def exposed(self) -> bool:
        """Whether users other than its owner may read it (a folder: list or enter it)."""
        return bool(self.mode & OTHERS)

    @property
    def fix(self) -> str:
        return f"chmod {'700' if self.is_folder else '600'} {self.path}"

    @property
    def detail(self) -> str:
        return f"other users may {'list and enter' if self.is_folder else 'read'} it (mode {self.mode:04o})"

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}"


def checked(folder: Path) -> list[Entry]:
    """The folder (given as a symlink: where it points) and every entry directly in it but symlinks
    (whose own mode means nothing; what one points at is checked where it is)."""
    entries = [_entry(folder, folder.stat())]
    for path in sorted(folder.iterdir()):
        try:
            info = path.lstat()
        except FileNotFoundError:  # removed meanwhile (a -wal file SQLite checkpointed away)
            continue
        if not stat.S_ISLNK(info.st_mode):
            entries.append(_entry(path, info))
    return entries


def _entry(path: Path, info: os.stat_result) -> Entry:
    return Entry(path, stat.S_IMODE(info.st_mode), stat.S_ISDIR(info.st_mode))


def make_private(folder: Path, tell: bool) -> None:
    """Take the group's and others' bits off the folder and every entry directly in it. A warning
    (``FolderWarning``) for each path that could not be made private and, with ``tell``, for each
    that was: a folder someone opened up (or an older policybox made) is worth knowing about."""
    for exposure in (entry for entry in checked(folder) if entry.exposed):
        try:
            exposure.path.chmod(exposure.mode & ~OTHERS)
        except OSError as exc:
            why = f"{exposure}, and it cannot be made private ({exc.strerror}): {exposure.fix}"
            warnings.warn(why, FolderWarning, 2)
            continue
        if tell:
            warnings.warn(f"{exposure}; made it {exposure.mode & ~OTHERS:04o}", FolderWarning, 2)
