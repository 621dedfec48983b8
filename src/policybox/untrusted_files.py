"""Reading a file an entrant controls, on the host: confined to its folder, a regular file, capped.

What a submission hands the host to read -- its spec file, ``policy_spec.json``, ``cogames.toml`` or
``requirements.txt``, the module of its policy's class, every file packed for another machine -- is
the entrant's to shape: a symlink to ``/proc/kmsg`` (which ``stat`` calls a regular file, and whose
read blocks and consumes the kernel's log), to ``/dev/zero`` or to the organiser's own files; a FIFO;
a 1 GiB sparse file. So every such read goes through ``opened`` (or ``read``, which caps it):

* the path, its symlinks followed in name only (nothing is opened for that), must lie in its
  ``Folder``; then it is opened a part at a time from that folder down with ``O_NOFOLLOW``, so that
  a symlink swapped in after the check is refused, not followed;
* ``O_NONBLOCK``, so that a FIFO or a device cannot block the open;
* ``fstat`` on the open descriptor, so that what is checked is what is read: only a regular file is;
* ``read`` reads at most its cap, and refuses a file larger than that.

A refusal is a ``SpecError`` that names the file and why; a file that is not there is ``Missing`` (one
too), so that a caller that looks in several places can go on to the next (a folder swapped for a
symlink after the check is one too: ``O_NOFOLLOW`` with ``O_DIRECTORY`` says ``ENOTDIR``). A file of
the host's own (a module on ``sys.path``) is read with no ``Folder``: followed as it is, and still only
if regular.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from policybox.errors import SpecError

FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MISSING = (errno.ENOENT, errno.ENOTDIR)  # ENOTDIR: a part of the path is a file (a zip on sys.path)


class Missing(SpecError):
    """The file is not there (nor a symlink in its place)."""


class Folder(NamedTuple):
    """The folder an entrant's paths must stay in (resolved), and how messages describe it."""

    root: Path
    described: str

    @classmethod
    def at(cls, root: str | Path, described: str) -> Folder:
        return cls(Path(os.path.realpath(root)), described)

    def check(self, resolved: Path, origin: str, field: str, value: str) -> None:
        """A path a spec names (the cell is given it resolved) must lie in the folder."""
        if not resolved.is_relative_to(self.root):
            raise SpecError(f"{origin}: {field} {value!r} resolves outside {self.described}")


@contextlib.contextmanager
def opened(path: Path, shown: str, inside: Folder | None) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """The regular file at ``path`` open for reading, and what ``fstat`` says of it, as the module says;
    ``shown`` is how messages name it. ``SpecError`` if it may not be read, ``Missing`` if it is not there."""
    file, info = open_regular(path, shown, inside)
    with file:
        yield file, info


def open_regular(path: Path, shown: str, inside: Folder | None) -> tuple[BinaryIO, os.stat_result]:
    """``opened``'s file and ``fstat``, for a caller that hands the open file on (a download, streamed
    after this returns): whoever holds it closes it."""
    try:
        fd = _open(path, shown, inside)
    except OSError as exc:
        if exc.errno in MISSING:
            raise Missing(f"{shown} does not exist") from None
        if exc.errno == errno.ELOOP:  # a symlink loop, or a symlink swapped in after the check
            raise SpecError(f"{shown} is a symlink that cannot be followed (a loop, or one that changed)") from None
        if exc.errno == errno.ENXIO:  # a socket
            raise SpecError(f"{shown} is not a regular file") from None
        raise SpecError(f"{shown} cannot be read: {exc.strerror or exc}") from None
    file = os.fdopen(fd, "rb")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SpecError(f"{shown} is not a regular file")
    except BaseException:
        file.close()
        raise
    return file, info


def read(path: Path, shown: str, inside: Folder | None, max_bytes: int) -> bytes:
    """The whole regular file at ``path``, refused (``SpecError``) if it holds more than ``max_bytes``."""
    with opened(path, shown, inside) as (file, info):
        data = file.read(max_bytes + 1) if info.st_size <= max_bytes else None
    if data is None or len(data) > max_bytes:  # larger, or grown since it was opened
        raise SpecError(f"{shown} is larger than {max_bytes} bytes")
    return data


def _open(path: Path, shown: str, inside: Folder | None) -> int:
    if inside is None:
        return os.open(path, FILE_FLAGS)
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(inside.root):
        what = "is a symlink to a file" if Path(os.path.abspath(path)).is_relative_to(inside.root) else "is"
        raise SpecError(f"{shown} {what} outside {inside.described}")
    base, parts = inside.root, real.relative_to(inside.root).parts
    if not parts:  # the root itself: a file (a checkpoint packed as a root of its own), opened from its folder
        base, parts = base.parent, (base.name,)
    *folders, name = parts
    fd = os.open(base, FOLDER_FLAGS)
    try:
        for folder in folders:
            inner = os.open(folder, FOLDER_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(name, FILE_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)
